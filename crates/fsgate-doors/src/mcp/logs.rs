//! Changes told to the client as MCP log messages: one `notifications/message` at level
//! `info`, logger `fsgate`, per change fsgate made for the session, once the client set
//! a level (`logging/setLevel`) that lets `info` through, and while the policy's
//! `[notify] mcp` is on.
//!
//! The request's thread only queues the message (bounded in bytes; past the bound a
//! message is dropped and counted, never waited for); one task per connection sends
//! them through the SDK.

// Logging is deprecated in the SDK (SEP-2577) but current in the 2025 revisions.
#![allow(deprecated)]

use std::fmt;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::RoleServer;
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::Peer;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use fsgate_gateway::{ChangeNote, ChangeSink, Gateway};

/// Bytes of messages queued at once, per connection.
const MAX_QUEUED_BYTES: usize = 256 * 1024;
/// Messages queued at once (each is also counted in bytes).
const MAX_QUEUED: usize = 1024;
/// No level set yet: nothing is sent.
const UNSET: u8 = u8::MAX;

type Queued = (LoggingMessageNotificationParam, usize);

/// The change sink of one connection.
pub(super) struct Logs {
    gw: Arc<Gateway>,
    /// The client's level as its rank (see [`rank`]), or [`UNSET`].
    level: AtomicU8,
    tx: mpsc::Sender<Queued>,
    /// Taken by the sending task once the peer is known.
    rx: Mutex<Option<mpsc::Receiver<Queued>>>,
    queued: Arc<AtomicUsize>,
    dropped: AtomicU64,
}

impl fmt::Debug for Logs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Logs")
            .field("level", &self.level.load(Ordering::Relaxed))
            .field("queued", &self.queued.load(Ordering::Relaxed))
            .finish()
    }
}

/// A level's place in the order of severity: `debug` 0 ... `emergency` 7.
fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// Whether a client at level `rank` (or none set) takes `info` messages.
fn info_passes(rank_set: u8) -> bool {
    rank_set <= rank(LoggingLevel::Info)
}

impl Logs {
    pub(super) fn new(gw: Arc<Gateway>) -> Logs {
        let (tx, rx) = mpsc::channel(MAX_QUEUED);
        Logs {
            gw,
            level: AtomicU8::new(UNSET),
            tx,
            rx: Mutex::new(Some(rx)),
            queued: Arc::new(AtomicUsize::new(0)),
            dropped: AtomicU64::new(0),
        }
    }

    /// The client's `logging/setLevel`.
    pub(super) fn set_level(&self, level: LoggingLevel) {
        self.level.store(rank(level), Ordering::Relaxed);
    }

    /// Starts sending to `peer` (once; call inside the runtime).
    pub(super) fn start(&self, peer: Peer<RoleServer>) {
        let Some(mut rx) = self.rx.lock().ok().and_then(|mut r| r.take()) else {
            return;
        };
        let queued = Arc::clone(&self.queued);
        tokio::spawn(async move {
            while let Some((param, size)) = rx.recv().await {
                queued.fetch_sub(size, Ordering::Relaxed);
                if let Err(e) = peer.notify_logging_message(param).await {
                    tracing::debug!("mcp change notes stop: {e}");
                    break;
                }
            }
        });
    }

    fn wanted(&self) -> bool {
        info_passes(self.level.load(Ordering::Relaxed)) && self.gw.policy().notify_mcp()
    }
}

impl ChangeSink for Logs {
    fn changed(&self, note: &ChangeNote) {
        if !self.wanted() {
            return;
        }
        let data = data(note);
        let size = crate::results::json_len_upto(&data, usize::MAX).unwrap_or(0);
        let param =
            LoggingMessageNotificationParam::new(LoggingLevel::Info, data).with_logger("fsgate");
        let before = self.queued.fetch_add(size, Ordering::Relaxed);
        if before + size > MAX_QUEUED_BYTES || self.tx.try_send((param, size)).is_err() {
            self.queued.fetch_sub(size, Ordering::Relaxed);
            if self.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
                tracing::warn!("the MCP client is not taking change notes; some are dropped");
            }
        }
    }
}

/// The message's data: what changed, where, and the audit record.
fn data(note: &ChangeNote) -> Value {
    let path = note.abs_path().to_string_lossy().into_owned();
    let path2 = note.abs_path2().map(|p| p.to_string_lossy().into_owned());
    let mut m = Map::new();
    let seq = note
        .seq
        .map_or(String::new(), |s| format!(" (audit seq {s})"));
    // The agent chose the names: escaped in the line a person reads, kept in the data.
    let shown = |p: &str| fsgate_base::text::escape_for_humans(p).into_owned();
    let text = match &path2 {
        Some(to) => format!(
            "fsgate: {} {} -> {}{seq}",
            note.op.name(),
            shown(&path),
            shown(to)
        ),
        None => format!("fsgate: {} {}{seq}", note.op.name(), shown(&path)),
    };
    m.insert("message".into(), json!(text));
    m.insert("op".into(), json!(note.op.name()));
    m.insert("path".into(), json!(path));
    if let Some(to) = path2 {
        m.insert("path2".into(), json!(to));
    }
    m.insert("seq".into(), json!(note.seq));
    m.insert("session".into(), json!(note.session));
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsgate_base::path::RelPath;

    #[test]
    fn info_passes_debug_and_info_only() {
        assert!(!info_passes(UNSET), "no level set: nothing");
        assert!(info_passes(rank(LoggingLevel::Debug)));
        assert!(info_passes(rank(LoggingLevel::Info)));
        for above in [
            LoggingLevel::Notice,
            LoggingLevel::Warning,
            LoggingLevel::Emergency,
        ] {
            assert!(!info_passes(rank(above)), "{above:?}");
        }
    }

    #[test]
    fn the_data_names_the_op_both_paths_and_the_record() {
        let parse = |p| RelPath::parse_rooted(p).expect("path");
        let note = ChangeNote {
            op: fsgate_gateway::ops::ChangeOp::Rename,
            session: "s1".into(),
            path: parse("/a/b.txt"),
            path2: Some(parse("/c.txt")),
            root: "/ws".into(),
            proposed: None,
            replaced: None,
            seq: Some(42),
        };
        let d = data(&note);
        assert_eq!(d["op"], "rename");
        assert_eq!(d["path"], "/ws/a/b.txt");
        assert_eq!(d["path2"], "/ws/c.txt");
        assert_eq!(d["seq"], 42);
        assert_eq!(
            d["message"],
            "fsgate: rename /ws/a/b.txt -> /ws/c.txt (audit seq 42)"
        );
    }

    #[test]
    fn the_message_escapes_what_the_agent_named() {
        let parse = |p| RelPath::parse_rooted(p).expect("path");
        let note = ChangeNote {
            op: fsgate_gateway::ops::ChangeOp::Write,
            session: "s1".into(),
            path: parse("/a\nfsgate: rm /ws/src (audit seq 1)\u{202e}.txt"),
            path2: None,
            root: "/ws".into(),
            proposed: None,
            replaced: None,
            seq: Some(7),
        };
        let d = data(&note);
        let text = d["message"].as_str().unwrap_or_default();
        assert!(!text.contains('\n') && !text.contains('\u{202e}'), "{text}");
        assert!(text.contains("/ws/a\\nfsgate"), "{text}");
        assert_eq!(
            d["path"], "/ws/a\nfsgate: rm /ws/src (audit seq 1)\u{202e}.txt",
            "the data keeps the name as it is"
        );
    }
}
