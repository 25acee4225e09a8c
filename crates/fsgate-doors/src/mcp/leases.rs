//! The content budget on the MCP door: the leases a tool call's reads take (see the
//! gateway's `budget`) are collected here and kept with the call's answer until the
//! output copier has written it (see `flow`): a client that stops reading then holds at
//! most the gateway's budget of content, however many calls it sends.

use std::cell::RefCell;

use fsgate_base::error::GatewayError;
use fsgate_gateway::ops::{Op, Output, RequestCtx};
use fsgate_gateway::{Gateway, Lease, Request};

thread_local! {
    /// Leases taken by the tool running on this (blocking) thread.
    static TAKEN: RefCell<Vec<Lease>> = const { RefCell::new(Vec::new()) };
}

/// Runs `op`, keeping any lease its answer holds for [`take`].
pub(super) fn serve_op(gw: &Gateway, ctx: &RequestCtx, op: Op) -> Result<Output, GatewayError> {
    let (result, lease) = gw.serve_leased(ctx, Request::Op(op));
    if let Some(l) = lease {
        TAKEN.with(|t| t.borrow_mut().push(l));
    }
    result
}

/// The leases the tool that just ran on this thread took.
pub(super) fn take() -> Vec<Lease> {
    TAKEN.with(|t| std::mem::take(&mut *t.borrow_mut()))
}
