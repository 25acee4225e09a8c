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

use std::io::{self, Write};
use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResponse, InputRequiredResult, ServerResult};
use serde::Serialize;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError, mpsc};

use super::call::Call;
use super::flow::{Flow, Pending};
use super::mrtr;
use super::render::Answer;
use super::render::too_big;
use super::tool_id::ToolId;
use super::tools::{ToolRequest, Tools};
use crate::batch::{self, Batched};
use crate::door::{self, Door as _};
use crate::stdio::Sink;
use fsgate_base::error::GatewayError;
use fsgate_gateway::{
    Batch, Gateway, Lease, escape_json_bytes_into, escape_json_into, json_text_len,
};

/// Answers for the output copier, with the requests whose rooms they release once written.
#[derive(Default)]
pub(super) struct Outgoing {
    /// Whole JSON-RPC messages, each ending in a newline.
    pub bytes: Vec<u8>,
    /// A large text answer, written after `bytes`, escaped as it goes out.
    pub text: Option<Streamed>,
    /// Dropped once `bytes` is written.
    pub pending: Vec<Pending>,
}

impl From<Vec<u8>> for Outgoing {
    fn from(bytes: Vec<u8>) -> Outgoing {
        Outgoing {
            bytes,
            ..Outgoing::default()
        }
    }
}

impl Outgoing {
    fn is_empty(&self) -> bool {
        self.bytes.is_empty() && self.text.is_none()
    }

    /// Appends `next` if this one ends in plain bytes, so both go out in one write;
    /// else gives it back.
    pub(super) fn absorb(&mut self, next: Outgoing) -> Result<(), Outgoing> {
        if self.text.is_some() {
            return Err(next);
        }
        self.bytes.extend_from_slice(&next.bytes);
        self.text = next.text;
        self.pending.extend(next.pending);
        Ok(())
    }

    /// Writes the answers: the bytes, then the text answer.
    pub(super) fn write_to(&self, w: &mut dyn Write) -> io::Result<()> {
        if !self.bytes.is_empty() {
            w.write_all(&self.bytes)?;
        }
        match &self.text {
            Some(t) if t.escaped => write_escaped(w, &t.key, &t.text),
            Some(t) => write_text(w, &t.key, &t.text, STREAM_PIECE),
            None => Ok(()),
        }
    }
}

/// A text answer too large to write from the batch thread: its text, escaped only as it
/// is written, in pieces, once for each copy (no answer buffer twice the text's size,
/// whose page faults and copies cost more than a second escaping); or, `escaped`, the
/// text's escaping already, written twice as it is.
pub(super) struct Streamed {
    key: String,
    text: String,
    escaped: bool,
}

/// An answer ready to go out.
enum Encoded {
    Bytes(Vec<u8>),
    /// Its exact encoded length, and the answer.
    Text(usize, Streamed),
}

/// A `tools/call` to run.
pub(super) struct Job {
    key: String,
    /// Set by [`Door::submit`]: which request under `key` this is.
    serial: u64,
    call: Call,
    /// Why it is refused unrun: its session reaches nothing, or it waited for the
    /// client's roots and they did not come.
    unsettled: Option<GatewayError>,
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

/// Whether `tool` is quick and read-only: it may run in a batch.
fn batched(tool: ToolId) -> bool {
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

/// A call that ran, before its answer is encoded.
pub(super) struct Done {
    key: String,
    serial: u64,
    /// What it called (its refusal, should its batch fail to settle).
    tool: ToolId,
    reply: Reply,
    leases: Vec<Lease>,
    /// The call's era is 2026-07-28 or later (see `call::Era`).
    modern: bool,
}

/// What a call that ran answers.
enum Reply {
    /// The tool's result.
    Tool(Answer),
    /// The question a stateless round met (see `mrtr`).
    Input(InputRequiredResult),
    /// A JSON-RPC error.
    Error(McpError),
}

/// The direct path of one connection.
pub(super) struct Direct {
    gw: Arc<Gateway>,
    flow: Arc<Flow>,
    /// Signs the `requestState` of a stateless round's question.
    states: Option<Arc<mrtr::States>>,
    max: usize,
    /// Bounds the calls running on the blocking pool at once.
    slots: Arc<Semaphore>,
    /// Bounds the writes running at once, apart from `slots`: a write spends most of its
    /// time waiting on flushes, which overlap (and share the audit log's) when more run.
    writes: Arc<Semaphore>,
    /// Where small answers are written, by the thread that made them.
    sink: Arc<Sink>,
    /// Larger batches go to the output copier, so that this thread goes on while the
    /// client reads them. (Held also so that the copier, and so the connection, ends
    /// only once every answer of this path is written.)
    answers: mpsc::Sender<Outgoing>,
    rt: tokio::runtime::Handle,
}

/// The pump's side: where it sends the calls it takes.
pub(super) struct Door {
    direct: Arc<Direct>,
    batch: batch::Door<Job>,
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
    fn send(&self, out: &mut Outgoing) {
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
            && crate::stdio::on_own_thread()
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

impl Direct {
    /// Runs one call, in `batch` if one is given, unless it was cancelled before it
    /// started.
    fn run_in(&self, job: Job, batch: Option<&Batch>) -> Option<Done> {
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

/// Runs `job` on the blocking pool and answers it there; nothing waits for it.
fn on_pool(
    direct: &Arc<Direct>,
    job: Job,
    change: Option<batch::Change>,
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
fn run_and_answer(direct: &Direct, job: Job, change: Option<batch::Change>) {
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
const WRITES_IN_FLIGHT: usize = 32;

/// Bytes an answering thread writes itself: what fits a pipe's default buffer (64 KiB),
/// so that a client that keeps reading does not make it wait.
const WRITE_HERE_MAX: usize = 64 * 1024;

/// Pieces of text a [`Streamed`] answer escapes and writes at a time.
const STREAM_PIECE: usize = 256 * 1024;

/// The JSON-RPC answer for id `key`, encoded once (not sized first, then encoded), or
/// the limit error in its place if it is over the message limit `max`. A text answer
/// of the 2025 era (`modern` false) is sized exactly first (cheap), then written into
/// a buffer of that size, or, if larger than [`WRITE_HERE_MAX`], left to be escaped as
/// it is written.
fn encode_fitted(max: usize, key: &str, reply: Reply, modern: bool) -> Encoded {
    let mut bytes = Vec::new();
    let result = match reply {
        Reply::Tool(Answer::Text(text)) if !modern => match fit_text(max, key, text, false) {
            Ok(encoded) => return encoded,
            Err(size) => return limit_error(max, key, size, modern),
        },
        Reply::Tool(Answer::Escaped(escaped)) if !modern => {
            match fit_text(max, key, escaped, true) {
                Ok(encoded) => return encoded,
                Err(size) => return limit_error(max, key, size, modern),
            }
        }
        Reply::Error(e) => {
            encode(&mut bytes, key, ("error", &e));
            return Encoded::Bytes(bytes);
        }
        Reply::Tool(answer) => ServerResult::CallToolResult(answer.into_result()),
        Reply::Input(ir) => ServerResult::from(CallToolResponse::InputRequired(ir)),
    };
    encode(&mut bytes, key, ("result", &for_era(result, modern)));
    if bytes.len() <= max {
        return Encoded::Bytes(bytes);
    }
    limit_error(max, key, bytes.len(), modern)
}

/// The limit error for an answer of `size` bytes, over the message limit `max`.
fn limit_error(max: usize, key: &str, size: usize, modern: bool) -> Encoded {
    let mut bytes = Vec::new();
    let result = ServerResult::CallToolResult(too_big(size, max));
    encode(&mut bytes, key, ("result", &for_era(result, modern)));
    Encoded::Bytes(bytes)
}

/// `result` as the SDK sends it in the call's era: for the 2025 revisions without
/// `resultType: "complete"`, a field they do not have.
fn for_era(mut result: ServerResult, modern: bool) -> ServerResult {
    if !modern {
        result.strip_result_type_for_legacy_peer();
    }
    result
}

/// A text answer (`text` plain, or already `escaped`) encoded here, or left to be
/// streamed if larger than [`WRITE_HERE_MAX`]; its size if over the limit `max`.
fn fit_text(max: usize, key: &str, text: String, escaped: bool) -> Result<Encoded, usize> {
    let size = if escaped {
        escaped_answer_len(key, &text)
    } else {
        text_answer_len(key, &text)
    };
    if size > max {
        return Err(size);
    }
    if size > WRITE_HERE_MAX {
        return Ok(streamed(size, key, text, escaped));
    }
    let mut bytes = Vec::with_capacity(size);
    if escaped {
        encode_escaped(&mut bytes, key, &text);
    } else {
        encode_text(&mut bytes, key, &text);
    }
    Ok(Encoded::Bytes(bytes))
}

/// A text answer of `size` bytes left for the copier to write.
fn streamed(size: usize, key: &str, text: String, escaped: bool) -> Encoded {
    let key = key.to_string();
    Encoded::Text(size, Streamed { key, text, escaped })
}

/// The parts of a text answer around its two copies of the text (as serde_json writes
/// a `CallToolResult` of one text block and `structuredContent: {content}`).
const TEXT_HEAD: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":";
const TEXT_OPEN: &[u8] = b",\"result\":{\"content\":[{\"type\":\"text\",\"text\":";
const TEXT_MID: &[u8] = b"}],\"structuredContent\":{\"content\":";
const TEXT_TAIL: &[u8] = b"},\"isError\":false}}\n";

/// The exact length of [`encode_text`]'s answer.
fn text_answer_len(key: &str, text: &str) -> usize {
    let escaped = usize::try_from(json_text_len(text)).unwrap_or(usize::MAX);
    answer_len(key, escaped)
}

/// The exact length of [`encode_escaped`]'s answer.
fn escaped_answer_len(key: &str, escaped: &str) -> usize {
    answer_len(key, escaped.len().saturating_add(2))
}

/// The length of a text answer for id `key` whose text is `quoted` bytes as a JSON
/// string.
fn answer_len(key: &str, quoted: usize) -> usize {
    [TEXT_HEAD, TEXT_OPEN, TEXT_MID, TEXT_TAIL]
        .iter()
        .map(|p| p.len())
        .sum::<usize>()
        .saturating_add(key.len())
        .saturating_add(quoted.saturating_mul(2))
}

/// Appends the answer for id `key` carrying `text` twice, escaped once: the second copy
/// is the first's escaped bytes.
fn encode_text(out: &mut Vec<u8>, key: &str, text: &str) {
    out.extend_from_slice(TEXT_HEAD);
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(TEXT_OPEN);
    let start = out.len();
    escape_json_into(out, text);
    let end = out.len();
    out.extend_from_slice(TEXT_MID);
    out.extend_from_within(start..end);
    out.extend_from_slice(TEXT_TAIL);
}

/// [`encode_text`] of the text whose escaping is `escaped`.
fn encode_escaped(out: &mut Vec<u8>, key: &str, escaped: &str) {
    out.extend_from_slice(TEXT_HEAD);
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(TEXT_OPEN);
    for between in [TEXT_MID, TEXT_TAIL] {
        out.push(b'"');
        out.extend_from_slice(escaped.as_bytes());
        out.push(b'"');
        out.extend_from_slice(between);
    }
}

/// Writes [`encode_escaped`]'s answer to `w`: the escaped text twice from where it
/// is, no copy of it.
fn write_escaped(w: &mut dyn Write, key: &str, escaped: &str) -> io::Result<()> {
    let mut head = Vec::with_capacity(TEXT_HEAD.len() + key.len() + TEXT_OPEN.len() + 1);
    head.extend_from_slice(TEXT_HEAD);
    head.extend_from_slice(key.as_bytes());
    head.extend_from_slice(TEXT_OPEN);
    head.push(b'"');
    w.write_all(&head)?;
    w.write_all(escaped.as_bytes())?;
    w.write_all(b"\"")?;
    w.write_all(TEXT_MID)?;
    w.write_all(b"\"")?;
    w.write_all(escaped.as_bytes())?;
    w.write_all(b"\"")?;
    w.write_all(TEXT_TAIL)
}

/// Writes [`encode_text`]'s answer to `w`, escaping `piece` bytes of the text at a time
/// into a small buffer, written whenever it holds `piece` bytes.
fn write_text(w: &mut dyn Write, key: &str, text: &str, piece: usize) -> io::Result<()> {
    let mut buf = Vec::with_capacity(piece + piece / 8);
    buf.extend_from_slice(TEXT_HEAD);
    buf.extend_from_slice(key.as_bytes());
    buf.extend_from_slice(TEXT_OPEN);
    for between in [TEXT_MID, TEXT_TAIL] {
        buf.push(b'"');
        for part in text.as_bytes().chunks(piece.max(1)) {
            escape_json_bytes_into(&mut buf, part);
            if buf.len() >= piece {
                w.write_all(&buf)?;
                buf.clear();
            }
        }
        buf.push(b'"');
        buf.extend_from_slice(between);
    }
    w.write_all(&buf)
}

/// Appends the JSON-RPC answer for id `key` (the id's JSON text) to `out`: its
/// `member` (`result` or `error`) and value, as the SDK writes it.
pub(super) fn encode(out: &mut Vec<u8>, key: &str, (member, value): (&str, &impl Serialize)) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b",\"");
    out.extend_from_slice(member.as_bytes());
    out.extend_from_slice(b"\":");
    if serde_json::to_writer(&mut *out, value).is_err() {
        // Unreachable for these plain values; still an answer, not a hang.
        out.extend_from_slice(br#"{"content":[{"type":"text","text":"internal error: the answer could not be encoded"}],"isError":true}"#);
    }
    out.extend_from_slice(b"}\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes an encoded answer puts on the wire.
    fn wire(e: Encoded) -> Vec<u8> {
        let out = Outgoing {
            bytes: Vec::new(),
            text: None,
            pending: Vec::new(),
        };
        let out = match e {
            Encoded::Bytes(bytes) => Outgoing { bytes, ..out },
            Encoded::Text(_, t) => Outgoing {
                text: Some(t),
                ..out
            },
        };
        let mut w = Vec::new();
        out.write_to(&mut w).unwrap();
        w
    }

    fn fitted(max: usize, key: &str, answer: Answer) -> Vec<u8> {
        match encode_fitted(max, key, Reply::Tool(answer), false) {
            Encoded::Bytes(b) => b,
            Encoded::Text(..) => panic!("streamed"),
        }
    }

    /// What the general encoder writes for the same answer (the SDK's shape).
    fn general(max: usize, key: &str, text: &str) -> Vec<u8> {
        let result = Answer::Text(text.to_string()).into_result();
        wire(encode_fitted(
            max,
            key,
            Reply::Tool(Answer::Result(result)),
            false,
        ))
    }

    #[test]
    fn a_text_answer_is_byte_for_byte_the_general_encoding() {
        let texts = [
            String::new(),
            "plain".to_string(),
            "quotes \" and \\ and \t\n\r\u{1}\u{1f}\u{7f} é \u{2028} 日本".to_string(),
            "a line of text\n".repeat(700),
        ];
        for text in &texts {
            for key in ["1", "\"abc\"", "184467440737"] {
                let fast = fitted(usize::MAX, key, Answer::Text(text.clone()));
                assert_eq!(
                    String::from_utf8_lossy(&fast),
                    String::from_utf8_lossy(&general(usize::MAX, key, text))
                );
                assert_eq!(fast.len(), text_answer_len(key, text));
                assert_eq!(fast.capacity(), fast.len(), "sized exactly, never regrown");
            }
        }
    }

    #[test]
    fn a_text_answer_over_the_limit_is_the_same_limit_error() {
        let text = "x\ty\n".repeat(1000);
        let size = text_answer_len("7", &text);
        for max in [size - 1, 4096] {
            let fast = fitted(max, "7", Answer::Text(text.clone()));
            assert_eq!(fast, general(max, "7", &text));
            let v: serde_json::Value = serde_json::from_slice(&fast).unwrap();
            assert_eq!(v["result"]["isError"], true);
            let msg = v["result"]["content"][0]["text"].as_str().unwrap();
            assert!(msg.contains(&format!("would be {size} bytes")), "{msg}");
        }
        let fits = fitted(size, "7", Answer::Text(text.clone()));
        assert_eq!(fits.len(), size);
    }

    /// A large text answer is streamed, and its bytes are the general encoding's, for
    /// any piece size (cuts inside escapes' sources and multi-byte characters); over the
    /// limit it is the limit error, never streamed.
    #[test]
    fn a_streamed_text_answer_is_byte_for_byte_the_general_encoding() {
        let text = "quotes \" and \\ \t\u{1}\u{7f} é 日本 \u{2028}\n".repeat(3000);
        let whole = general(usize::MAX, "12", &text);
        let size = text_answer_len("12", &text);
        assert!(size > WRITE_HERE_MAX);
        let streamed = encode_fitted(
            usize::MAX,
            "12",
            Reply::Tool(Answer::Text(text.clone())),
            false,
        );
        assert!(matches!(streamed, Encoded::Text(len, _) if len == size));
        let bytes = wire(streamed);
        assert_eq!(bytes.len(), size);
        assert!(bytes == whole, "streamed answer differs");
        let part = &text[..text.char_indices().nth(4000).unwrap().0];
        for piece in [1, 2, 3, 5, 7, 64, 1000, 4096] {
            let mut w = Vec::new();
            write_text(&mut w, "12", part, piece).unwrap();
            let mut want = Vec::new();
            encode_text(&mut want, "12", part);
            assert!(w == want, "piece {piece}");
        }
        let over = fitted(size - 1, "12", Answer::Text(text.clone()));
        assert_eq!(over, general(size - 1, "12", &text));
    }

    /// An answer held escaped goes on the wire as the same text held plain: written
    /// here, streamed, or refused over the limit; and the SDK path gets the same result.
    #[test]
    fn an_escaped_answer_is_byte_for_byte_its_text_answer() {
        let small = "quotes \" and \\ \t\u{1}\u{7f} é 日本 \u{2028}\n".to_string();
        for text in [String::new(), small.clone(), small.repeat(3000)] {
            let mut escaped = Vec::new();
            escape_json_bytes_into(&mut escaped, text.as_bytes());
            let escaped = String::from_utf8(escaped).unwrap();
            let size = text_answer_len("9", &text);
            assert_eq!(escaped_answer_len("9", &escaped), size);
            for max in [usize::MAX, size, size - 1, 100] {
                let plain = wire(encode_fitted(
                    max,
                    "9",
                    Reply::Tool(Answer::Text(text.clone())),
                    false,
                ));
                let held = wire(encode_fitted(
                    max,
                    "9",
                    Reply::Tool(Answer::Escaped(escaped.clone())),
                    false,
                ));
                assert!(plain == held, "{} bytes, max {max}", text.len());
            }
            assert_eq!(
                Answer::Escaped(escaped).into_result(),
                Answer::Text(text).into_result()
            );
        }
    }
}
