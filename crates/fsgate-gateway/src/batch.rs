//! A batch: read-only requests a door runs one after the other on one thread, answered
//! together. The door asks the gateway for a [`Batch`] and serves each request in it
//! ([`Gateway::serve`] with [`How::in_batch`](crate::How::in_batch)): their audit records are queued without waiting, and the door
//! waits once ([`Gateway::settle`]) before it answers any of them, so the whole batch
//! shares one write and one sync of the log. Every answer still waits for its record:
//! only the waiting is moved, and a record that fails withholds every answer of the
//! batch. Changes never defer: their intent must be durable before the workspace is
//! touched.
//!
//! While a batch holds answers it has not handed over, the content leases of its next
//! requests must not wait for room (they could wait for the batch itself): they pass
//! the budget instead ([`Waiting::Overdraw`]), and the batch says so
//! ([`Batch::overdrawn`]); the door then hands over what it holds before it runs more.

use std::cell::{Cell, RefCell};

use fsgate_audit::Ticket;

use crate::budget::{Lease, Waiting};

/// One batch's queued records and the state of its content leases. Served in with
/// [`How::in_batch`](crate::How::in_batch); [`Gateway::settle`](crate::Gateway::settle)d before any of its answers goes out.
#[must_use = "a batch's records must be settled before its requests are answered"]
#[derive(Default)]
pub struct Batch {
    /// Records queued, not yet waited for.
    pub(crate) records: RefCell<Vec<Ticket>>,
    /// The batch holds answers not handed over yet: leases must not wait.
    holding: Cell<bool>,
    /// A lease went past the budget: the batch must hand over what it holds.
    overdrawn: Cell<bool>,
    /// Allowed reads are held with their process's others, not queued one by one.
    coalesce: bool,
}

impl std::fmt::Debug for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("records", &self.records.borrow().len())
            .field("holding", &self.holding.get())
            .field("overdrawn", &self.overdrawn.get())
            .finish()
    }
}

impl Batch {
    /// An empty batch, holding nothing.
    pub fn new() -> Batch {
        Batch::default()
    }

    /// A batch whose allowed reads are not waited for at all: each is held with the
    /// same process's other reads and recorded with them as one `reads` record within
    /// a second ([`fsgate_audit::AuditLog::append_coalesced`]); refusals are queued
    /// and settled as in any batch. For the view of `fsgate run`, whose processes
    /// make thousands of lookups.
    pub fn coalescing() -> Batch {
        Batch {
            coalesce: true,
            ..Batch::default()
        }
    }

    /// Whether allowed reads are coalesced.
    pub(crate) fn coalesces(&self) -> bool {
        self.coalesce
    }

    /// Says whether the batch now holds answers it has not handed over: from then on
    /// its requests' leases pass the budget rather than wait.
    pub fn set_holding(&self, holding: bool) {
        self.holding.set(holding);
    }

    /// [`set_holding`](Self::set_holding), saying whether it held before.
    pub(crate) fn hold(&self, holding: bool) -> bool {
        self.holding.replace(holding)
    }

    /// Whether a lease went past the budget: hand over what the batch holds now.
    pub fn overdrawn(&self) -> bool {
        self.overdrawn.get()
    }

    /// Whether no record was queued (every record was written before its request
    /// returned).
    pub fn is_empty(&self) -> bool {
        self.records.borrow().is_empty()
    }

    /// How this batch's leases behave when the budget has no room.
    pub(crate) fn waiting(&self) -> Waiting {
        if self.holding.get() {
            Waiting::Overdraw
        } else {
            Waiting::Wait
        }
    }

    /// Keeps a queued record for [`Gateway::settle`].
    pub(crate) fn keep(&self, ticket: Ticket) {
        self.records.borrow_mut().push(ticket);
    }

    /// Notes what a request's answer holds.
    pub(crate) fn note_lease(&self, lease: Option<&Lease>) {
        if lease.is_some_and(Lease::overdrew) {
            self.overdrawn.set(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::{Gateway, Request};
    use crate::ops;
    use crate::ops::Op;
    use crate::serve::How;
    use crate::tests::{ctx, open as gateway, records};
    use fsgate_audit::Fault;

    fn read(path: &str) -> Request {
        Request::Op(Op::ReadFile(ops::ReadFile { path: path.into() }))
    }

    /// Reads in a batch queue their records; a change in it does not (its intent must be
    /// durable first); settling makes the queued ones durable.
    #[test]
    fn a_batch_queues_the_records_of_reads_only_and_settles_them() {
        let (ws, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(ws.path().join("a.txt"), "a").unwrap();
        let log = state.path().join("audit.jsonl");
        let gw = gateway(ws.path(), &log);
        let write = Op::Write(ops::Write::text("/b.txt".into(), "b".into()));
        let changes = Batch::new();
        gw.serve(&ctx(), Request::Op(write), How::in_batch(&changes))
            .0
            .unwrap();
        assert!(changes.is_empty(), "a change's records were deferred");
        gw.settle(changes).unwrap();
        let reads = Batch::new();
        gw.serve(&ctx(), read("/a.txt"), How::in_batch(&reads))
            .0
            .unwrap();
        gw.serve(&ctx(), read("/b.txt"), How::in_batch(&reads))
            .0
            .unwrap();
        assert_eq!(reads.records.borrow().len(), 2);
        gw.settle(reads).unwrap();
        let ops: Vec<_> = records(&log)
            .iter()
            .filter(|r| r["kind"] == "request")
            .map(|r| (r["op"].clone(), r["path"].clone()))
            .collect();
        assert_eq!(ops.len(), 3, "{ops:?}");
        assert_eq!(ops[2].1, "b.txt", "{ops:?}");
    }

    /// A queued record that cannot be written withholds every answer of its batch.
    #[test]
    fn a_record_that_fails_makes_settle_withhold_the_batch() {
        let (ws, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(ws.path().join("a.txt"), "a").unwrap();
        let gw = gateway(ws.path(), &state.path().join("audit.jsonl"));
        gw.audit().unwrap().inject_faults(Fault::Write, 1);
        let batch = Batch::new();
        let _ = gw.serve(&ctx(), read("/a.txt"), How::in_batch(&batch));
        let err = gw.settle(batch).unwrap_err();
        assert!(err.message().contains("withheld"), "{err:?}");
    }

    /// A batch that holds answers passes the content budget instead of waiting (it could
    /// wait for itself), and says so; one that holds nothing takes its lease as usual.
    #[test]
    fn a_holding_batch_overdraws_the_budget_and_says_so() {
        const MAX: usize = 64 * 1024;
        let text = fsgate_policy::DEFAULT_POLICY_TOML.replace(
            "[limits]\n",
            &format!("[limits]\nmax_message_bytes = {MAX}\n"),
        );
        let pol = fsgate_policy::Policy::from_toml(&text, "test").unwrap();
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("big"), vec![b'a'; MAX * 7 / 8]).unwrap();
        let gw = Gateway::new(pol, fsgate_workspace::Workspace::open(ws.path()).unwrap());
        let batch = Batch::new();
        // The budget is twice the message limit: one answer (its content and its
        // encoding) fits, a second does not.
        let (out, first) = gw.serve(&ctx(), read("/big"), How::in_batch(&batch));
        out.unwrap();
        assert!(!batch.overdrawn());
        batch.set_holding(true);
        let (out, second) = gw.serve(&ctx(), read("/big"), How::in_batch(&batch));
        out.unwrap();
        assert!(
            batch.overdrawn(),
            "the second answer passed the budget silently"
        );
        drop((first, second));
        gw.settle(batch).unwrap();
    }

    /// A request's further read passes the budget its own earlier answers fill, rather
    /// than wait for them (which nothing would give back), and its record is durable.
    #[test]
    fn a_further_operation_of_a_request_does_not_wait_for_its_own_leases() {
        const MAX: usize = 64 * 1024;
        let text = fsgate_policy::DEFAULT_POLICY_TOML.replace(
            "[limits]\n",
            &format!("[limits]\nmax_message_bytes = {MAX}\n"),
        );
        let pol = fsgate_policy::Policy::from_toml(&text, "test").unwrap();
        let (ws, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(ws.path().join("big"), vec![b'a'; MAX * 7 / 8]).unwrap();
        let log = state.path().join("audit.jsonl");
        let audit = fsgate_audit::AuditLog::open(
            &log,
            &fsgate_audit::AuditSettings::default(),
            pol.sha256(),
            fsgate_audit::OpenOptions::default(),
        )
        .unwrap();
        let ws_handle = fsgate_workspace::Workspace::open(ws.path()).unwrap();
        let gw = Gateway::new(pol, ws_handle).with_audit(audit);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let (out, first) = gw.serve(&ctx(), read("/big"), How::alone());
            out.unwrap();
            let (out, second) = gw.serve(&ctx(), read("/big"), How::alone().further());
            let _ = tx.send(out.is_ok());
            drop((first, second));
        });
        let answered = rx.recv_timeout(std::time::Duration::from_secs(10));
        assert_eq!(answered, Ok(true), "the second read waited for the first");
        assert_eq!(
            records(&log)
                .iter()
                .filter(|r| r["kind"] == "request")
                .count(),
            2
        );
    }
}
