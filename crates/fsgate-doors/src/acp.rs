//! Transport `acp`: newline-delimited JSON-RPC 2.0 on stdio, fsgate playing the ACP
//! client's file-system role. Requests are served concurrently and answered in any
//! order; on stdin EOF in-flight requests finish, then the loop returns. Which operation
//! each file method names, and its params, is `acp_params.rs`.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::io::{AsyncRead, BufReader};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;

use super::batch::{self, batched::Batched};
use super::jsonrpc::{self, Incoming};
use super::lines::{Line, read_line};
use crate::acp_params::to_op;
use crate::door::{self, Decoded, Door, Ops, Ran, Served};
use crate::outbox::{Outbox, Queued};
use crate::stdio::{self, sink::Sink};
use fsgate_base::error::{GatewayError, code};
use fsgate_decide::OpClass;
use fsgate_gateway::Gateway;
use fsgate_gateway::ops::{Output, PathStyle, RequestCtx};
use fsgate_gateway::{Batch, DoorSpec, Lease, Request};

/// A batch's answers up to this size are written by the batch thread itself, when
/// nothing waits in the outbox; larger ones go to the writer task, so that the thread
/// goes on while the client reads them.
const WRITE_HERE_MAX: usize = 64 * 1024;

/// Bytes of queued answers the writer task writes at once at most.
const WRITE_BATCH: usize = 256 * 1024;

/// Requests served at once per connection; more wait for a slot.
pub(crate) const MAX_IN_FLIGHT: usize = 64;

/// The ACP protocol version carrying the `fs/*` methods.
pub(crate) const PROTOCOL_VERSION: u64 = 1;

/// This door, as its requests carry it: content sent once; files read in parts with
/// `line` and `limit`, binary content with `_fsgate/read_file`.
pub const DOOR: DoorSpec = DoorSpec {
    name: "acp",
    content_copies: 1,
    read_in_parts: "; read the file in parts (line and limit)",
    binary_read: "; use _fsgate/read_file",
    media_read: "; the policy lets media files (images, audio) be read base64-encoded with \
                 _fsgate/read_file if their content matches their extension",
    for_processes: false,
};

/// The session id a request names, if any.
pub(crate) fn session_of(params: &Value) -> Option<String> {
    params
        .get("sessionId")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// The `initialize` result: capabilities follow the policy.
pub(crate) fn initialize_result(gw: &Gateway) -> Value {
    json!({
        "protocolVersion": PROTOCOL_VERSION,
        "clientCapabilities": {
            "fs": {
                "readTextFile": gw.members().can_ever(OpClass::Read),
                "writeTextFile": gw.members().can_ever(OpClass::Write),
            }
        },
        "_meta": { "fsgate": gw.meta() },
    })
}

/// One JSON-RPC request to this door, as read.
pub struct AcpRequest {
    /// The id, echoed in the answer.
    pub id: Value,
    /// The method.
    pub method: String,
    /// The params (`null` if absent).
    pub params: Value,
}

/// The ACP door's wire (see [`crate::door`]): JSON-RPC requests in, responses out,
/// paths absolute.
pub(crate) struct Acp;

impl Door for Acp {
    type Wire = AcpRequest;
    type Tag = Value;
    type Answer = Value;
    /// Every ACP file method is one operation.
    type Task = std::convert::Infallible;

    fn decode(&self, gw: &Gateway, wire: AcpRequest) -> Decoded<Acp> {
        let AcpRequest { id, method, params } = wire;
        if method == "initialize" {
            return message(id, method, Ok(initialize_result(gw)));
        }
        match to_op(&method, params) {
            Ok(Some(op)) => Decoded::Op { op, tag: id },
            Ok(None) => {
                let msg = format!("method not found: {method}");
                let error = jsonrpc::error_object(code::METHOD_NOT_FOUND, &msg, None);
                message(id, method, Err(error))
            }
            Err(e) => message(id, method, Err(e.to_rpc_error())),
        }
    }

    fn encode(&self, gw: &Gateway, id: &Value, out: Output) -> Value {
        let result = crate::results::render(gw, PathStyle::Absolute, out);
        jsonrpc::result_response(id, result)
    }

    fn refuse(&self, id: &Value, e: &GatewayError) -> Value {
        jsonrpc::error_response(id, e.to_rpc_error())
    }

    fn run(&self, _: &Gateway, _: &Ops<'_>, _: &Value, task: Self::Task) -> Ran<Acp> {
        match task {}
    }
}

/// A message that is no workspace operation, answered with a result or an error
/// object once recorded as `name` (see [`Decoded::Message`]).
pub(crate) fn message(
    id: Value,
    name: impl Into<String>,
    answer: Result<Value, Value>,
) -> Decoded<Acp> {
    let (outcome, answer) = match answer {
        Ok(result) => (Ok(()), jsonrpc::result_response(&id, result)),
        Err(error) => {
            let outcome = Err((
                error["code"].as_i64().unwrap_or(code::INTERNAL),
                error["message"].as_str().unwrap_or_default().to_string(),
            ));
            (outcome, jsonrpc::error_response(&id, error))
        }
    };
    Decoded::Message {
        name: name.into(),
        tag: id,
        answer,
        outcome,
    }
}

/// Answers one request (blocking: run it off the async threads). Every request, a
/// workspace operation or not, is recorded in the audit log before it is answered. The
/// leases are the content budget the answer holds: keep them until the answer is queued.
pub fn answer(gw: &Gateway, peer: &str, request: AcpRequest) -> (Value, Vec<Lease>) {
    answer_in(gw, &request_ctx(peer, &request.params), request)
}

/// The context of a request on this door naming `params`' session.
fn request_ctx(peer: &str, params: &Value) -> RequestCtx {
    door_ctx(peer, session_of(params).unwrap_or_default())
}

/// The context of a message on this door, in `session`.
fn door_ctx(peer: &str, session: String) -> RequestCtx {
    RequestCtx {
        style: PathStyle::Absolute,
        session,
        door: &DOOR,
        peer: peer.to_string(),
        scope: Default::default(),
        asker: None,
        notifier: None,
    }
}

/// [`answer`] under a context the caller made (the proxy's has an asker and notifier).
pub(crate) fn answer_in(
    gw: &Gateway,
    ctx: &RequestCtx,
    request: AcpRequest,
) -> (Value, Vec<Lease>) {
    let served = door::serve_wire(&Acp, gw, ctx, None, request);
    (served.answer, served.leases)
}

/// A message as one line of bytes.
pub fn line_bytes(v: &Value) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(256);
    crate::encode::write_json(&mut bytes, v);
    bytes.push(b'\n');
    bytes
}

/// Answers a message that is not a valid request, after recording it.
fn answer_invalid(gw: &Gateway, peer: &str, id: Value, error: Value) -> Value {
    let invalid = message(id, "invalid-message", Err(error));
    door::serve(&Acp, gw, &door_ctx(peer, String::new()), None, invalid).answer
}

/// Serves ACP on this process's stdin/stdout (`fsgate serve --transport acp`). Stdin is
/// read on a thread of its own with blocking reads, so that a request alone runs on the
/// thread that read it and no runtime thread is woken for it; where stdin cannot be
/// read that way, the runtime reads it.
pub async fn serve_stdio(gw: Arc<Gateway>, peer: String) -> std::io::Result<()> {
    match stdio::thread_reader::ThreadReader::stdin() {
        Ok((input, stop)) => {
            let serving = serve(gw, peer, input, Sink::stdout());
            let running = stdio::own_thread::on_thread("fsgate-acp-input", serving, stop)?;
            // Nothing stops it here: no output means the thread died (a panic).
            running.finish().await.unwrap_or_else(|| {
                Err(std::io::Error::other(
                    "the ACP input thread ended without a result",
                ))
            })
        }
        Err(e) => {
            tracing::debug!("stdin read by the runtime: {e}");
            serve(gw, peer, stdio::stdin(), Sink::stdout()).await
        }
    }
}

/// Serves requests from `input` until EOF, writing responses to `output`. Unwritten
/// answers are bounded in bytes (the message limit): while they fill the bound, no new
/// request is read, and answers wait to be queued (see `Outbox`). The batch thread
/// writes small batches of answers to `output` itself (no hop to another thread).
///
/// One limit, not two: answers waiting to be queued hold the gateway's content budget
/// (twice the limit, and one answer past it), so a client that reads nothing holds at
/// most the idle process, one limit queued and that budget: about 113 MiB with the
/// default limits (17 + 24 + 48 + 24), inside the 128 MiB target (`tests/acp_memory.rs`).
/// With twice the limit queued the worst case was 137 MiB, and the test met 129.
pub(crate) async fn serve<R>(
    gw: Arc<Gateway>,
    peer: String,
    input: R,
    output: Arc<Sink>,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
{
    let max = usize::try_from(gw.policy().limits().max_message_bytes).unwrap_or(usize::MAX);
    let (outbox, rx) = Outbox::<Vec<u8>>::new(max);
    let writer = tokio::spawn(write_lines(rx, Arc::clone(&output)));
    let mut reader = BufReader::with_capacity(64 * 1024, input);
    let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let peer: Arc<str> = peer.into();
    let batch = BatchDoor {
        gw: Arc::clone(&gw),
        peer: Arc::clone(&peer),
        out: outbox.clone(),
        sink: output,
        rt: tokio::runtime::Handle::current(),
    };
    let door = Arc::new(batch);
    let batch = batch::start(Arc::clone(&door), "fsgate-acp-batch")?;
    // Lines queued for the batch thread hold room for their bytes until they have run:
    // the queue's length alone would let a client park hundreds of maximal lines there.
    let input_cap = u32::try_from(max.saturating_mul(2)).unwrap_or(u32::MAX >> 4);
    let input = Arc::new(Semaphore::new(input_cap as usize));
    let dispatch = Dispatch {
        gw: &gw,
        peer: &peer,
        outbox: &outbox,
        door: &door,
        batch: &batch,
        slots: &slots,
        input: (&input, input_cap),
    };
    let mut tasks = JoinSet::new();
    loop {
        outbox.wait_for_room().await;
        let line = match read_line(&mut reader, max).await {
            Ok(Line::Eof) => break,
            Ok(Line::TooLong { len }) => {
                let msg = format!("message of {len} bytes exceeds the limit of {max} bytes");
                tracing::warn!("{msg}");
                let err = jsonrpc::error_object(code::INVALID_REQUEST, &msg, None);
                invalid(&gw, &peer, Value::Null, err, &outbox).await;
                continue;
            }
            Ok(Line::Message(bytes)) => bytes,
            Err(e) => {
                tracing::error!("reading stdin: {e}");
                break;
            }
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        // Reaped now, not before the read: a request answered while the line was
        // awaited leaves nothing in flight, and the next one may run alone.
        while tasks.try_join_next().is_some() {}
        if !dispatch.message(&line, &mut tasks, reader.buffer()).await {
            break;
        }
    }
    while tasks.join_next().await.is_some() {}
    // The batch thread answers what it holds, then lets go of its outbox (as does the
    // door kept here for requests run alone: the writer ends when every sender is gone).
    drop(batch);
    drop(door);
    drop(outbox);
    writer.await.map_err(std::io::Error::other)?
}

/// Where the read loop hands a message: the batch thread (or its door, to run a
/// request here), a task of its own, or the log (notifications, stray responses).
struct Dispatch<'a> {
    gw: &'a Arc<Gateway>,
    peer: &'a Arc<str>,
    outbox: &'a Outbox<Vec<u8>>,
    door: &'a Arc<BatchDoor>,
    batch: &'a batch::Door<Job>,
    /// Requests in flight on tasks of their own.
    slots: &'a Arc<Semaphore>,
    /// Room for the bytes of lines queued for the batch thread, and its size.
    input: (&'a Arc<Semaphore>, u32),
}

impl Dispatch<'_> {
    /// Serves one message (`ahead` is what was read beyond it); `false` when reading
    /// must stop.
    async fn message(&self, line: &[u8], tasks: &mut JoinSet<()>, ahead: &[u8]) -> bool {
        let (gw, peer) = (self.gw, self.peer);
        let (input, input_cap) = self.input;
        let units = u32::try_from(line.len())
            .unwrap_or(u32::MAX)
            .clamp(1, input_cap);
        match jsonrpc::classify(line) {
            Incoming::Request { id, method, params } if batched(&method) => {
                let Ok(room) = Arc::clone(input).acquire_many_owned(units).await else {
                    return false;
                };
                let job = Job {
                    request: AcpRequest { id, method, params },
                    _room: room,
                };
                if alone(gw, tasks, self.batch, ahead) {
                    // On stdin's own thread (`serve_stdio`) block_in_place just calls;
                    // on a runtime thread, its other tasks move to another thread.
                    tokio::task::block_in_place(|| self.batch.run_here(&**self.door, job));
                    return true;
                }
                self.batch.send(job).await;
            }
            Incoming::Request { id, method, params }
                if changes(&method) && alone_here(gw, tasks, self.batch, ahead) =>
            {
                // A change alone runs right here too: no task, no pool thread, and its
                // answer written by this thread (nothing is in flight to need it).
                self.door.run_alone(AcpRequest { id, method, params });
            }
            Incoming::Request { id, method, params } => {
                // Reads sent after a change wait until it is done.
                let change = changes(&method).then(|| self.batch.change());
                let Ok(permit) = Arc::clone(self.slots).acquire_owned().await else {
                    return false;
                };
                let (gw, out, peer) = (Arc::clone(gw), self.outbox.clone(), Arc::clone(peer));
                tasks.spawn(async move {
                    request(gw, peer, AcpRequest { id, method, params }, out).await;
                    drop((permit, change));
                });
            }
            Incoming::Notification { method, .. } => {
                tracing::debug!(%method, "notification ignored");
                note(gw, peer, method).await;
            }
            Incoming::Response { id, .. } => {
                tracing::debug!(%id, "unexpected response ignored");
                note(gw, peer, "unexpected-response".into()).await;
            }
            Incoming::Invalid { id, error } => invalid(gw, peer, id, error, self.outbox).await,
        }
        true
    }
}

/// Whether a batched request may run right here as a batch of one instead of waking the
/// batch thread (a futex and a wake-up on another CPU per request): nothing else is in
/// flight, nothing further was read ahead (pipelined requests are batched), and the
/// batch door allows it ([`batch::Door::may_run_here`]).
fn alone<J>(gw: &Gateway, tasks: &JoinSet<()>, batch: &batch::Door<J>, ahead: &[u8]) -> bool {
    ahead.is_empty() && tasks.is_empty() && batch.may_run_here(gw)
}

/// Whether a change may run right here, on stdin's own thread: as [`alone`], and that
/// thread is one of its own, which nothing else needs while the change runs (a change
/// may take a while; a runtime worker must not be held for it).
fn alone_here<J>(gw: &Gateway, tasks: &JoinSet<()>, batch: &batch::Door<J>, ahead: &[u8]) -> bool {
    crate::stdio::own_thread::on_own_thread() && alone(gw, tasks, batch, ahead)
}

/// Whether `method` is quick and read-only: answered on the batch thread.
fn batched(method: &str) -> bool {
    matches!(
        method,
        "fs/read_text_file" | "_fsgate/read_file" | "_fsgate/stat" | "_fsgate/ls"
    )
}

/// Whether `method` changes the workspace.
fn changes(method: &str) -> bool {
    matches!(
        method,
        "fs/write_text_file"
            | "_fsgate/edit_text_file"
            | "_fsgate/mkdir"
            | "_fsgate/rm"
            | "_fsgate/rename"
    )
}

/// A request for the batch thread.
struct Job {
    request: AcpRequest,
    /// Room for the request's line in the connection's input bound, until it has run.
    _room: tokio::sync::OwnedSemaphorePermit,
}

/// The connection's batch thread (see [`crate::batch`]).
struct BatchDoor {
    gw: Arc<Gateway>,
    peer: Arc<str>,
    out: Outbox<Vec<u8>>,
    /// Where small batches of answers are written, by this thread.
    sink: Arc<Sink>,
    rt: tokio::runtime::Handle,
}

impl Batched for BatchDoor {
    type Job = Job;
    type Done = Served<Acp>;

    fn gateway(&self) -> &Gateway {
        &self.gw
    }

    fn run(&self, job: Job, batch: &Batch) -> Option<Served<Acp>> {
        let ctx = request_ctx(&self.peer, &job.request.params);
        Some(door::serve_wire(
            &Acp,
            &self.gw,
            &ctx,
            Some(batch),
            job.request,
        ))
    }

    fn answer(&self, done: Vec<Served<Acp>>, settled: Result<(), GatewayError>) {
        let lines: Vec<(Vec<u8>, Vec<Lease>)> = done
            .into_iter()
            .map(|served| {
                let served = served.settled(&Acp, &settled);
                (line_bytes(&served.answer), served.leases)
            })
            .collect();
        self.write_lines(lines);
    }
}

impl BatchDoor {
    /// Runs a request alone on this thread (see `alone_here`) and answers it.
    fn run_alone(&self, request: AcpRequest) {
        let id = request.id.clone();
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            answer(&self.gw, &self.peer, request)
        }));
        let (v, lease) = ran.unwrap_or_else(|_| {
            tracing::error!("request task failed: it panicked");
            let e = GatewayError::Internal("request task failed".into());
            (Acp.refuse(&id, &e), Vec::new())
        });
        self.write_lines(vec![(line_bytes(&v), lease)]);
    }

    /// Writes answers here when small and nothing queued before would be overtaken;
    /// else queues them for the writer.
    fn write_lines(&self, lines: Vec<(Vec<u8>, Vec<Lease>)>) {
        let total: usize = lines.iter().map(|(b, _)| b.len()).sum();
        // Written here only when nothing queued before would be overtaken.
        if total <= WRITE_HERE_MAX && self.out.unwritten() == 0 {
            let mut all = Vec::with_capacity(total);
            for (bytes, _) in &lines {
                all.extend_from_slice(bytes);
            }
            if let Err(e) = self.sink.write(&all) {
                // The client stopped reading for good: nobody to answer.
                tracing::debug!("answers not written: {e}");
            }
            return;
        }
        self.rt.block_on(async {
            for (bytes, lease) in lines {
                let len = bytes.len();
                self.out.send(bytes, len).await;
                drop(lease);
            }
        });
    }
}

/// Answers one request on the blocking pool and queues the answer; the content budget
/// it holds is returned once the answer is queued.
async fn request(gw: Arc<Gateway>, peer: Arc<str>, request: AcpRequest, out: Outbox<Vec<u8>>) {
    let id = request.id.clone();
    let (bytes, lease) = tokio::task::spawn_blocking(move || {
        let (v, lease) = answer(&gw, &peer, request);
        (line_bytes(&v), lease)
    })
    .await
    .unwrap_or_else(|e| {
        tracing::error!("request task failed: {e}");
        let e = GatewayError::Internal("request task failed".into());
        (line_bytes(&Acp.refuse(&id, &e)), Vec::new())
    });
    let len = bytes.len();
    out.send(bytes, len).await;
    drop(lease);
}

/// Records a message that gets no answer (a notification, a stray response): every
/// message has its record, answered or not.
async fn note(gw: &Arc<Gateway>, peer: &Arc<str>, name: String) {
    let (gw, peer) = (Arc::clone(gw), Arc::clone(peer));
    let _ = tokio::task::spawn_blocking(move || {
        let ctx = door_ctx(&peer, String::new());
        if let Err(e) = gw
            .serve(
                &ctx,
                Request::message(name, Ok(())),
                fsgate_gateway::How::alone(),
            )
            .0
        {
            tracing::error!("{e}");
        }
    })
    .await;
}

/// Records and answers a message that is not a valid request.
async fn invalid(
    gw: &Arc<Gateway>,
    peer: &Arc<str>,
    id: Value,
    error: Value,
    out: &Outbox<Vec<u8>>,
) {
    let (gw, peer) = (Arc::clone(gw), Arc::clone(peer));
    let resp = tokio::task::spawn_blocking(move || answer_invalid(&gw, &peer, id, error))
        .await
        .unwrap_or_else(|_| {
            jsonrpc::error_response(
                &Value::Null,
                jsonrpc::error_object(code::INTERNAL, "internal error", None),
            )
        });
    let bytes = line_bytes(&resp);
    let len = bytes.len();
    out.send(bytes, len).await;
}

/// Writes the queued lines, those queued together in one write (lines are appended to
/// the first until `WRITE_BATCH` bytes are passed; a large first line is moved, not
/// copied); the room a line held is given back once it is written.
pub(crate) async fn write_lines(
    mut rx: mpsc::UnboundedReceiver<Queued<Vec<u8>>>,
    out: Arc<Sink>,
) -> std::io::Result<()> {
    while let Some(first) = rx.recv().await {
        let (mut bytes, room) = first.split();
        let mut held = vec![room];
        while bytes.len() < WRITE_BATCH {
            let Ok(q) = rx.try_recv() else { break };
            let (more, room) = q.split();
            bytes.extend_from_slice(&more);
            held.push(room);
        }
        out.write_owned(bytes).await?;
        drop(held);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::AsyncWriteExt;

    /// A client that stops reading and keeps sending quick reads cannot make the
    /// connection hold more than its input bound of request lines (the batch queue's
    /// length is no bound: 256 lines of up to the message limit each).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn batched_lines_queued_are_bounded_in_bytes() {
        const MAX: usize = 64 * 1024;
        let pol = crate::policy_with_message_limit(MAX);
        let ws = tempfile::tempdir().unwrap();
        let root = ws.path().canonicalize().unwrap();
        let gw = Arc::new(Gateway::new(
            pol,
            fsgate_workspace::Workspace::open(&root).unwrap(),
        ));
        let (mut client, input) = tokio::io::duplex(16 * 1024);
        // The client never reads its answers.
        let (_unread, output) = std::io::pipe().unwrap();
        let server = tokio::spawn(serve(gw, "t".into(), input, Sink::new(output)));
        let sent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let sent2 = Arc::clone(&sent);
        let missing = root.join("missing").to_string_lossy().into_owned();
        let writer = tokio::spawn(async move {
            for i in 0..400 {
                // A long id, echoed in the answer: every answer is large too.
                let id = format!("{i}-{}", "x".repeat(MAX * 3 / 4));
                let line = json!({"jsonrpc": "2.0", "id": id, "method": "_fsgate/stat",
                    "params": {"path": missing}});
                let mut bytes = line.to_string().into_bytes();
                bytes.push(b'\n');
                if client.write_all(&bytes).await.is_err() {
                    return;
                }
                sent2.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        });
        tokio::time::sleep(Duration::from_secs(3)).await;
        let taken = sent.load(std::sync::atomic::Ordering::Relaxed);
        writer.abort();
        server.abort();
        // Answers in the outbox (2 × MAX) and the pipes, lines in the input bound
        // (2 × MAX): a handful of lines, not hundreds.
        assert!(
            taken < 20,
            "{taken} lines of {} bytes taken in",
            MAX * 3 / 4
        );
    }
}
