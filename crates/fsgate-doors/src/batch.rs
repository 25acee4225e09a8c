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

use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering, fence};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use fsgate_base::error::GatewayError;
use fsgate_gateway::{Batch, Gateway};

/// Requests one batch takes at most: the batch's answers wait for its slowest request.
pub(crate) const MAX_BATCH: usize = 64;

/// Requests queued for the thread. Each also holds room for its line in its door's own
/// byte bound, which is what bounds memory; this only bounds the queue's length.
const QUEUE: usize = 256;

/// What a door does with the requests it batches.
pub(crate) trait Batched: Send + Sync + 'static {
    /// One request, as the door hands it over.
    type Job: Send + 'static;
    /// One request run, its answer not yet handed over.
    type Done;

    /// The gateway the requests go through.
    fn gateway(&self) -> &Gateway;

    /// Runs one request, serving its operation in `batch` (a door's with
    /// [`crate::door::serve`]); None if it is no longer wanted (cancelled by the client).
    fn run(&self, job: Self::Job, batch: &Batch) -> Option<Self::Done>;

    /// Hands the answers over. `settled`: whether their deferred records are durable; if
    /// not, each answer must be replaced by this error.
    fn answer(&self, done: Vec<Self::Done>, settled: Result<(), GatewayError>);
}

/// The order of one connection's requests: which changes, admitted when, are still
/// running.
#[derive(Default)]
struct Order {
    state: Mutex<OrderState>,
    done: Condvar,
}

#[derive(Default)]
struct OrderState {
    /// The last admission number given.
    last: u64,
    /// Admission numbers of the changes still running.
    running: BTreeSet<u64>,
    /// Threads in [`Order::wait_ready`]: a change that ends wakes someone only then (a
    /// wake-up with nobody waiting is still a syscall, on every change's path).
    waiting: usize,
}

impl Order {
    fn lock(&self) -> MutexGuard<'_, OrderState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next admission number; `running`: the request is a change and now runs.
    fn admit(&self, running: bool) -> u64 {
        let mut st = self.lock();
        st.last += 1;
        let seq = st.last;
        if running {
            st.running.insert(seq);
        }
        seq
    }

    /// Whether every change admitted before `seq` is done.
    fn ready(&self, seq: u64) -> bool {
        self.lock().running.first().is_none_or(|&first| first > seq)
    }

    fn wait_ready(&self, seq: u64) {
        let mut st = self.lock();
        while st.running.first().is_some_and(|&first| first < seq) {
            st.waiting += 1;
            st = self.done.wait(st).unwrap_or_else(PoisonError::into_inner);
            st.waiting -= 1;
        }
    }
}

/// A change in flight: batched requests read after it wait until this is dropped (when
/// the change is done).
pub(crate) struct Change {
    order: Arc<Order>,
    seq: u64,
}

impl Drop for Change {
    fn drop(&mut self) {
        let mut st = self.order.lock();
        st.running.remove(&self.seq);
        if st.waiting > 0 {
            self.order.done.notify_all();
        }
    }
}

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
        _ended: Ended(Some(ended_tx)),
    });
    let thread: Arc<dyn Kick> = queue;
    Ok((Door { tx, order, thread }, ended))
}

/// Starts the batch thread if none runs.
trait Kick: Send + Sync {
    fn kick(&self);
}

/// A door's queue and what its thread needs. Dropped (which completes `ended`) once the
/// door is gone and no thread runs; `door` is dropped before that.
struct Queue<B: Batched> {
    door: Arc<B>,
    order: Arc<Order>,
    /// Only the thread takes from it.
    jobs: Mutex<mpsc::Receiver<(u64, B::Job)>>,
    /// A thread runs (or is starting) and will see every job queued before it clears this.
    running: AtomicBool,
    /// Whose blocking pool runs the queue if no thread can be started.
    rt: Option<tokio::runtime::Handle>,
    name: String,
    me: Weak<Queue<B>>,
    /// Declared last: completes after the other fields are dropped.
    _ended: Ended,
}

/// Completes the `ended` receiver when dropped.
struct Ended(Option<oneshot::Sender<()>>);

impl Drop for Ended {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

impl<B: Batched> Kick for Queue<B> {
    fn kick(&self) {
        // Pairs with the fence in `work`: either the thread sees this job, or this sees
        // `running` cleared and starts one.
        fence(Ordering::SeqCst);
        if self.running.swap(true, Ordering::SeqCst) {
            return;
        }
        let Some(queue) = self.me.upgrade() else {
            return;
        };
        let spawned = std::thread::Builder::new()
            .name(self.name.clone())
            .spawn(move || queue.work());
        if let Err(e) = spawned {
            // Nothing else would take the queued jobs: run them on the blocking pool.
            tracing::warn!("cannot start the batch thread, using the blocking pool: {e}");
            if let (Some(queue), Some(rt)) = (self.me.upgrade(), &self.rt) {
                rt.spawn_blocking(move || queue.work());
            }
        }
    }
}

/// Waits up to `within` for the next job (None: none came, or the door is gone),
/// parked: no runtime timer, which a runtime shutting down would no longer serve.
fn recv_within<T>(jobs: &mut mpsc::Receiver<T>, within: Duration) -> Option<T> {
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let deadline = Instant::now() + within;
    loop {
        if let std::task::Poll::Ready(job) = jobs.poll_recv(&mut cx) {
            return job;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        std::thread::park_timeout(left);
    }
}

/// Wakes the thread parked in [`recv_within`].
struct Unpark(std::thread::Thread);

impl std::task::Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

impl<B: Batched> Queue<B> {
    /// The thread: takes what waits, runs it as one batch, and again; ends after
    /// [`KEEP_ALIVE`] without a job, or once the door is dropped and all is answered.
    fn work(&self) {
        let mut waiting = VecDeque::new();
        loop {
            let more = {
                let mut jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
                self.take(&mut jobs, &mut waiting)
            };
            if more {
                run_waiting(&*self.door, &self.order, &mut waiting);
                continue;
            }
            self.running.store(false, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            // A job queued before `running` was cleared saw it set and left it to us.
            let queued = !self
                .jobs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_empty();
            if !queued || self.running.swap(true, Ordering::SeqCst) {
                return;
            }
        }
    }

    /// Moves up to [`MAX_BATCH`] jobs into `waiting`, waiting up to [`KEEP_ALIVE`] for
    /// the first; false if none came.
    fn take(
        &self,
        jobs: &mut mpsc::Receiver<(u64, B::Job)>,
        waiting: &mut VecDeque<(u64, B::Job)>,
    ) -> bool {
        if waiting.is_empty() {
            let first = match jobs.try_recv() {
                Ok(job) => Some(job),
                Err(mpsc::error::TryRecvError::Disconnected) => None,
                Err(mpsc::error::TryRecvError::Empty) => recv_within(jobs, KEEP_ALIVE),
            };
            match first {
                Some(job) => waiting.push_back(job),
                None => return false,
            }
        }
        while waiting.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(job) => waiting.push_back(job),
                Err(_) => break,
            }
        }
        true
    }
}

/// Runs one batch from `waiting`: its records settled once, then its answers handed over.
fn run_waiting<B: Batched>(door: &B, order: &Order, waiting: &mut VecDeque<(u64, B::Job)>) {
    let (done, batch) = run_deferred(door, order, waiting);
    let settled = door.gateway().settle(batch);
    door.answer(done, settled);
}

/// Runs one batch from `waiting`, its records queued but not yet waited for.
fn run_deferred<B: Batched>(
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
fn run_batch<B: Batched>(
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

#[cfg(test)]
mod tests {
    use super::*;
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
            let (out, lease) = self.gw.serve_in(&ctx(), read, batch);
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
                let (out, lease) = gw.serve_leased(&ctx(), fsgate_gateway::Request::Op(read));
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
