//! One tool call's way into the gateway. Its operations are served through
//! [`ToolCall::serve_op`]: in the batch the call runs in, if any (see `crate::batch`), and
//! with the content leases their answers hold (see the gateway's `budget`) collected
//! here, to be kept with the call's answer until the output copier has written it (see
//! `flow`): a client that stops reading then holds at most the gateway's budget of
//! content, however many calls it sends.

use std::cell::RefCell;
use std::ops::Deref;

use fsgate_base::error::GatewayError;
use fsgate_gateway::ops::{Op, Output, RequestCtx};
use fsgate_gateway::{Batch, Gateway, Lease, Request};

/// One tool call: its request context, the batch it runs in, and the leases its
/// answers hold. Derefs to the context, which is what most of a tool reads.
pub(super) struct ToolCall<'a> {
    ctx: &'a RequestCtx,
    batch: Option<&'a Batch>,
    leases: RefCell<Vec<Lease>>,
}

impl<'a> ToolCall<'a> {
    /// A call under `ctx`, in `batch` if one is given.
    pub(super) fn new(ctx: &'a RequestCtx, batch: Option<&'a Batch>) -> ToolCall<'a> {
        ToolCall {
            ctx,
            batch,
            leases: RefCell::new(Vec::new()),
        }
    }

    /// Serves `op` for this call, keeping any lease its answer holds.
    pub(super) fn serve_op(&self, gw: &Gateway, op: Op) -> Result<Output, GatewayError> {
        let (result, lease) = gw.serve_leased_in(self.ctx, Request::Op(op), self.batch);
        if let Some(l) = lease {
            self.leases.borrow_mut().push(l);
        }
        result
    }

    /// The leases the call's answers hold.
    pub(super) fn into_leases(self) -> Vec<Lease> {
        self.leases.into_inner()
    }
}

impl Deref for ToolCall<'_> {
    type Target = RequestCtx;

    fn deref(&self) -> &RequestCtx {
        self.ctx
    }
}
