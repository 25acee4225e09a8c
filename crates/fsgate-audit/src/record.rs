//! One audit record: what the gateway reports ([`AuditEvent`]) and its body's encoding.
//! Sealing a record line into the chain is in `seal`, checking a line in
//! `super::line`; both are re-exported here.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::canonical::{self, push_str, push_u64};
pub(crate) use super::seal::is_lower_hex;
pub(crate) use super::seal::seal;
pub(crate) use super::seal::{GENESIS_PREV, HASH_SUFFIX_LEN, chain_hash, decode_hash};

/// The `kind` of a record made for a request.
pub const KIND_REQUEST: &str = "request";
/// The record of a change about to be made, durable before the workspace is touched;
/// its `request` record (the outcome) names it in `args.intent`.
pub const KIND_INTENT: &str = "intent";
/// Written at start-up for an intent that has no outcome: what the disk shows.
pub const KIND_RECONCILED: &str = "reconciled";
/// `details` member of a change's outcome recorded while the directory entry it made
/// was still being synced (true): the change counts as done in the log only once a
/// later record names its intent in [`ENTRIES_DURABLE`].
pub const ENTRY_PENDING: &str = "entryPending";
/// `details` member of any record: the intents whose outcomes had [`ENTRY_PENDING`]
/// and whose directory entries were durable before this record was appended.
pub const ENTRIES_DURABLE: &str = "entriesDurable";

/// The operations that change a workspace, as a record's `op` names them. Whatever reads
/// an `op` back from a record to act on it (reconciliation after a crash, git staging,
/// reports) parses it here, once, and matches the variant: a new changing operation is
/// a new variant, and the compiler lists every `match` that must handle it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeOp {
    /// `write_text_file` (text or bytes: a file's whole content).
    Write,
    /// `edit_text_file`.
    Edit,
    /// `mkdir`.
    Mkdir,
    /// `rm`.
    Rm,
    /// `rename` (its destination is the record's `path2`).
    Rename,
    /// `restore` (`fsgate backup restore`: a file's whole content).
    Restore,
    /// `chmod` (the old and new permission bits in `args.oldMode` and `args.mode`).
    Chmod,
    /// `symlink` (a symbolic link made, its target in `args.target`).
    Symlink,
    /// `utimes` (a file's times: `args.atime`, `args.mtime` set, `args.oldAtime`,
    /// `args.oldMtime` before, each in nanoseconds since the epoch).
    Utimes,
}

impl ChangeOp {
    /// Every changing operation.
    pub const ALL: [ChangeOp; 9] = [
        ChangeOp::Write,
        ChangeOp::Edit,
        ChangeOp::Mkdir,
        ChangeOp::Rm,
        ChangeOp::Rename,
        ChangeOp::Restore,
        ChangeOp::Chmod,
        ChangeOp::Symlink,
        ChangeOp::Utimes,
    ];

    /// The name records use.
    pub fn name(self) -> &'static str {
        match self {
            ChangeOp::Write => "write_text_file",
            ChangeOp::Edit => "edit_text_file",
            ChangeOp::Mkdir => "mkdir",
            ChangeOp::Rm => "rm",
            ChangeOp::Rename => "rename",
            ChangeOp::Restore => "restore",
            ChangeOp::Chmod => "chmod",
            ChangeOp::Symlink => "symlink",
            ChangeOp::Utimes => "utimes",
        }
    }

    /// What the change did, in words for a person ("wrote", "removed"...).
    pub fn done(self) -> &'static str {
        match self {
            ChangeOp::Write => "wrote",
            ChangeOp::Edit => "edited",
            ChangeOp::Mkdir => "created directory",
            ChangeOp::Rm => "removed",
            ChangeOp::Rename => "renamed",
            ChangeOp::Restore => "restored",
            ChangeOp::Chmod => "changed the mode of",
            ChangeOp::Symlink => "made the link",
            ChangeOp::Utimes => "set the times of",
        }
    }

    /// The changing operation a record's `op` names, if it names one.
    pub fn from_name(name: &str) -> Option<ChangeOp> {
        ChangeOp::ALL.into_iter().find(|c| c.name() == name)
    }
}
/// Lifecycle kinds written by the log itself.
pub(crate) const KIND_START: &str = "start";
/// Written by [`super::AuditLog::close`].
pub(crate) const KIND_STOP: &str = "stop";
/// Written at start-up when a torn last line was cut off.
pub(crate) const KIND_RECOVERED: &str = "recovered";
/// Written at start-up when an operator accepted a chain that did not verify.
pub(crate) const KIND_BREAK: &str = "break";

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
    /// SHA-256 of the policy that decided this request, when the caller knows it (a
    /// request in flight across a reload keeps the hash of the policy that judged it);
    /// `None`: the policy in force when the record is appended.
    pub policy_sha256: Option<Arc<str>>,
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
            policy_sha256: None,
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
    /// without the surrounding braces (see [`seal`]). Strings longer than
    /// [`super::cut::MAX_WHOLE`] bytes are cut, and listed in `details.cut`.
    pub(crate) fn body(&self, policy_sha256: &str) -> Vec<u8> {
        match self.bounded() {
            Some(cut) => cut.encode(policy_sha256),
            None => self.encode(policy_sha256),
        }
    }

    /// [`body`](Self::body) of the event as it is.
    fn encode(&self, policy_sha256: &str) -> Vec<u8> {
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// A plausible request event (shared with the line checker's tests).
    pub(crate) fn sample() -> AuditEvent {
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
    fn lifecycle_records_have_no_request_fields() {
        let mut d = Map::new();
        d.insert("pid".into(), json!(7));
        let body = AuditEvent::lifecycle("start", d).body("");
        assert_eq!(body, br#""kind":"start","details":{"pid":7}"#);
    }
}
