//! A connection's batch thread: quick read-only requests are answered here in batches
//! instead of one blocking-pool hand-off each.
//!
//! The thread takes every request already waiting (at most `MAX_BATCH`), runs them one
//! after the other in one [`fsgate_gateway::Batch`] (their audit records queued, not
//! waited for), waits once for the whole batch to be durable
//! ([`Gateway::settle`]), and hands the answers over together, so a batch shares one
//! write and one sync of the log and one write to the client. Every answer still waits
//! for its record. A batch stops early when its answers' content leases outgrow the
//! gateway's budget ([`fsgate_gateway::Batch::overdrawn`]): they go out before anything
//! else runs. Changes and slow requests do not come here.
//!
//! Order: a batched request sees every change its connection sent before it. Changes are
//! noted (`Door::change`) in the order they were read, and a batched request waits until
//! those read before it are done (its batch first hands over what it holds, so that
//! nothing waits for a lease the batch keeps). Slow reads (search) hold nothing up.

//!
//! Here: a connection's side (`Door`) and the thread's start; `batch/batched.rs` is what
//! a door does with its requests, `batch/order.rs` the order of changes and the reads
//! after them, `batch/thread.rs` the thread, `batch/run.rs` one batch run.

pub(crate) mod batched;
pub(crate) mod order;
mod run;
mod thread;

use std::collections::VecDeque;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use batched::Batched;
use fsgate_base::error::GatewayError;
use fsgate_gateway::Gateway;
use order::{Change, Order};
use run::run_deferred;
use thread::{Ended, Kick, Queue};

/// Requests queued for the thread. Each also holds room for its line in its door's own
/// byte bound, which is what bounds memory; this only bounds the queue's length.
const QUEUE: usize = 256;

/// A connection's side of its batch thread.
pub struct Door<J> {
    tx: mpsc::Sender<(u64, J)>,
    order: Arc<Order>,
    thread: Arc<dyn Kick>,
}

impl<J> Door<J> {
    /// Queues a batched request (call in the order the connection read its requests).
    pub async fn send(&self, job: J) {
        let seq = self.order.admit(false);
        // Err: the queue's receiver is gone (not before the door is dropped).
        let _ = self.tx.send((seq, job)).await;
        self.thread.kick();
    }

    /// Whether nothing is queued for the thread and no change is running: a request
    /// may then run on the caller's thread ([`run_here`](Self::run_here)) in its place.
    pub(crate) fn quiet(&self) -> bool {
        self.tx.capacity() == self.tx.max_capacity() && self.order.lock().running.is_empty()
    }

    /// Whether a request that is alone on its connection (the door knows that part) may
    /// run on the caller's thread instead of waking the batch thread: nothing queued or
    /// changing ([`quiet`](Self::quiet)), a thread that may block (`block_in_place`: a
    /// door's own input thread, or a multi-thread runtime's worker), and no ask rules (a
    /// question's reply must be read meanwhile, and the caller would not read it).
    pub(crate) fn may_run_here(&self, gw: &Gateway) -> bool {
        let multi = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        (multi || crate::stdio::own_thread::on_own_thread()) && self.may_run_inline(gw)
    }

    /// [`may_run_here`](Self::may_run_here) for a caller on a thread of its own (a
    /// connection's own thread and runtime): nothing queued or changing, and no ask
    /// rules. While the request runs, that thread does nothing else: the caller makes
    /// sure nothing another request waits for needs it meanwhile.
    pub(crate) fn may_run_inline(&self, gw: &Gateway) -> bool {
        self.quiet() && !gw.policy().has_ask_rules()
    }

    /// Runs `job` on the calling thread (which blocks) as a batch of one, its record
    /// settled, and gives back its answer for the caller to hand over.
    pub(crate) fn run_settled<B: Batched<Job = J>>(
        &self,
        door: &B,
        job: J,
    ) -> (Vec<B::Done>, Result<(), GatewayError>) {
        let mut waiting = VecDeque::from([(self.order.admit(false), job)]);
        let (done, batch) = run_deferred(door, &self.order, &mut waiting);
        (done, door.gateway().settle(batch))
    }

    /// Runs `job` on the calling thread (which blocks), exactly as the batch thread runs
    /// a batch of one: its record settled before its answer is handed over. For a
    /// connection with nothing else in flight, this saves waking the thread (a futex
    /// and a wake-up on another CPU, about 30 us on a VM) on every request.
    pub(crate) fn run_here<B: Batched<Job = J>>(&self, door: &B, job: J) {
        let (done, settled) = self.run_settled(door, job);
        door.answer(done, settled);
    }

    /// Notes a change (a request that does not come here), read now; keep the value
    /// until the change is done.
    pub(crate) fn change(&self) -> Change {
        Change {
            order: Arc::clone(&self.order),
            seq: self.order.admit(true),
        }
    }
}

/// Starts the batch thread for `door`; it ends once the returned door is dropped and
/// the requests queued are answered.
pub(crate) fn start<B: Batched>(door: Arc<B>, name: &str) -> std::io::Result<Door<B::Job>> {
    start_joined(door, name).map(|(tx, _ended)| tx)
}

/// How long the batch thread waits for a request before it ends (a later request
/// starts it again): an idle connection keeps no thread, and a burst pays one start.
pub const KEEP_ALIVE: Duration = Duration::from_secs(5);

/// [`start`], with a receiver that completes when the thread has answered everything
/// and ended. The thread starts with the first request, and ends after [`KEEP_ALIVE`]
/// without one.
pub(crate) fn start_joined<B: Batched>(
    door: Arc<B>,
    name: &str,
) -> std::io::Result<(Door<B::Job>, oneshot::Receiver<()>)> {
    let rt = tokio::runtime::Handle::try_current().ok();
    let (tx, rx) = mpsc::channel(QUEUE);
    let (ended_tx, ended) = oneshot::channel();
    let order = Arc::new(Order::default());
    let queue = Arc::new_cyclic(|me| Queue {
        door,
        order: Arc::clone(&order),
        jobs: Mutex::new(rx),
        running: AtomicBool::new(false),
        rt,
        name: name.to_owned(),
        me: me.clone(),
        keep_alive: KEEP_ALIVE,
        _ended: Ended(Some(ended_tx)),
    });
    let thread: Arc<dyn Kick> = queue;
    Ok((Door { tx, order, thread }, ended))
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsgate_gateway::Batch;
    use fsgate_gateway::ops;
    use fsgate_gateway::ops::{Op, PathStyle, RequestCtx};
    use std::time::Duration;

    struct Reads {
        gw: Gateway,
        answered: std::sync::mpsc::Sender<usize>,
    }

    fn ctx() -> RequestCtx {
        RequestCtx {
            style: PathStyle::Rooted,
            session: "s".into(),
            door: &crate::acp::DOOR,
            peer: "t".into(),
            scope: Default::default(),
            asker: None,
            notifier: None,
        }
    }

    impl Batched for Reads {
        type Job = String;
        type Done = Option<fsgate_gateway::Lease>;
        fn gateway(&self) -> &Gateway {
            &self.gw
        }
        fn run(&self, path: String, batch: &Batch) -> Option<Self::Done> {
            let read = fsgate_gateway::Request::Op(Op::ReadFile(ops::ReadFile { path }));
            let (out, lease) = self
                .gw
                .serve(&ctx(), read, fsgate_gateway::How::in_batch(batch));
            out.unwrap();
            Some(lease)
        }
        fn answer(&self, done: Vec<Self::Done>, _: Result<(), GatewayError>) {
            let _ = self.answered.send(done.len());
        }
    }

    /// A batch that holds no answer yet waits for the content budget like any request:
    /// it does not pass the budget (each connection's batch thread could, at once).
    #[test]
    fn a_batch_holding_nothing_waits_for_the_budget() {
        const MAX: usize = 64 * 1024;
        let pol = crate::policy_with_message_limit(MAX);
        let ws = tempfile::tempdir().unwrap();
        let root = ws.path().canonicalize().unwrap();
        std::fs::write(root.join("big"), vec![b'a'; MAX * 7 / 8]).unwrap();
        let gw = Gateway::new(pol, fsgate_workspace::Workspace::open(&root).unwrap());
        // Held elsewhere: most of the budget (2 × MAX).
        let held: Vec<_> = (0..1)
            .map(|_| {
                let read = Op::ReadFile(ops::ReadFile {
                    path: "/big".into(),
                });
                let (out, lease) = gw.serve(
                    &ctx(),
                    fsgate_gateway::Request::Op(read),
                    fsgate_gateway::How::alone(),
                );
                out.unwrap();
                lease.unwrap()
            })
            .collect();
        let (answered, answers) = std::sync::mpsc::channel();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let tx = rt.block_on(async { start(Arc::new(Reads { gw, answered }), "t").unwrap() });
        rt.block_on(tx.send("/big".into()));
        assert!(
            answers.recv_timeout(Duration::from_millis(300)).is_err(),
            "the batch passed the budget while holding nothing"
        );
        drop(held);
        assert_eq!(answers.recv_timeout(Duration::from_secs(10)), Ok(1));
        drop(tx);
    }

    /// The thread starts with the first request, waits for the next one (which it
    /// takes), and is gone once the door is dropped: `ended` completes.
    #[test]
    fn the_thread_takes_requests_that_come_while_it_waits_and_ends_with_its_door() {
        let ws = tempfile::tempdir().unwrap();
        let root = ws.path().canonicalize().unwrap();
        std::fs::write(root.join("a"), "a").unwrap();
        let gw = Gateway::new(
            fsgate_policy::Policy::builtin_default().unwrap(),
            fsgate_workspace::Workspace::open(&root).unwrap(),
        );
        let (answered, answers) = std::sync::mpsc::channel();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let (tx, ended) = rt
            .block_on(async { start_joined(Arc::new(Reads { gw, answered }), "t") })
            .unwrap();
        for _ in 0..3 {
            rt.block_on(tx.send("/a".into()));
            assert_eq!(answers.recv_timeout(Duration::from_secs(10)), Ok(1));
            // The thread now waits for the next request (up to KEEP_ALIVE).
            std::thread::sleep(Duration::from_millis(100));
        }
        drop(tx);
        let ended =
            rt.block_on(async { tokio::time::timeout(Duration::from_secs(10), ended).await });
        assert!(matches!(ended, Ok(Ok(()))), "the batch thread did not end");
    }
}
