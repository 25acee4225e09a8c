//! One WebSocket connection: its requests (served concurrently, within limits in count
//! and bytes), its subscription, and its share of the change notices.
//!
//! Every message that arrives goes through [`Gateway::serve`] exactly once: a workspace
//! operation as [`Request::Op`], anything else (malformed, binary, oversized,
//! subscribe, unknown type) as [`Request::message`] with the answer the client gets;
//! both through [`door::serve`], except the messages that get no answer (a subscription
//! without a `requestId`, a delivered permission reply), which are only recorded.
//!
//! Memory: answers wait in an [`Outbox`] counted in encoded bytes (twice the message
//! limit per connection, and the server's total across connections); while it is full
//! the connection reads no further message, so a client that stops reading stops being
//! served. Requests in flight are bounded in count and in bytes, per connection and
//! across the server; an answer over the message limit becomes a limit error. Change
//! events wait in a small [`Mailbox`] that turns into one `overflow` event when the
//! client does not keep up.

use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::SplitStream;
use futures_util::{FutureExt, SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, broadcast, mpsc, watch};
use tokio::task::JoinSet;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::error::{CapacityError, Error as WsProtoError};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

use super::mailbox::{Lost, Mailbox};
use super::permission::{self, Asks, ReplyError, WsAsker};
use super::protocol::{self, Echo, Head, Incoming, Ws};
use super::stall::Stall;
use crate::batch::{self, Batched};
use crate::door::{self, Decoded, Door, Served};
use crate::outbox::{Outbox, Queued, SharedRoom};
use fsgate_base::error::{GatewayError, code};
use fsgate_base::path::RelPath;
use fsgate_gateway::Gateway;
use fsgate_gateway::ask::Asker;
use fsgate_gateway::ops::{Op, RequestCtx};
use fsgate_gateway::watch::Notice;
use fsgate_gateway::{Batch, How, Request};

/// How long the rest of an oversized message is read and discarded, so that closing
/// the socket does not reset it before the client has read the error.
const DRAIN_AFTER_OVERSIZE: Duration = Duration::from_secs(5);

/// Limits of one connection, and the server-wide budgets it shares.
#[derive(Debug, Clone)]
pub(super) struct ConnLimits {
    /// Requests served at once.
    pub max_in_flight: usize,
    /// Largest message, in bytes (in or out).
    pub max_message: usize,
    /// Unwritten answer bytes across all connections.
    pub total: SharedRoom,
    /// Bytes reserved by requests in flight across all connections.
    pub server_in_flight: Arc<Semaphore>,
    /// How long the client may read none of its answers (`[ws] write_stall_ms`).
    pub write_stall: Duration,
}

impl ConnLimits {
    /// Unwritten reply bytes after which the connection stops reading.
    pub(super) fn conn_out(&self) -> usize {
        self.max_message.saturating_mul(2)
    }

    /// Bytes reserved by one connection's requests in flight.
    pub(super) fn conn_in_flight(&self) -> usize {
        self.max_message.saturating_mul(2)
    }
}

/// The server-wide budget (unwritten answers, and requests in flight, each): four
/// messages (64 MiB with the default limit), however many connections there are.
pub(super) fn server_budget(max_message: usize) -> usize {
    max_message.saturating_mul(4)
}

/// What one connection shares with its request tasks.
struct Shared {
    gw: Arc<Gateway>,
    ctx: Arc<RequestCtx>,
    out: Outbox<Message>,
    limits: ConnLimits,
    slots: Arc<Semaphore>,
    bytes: Arc<Semaphore>,
    /// The connection's `permission` questions; None if the client answers none.
    asks: Option<Arc<Asks>>,
    asker: Option<WsAsker>,
    /// Where blocking work goes ([`Conn::pool`]).
    pool: tokio::runtime::Handle,
    /// Held until every thread and task of the connection is done ([`Conn::held`]).
    _held: Option<Arc<OwnedSemaphorePermit>>,
}

/// Closes the connection's questions when dropped: however the connection ends (its
/// client gone, or the server stopping and dropping its future), a request waiting for
/// an answer is told "unanswered" at once instead of at its ask timeout.
struct CloseAsks(Option<Arc<Asks>>);

impl Drop for CloseAsks {
    fn drop(&mut self) {
        if let Some(a) = &self.0 {
            a.close();
        }
    }
}

/// One upgraded connection's gateway, context and limits.
pub(super) struct Conn {
    /// The gateway every message goes through.
    pub gw: Arc<Gateway>,
    /// The connection's context (its asker is set here).
    pub ctx: RequestCtx,
    /// The connection's limits.
    pub limits: ConnLimits,
    /// The runtime whose blocking pool runs the connection's slow requests and records
    /// (the server's, shared by every connection).
    pub pool: tokio::runtime::Handle,
    /// Whether the client is put `permission` questions.
    pub askable: bool,
    /// The connection thread's slot: kept until the connection's batch thread and its
    /// requests on the pool are done too, so that a server that stops waits for them
    /// (for a while) before its log's last record.
    pub held: Option<Arc<OwnedSemaphorePermit>>,
}

/// The watcher's notices from now on, and what it left unwatched in each workspace
/// (said first).
pub(super) type Notices = (broadcast::Receiver<Arc<Notice>>, Vec<Arc<Notice>>);

/// Serves one upgraded connection until the client closes it.
pub(super) async fn run(
    ws: WebSocketStream<TcpStream>,
    conn: Conn,
    notices: Option<Notices>,
    subscription: Option<RelPath>,
) {
    let stall = Stall::new(ws.get_ref(), conn.limits.write_stall);
    let (sink, stream) = ws.split();
    let (out, out_rx) = Outbox::<Message>::new(conn.limits.conn_out());
    let out = out.sharing(&conn.limits.total);
    let mailbox = Mailbox::default();
    let writer = tokio::spawn(write_all(sink, out_rx, mailbox.clone(), stall));
    let (sub_tx, sub_rx) = watch::channel(subscription);
    let events = notices.map(|(n, gaps)| {
        for gap in gaps {
            if let Notice::Unwatched(u) = &*gap {
                mailbox.push(protocol::unwatched_event(u).to_string());
            }
        }
        tokio::spawn(forward_notices(n, sub_rx, mailbox))
    });
    let sh = shared(conn, &out);
    let _close_asks = CloseAsks(sh.asks.clone());
    let door = Arc::new(BatchDoor {
        sh: Arc::clone(&sh),
        rt: tokio::runtime::Handle::current(),
    });
    let Ok((batch, batch_ended)) = batch::start_joined(Arc::clone(&door), "fsgate-ws-batch") else {
        tracing::error!(session = %sh.ctx.session, "cannot start the connection's batch thread");
        return;
    };
    let mut tasks = JoinSet::new();
    let mut rd = Reader {
        waiting: sh.asks.as_ref().map(|a| a.waiting()),
        stream,
        ended: false,
        oversized: false,
    };
    let requests = Requests {
        sh: &sh,
        sub_tx: &sub_tx,
        out: &out,
        door: &door,
        batch: &batch,
    };
    requests.serve(&mut rd, &mut tasks).await;
    // Questions still waiting cannot be answered any more.
    if let Some(a) = &sh.asks {
        a.close();
    }
    let (stream, oversized) = (rd.stream, rd.oversized);
    // Requests already running finish and are answered (they are recorded either way).
    while tasks.join_next().await.is_some() {}
    drop((batch, door));
    let _ = batch_ended.await;
    if let Some(e) = events {
        e.abort();
    }
    if oversized {
        let close = Message::Close(Some(CloseFrame {
            code: CloseCode::Size,
            reason: "message too large".into(),
        }));
        out.send(close, 1).await;
    }
    let (session, max) = (sh.ctx.session.clone(), sh.limits.max_message);
    drop((out, sh));
    if let Ok(sink) = writer.await
        && oversized
        && let Ok(mut ws) = stream.reunite(sink)
    {
        drain(ws.get_mut(), max).await;
    }
    tracing::debug!(%session, "connection closed");
}

/// What reading a connection's requests needs: what they share, the subscription
/// they may change, the outbox (its room), the batch thread and its door.
struct Requests<'a> {
    sh: &'a Arc<Shared>,
    sub_tx: &'a watch::Sender<Option<RelPath>>,
    out: &'a Outbox<Message>,
    door: &'a Arc<BatchDoor>,
    batch: &'a batch::Door<<BatchDoor as Batched>::Job>,
}

impl Requests<'_> {
    /// Reads and serves requests until the client closes the connection (or it is cut
    /// off): changes and the reads batched with them on the batch thread, in order;
    /// other requests on tasks of their own (`tasks`).
    async fn serve(&self, rd: &mut Reader, tasks: &mut JoinSet<()>) {
        let (sh, sub_tx) = (self.sh, self.sub_tx);
        // A message read while deciding whether a request is alone, to be taken next.
        let mut ahead = None;
        loop {
            while tasks.try_join_next().is_some() {}
            // Back-pressure: a client that does not read its replies is not read either.
            rd.meanwhile(sh, sub_tx, self.out.wait_for_room()).await;
            if rd.ended {
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
    async fn batch_one(
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

impl Shared {
    /// The connection's codec: answers bounded by its message limit.
    fn codec(&self) -> Ws {
        Ws {
            max: self.limits.max_message,
        }
    }
}

/// What the connection's requests share; the context's asker puts questions to it.
fn shared(conn: Conn, out: &Outbox<Message>) -> Arc<Shared> {
    let Conn {
        gw,
        mut ctx,
        limits,
        askable,
        pool,
        held,
    } = conn;
    let asks = askable.then(|| Asks::new(out.clone(), limits.max_message));
    let asker = asks.as_ref().map(|a| WsAsker::new(Arc::clone(a)));
    ctx.asker = asker.clone().map(|a| Arc::new(a) as Arc<dyn Asker>);
    Arc::new(Shared {
        gw,
        ctx: Arc::new(ctx),
        out: out.clone(),
        slots: Arc::new(Semaphore::new(limits.max_in_flight)),
        bytes: Arc::new(Semaphore::new(permits(limits.conn_in_flight()))),
        limits,
        asks,
        asker,
        pool,
        _held: held,
    })
}

/// A decoded operation, waiting for its slot.
struct Task {
    op: Op,
    tag: Echo,
}

/// Takes one text message: answers (after recording) what is no operation, and
/// returns an operation to serve.
async fn take(sh: &Shared, sub_tx: &watch::Sender<Option<RelPath>>, text: &str) -> Option<Task> {
    match protocol::parse(text) {
        Incoming::Request(request) => match sh.codec().decode(&sh.gw, request) {
            Decoded::Op { op, tag } => return Some(Task { op, tag }),
            message => answer(sh, message).await,
        },
        Incoming::Bad { head, reply } => answer(sh, protocol::message(head, reply)).await,
        Incoming::Subscribe { head, path } => {
            let reply = match fsgate_gateway::subscription(&path) {
                Ok(rel) => {
                    let shown = rel.to_rooted();
                    sub_tx.send_replace(Some(rel));
                    protocol::data_response(&head, json!({"path": shown}))
                }
                Err(e) => protocol::gateway_error_response(&head, &e),
            };
            answer_if_asked(sh, head, reply).await;
        }
        Incoming::Unsubscribe { head } => {
            sub_tx.send_replace(None);
            let reply = protocol::data_response(&head, json!({}));
            answer_if_asked(sh, head, reply).await;
        }
        Incoming::Permission {
            head,
            id,
            answer: a,
        } => {
            let delivered = match &sh.asks {
                Some(asks) => asks.deliver(&id, a),
                None => Err(ReplyError::Unknown(id)),
            };
            match delivered {
                Ok(()) => record(sh, &head.kind, Ok(())).await,
                Err(e) => {
                    let err = GatewayError::InvalidParams(e.to_string());
                    let reply = protocol::gateway_error_response(&head, &err);
                    answer(sh, protocol::message(head, reply)).await;
                }
            }
        }
    }
    None
}

/// The connection's reading side.
struct Reader {
    stream: SplitStream<WebSocketStream<TcpStream>>,
    /// How many of the connection's questions wait for a reply.
    waiting: Option<watch::Receiver<usize>>,
    /// The client closed, or the connection failed.
    ended: bool,
    /// It ended with a message over the limit.
    oversized: bool,
}

impl Reader {
    /// The text of what was read; anything else is answered here, or ends the reading.
    async fn text(
        &mut self,
        sh: &Shared,
        read: Option<Result<Message, WsProtoError>>,
    ) -> Option<Utf8Bytes> {
        match read {
            Some(Ok(Message::Text(t))) => return Some(t),
            Some(Ok(Message::Binary(_))) => {
                let reply =
                    invalid_request("binary frames are not supported; send JSON text messages");
                answer(sh, protocol::message(no_head(), reply)).await;
                return None;
            }
            Some(Ok(Message::Close(_))) | None => {}
            Some(Ok(_)) => return None,
            Some(Err(WsProtoError::Capacity(CapacityError::MessageTooLong { size, max_size }))) => {
                let reply = too_large(size, max_size);
                answer(sh, protocol::message(no_head(), reply)).await;
                self.oversized = true;
            }
            Some(Err(e)) => tracing::debug!(session = %sh.ctx.session, "connection ended: {e}"),
        }
        self.ended = true;
        // Nobody is left to answer the questions still waiting.
        if let Some(a) = &sh.asks {
            a.close();
        }
        None
    }

    /// Waits for `fut` (a slot, room for answers). Meanwhile, while a question of this
    /// connection waits, it keeps reading, so that the reply is not stuck behind the
    /// requests waiting for it: replies are delivered, other requests refused as busy.
    async fn meanwhile<F: Future>(
        &mut self,
        sh: &Shared,
        sub_tx: &watch::Sender<Option<RelPath>>,
        fut: F,
    ) -> F::Output {
        tokio::pin!(fut);
        let Some(mut waiting) = self.waiting.clone() else {
            return fut.await;
        };
        loop {
            if self.ended {
                return fut.await;
            }
            let asking = *waiting.borrow_and_update() > 0;
            tokio::select! {
                biased;
                out = &mut fut => return out,
                // Also while reading: once no question waits, reading stops again.
                changed = waiting.changed() => {
                    if changed.is_err() {
                        return fut.await;
                    }
                }
                read = self.stream.next(), if asking => {
                    if let Some(text) = self.text(sh, read).await
                        && let Some(task) = take(sh, sub_tx, text.as_str()).await
                    {
                        let head = task.tag.head;
                        let reply = busy(&head);
                        answer(sh, protocol::message(head, reply)).await;
                    }
                }
            }
        }
    }
}

/// The answer to a request read while the connection cannot take one (its slots are
/// all taken, or its answers unread) and a question waits for the client: refused
/// rather than left unread.
fn busy(head: &Head) -> Value {
    let msg = "this connection cannot take another request now (its [ws] max_in_flight requests are running, or its answers are unread) while a permission question waits for your reply; answer it, then send this request again".to_string();
    let extra = json!({"rule": "ws.max_in_flight", "reason": msg});
    protocol::error_response(head, code::LIMIT, &msg, Some(&extra))
}

/// Semaphore permits for `n` bytes (a semaphore counts in u32).
fn permits(n: usize) -> usize {
    n.min(u32::MAX as usize >> 1)
}

/// Waits for a slot for a request of `size` bytes: one of the connection's requests in
/// flight, and its bytes, on the connection and on the server. What an answer holds is
/// bounded where it is known: the gateway's budget leases the content a read or listing
/// holds, sized by the file or the answer, until the answer is queued here.
async fn admit(sh: &Shared, size: usize) -> Option<[OwnedSemaphorePermit; 3]> {
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
fn alone<J>(sh: &Shared, tasks: &JoinSet<()>, batch: &batch::Door<J>) -> bool {
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
fn batched(op: &Op) -> bool {
    op.id().is_quick_read()
}

/// The context of one request, when it differs from the connection's: under a policy
/// with ask rules, its questions name the request they are about.
fn request_ctx(sh: &Shared, head: &Head) -> Option<RequestCtx> {
    let asker = sh.asker.as_ref()?;
    if !sh.gw.policy().has_ask_rules() {
        return None;
    }
    let mut ctx = (*sh.ctx).clone();
    let request = permission::Request {
        kind: head.kind.clone(),
        id: head.request_id.clone(),
    };
    ctx.asker = Some(Arc::new(asker.for_request(request)));
    Some(ctx)
}

/// A batched operation that ran: its answer, and what it holds until the answer is
/// queued.
struct Done {
    served: Served<Ws>,
    permits: [OwnedSemaphorePermit; 3],
}

/// The connection's batch thread (see [`crate::batch`]).
struct BatchDoor {
    sh: Arc<Shared>,
    rt: tokio::runtime::Handle,
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
    async fn answer_now(&self, done: Vec<Done>, settled: Result<(), GatewayError>) {
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
async fn serve_op(sh: Arc<Shared>, task: Task, permits: [OwnedSemaphorePermit; 3]) {
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

/// Records a message that is no operation, then queues its answer (or, if the record
/// could not be made, the error saying so).
async fn answer(sh: &Shared, message: Decoded<Ws>) {
    let (gw, ctx, codec) = (Arc::clone(&sh.gw), Arc::clone(&sh.ctx), sh.codec());
    let tag = match &message {
        Decoded::Op { tag, .. } | Decoded::Task { tag, .. } | Decoded::Message { tag, .. } => {
            tag.clone()
        }
    };
    let text = (sh.pool)
        .spawn_blocking(move || door::serve(&codec, &gw, &ctx, None, message).answer)
        .await
        .unwrap_or_else(|e| {
            let err = GatewayError::Internal(format!("record task failed: {e}"));
            sh.codec().refuse(&tag, &err)
        });
    send(&sh.out, text).await;
}

/// Queues an encoded answer once the connection (and the server) has room for it.
async fn send(out: &Outbox<Message>, text: String) {
    let len = text.len();
    out.send(Message::text(text), len).await;
}

/// [`answer`], for `subscribe` / `unsubscribe`: recorded always, answered only when
/// the message had a `requestId`.
async fn answer_if_asked(sh: &Shared, head: Head, reply: Value) {
    if head.request_id.is_none() {
        return record(sh, &head.kind, protocol::outcome_of(&reply)).await;
    }
    answer(sh, protocol::message(head, reply)).await;
}

/// Records a message that gets no answer.
async fn record(sh: &Shared, name: &str, outcome: Result<(), (i64, String)>) {
    let (gw, ctx) = (Arc::clone(&sh.gw), Arc::clone(&sh.ctx));
    let name = name.to_string();
    let _ = (sh.pool)
        .spawn_blocking(move || {
            gw.serve(&ctx, Request::message(name, outcome), How::alone())
                .0
        })
        .await;
}

/// The head of a message that could not be read: no type, no `requestId`.
fn no_head() -> Head {
    Head {
        kind: "error".into(),
        request_id: None,
    }
}

fn invalid_request(msg: &str) -> Value {
    protocol::error_response(&no_head(), code::INVALID_REQUEST, msg, None)
}

fn too_large(size: usize, max: usize) -> Value {
    let head = no_head();
    let msg = format!(
        "message of {size} bytes exceeds the limit of {max} bytes ([ws] max_message_bytes / [limits] max_message_bytes); the connection will be closed"
    );
    tracing::warn!("{msg}");
    let extra = json!({"rule": "limits.max_message_bytes", "reason": msg});
    protocol::error_response(&head, code::LIMIT, &msg, Some(&extra))
}

/// Closes our side (the server closes TCP first after a close frame) and reads and
/// discards what the client still sends, until it closes or time is up.
async fn drain(tcp: &mut TcpStream, max: usize) {
    let _ = tcp.shutdown().await;
    let mut buf = vec![0u8; 64 * 1024];
    let mut left = max.saturating_mul(2);
    let _ = tokio::time::timeout(DRAIN_AFTER_OVERSIZE, async {
        while left > 0 {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    })
    .await;
}

/// Writes answers and events in order of arrival; returns the sink so an oversized
/// connection can be drained. An answer's room is given back once it is written (when
/// its [`Queued`] drops). A client that reads nothing for `stall`'s limit is closed:
/// the writer stops, and its unwritten answers (and their room) are dropped.
async fn write_all<S>(
    mut sink: S,
    mut rx: mpsc::UnboundedReceiver<Queued<Message>>,
    mailbox: Mailbox,
    stall: Stall,
) -> S
where
    S: futures_util::Sink<Message> + Unpin,
{
    loop {
        let sent = tokio::select! {
            q = rx.recv() => {
                let Some(q) = q else { break };
                stall.write(send_ready(&mut sink, q, &mut rx)).await
            }
            batch = mailbox.take() => {
                stall.write(send_events(&mut sink, batch.lost, batch.events)).await
            }
        };
        match sent {
            Some(true) => {}
            Some(false) => break,
            None => return sink,
        }
    }
    let _ = stall.write(sink.flush()).await;
    sink
}

/// Sends `first` and whatever else is already queued (up to [`COALESCE_BYTES`]) with one
/// flush; the messages' rooms are held until it. False: stop (closed or failed).
async fn send_ready<S>(
    sink: &mut S,
    first: Queued<Message>,
    rx: &mut mpsc::UnboundedReceiver<Queued<Message>>,
) -> bool
where
    S: futures_util::Sink<Message> + Unpin,
{
    let mut held = Vec::new();
    let mut bytes = 0;
    let mut next = Some(first);
    while let Some(q) = next {
        let (msg, room) = q.split();
        let closing = matches!(msg, Message::Close(_));
        bytes += msg.len();
        held.push(room);
        if sink.feed(msg).await.is_err() {
            return false;
        }
        if closing {
            let _ = sink.flush().await;
            return false;
        }
        next = if bytes < COALESCE_BYTES {
            rx.try_recv().ok()
        } else {
            None
        };
    }
    sink.flush().await.is_ok()
}

/// Bytes of answers written with one flush at most.
const COALESCE_BYTES: usize = 256 * 1024;

async fn send_events<S>(sink: &mut S, lost: Lost, events: Vec<String>) -> bool
where
    S: futures_util::Sink<Message> + Unpin,
{
    if let Some(n) = lost {
        let v = protocol::overflow_event(n);
        if sink.feed(Message::text(v.to_string())).await.is_err() {
            return false;
        }
    }
    for e in events {
        if sink.feed(Message::text(e)).await.is_err() {
            return false;
        }
    }
    sink.flush().await.is_ok()
}

/// Puts the notices under the connection's subscription in its mailbox.
async fn forward_notices(
    mut notices: broadcast::Receiver<Arc<Notice>>,
    subscription: watch::Receiver<Option<RelPath>>,
    out: Mailbox,
) {
    loop {
        match notices.recv().await {
            Ok(n) => match &*n {
                Notice::Change(c) => {
                    let wanted = subscription
                        .borrow()
                        .as_ref()
                        .is_some_and(|sub| c.path.starts_with(sub));
                    if wanted {
                        out.push(protocol::change_event(c).to_string());
                    }
                }
                Notice::Overflow => out.lost(None),
                Notice::Unwatched(u) => out.push(protocol::unwatched_event(u).to_string()),
            },
            Err(broadcast::error::RecvError::Lagged(n)) => {
                tracing::warn!(dropped = n, "a slow connection lost change events");
                out.lost(Some(n));
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsgate_gateway::ops::PathStyle;

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
