//! Deferred durability for batches. A door that runs several read-only requests on one
//! thread opens a [`deferring`] scope around them: their audit records are queued
//! without waiting, and the door waits once ([`Gateway::settle`]) before it answers any
//! of them, so the whole batch shares one write and one sync of the log. Every answer
//! still waits for its record: only the waiting is moved, and a record that fails
//! withholds its answer as before. Changes never defer: their intent must be durable
//! before the workspace is touched.

use std::cell::RefCell;

use fsgate_audit::Ticket;
use fsgate_base::error::GatewayError;

use super::Gateway;

thread_local! {
    /// The records queued on this thread inside a [`deferring`] scope.
    static QUEUED: RefCell<Option<Vec<Ticket>>> = const { RefCell::new(None) };
}

/// Records queued by a [`deferring`] scope, to [`Gateway::settle`] before answering.
#[must_use = "deferred records must be settled before their requests are answered"]
#[derive(Default)]
pub struct Deferred(Vec<Ticket>);

impl Deferred {
    /// Whether the scope queued no record (every record was written before returning).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Runs `f` with this thread's read-only requests deferring their records.
pub fn deferring<R>(f: impl FnOnce() -> R) -> (R, Deferred) {
    let outer = QUEUED.with(|q| q.borrow_mut().replace(Vec::new()));
    let result = f();
    let tickets = QUEUED.with(|q| std::mem::replace(&mut *q.borrow_mut(), outer));
    (result, Deferred(tickets.unwrap_or_default()))
}

/// Whether a [`deferring`] scope is open on this thread.
pub(super) fn active() -> bool {
    QUEUED.with(|q| q.borrow().is_some())
}

/// Keeps `ticket` for the open scope. Returns it back if no scope is open.
pub(super) fn keep(ticket: Ticket) -> Option<Ticket> {
    QUEUED.with(|q| match q.borrow_mut().as_mut() {
        Some(v) => {
            v.push(ticket);
            None
        }
        None => Some(ticket),
    })
}

impl Gateway {
    /// Waits until every record `deferred` queued is durable. Err: one could not be
    /// written, and the answers of the scope must be withheld (answered with this error).
    pub fn settle(&self, deferred: Deferred) -> Result<(), GatewayError> {
        let Some(audit) = self.audit() else {
            return Ok(());
        };
        let mut failure = None;
        for ticket in deferred.0 {
            if let Err(e) = audit.wait(ticket) {
                tracing::error!("audit log: {e}");
                failure.get_or_insert(e);
            }
        }
        match failure {
            None => Ok(()),
            Some(e) => Err(GatewayError::Internal(format!(
                "{e}; the result is withheld because it could not be recorded"
            ))),
        }
    }
}
