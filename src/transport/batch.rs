//! A connection's batch thread: quick read-only requests are answered here in batches
//! instead of one blocking-pool hand-off each.
//!
//! The thread takes every request already waiting (at most [`MAX_BATCH`]), runs them one
//! after the other with their audit records deferred ([`crate::gateway::deferring`]),
//! waits once for the whole batch to be durable, and hands the answers over together,
//! so a batch shares one write and one sync of the log and one write to the client.
//! Every answer still waits for its record. A batch stops early when its answers'
//! content leases outgrow the gateway's budget ([`crate::gateway::unwaiting`]): they go
//! out before anything else runs. Changes and slow requests do not come here.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::error::GatewayError;
use crate::gateway::{Gateway, deferring, unwaiting};

/// Requests one batch takes at most: the batch's answers wait for its slowest request.
pub const MAX_BATCH: usize = 64;

/// Requests queued for the thread. Each also holds room for its line in its door's own
/// byte bound, which is what bounds memory; this only bounds the queue's length.
const QUEUE: usize = 256;

/// What a door does with the requests it batches.
pub trait Batched: Send + Sync + 'static {
    /// One request, as the door hands it over.
    type Job: Send + 'static;
    /// One request run, its answer not yet handed over.
    type Done;

    /// The gateway the requests go through.
    fn gateway(&self) -> &Gateway;

    /// Runs one request; None if it is no longer wanted (cancelled by the client).
    fn run(&self, job: Self::Job) -> Option<Self::Done>;

    /// Hands the answers over. `settled`: whether their deferred records are durable; if
    /// not, each answer must be replaced by this error.
    fn answer(&self, done: Vec<Self::Done>, settled: Result<(), GatewayError>);
}

/// Starts the batch thread for `door`; it ends once the returned sender is dropped and
/// the requests queued are answered.
pub fn start<B: Batched>(door: Arc<B>, name: &str) -> std::io::Result<mpsc::Sender<B::Job>> {
    let (tx, rx) = mpsc::channel(QUEUE);
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || work(&*door, rx))?;
    Ok(tx)
}

/// The thread: takes what waits, runs it as one batch, and again.
fn work<B: Batched>(door: &B, mut jobs: mpsc::Receiver<B::Job>) {
    let mut waiting = VecDeque::new();
    loop {
        if waiting.is_empty() {
            match jobs.blocking_recv() {
                Some(job) => waiting.push_back(job),
                None => return,
            }
        }
        while waiting.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(job) => waiting.push_back(job),
                Err(_) => break,
            }
        }
        let (done, deferred) = deferring(|| run_batch(door, &mut waiting));
        let settled = door.gateway().settle(deferred);
        door.answer(done, settled);
    }
}

/// Runs requests from `waiting` until it is empty or their content leases outgrew the
/// gateway's budget.
fn run_batch<B: Batched>(door: &B, waiting: &mut VecDeque<B::Job>) -> Vec<B::Done> {
    let mut done = Vec::with_capacity(waiting.len());
    while let Some(job) = waiting.pop_front() {
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            unwaiting(|| door.run(job))
        }));
        let Ok((ran, overdrawn)) = ran else {
            // `run` turns failures into answers; a panic is a bug, and this thread must
            // live on for the requests behind it. The request's room stays taken.
            tracing::error!("a batched request panicked; it gets no answer");
            continue;
        };
        done.extend(ran);
        if overdrawn {
            break;
        }
    }
    done
}
