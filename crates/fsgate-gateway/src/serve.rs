//! The one way into the gateway ([`Gateway::serve`]) and how a door asks for it
//! ([`How`]): alone, in a batch, as a further operation of a request that holds leases,
//! or noted (`fsgate undo`).

use serde_json::{Map, Value};

use crate::batch::Batch;
use crate::budget::Lease;
use crate::gateway::{Gateway, Request};
use crate::growth::within_growth;
use crate::ops::output::Output;
use crate::record::record_message;
use crate::request::RequestCtx;
use crate::route::route_op;
use fsgate_base::error::GatewayError;

/// How one request is served (see [`Gateway::serve`]). [`How::alone`] by default.
#[derive(Debug, Default)]
pub struct How<'a> {
    /// The batch the request is one of.
    batch: Option<&'a Batch>,
    /// A further operation of a request that still holds its earlier ones' leases.
    further: bool,
    /// Added to the records' `args` of an operation served noted.
    note: Option<Map<String, Value>>,
}

impl<'a> How<'a> {
    /// Alone: the record is durable before [`Gateway::serve`] returns.
    pub fn alone() -> How<'a> {
        How::default()
    }

    /// As one request of `batch` if one is given (else alone): a read-only operation's
    /// record is queued in the batch, not waited for, and its answer must not go out
    /// before [`Gateway::settle`] said the batch is durable.
    pub fn batched(batch: Option<&'a Batch>) -> How<'a> {
        How {
            batch,
            ..How::default()
        }
    }

    /// As one request of `batch`.
    pub fn in_batch(batch: &'a Batch) -> How<'a> {
        How::batched(Some(batch))
    }

    /// A further operation of a request that still holds the leases of its earlier
    /// ones (a door's task, such as MCP's `read_multiple_files`): waiting for room, its
    /// lease could wait for the request's own, which nothing would give back. It passes
    /// the budget instead, as a batch holding answers does, and the batch (if any) is
    /// told so. Alone, its record is still durable before it returns.
    pub fn further(self) -> How<'a> {
        How {
            further: true,
            ..self
        }
    }

    /// One operation whose records (its intent and its outcome) carry `note` among
    /// their `args`: `fsgate undo` names the session it undoes this way (`args.undo`),
    /// and the backup it puts back (`args.restoredFrom`). It is served in this
    /// gateway's own workspace, outside the growth budgets, and its paths are reached
    /// without following any symbolic link (rule `workspace-link`): what an undo puts
    /// back goes exactly where the change was, never through a link made since to
    /// somewhere else. A message is served as without it.
    pub fn noted(note: Map<String, Value>) -> How<'a> {
        How {
            note: Some(note),
            ..How::default()
        }
    }
}

impl Gateway {
    /// The one way into the gateway for every message from every door: a workspace
    /// operation is decided, recorded, executed and answered; any other message (an
    /// `initialize`, an unknown method, malformed JSON, a subscribe, a refused upgrade) is
    /// recorded, and the door answers it with the outcome it gave. Err: the message could
    /// not be recorded, and the door answers with that error instead.
    ///
    /// With the answer comes the content budget it holds: a door keeps it until it has
    /// queued the encoded answer for its client, so that content held in memory stays
    /// bounded across every door (see `budget`).
    pub fn serve(
        &self,
        ctx: &RequestCtx,
        request: Request,
        how: How<'_>,
    ) -> (Result<Output, GatewayError>, Option<Lease>) {
        let request = match (how.note, request) {
            (Some(note), Request::Op(op)) => {
                return self.handle_with(ctx, op, (note, None, true), Ok(()));
            }
            (_, request) => request,
        };
        match (how.further, how.batch) {
            (false, batch) => serve_noting_lease(self, ctx, request, batch),
            (true, Some(b)) => {
                let was = b.hold(true);
                let served = serve_noting_lease(self, ctx, request, Some(b));
                b.hold(was);
                served
            }
            (true, None) => {
                let own = Batch::new();
                own.set_holding(true);
                let (out, lease) = serve_noting_lease(self, ctx, request, Some(&own));
                match self.settle(own) {
                    Ok(()) => (out, lease),
                    Err(e) => (Err(e), None),
                }
            }
        }
    }
}

/// Serves `request`, in `batch` if one is given, which is told what its answer holds.
fn serve_noting_lease(
    gw: &Gateway,
    ctx: &RequestCtx,
    request: Request,
    batch: Option<&Batch>,
) -> (Result<Output, GatewayError>, Option<Lease>) {
    let (out, lease) = serve_batched(gw, ctx, request, batch);
    if let Some(b) = batch {
        b.note_lease(lease.as_ref());
    }
    (out, lease)
}

/// Serves `request` under the session's real name, within the growth budgets, in the
/// workspace its paths lie in.
fn serve_batched(
    gw: &Gateway,
    ctx: &RequestCtx,
    request: Request,
    batch: Option<&Batch>,
) -> (Result<Output, GatewayError>, Option<Lease>) {
    let named;
    let ctx = match gw.names.real(&ctx.session) {
        Some(session) => {
            named = RequestCtx {
                session,
                ..ctx.clone()
            };
            &named
        }
        None => ctx,
    };
    if let Err(e) = within_growth(gw.audit.as_ref(), ctx, &request) {
        return (Err(e), None);
    }
    match request {
        Request::Op(op) if gw.is_several() => route_op(gw, ctx, op, batch),
        Request::Op(op) => gw.handle_with(ctx, op, (Map::new(), batch, false), Ok(())),
        Request::Message {
            name,
            outcome,
            rule,
        } => (
            record_message(gw.audit.as_ref(), ctx, &name, outcome, rule).map(|()| Output::Unit),
            None,
        ),
    }
}

impl Gateway {
    /// Waits until every record `batch` queued is durable. Err: one could not be
    /// written, and every answer of the batch must be withheld (answered with this
    /// error).
    pub fn settle(&self, batch: Batch) -> Result<(), GatewayError> {
        let Some(audit) = self.audit() else {
            return Ok(());
        };
        let mut failure = None;
        for ticket in batch.records.into_inner() {
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
