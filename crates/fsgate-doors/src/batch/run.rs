//! One batch run: its requests served in one [`Batch`] (stopping early when their
//! leases outgrow the budget or a change read before one is still running), its records
//! settled once, its answers handed over.

use std::collections::VecDeque;

use super::batched::Batched;
use super::order::Order;
use fsgate_gateway::Batch;

/// Runs one batch from `waiting`: its records settled once, then its answers handed over.
pub(super) fn run_waiting<B: Batched>(
    door: &B,
    order: &Order,
    waiting: &mut VecDeque<(u64, B::Job)>,
) {
    let (done, batch) = run_deferred(door, order, waiting);
    let settled = door.gateway().settle(batch);
    door.answer(done, settled);
}

/// Runs one batch from `waiting`, its records queued but not yet waited for.
pub(super) fn run_deferred<B: Batched>(
    door: &B,
    order: &Order,
    waiting: &mut VecDeque<(u64, B::Job)>,
) -> (Vec<B::Done>, Batch) {
    // Holding nothing now: wait for the changes sent before the first request.
    if let Some((seq, _)) = waiting.front() {
        order.wait_ready(*seq);
    }
    let batch = Batch::new();
    let done = run_batch(door, order, waiting, &batch);
    (done, batch)
}

/// Runs requests from `waiting` until it is empty, their content leases outgrew the
/// gateway's budget, or the next one must wait for a change sent before it.
pub(super) fn run_batch<B: Batched>(
    door: &B,
    order: &Order,
    waiting: &mut VecDeque<(u64, B::Job)>,
    batch: &Batch,
) -> Vec<B::Done> {
    let mut done = Vec::with_capacity(waiting.len());
    while let Some((seq, job)) = waiting.pop_front() {
        if !done.is_empty() && !order.ready(seq) {
            waiting.push_front((seq, job));
            break;
        }
        // Holding nothing yet, the first request may wait for room like any other: only
        // leases held by answers not yet handed over make waiting a risk. (Passing the
        // budget on every batch thread would let each connection hold one answer more.)
        batch.set_holding(!done.is_empty());
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| door.run(job, batch)));
        let Ok(ran) = ran else {
            // `run` turns failures into answers; a panic is a bug, and this thread must
            // live on for the requests behind it. The request's room stays taken.
            tracing::error!("a batched request panicked; it gets no answer");
            continue;
        };
        done.extend(ran);
        if batch.overdrawn() {
            break;
        }
    }
    done
}
