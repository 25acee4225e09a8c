//! The one path of every tool call: the pump reads a `tools/call` (see `call`) and
//! hands it here, never to the SDK, which saves two pipe hops, a task and a parse and
//! encoding per call; this path runs it and writes its answer, as the SDK would have
//! encoded it for the call's protocol era.
//!
//! Quick read-only tools run on the connection's batch thread ([`crate::batch`]):
//! a batch shares one sync of the audit log and one write to the client, which that
//! thread makes itself (no hand-off to a writer task and a pool thread). Changes and slow tools
//! (search, trees) run on the blocking pool, a few at a time, so they never hold up a
//! batch; so does every call while the policy has `ask` rules, as any of them may wait for
//! a person. A change alone on a connection whose input has a thread of its own runs on
//! that thread instead (nothing else is in flight to need it). Either way the answer is
//! exactly what the SDK would have written.
//!
//! Each call is claimed (it records itself, through its gateway operations) just before
//! it runs; a call the client cancelled before that is skipped, and an answer whose call
//! was cancelled while running is dropped.

//!
//! Here: a call run (through the door trait) and its answers written; `submit.rs`
//! decides where a call runs, `encoded.rs` encodes its answer, `outgoing.rs` holds
//! answers on their way to the client.

use std::sync::Arc;

use rmcp::ErrorData as McpError;

use tokio::sync::{Semaphore, mpsc};

use super::call::Call;
use super::flow::Flow;
use super::mrtr;

use super::tool_id::ToolId;
use super::tools::{ToolRequest, Tools};
use crate::batch::batched::Batched;
use crate::door::{self, Door as _};
use crate::stdio::sink::Sink;
use fsgate_base::error::GatewayError;
use fsgate_gateway::{Batch, Gateway, Lease};

use super::encoded::{Encoded, Reply, WRITE_HERE_MAX, encode_fitted};
use super::outgoing::Outgoing;

/// A `tools/call` to run.
pub(super) struct Job {
    pub(super) key: String,
    /// Set by [`Door::submit`]: which request under `key` this is.
    pub(super) serial: u64,
    pub(super) call: Call,
    /// Why it is refused unrun: its session reaches nothing, or it waited for the
    /// client's roots and they did not come.
    pub(super) unsettled: Option<GatewayError>,
}

impl Job {
    /// The job of `call`, the request with id `key`.
    pub(super) fn new(key: String, call: Call) -> Job {
        Job {
            key,
            serial: 0,
            call,
            unsettled: None,
        }
    }

    /// The scope the call runs in (its roots).
    pub(super) fn scope(&self) -> &fsgate_gateway::Scope {
        &self.call.ctx.scope
    }

    /// This job, refused with `e` instead of run.
    pub(super) fn refused(mut self, e: GatewayError) -> Job {
        self.unsettled = Some(e);
        self
    }
}

/// A call that ran, before its answer is encoded.
pub(super) struct Done {
    pub(super) key: String,
    pub(super) serial: u64,
    /// What it called (its refusal, should its batch fail to settle).
    pub(super) tool: ToolId,
    pub(super) reply: Reply,
    pub(super) leases: Vec<Lease>,
    /// The call's era is 2026-07-28 or later (see `call::Era`).
    pub(super) modern: bool,
}

/// The direct path of one connection.
pub(super) struct Direct {
    pub(super) gw: Arc<Gateway>,
    pub(super) flow: Arc<Flow>,
    /// Signs the `requestState` of a stateless round's question.
    pub(super) states: Option<Arc<mrtr::States>>,
    pub(super) max: usize,
    /// Bounds the calls running on the blocking pool at once.
    pub(super) slots: Arc<Semaphore>,
    /// Bounds the writes running at once, apart from `slots`: a write spends most of its
    /// time waiting on flushes, which overlap (and share the audit log's) when more run.
    pub(super) writes: Arc<Semaphore>,
    /// Where small answers are written, by the thread that made them.
    pub(super) sink: Arc<Sink>,
    /// Larger batches go to the output copier, so that this thread goes on while the
    /// client reads them. (Held also so that the copier, and so the connection, ends
    /// only once every answer of this path is written.)
    pub(super) answers: mpsc::Sender<Outgoing>,
    pub(super) rt: tokio::runtime::Handle,
}

impl Batched for Direct {
    type Job = Job;
    type Done = Done;

    fn gateway(&self) -> &Gateway {
        &self.gw
    }

    /// Runs one call in `batch`, unless it was cancelled before it started.
    fn run(&self, job: Job, batch: &Batch) -> Option<Done> {
        self.run_in(job, Some(batch))
    }

    /// Encodes the answers and writes them, in as few writes as their rooms allow.
    fn answer(&self, done: Vec<Done>, settled: Result<(), GatewayError>) {
        let mut out = Outgoing::default();
        for Done {
            key,
            serial,
            tool,
            reply,
            leases,
            modern,
        } in done
        {
            let (reply, leases) = match &settled {
                Ok(()) => (reply, leases),
                // The tool's refusal in the answer's place (see `door::Served::settled`).
                Err(e) => (Reply::Tool(Tools.refuse(&tool, e)), Vec::new()),
            };
            let encoded = encode_fitted(self.max, &key, reply, modern);
            let len = match &encoded {
                Encoded::Bytes(b) => b.len(),
                Encoded::Text(len, _) => *len,
            };
            if let Err(leases) = self.flow.try_hold_answer(&key, len, leases) {
                // No room until what is already encoded is written: send it first.
                self.send(&mut out);
                self.rt.block_on(self.flow.hold_answer(&key, len, leases));
            }
            let Some(pending) = self.flow.take_serial(&key, serial) else {
                continue; // Cancelled while it ran: its records stand, no answer.
            };
            let bytes = match encoded {
                Encoded::Bytes(bytes) => bytes,
                Encoded::Text(_, text) => {
                    // After what is before it, on its own (the copier writes it).
                    self.send(&mut out);
                    out.text = Some(text);
                    out.pending.push(pending);
                    self.send(&mut out);
                    continue;
                }
            };
            if bytes.len() > WRITE_HERE_MAX {
                // A large answer is moved, never copied (a 10 MiB read's is 21 MB):
                // what is before it goes first.
                self.send(&mut out);
            }
            if out.bytes.is_empty() {
                out.bytes = bytes;
            } else {
                out.bytes.extend_from_slice(&bytes);
            }
            out.pending.push(pending);
        }
        self.send(&mut out);
    }
}

impl Direct {
    /// Writes `out` (or, if large or if the copier has answers waiting, hands it to the
    /// copier), and then lets go of its requests (and their rooms).
    pub(super) fn send(&self, out: &mut Outgoing) {
        if out.is_empty() {
            return;
        }
        let batch = std::mem::take(out);
        let idle = self.answers.capacity() == self.answers.max_capacity();
        if batch.bytes.len() > WRITE_HERE_MAX || batch.text.is_some() || !idle {
            // Err: the copier is gone (the client left); nothing to answer.
            let _ = self.rt.block_on(self.answers.send(batch));
            return;
        }
        let Outgoing { bytes, pending, .. } = batch;
        if let Err(e) = self.sink.write(&bytes) {
            // The client stopped reading for good: nobody to answer.
            tracing::debug!("answers not written: {e}");
        }
        drop(pending);
    }
}

impl Direct {
    /// Runs one call, in `batch` if one is given, unless it was cancelled before it
    /// started.
    pub(super) fn run_in(&self, job: Job, batch: Option<&Batch>) -> Option<Done> {
        if !self.flow.claim_serial(&job.key, job.serial) {
            return None;
        }
        let Call {
            tool,
            args,
            ctx,
            era,
        } = job.call;
        let gw = &*self.gw;
        let wire = ToolRequest {
            tool,
            args,
            ctx: Arc::clone(&ctx),
            unsettled: job.unsettled,
        };
        // `serve` answers a panic in the tool; this, one in decoding it.
        let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            door::serve_wire(&Tools, gw, &ctx, batch, wire)
        }));
        let (result, leases) = match served {
            Ok(served) => (served.answer, served.leases),
            Err(_) => (Tools.panicked(&tool), Vec::new()),
        };
        // Only a stateless round may ask: no policy read for any other call.
        let asked = era
            .round
            .zip(self.states.as_ref())
            .and_then(|(r, states)| r.input_required(states, gw.policy().ask_timeout()));
        let reply = match asked {
            // The question instead of the refusal its first round made.
            Some(ir) if era.modern => Reply::Input(ir),
            Some(_) => Reply::Error(McpError::invalid_request(
                "InputRequiredResult requires negotiated protocol version 2026-07-28 or newer",
                None,
            )),
            None => Reply::Tool(result),
        };
        Some(Done {
            key: job.key,
            serial: job.serial,
            tool,
            reply,
            leases,
            modern: era.modern,
        })
    }
}
