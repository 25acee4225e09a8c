//! One audit record: what the gateway reports ([`AuditEvent`]), how a record line is
//! sealed into the chain, and how one line is checked on its own.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::canonical::{self, push_str, push_u64};

/// The `prev` of the first record of a log: 64 zeros.
pub const GENESIS_PREV: [u8; 32] = [0; 32];
/// `,"hash":"` + 64 hex digits + `"}`: the fixed tail of every record line.
pub const HASH_SUFFIX_LEN: usize = 9 + 64 + 2;

/// The `kind` of a record made for a request.
pub const KIND_REQUEST: &str = "request";
/// Lifecycle kinds written by the log itself.
pub const KIND_START: &str = "start";
/// Written by [`super::AuditLog::close`].
pub const KIND_STOP: &str = "stop";
/// Written at start-up when a torn last line was cut off.
pub const KIND_RECOVERED: &str = "recovered";
/// Written at start-up when an operator accepted a chain that did not verify.
pub const KIND_BREAK: &str = "break";

/// What the gateway reports about one request (or one lifecycle event).
///
/// Empty strings and `None` are left out of the record; `args` and `details` are written
/// with sorted keys. See audit/FORMAT.md for the record layout.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEvent {
    /// `"request"`, or a lifecycle kind (`start`, `stop`, `policy`, `reload`, ...).
    pub kind: String,
    /// The agent session (ACP `sessionId`, MCP/WS connection id).
    pub session: String,
    /// `"acp"`, `"mcp"`, `"ws"` or `"cli"`.
    pub transport: String,
    /// Who asked: `pid=..,uid=..` of the stdio peer, or the remote address.
    pub peer: String,
    /// The operation (`read`, `write`, `edit`, `ls`, `stat`, `glob`, `grep`, `mkdir`,
    /// `rm`, `rename`, `restore`, ...).
    pub op: String,
    /// Workspace-relative path of the request (source for rename).
    pub path: Option<String>,
    /// Second workspace-relative path (rename target).
    pub path2: Option<String>,
    /// The arguments that matter (line, limit, pattern, recursive, ...).
    pub args: Map<String, Value>,
    /// `"allow"` or `"deny"`.
    pub decision: String,
    /// The policy rule that decided.
    pub rule: Option<String>,
    /// The rule's reason, or the error's one-line message.
    pub reason: Option<String>,
    /// `"ok"`, or the error code returned (`"-32003"`, ...).
    pub outcome: String,
    /// Bytes read or written.
    pub bytes: Option<u64>,
    /// SHA-256 (hex) of the content read or written: proves exactly what was seen.
    pub sha256: Option<String>,
    /// The backup made before the operation changed a file.
    pub backup: Option<String>,
    /// Time spent on the request, in microseconds (request records only).
    pub duration_us: u64,
    /// Free-form details of a lifecycle record (policy path, check result, ...).
    pub details: Map<String, Value>,
}

impl Default for AuditEvent {
    fn default() -> Self {
        AuditEvent {
            kind: KIND_REQUEST.to_owned(),
            session: String::new(),
            transport: String::new(),
            peer: String::new(),
            op: String::new(),
            path: None,
            path2: None,
            args: Map::new(),
            decision: String::new(),
            rule: None,
            reason: None,
            outcome: String::new(),
            bytes: None,
            sha256: None,
            backup: None,
            duration_us: 0,
            details: Map::new(),
        }
    }
}

impl AuditEvent {
    /// A lifecycle record (`start`, `stop`, `policy`, `check`, `reload`, ...) with details.
    pub fn lifecycle(kind: &str, details: Map<String, Value>) -> Self {
        AuditEvent {
            kind: kind.to_owned(),
            details,
            ..Default::default()
        }
    }

    /// Serialises the record body: the fields from `kind` to `details`, canonically,
    /// without the surrounding braces (see [`seal`]).
    pub(crate) fn body(&self, policy_sha256: &str) -> Vec<u8> {
        let mut out = Vec::with_capacity(256);
        let kind = if self.kind.is_empty() {
            KIND_REQUEST
        } else {
            &self.kind
        };
        field_str(&mut out, "kind", kind);
        for (name, v) in [
            ("session", &self.session),
            ("transport", &self.transport),
            ("peer", &self.peer),
            ("op", &self.op),
        ] {
            if !v.is_empty() {
                field_str(&mut out, name, v);
            }
        }
        opt_str(&mut out, "path", &self.path);
        opt_str(&mut out, "path2", &self.path2);
        if !self.args.is_empty() {
            out.extend_from_slice(b",\"args\":");
            canonical::push_object(&mut out, &self.args);
        }
        if !self.decision.is_empty() {
            field_str(&mut out, "decision", &self.decision);
        }
        opt_str(&mut out, "rule", &self.rule);
        opt_str(&mut out, "reason", &self.reason);
        if !self.outcome.is_empty() {
            field_str(&mut out, "outcome", &self.outcome);
        }
        if let Some(b) = self.bytes {
            field_u64(&mut out, "bytes", b);
        }
        opt_str(&mut out, "sha256", &self.sha256);
        opt_str(&mut out, "backup", &self.backup);
        if !policy_sha256.is_empty() {
            field_str(&mut out, "policy_sha256", policy_sha256);
        }
        if kind == KIND_REQUEST {
            field_u64(&mut out, "duration_us", self.duration_us);
        }
        if !self.details.is_empty() {
            out.extend_from_slice(b",\"details\":");
            canonical::push_object(&mut out, &self.details);
        }
        out
    }
}

/// Appends `"name":"value"`, with a comma unless it is the body's first field.
fn field_str(out: &mut Vec<u8>, name: &str, v: &str) {
    if !out.is_empty() {
        out.push(b',');
    }
    out.push(b'"');
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":");
    push_str(out, v);
}

fn opt_str(out: &mut Vec<u8>, name: &str, v: &Option<String>) {
    if let Some(v) = v {
        field_str(out, name, v);
    }
}

fn field_u64(out: &mut Vec<u8>, name: &str, v: u64) {
    out.push(b',');
    out.push(b'"');
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":");
    push_u64(out, v);
}

/// What [`super::AuditLog::append`] hands back once a record is durable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    /// The record's sequence number.
    pub seq: u64,
    /// The record's hash (hex).
    pub hash: String,
    /// The record's timestamp.
    pub ts: String,
}

/// Builds a complete record line (with `\n`) from its parts; returns the line and its hash.
/// `body` comes from [`AuditEvent::body`]; `log` is set on the first record of a file.
pub fn seal(
    seq: u64,
    ts: &str,
    log: Option<&str>,
    body: &[u8],
    prev: &[u8; 32],
) -> (Vec<u8>, [u8; 32]) {
    let mut line = Vec::with_capacity(body.len() + 200);
    line.extend_from_slice(b"{\"seq\":");
    push_u64(&mut line, seq);
    line.extend_from_slice(b",\"ts\":");
    push_str(&mut line, ts);
    if let Some(log) = log {
        line.extend_from_slice(b",\"log\":");
        push_str(&mut line, log);
    }
    line.push(b',');
    line.extend_from_slice(body);
    line.extend_from_slice(b",\"prev\":\"");
    line.extend_from_slice(hex::encode(prev).as_bytes());
    line.push(b'"');
    let hash = chain_hash(prev, &line, b"}");
    line.extend_from_slice(b",\"hash\":\"");
    line.extend_from_slice(hex::encode(hash).as_bytes());
    line.extend_from_slice(b"\"}\n");
    (line, hash)
}

/// `SHA-256(prev || canonical)`, with the canonical bytes given in two pieces.
pub fn chain_hash(prev: &[u8; 32], head: &[u8], tail: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(prev);
    h.update(head);
    h.update(tail);
    h.finalize().into()
}

/// A record's fields as they appear in a line, borrowed where possible.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct View<'a> {
    seq: u64,
    #[serde(borrow)]
    ts: Cow<'a, str>,
    #[serde(borrow, default)]
    log: Option<Cow<'a, str>>,
    #[serde(borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    session: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    transport: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    peer: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    op: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    path: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    path2: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    args: Option<&'a RawValue>,
    #[serde(borrow, default)]
    decision: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    rule: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    reason: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    outcome: Option<Cow<'a, str>>,
    #[serde(default)]
    bytes: Option<u64>,
    #[serde(borrow, default)]
    sha256: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    backup: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    policy_sha256: Option<Cow<'a, str>>,
    #[serde(default)]
    duration_us: Option<u64>,
    #[serde(borrow, default)]
    details: Option<&'a RawValue>,
    #[serde(borrow)]
    prev: Cow<'a, str>,
    #[serde(borrow)]
    hash: Cow<'a, str>,
}

/// A record that checked out on its own (content, form and hash).
#[derive(Debug, Clone)]
pub struct LineInfo {
    /// `seq` field.
    pub seq: u64,
    /// `prev` field, decoded.
    pub prev: [u8; 32],
    /// `hash` field, decoded (and equal to the recomputed hash).
    pub hash: [u8; 32],
    /// `ts` field (canonical shape).
    pub ts: [u8; canonical::TS_LEN],
    /// `log` field, when present.
    pub log: Option<String>,
    /// `kind` is `break` or `recovered` (reported as warnings by verify).
    pub kind: Option<String>,
}

impl LineInfo {
    /// The timestamp as text.
    pub fn ts_str(&self) -> &str {
        std::str::from_utf8(&self.ts).unwrap_or("")
    }
}

/// Why one line is not a valid record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineFault {
    /// Not a canonical record (bad JSON, unknown or mistyped field, wrong order, ...).
    Malformed(String),
    /// Well-formed, but the hash does not match the content: the record was edited.
    Modified { seq: u64 },
}

impl std::fmt::Display for LineFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LineFault::Malformed(m) => write!(f, "malformed record: {m}"),
            LineFault::Modified { seq } => {
                write!(
                    f,
                    "record seq {seq} was modified: its hash does not match its content"
                )
            }
        }
    }
}

/// The complete lines of a file (without their `\n`) and their byte offsets. A last line
/// without `\n` (torn) is not among them.
pub fn lines(bytes: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    let mut pos = 0;
    std::iter::from_fn(move || {
        let rest = &bytes[pos..];
        let nl = rest.iter().position(|&b| b == b'\n')?;
        let start = pos;
        pos += nl + 1;
        Some((start, &rest[..nl]))
    })
}

/// Checks one line (without its `\n`): form, canonical encoding and hash.
/// `scratch` is a reusable buffer.
pub fn check_line(line: &[u8], scratch: &mut Vec<u8>) -> Result<LineInfo, LineFault> {
    let bad = |m: &str| LineFault::Malformed(m.to_owned());
    let text = std::str::from_utf8(line).map_err(|_| bad("not UTF-8"))?;
    let v: View<'_> = serde_json::from_str(text)
        .map_err(|e| LineFault::Malformed(format!("not a record: {e}")))?;
    if !canonical::is_canonical_ts(v.ts.as_bytes()) {
        return Err(bad("ts is not YYYY-MM-DDTHH:MM:SS.ffffffZ"));
    }
    let prev = decode_hash(&v.prev).ok_or_else(|| bad("prev is not 64 lowercase hex digits"))?;
    let hash = decode_hash(&v.hash).ok_or_else(|| bad("hash is not 64 lowercase hex digits"))?;
    if let Some(log) = &v.log
        && !is_lower_hex(log, 32)
    {
        return Err(bad("log is not 32 lowercase hex digits"));
    }
    for raw in [v.args, v.details].into_iter().flatten() {
        let raw = raw.get().as_bytes();
        if raw.first() != Some(&b'{') {
            return Err(bad("args/details is not an object"));
        }
        canonical::check_value(raw)
            .map_err(|m| LineFault::Malformed(format!("args/details not canonical: {m}")))?;
    }
    if v.seq == 0 {
        return Err(bad("seq 0"));
    }
    if prev == GENESIS_PREV && (v.seq != 1 || v.log.is_none()) {
        return Err(bad(
            "genesis prev on a record that is not seq 1 with a log id",
        ));
    }
    rebuild(&v, scratch);
    if scratch.as_slice() != line {
        return Err(bad(
            "not in canonical form (field order, spacing or escaping)",
        ));
    }
    let head = &line[..line.len() - HASH_SUFFIX_LEN];
    if chain_hash(&prev, head, b"}") != hash {
        return Err(LineFault::Modified { seq: v.seq });
    }
    let mut ts = [0u8; canonical::TS_LEN];
    ts.copy_from_slice(v.ts.as_bytes());
    let kind = match v.kind.as_ref() {
        KIND_BREAK | KIND_RECOVERED => Some(v.kind.into_owned()),
        _ => None,
    };
    Ok(LineInfo {
        seq: v.seq,
        prev,
        hash,
        ts,
        log: v.log.map(Cow::into_owned),
        kind,
    })
}

/// Writes the canonical line for `v` (hash included, no `\n`) into `out`.
fn rebuild(v: &View<'_>, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(b"{\"seq\":");
    push_u64(out, v.seq);
    let s = |out: &mut Vec<u8>, name: &str, val: &Option<Cow<'_, str>>| {
        if let Some(val) = val {
            out.extend_from_slice(b",\"");
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b"\":");
            push_str(out, val);
        }
    };
    let n = |out: &mut Vec<u8>, name: &str, val: Option<u64>| {
        if let Some(val) = val {
            out.extend_from_slice(b",\"");
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b"\":");
            push_u64(out, val);
        }
    };
    let raw = |out: &mut Vec<u8>, name: &str, val: Option<&RawValue>| {
        if let Some(val) = val {
            out.extend_from_slice(b",\"");
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b"\":");
            out.extend_from_slice(val.get().as_bytes());
        }
    };
    s(out, "ts", &Some(Cow::Borrowed(&v.ts)));
    s(out, "log", &v.log);
    s(out, "kind", &Some(Cow::Borrowed(&v.kind)));
    s(out, "session", &v.session);
    s(out, "transport", &v.transport);
    s(out, "peer", &v.peer);
    s(out, "op", &v.op);
    s(out, "path", &v.path);
    s(out, "path2", &v.path2);
    raw(out, "args", v.args);
    s(out, "decision", &v.decision);
    s(out, "rule", &v.rule);
    s(out, "reason", &v.reason);
    s(out, "outcome", &v.outcome);
    n(out, "bytes", v.bytes);
    s(out, "sha256", &v.sha256);
    s(out, "backup", &v.backup);
    s(out, "policy_sha256", &v.policy_sha256);
    n(out, "duration_us", v.duration_us);
    raw(out, "details", v.details);
    s(out, "prev", &Some(Cow::Borrowed(&v.prev)));
    s(out, "hash", &Some(Cow::Borrowed(&v.hash)));
    out.push(b'}');
}

fn is_lower_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Decodes 64 lowercase hex digits.
pub fn decode_hash(s: &str) -> Option<[u8; 32]> {
    if !is_lower_hex(s, 64) {
        return None;
    }
    let mut out = [0u8; 32];
    hex::decode_to_slice(s, &mut out).ok()?;
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> AuditEvent {
        let mut args = Map::new();
        args.insert("limit".into(), json!(20));
        args.insert("line".into(), json!(3));
        AuditEvent {
            session: "s-1".into(),
            transport: "acp".into(),
            peer: "pid=42,uid=1000".into(),
            op: "read".into(),
            path: Some("src/main.rs".into()),
            args,
            decision: "allow".into(),
            rule: Some("workspace-read".into()),
            outcome: "ok".into(),
            bytes: Some(120),
            sha256: Some("ab".repeat(32)),
            duration_us: 57,
            ..Default::default()
        }
    }

    #[test]
    fn a_sealed_record_has_the_documented_layout_and_checks() {
        let body = sample().body("cd".repeat(32).as_str());
        let (line, hash) = seal(
            1,
            "2026-01-02T03:04:05.000006Z",
            Some(&"0f".repeat(16)),
            &body,
            &GENESIS_PREV,
        );
        let text = String::from_utf8(line.clone()).unwrap();
        let expect_head = format!(
            "{{\"seq\":1,\"ts\":\"2026-01-02T03:04:05.000006Z\",\"log\":\"{}\",\"kind\":\"request\",\
             \"session\":\"s-1\",\"transport\":\"acp\",\"peer\":\"pid=42,uid=1000\",\"op\":\"read\",\
             \"path\":\"src/main.rs\",\"args\":{{\"limit\":20,\"line\":3}},\"decision\":\"allow\",\
             \"rule\":\"workspace-read\",\"outcome\":\"ok\",\"bytes\":120,\"sha256\":\"{}\",\
             \"policy_sha256\":\"{}\",\"duration_us\":57,\"prev\":\"{}\"",
            "0f".repeat(16),
            "ab".repeat(32),
            "cd".repeat(32),
            "0".repeat(64)
        );
        assert!(text.starts_with(&expect_head), "{text}");
        assert!(text.ends_with(&format!(",\"hash\":\"{}\"}}\n", hex::encode(hash))));
        // The hash covers prev || the record without its hash field.
        let mut h = Sha256::new();
        h.update([0u8; 32]);
        h.update(format!("{expect_head}}}").as_bytes());
        assert_eq!(<[u8; 32]>::from(h.finalize()), hash);

        let info = check_line(&line[..line.len() - 1], &mut Vec::new()).unwrap();
        assert_eq!((info.seq, info.hash, info.prev), (1, hash, GENESIS_PREV));
        assert_eq!(info.ts_str(), "2026-01-02T03:04:05.000006Z");
    }

    #[test]
    fn lifecycle_records_have_no_request_fields() {
        let mut d = Map::new();
        d.insert("pid".into(), json!(7));
        let body = AuditEvent::lifecycle("start", d).body("");
        assert_eq!(body, br#""kind":"start","details":{"pid":7}"#);
    }

    #[test]
    fn editing_any_byte_is_caught() {
        let (line, _) = seal(
            2,
            "2026-01-02T03:04:05.000006Z",
            None,
            &sample().body(""),
            &[7; 32],
        );
        let line = &line[..line.len() - 1];
        let mut scratch = Vec::new();
        assert!(check_line(line, &mut scratch).is_ok());
        let text = std::str::from_utf8(line).unwrap();
        let edited = text.replace("\"bytes\":120", "\"bytes\":121");
        assert_eq!(
            check_line(edited.as_bytes(), &mut scratch).unwrap_err(),
            LineFault::Modified { seq: 2 }
        );
        for bad in [
            text.replace("\"op\":\"read\"", "\"op\" :\"read\""),
            text.replace("\"rule\":\"workspace-read\"", "\"rule\":null"),
            text.replace(",\"outcome\":\"ok\"", ",\"extra\":1,\"outcome\":\"ok\""),
            text.replace("\"bytes\":120", "\"bytes\":120.0"),
            text.replace("src/main.rs", "src\\/main.rs"),
            text.replace(
                "\"decision\":\"allow\",\"rule\"",
                "\"rule\":\"x\",\"decision\":\"allow\",\"rule\"",
            ),
        ] {
            assert!(
                matches!(
                    check_line(bad.as_bytes(), &mut scratch),
                    Err(LineFault::Malformed(_))
                ),
                "accepted {bad}"
            );
        }
    }
}
