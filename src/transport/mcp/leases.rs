//! The content budget on the MCP door. The SDK queues a tool's answer after the tool
//! returns, out of fsgate's sight, so the budget a tool's reads hold (see the gateway's
//! `budget`) is kept here, by request id, until the output copier has written that
//! answer: a client that stops reading then holds at most the gateway's budget of
//! content, however many calls it sends.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::Value;

use crate::error::GatewayError;
use crate::gateway::{Gateway, Lease, Request};
use crate::ops::{Op, Output, RequestCtx};

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

/// Leases held until the answer to their request is written.
#[derive(Default)]
pub(super) struct Held(Mutex<HashMap<String, Vec<Lease>>>);

impl Held {
    /// Keeps `leases` until the answer with `id` (its JSON text) is written.
    pub(super) fn keep(&self, id: String, leases: Vec<Lease>) {
        if leases.is_empty() {
            return;
        }
        if let Ok(mut m) = self.0.lock() {
            m.entry(id).or_default().extend(leases);
        }
    }

    /// Gives back the leases of the answer `line` (one JSON-RPC message), once written.
    pub(super) fn written(&self, line: &[u8]) {
        #[derive(serde::Deserialize)]
        struct IdOnly {
            id: Option<Value>,
        }
        let Ok(IdOnly { id: Some(id) }) = serde_json::from_slice::<IdOnly>(line) else {
            return;
        };
        if let Ok(mut m) = self.0.lock() {
            m.remove(&id.to_string());
        }
    }
}
