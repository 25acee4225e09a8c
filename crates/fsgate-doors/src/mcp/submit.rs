//! Where a `tools/call` runs: the connection's batch thread (or right here, alone) for
//! quick reads, the blocking pool (a few at a time, writes apart) for the rest, or the
//! input's own thread for a change alone.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError, mpsc};

use super::flow::Flow;
use super::mrtr;

use super::tool_id::ToolId;

use crate::batch::{self, batched::Batched};

use crate::stdio::sink::Sink;

use super::direct::{Direct, Job};
use super::outgoing::Outgoing;
use fsgate_gateway::Gateway;

/// Whether `tool` is quick and read-only: it may run in a batch.
pub(super) fn batched(tool: ToolId) -> bool {
    matches!(
        tool,
        ToolId::ReadTextFile
            | ToolId::ReadFile
            | ToolId::ReadMultipleFiles
            | ToolId::ReadMediaFile
            | ToolId::Stat
            | ToolId::GetFileInfo
            | ToolId::Ls
            | ToolId::ListDirectory
            | ToolId::ListDirectoryWithSizes
            | ToolId::ListAllowedDirectories
    )
}

/// The pump's side: where it sends the calls it takes.
pub(super) struct Door {
    pub(super) direct: Arc<Direct>,
    pub(super) batch: batch::Door<Job>,
}

impl Direct {
    /// The direct path and its batch thread (which ends once the door is dropped and
    /// the calls queued are answered). Call inside the runtime.
    pub(super) fn start(
        gw: Arc<Gateway>,
        states: Option<Arc<mrtr::States>>,
        flow: Arc<Flow>,
        (max, slots): (usize, Arc<Semaphore>),
        (sink, answers): (Arc<Sink>, mpsc::Sender<Outgoing>),
    ) -> std::io::Result<Door> {
        let direct = Arc::new(Direct {
            gw,
            flow,
            states,
            max,
            slots,
            writes: Arc::new(Semaphore::new(WRITES_IN_FLIGHT)),
            sink,
            answers,
            rt: tokio::runtime::Handle::current(),
        });
        let batch = batch::start(Arc::clone(&direct), "fsgate-mcp-batch")?;
        Ok(Door { direct, batch })
    }
}

impl Door {
    /// Runs `job`: in the batch, or on the blocking pool for changes, slow tools, and
    /// any call while the policy has `ask` rules (a question must not hold up the batch).
    /// `alone`: nothing else of this connection is in flight or read; a batched call then
    /// runs right here as a batch of one (the pump reads nothing meanwhile, and there is
    /// nothing to batch it with), without waking the batch thread.
    pub(super) async fn submit(&self, mut job: Job, serial: u64, alone: bool) {
        job.serial = serial;
        if batched(job.call.tool) && !self.direct.gw.policy().has_ask_rules() {
            if alone && self.batch.may_run_here(&self.direct.gw) {
                // block_in_place: the runtime's other tasks move to another thread.
                let direct = &*self.direct;
                tokio::task::block_in_place(|| self.batch.run_here(direct, job));
                return;
            }
            self.batch.send(job).await;
            return;
        }
        // A change alone on a connection whose input has a thread of its own runs right
        // here too: a write one at a time then wakes no pool thread (its syncs still
        // overlap on the sync helpers). Nothing is read meanwhile, and nothing is in
        // flight to need it; with ask rules it goes to the pool (a reply must be read).
        if job.call.tool.changes()
            && alone
            && crate::stdio::own_thread::on_own_thread()
            && self.batch.may_run_inline(&self.direct.gw)
        {
            return run_and_answer(&self.direct, job, None);
        }
        // Reads sent after a change wait until it has run.
        let change = job.call.tool.changes().then(|| self.batch.change());
        let direct = Arc::clone(&self.direct);
        let slots = if matches!(job.call.tool, ToolId::WriteFile | ToolId::WriteTextFile) {
            Arc::clone(&direct.writes)
        } else {
            Arc::clone(&direct.slots)
        };
        // A free slot (the usual case): straight to the blocking pool, without a task
        // that waits for a slot and then for the call (each hop wakes a thread).
        match Arc::clone(&slots).try_acquire_owned() {
            Ok(permit) => return on_pool(&direct, job, change, permit),
            Err(TryAcquireError::Closed) => return,
            Err(TryAcquireError::NoPermits) => {}
        }
        tokio::spawn(async move {
            let Ok(permit) = slots.acquire_owned().await else {
                return;
            };
            on_pool(&direct, job, change, permit);
        });
    }
}

/// Runs `job` on the blocking pool and answers it there; nothing waits for it.
pub(super) fn on_pool(
    direct: &Arc<Direct>,
    job: Job,
    change: Option<batch::order::Change>,
    permit: OwnedSemaphorePermit,
) {
    let rt = direct.rt.clone();
    let direct = Arc::clone(direct);
    rt.spawn_blocking(move || {
        let _permit = permit;
        run_and_answer(&direct, job, change);
    });
}

/// Runs `job` on this thread and answers it; `change` (reads sent after it wait) is let
/// go once it has run.
pub(super) fn run_and_answer(direct: &Direct, job: Job, change: Option<batch::order::Change>) {
    // `run_in` answers a panicking call; this catches one in the answering too.
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let done = direct.run_in(job, None);
        drop(change);
        if let Some(done) = done {
            direct.answer(vec![done], Ok(()));
        }
    }));
    if ran.is_err() {
        tracing::error!("tool task failed: it panicked");
    }
}

/// Writes run at once per connection. A write's content is already in memory (its
/// request, which the connection's room accounts for) and its answer is small, so more
/// of them cost no more memory; they are bounded apart from the other calls' slots.
pub(super) const WRITES_IN_FLIGHT: usize = 32;
