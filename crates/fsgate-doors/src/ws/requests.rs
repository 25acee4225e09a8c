//! A connection's requests served: admitted within its limits in count and bytes,
//! quick reads on the connection's batch thread (or inline, alone), the rest on tasks
//! of their own.

use std::sync::Arc;

use futures_util::{FutureExt, StreamExt};

use tokio::sync::{OwnedSemaphorePermit, watch};
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::error::Error as WsProtoError;

use super::answer::send;
use super::protocol::Ws;
use super::reader::{Reader, Task, take};
use super::shared::{Shared, permits, request_ctx, server_budget};
use crate::batch::{self, batched::Batched};
use crate::door::{self, Decoded, Door, Served};
use crate::outbox::Outbox;
use fsgate_base::error::GatewayError;
use fsgate_base::path::RelPath;
use fsgate_gateway::Batch;
use fsgate_gateway::Gateway;
use fsgate_gateway::ops::Op;

/// What reading a connection's requests needs: what they share, the subscription
/// they may change, the outbox (its room), the batch thread and its door.
pub(super) struct Requests<'a> {
    pub(super) sh: &'a Arc<Shared>,
    pub(super) sub_tx: &'a watch::Sender<Option<RelPath>>,
    pub(super) out: &'a Outbox<Message>,
    pub(super) door: &'a Arc<BatchDoor>,
    pub(super) batch: &'a batch::Door<<BatchDoor as Batched>::Job>,
}

impl Requests<'_> {
    /// Reads and serves requests until the client closes the connection (or it is cut
    /// off): changes and the reads batched with them on the batch thread, in order;
    /// other requests on tasks of their own (`tasks`).
    pub(super) async fn serve(&self, rd: &mut Reader, tasks: &mut JoinSet<()>) {
        let (sh, sub_tx) = (self.sh, self.sub_tx);
        // A message read while deciding whether a request is alone, to be taken next.
        let mut ahead = None;
        loop {
            while tasks.try_join_next().is_some() {}
            // Back-pressure: a client that does not read its replies is not read either.
            rd.meanwhile(sh, sub_tx, self.out.wait_for_room()).await;
            // A client gone (its answers can no longer be written) is served no more of
            // what it sent before it went.
            if rd.ended || self.out.closed() {
                break;
            }
            let read = match ahead.take() {
                Some(read) => read,
                None => rd.stream.next().await,
            };
            let Some(text) = rd.text(sh, read).await else {
                if rd.ended {
                    break;
                }
                continue;
            };
            let Some(task) = take(sh, sub_tx, text.as_str()).await else {
                continue;
            };
            let Some(permits) = rd.meanwhile(sh, sub_tx, admit(sh, text.len())).await else {
                break;
            };
            drop(text);
            if batched(&task.op) {
                ahead = self.batch_one(rd, tasks, (task, permits)).await;
                continue;
            }
            // Reads sent after a change wait until it is done.
            let change = task.op.is_mutating().then(|| self.batch.change());
            let sh2 = Arc::clone(sh);
            tasks.spawn(async move {
                serve_op(sh2, task, permits).await;
                drop(change);
            });
        }
    }

    /// A request for the batch thread: run here at once if nothing else is running or
    /// has arrived, else queued behind the others (pipelined requests are batched).
    /// What was read ahead, if anything, is returned to be taken next.
    pub(super) async fn batch_one(
        &self,
        rd: &mut Reader,
        tasks: &JoinSet<()>,
        job: <BatchDoor as Batched>::Job,
    ) -> Option<Option<Result<Message, WsProtoError>>> {
        let mut ahead = None;
        let mut here = alone(self.sh, tasks, self.batch);
        if here {
            ahead = rd.stream.next().now_or_never();
            here = ahead.is_none();
        }
        if here {
            let (done, settled) = self.batch.run_settled(&**self.door, job);
            self.door.answer_now(done, settled).await;
            return ahead;
        }
        rd.meanwhile(self.sh, self.sub_tx, self.batch.send(job))
            .await;
        ahead
    }
}

/// Waits for a slot for a request of `size` bytes: one of the connection's requests in
/// flight, and its bytes, on the connection and on the server. What an answer holds is
/// bounded where it is known: the gateway's budget leases the content a read or listing
/// holds, sized by the file or the answer, until the answer is queued here.
pub(super) async fn admit(sh: &Shared, size: usize) -> Option<[OwnedSemaphorePermit; 3]> {
    let want = size.max(1);
    // Never more than a semaphore holds, or the wait would never end.
    let conn = u32::try_from(want.min(permits(sh.limits.conn_in_flight()))).ok()?;
    let server = u32::try_from(want.min(permits(server_budget(sh.limits.max_message)))).ok()?;
    let slot = Arc::clone(&sh.slots).acquire_owned().await.ok()?;
    let bytes = Arc::clone(&sh.bytes).acquire_many_owned(conn).await.ok()?;
    let all = Arc::clone(&sh.limits.server_in_flight)
        .acquire_many_owned(server)
        .await
        .ok()?;
    Some([slot, bytes, all])
}

/// Whether a batched request just admitted is the connection's only one in flight, so
/// that it may run right here as a batch of one instead of waking the batch thread (a
/// futex and a wake-up on another CPU per request). Not under a policy with ask rules:
/// a question's reply must be read meanwhile, and this task would not read it. Not
/// while answers of this connection wait to be written either: the request may wait
/// for the gateway's content budget, which other connections' answers hold until they
/// find room in the server's shared outbox, and this thread, blocked, would not write
/// (and free) what this connection holds of it.
pub(super) fn alone<J>(sh: &Shared, tasks: &JoinSet<()>, batch: &batch::Door<J>) -> bool {
    // Only on the connection's own runtime (`on_own_thread`): on a shared one, blocking
    // here would hold up every other task of the worker.
    let own = tokio::runtime::Handle::current().runtime_flavor()
        == tokio::runtime::RuntimeFlavor::CurrentThread;
    // The slot this request holds is the only one taken: nothing queued, running in the
    // batch thread, or answered but not yet queued.
    let only_this = own && sh.slots.available_permits() + 1 == sh.limits.max_in_flight;
    only_this && tasks.is_empty() && sh.out.unwritten() == 0 && batch.may_run_inline(&sh.gw)
}

/// Whether `op` is quick and read-only: served on the connection's batch thread.
pub(super) fn batched(op: &Op) -> bool {
    op.id().is_quick_read()
}

/// A batched operation that ran: its answer, and what it holds until the answer is
/// queued.
pub(super) struct Done {
    pub(super) served: Served<Ws>,
    pub(super) permits: [OwnedSemaphorePermit; 3],
}

/// The connection's batch thread (see [`crate::batch`]).
pub(super) struct BatchDoor {
    pub(super) sh: Arc<Shared>,
    pub(super) rt: tokio::runtime::Handle,
}

impl Batched for BatchDoor {
    type Job = (Task, [OwnedSemaphorePermit; 3]);
    type Done = Done;

    fn gateway(&self) -> &Gateway {
        &self.sh.gw
    }

    fn run(&self, (task, permits): Self::Job, batch: &Batch) -> Option<Done> {
        let own = request_ctx(&self.sh, &task.tag.head);
        let ctx = own.as_ref().unwrap_or(&self.sh.ctx);
        let served = door::serve(&self.sh.codec(), &self.sh.gw, ctx, Some(batch), task.into());
        Some(Done { served, permits })
    }

    fn answer(&self, done: Vec<Done>, settled: Result<(), GatewayError>) {
        // One entry into the runtime for the whole batch, not one per answer.
        self.rt.block_on(self.answer_now(done, settled));
    }
}

impl BatchDoor {
    /// Queues the answers of requests that ran (or, if their records could not be
    /// made, the error saying so in their place).
    pub(super) async fn answer_now(&self, done: Vec<Done>, settled: Result<(), GatewayError>) {
        for Done { served, permits } in done {
            let served = served.settled(&self.sh.codec(), &settled);
            send(&self.sh.out, served.answer).await;
            drop((served.leases, permits));
        }
    }
}

impl From<Task> for Decoded<Ws> {
    fn from(Task { op, tag }: Task) -> Decoded<Ws> {
        Decoded::Op { op, tag }
    }
}

/// Serves one operation and queues its answer; the permits are given back once the
/// answer is queued (where it is counted as unwritten).
pub(super) async fn serve_op(sh: Arc<Shared>, task: Task, permits: [OwnedSemaphorePermit; 3]) {
    let tag = task.tag.clone();
    let ctx = request_ctx(&sh, &task.tag.head).map_or_else(|| Arc::clone(&sh.ctx), Arc::new);
    let (gw, codec) = (Arc::clone(&sh.gw), sh.codec());
    let (text, lease) = (sh.pool)
        .spawn_blocking(move || {
            let served = door::serve(&codec, &gw, &ctx, None, task.into());
            (served.answer, served.leases)
        })
        .await
        .unwrap_or_else(|e| {
            tracing::error!("request task failed: {e}");
            let err = GatewayError::Internal("request task failed".into());
            (sh.codec().refuse(&tag, &err), Vec::new())
        });
    // The content's lease and the slots are held until the answer is queued (where it
    // counts as unwritten).
    send(&sh.out, text).await;
    drop((lease, permits));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ws::shared::{Conn, ConnLimits, shared};
    use fsgate_gateway::ops::PathStyle;
    use fsgate_gateway::ops::RequestCtx;
    use std::time::Duration;
    use tokio::sync::Semaphore;

    /// A request runs on its connection's thread only while none of that connection's
    /// answers wait to be written: blocked there (on the content budget, which other
    /// connections' answers hold until they find room in the shared outbox), the thread
    /// would not write, and so never free, what this connection holds of that room.
    /// (On a one-thread runtime, as every connection has.)
    #[tokio::test(flavor = "current_thread")]
    async fn nothing_runs_inline_while_an_answer_waits_to_be_written() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let pol = fsgate_policy::Policy::builtin_default().expect("policy");
        let ws = fsgate_workspace::Workspace::open(tmp.path()).expect("workspace");
        let limits = ConnLimits {
            max_in_flight: 4,
            max_message: 1 << 16,
            total: crate::outbox::shared_room(1 << 18),
            server_in_flight: Arc::new(Semaphore::new(1 << 18)),
            write_stall: Duration::from_secs(30),
        };
        let (out, mut written) = Outbox::<Message>::new(limits.conn_out());
        let out = out.sharing(&limits.total);
        let conn = Conn {
            gw: Arc::new(Gateway::new(pol, ws)),
            ctx: RequestCtx {
                style: PathStyle::Rooted,
                session: "ws-t".into(),
                door: &crate::ws::DOOR,
                peer: "t".into(),
                scope: Default::default(),
                asker: None,
                notifier: None,
            },
            limits,
            askable: false,
            pool: tokio::runtime::Handle::current(),
            held: None,
        };
        let sh = shared(conn, &out);
        let door = Arc::new(BatchDoor {
            sh: Arc::clone(&sh),
            rt: tokio::runtime::Handle::current(),
        });
        let batch = batch::start(door, "t").expect("batch thread");
        let tasks = JoinSet::new();
        // The request being decided holds its own slot.
        let _slot = Arc::clone(&sh.slots).acquire_owned().await.expect("slot");
        assert!(alone(&sh, &tasks, &batch), "a lone request runs inline");
        assert!(out.send(Message::text("x".repeat(100)), 100).await);
        assert!(
            !alone(&sh, &tasks, &batch),
            "inline with an answer still unwritten"
        );
        // Written (the writer lets go of it): inline again.
        drop(written.recv().await.expect("queued"));
        assert!(alone(&sh, &tasks, &batch), "inline once written");
    }
}
