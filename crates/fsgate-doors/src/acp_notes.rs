//! Each change fsgate made for the agent, shown to the editor as a `session/update`
//! tool call of its own ([`EditorNotes`]), through a queue bounded in bytes.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use crate::outbox::Outbox;

use crate::acp_shown::{change_kind, diff_content, line_of};
use fsgate_gateway::ops::ChangeOp;
use fsgate_gateway::{ChangeNote, ChangeSink};

/// What a change note shows of a write or edit: see [`diff_content`].
fn change_content(path: &std::path::Path, note: &ChangeNote) -> Vec<Value> {
    let Some(p) = &note.proposed else {
        return Vec::new();
    };
    diff_content(path, p, note.replaced.as_ref(), false)
}

/// The `session/update` showing the editor a change fsgate made.
pub(crate) fn change_update(note: &ChangeNote, n: u64) -> Value {
    let abs = note.abs_path();
    // The agent chose the names: escaped in the title a person reads.
    let shown = |p: &std::path::Path| {
        fsgate_base::text::escape_for_humans(&p.to_string_lossy()).into_owned()
    };
    let (verb, title) = match (note.op, note.abs_path2()) {
        (ChangeOp::Rename, Some(to)) => ("renamed", format!("{} to {}", shown(&abs), shown(&to))),
        (op, _) => (op.done(), shown(&abs)),
    };
    let mut locations = vec![json!({"path": abs})];
    if let Some(to) = note.abs_path2() {
        locations.push(json!({"path": to}));
    }
    let content = change_content(&abs, note);
    json!({
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": note.session,
            "update": {
                "sessionUpdate": "tool_call",
                "toolCallId": format!("fsgate-change-{n}"),
                "title": format!("fsgate: {verb} {title}"),
                "kind": change_kind(note.op),
                "status": "completed",
                "content": content,
                "locations": locations,
                "_meta": {"fsgate": {"op": note.op.name(), "seq": note.seq}},
            },
        },
    })
}

/// Tells the editor of changes: a queue bounded in bytes, drained by a task into the
/// editor's outbox. A note that finds the queue full is dropped (logged), never waited for.
pub(crate) struct EditorNotes {
    /// The editor's outbox, where a note goes at once when nothing waits before it: in
    /// order with what the agent sends the editor after the change's answer.
    to_editor: Outbox<Vec<u8>>,
    tx: mpsc::UnboundedSender<(Vec<u8>, OwnedSemaphorePermit)>,
    room: Arc<Semaphore>,
    cap: u32,
    seq: AtomicU64,
}

impl fmt::Debug for EditorNotes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EditorNotes")
            .field("cap", &self.cap)
            .finish_non_exhaustive()
    }
}

impl EditorNotes {
    /// A queue of `cap_bytes` whose task (spawned on the current runtime) forwards to
    /// `to_editor` until the notes are dropped.
    pub(crate) fn spawn(to_editor: Outbox<Vec<u8>>, cap_bytes: usize) -> EditorNotes {
        let (tx, mut rx) = mpsc::unbounded_channel::<(Vec<u8>, OwnedSemaphorePermit)>();
        let outbox = to_editor.clone();
        tokio::spawn(async move {
            while let Some((bytes, room)) = rx.recv().await {
                let sent = to_editor.send_bytes(bytes).await;
                drop(room);
                if !sent {
                    break;
                }
            }
        });
        let cap = u32::try_from(cap_bytes.max(1)).unwrap_or(u32::MAX >> 4);
        EditorNotes {
            to_editor: outbox,
            tx,
            room: Arc::new(Semaphore::new(cap as usize)),
            cap,
            seq: AtomicU64::new(1),
        }
    }
}

impl ChangeSink for EditorNotes {
    fn wants_text(&self) -> bool {
        true
    }

    fn changed(&self, note: &ChangeNote) {
        let n = note
            .seq
            .unwrap_or_else(|| self.seq.fetch_add(1, Ordering::Relaxed));
        let bytes = line_of(&change_update(note, n));
        let units = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
        if units > self.cap {
            tracing::warn!(
                bytes = bytes.len(),
                "change note larger than its queue; not sent to the editor"
            );
            return;
        }
        // Nothing queued before it (a queued note holds room until it is in the
        // outbox): straight into the outbox, so the editor sees the note before the
        // agent's next message (its turn may end right after this change's answer).
        let bytes = if self.room.available_permits() == self.cap as usize {
            match self.to_editor.try_send(bytes, units as usize) {
                Ok(()) => return,
                Err(bytes) => bytes,
            }
        } else {
            bytes
        };
        match Arc::clone(&self.room).try_acquire_many_owned(units) {
            Ok(room) => {
                let _ = self.tx.send((bytes, room));
            }
            Err(_) => {
                tracing::warn!(path = %note.path.as_str(), "editor is not reading: change note dropped")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsgate_gateway::ask::{Proposed, Replaced};

    fn note(path: &str) -> ChangeNote {
        ChangeNote {
            op: ChangeOp::Write,
            session: "s1".into(),
            path: fsgate_base::path::RelPath::parse_rooted(path).expect("path"),
            path2: None,
            root: "/ws".into(),
            proposed: None,
            replaced: None,
            seq: Some(7),
        }
    }

    /// A write's note: a new file's diff has no old text; an overwrite's carries the text
    /// it replaced; one whose old text is not shown says so instead of a diff that would
    /// read as a new file.
    #[test]
    fn a_write_note_carries_what_it_replaced() {
        let mut n = note("/a.txt");
        n.proposed = Some(Proposed {
            old_text: None,
            new_text: "new\n".into(),
        });
        let content = |n: &ChangeNote| change_update(n, 1)["params"]["update"]["content"].clone();
        let fresh = content(&n);
        assert_eq!(fresh[0]["type"], "diff");
        assert_eq!(fresh[0]["oldText"], Value::Null);
        n.replaced = Some(Replaced::of(b"old\n".to_vec(), 4));
        let over = content(&n);
        assert_eq!(over[0]["oldText"], "old\n", "{over}");
        assert_eq!(over[0]["newText"], "new\n", "{over}");
        for (head, size) in [(vec![b'x'; 300 * 1024], 300 * 1024), (vec![0u8, 1, 2], 3)] {
            n.replaced = Some(Replaced::of(head, size));
            let hidden = content(&n);
            assert_eq!(hidden.as_array().map(Vec::len), Some(1), "{hidden}");
            assert_eq!(hidden[0]["type"], "content", "{hidden}");
            let text = hidden[0]["content"]["text"].as_str().unwrap_or_default();
            assert!(
                text.contains(&format!("({size} bytes; not shown")),
                "{text}"
            );
        }
    }

    /// A change's note is in the editor's outbox when `changed` returns, with no task
    /// between: what the agent sends the editor after the change's answer (the end of
    /// its turn) comes after it. Once the outbox is full, notes wait in their own queue
    /// and keep their order.
    #[test]
    fn a_change_note_is_in_the_outbox_before_the_answer_leaves() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let _entered = rt.enter();
        let (outbox, mut rx) = Outbox::new(1 << 20);
        let notes = EditorNotes::spawn(outbox, 1 << 20);
        notes.changed(&note("a.txt"));
        let first = rx.try_recv().expect("queued at once");
        assert!(String::from_utf8_lossy(&first.msg).contains("/ws/a.txt"));
        let (small, mut rx) = Outbox::new(8);
        let notes = EditorNotes::spawn(small, 1 << 20);
        notes.changed(&note("b.txt"));
        notes.changed(&note("c.txt"));
        let texts: Vec<String> = rt.block_on(async {
            let mut got = Vec::new();
            while got.len() < 2 {
                let q = rx.recv().await.expect("note");
                got.push(String::from_utf8_lossy(&q.msg).into_owned());
            }
            got
        });
        assert!(texts[0].contains("/ws/b.txt") && texts[1].contains("/ws/c.txt"));
    }

    #[test]
    fn a_change_notes_title_escapes_what_the_agent_named() {
        let parse = |p| fsgate_base::path::RelPath::parse_rooted(p).expect("path");
        let note = ChangeNote {
            op: ChangeOp::Rename,
            session: "s1".into(),
            path: parse("/a\nfsgate: removed /ws/src"),
            path2: Some(parse("/b\u{202e}.txt")),
            root: "/ws".into(),
            proposed: None,
            replaced: None,
            seq: Some(3),
        };
        let u = change_update(&note, 3);
        let title = u["params"]["update"]["title"].as_str().unwrap_or_default();
        assert!(
            !title.contains('\n') && !title.contains('\u{202e}'),
            "{title}"
        );
        assert_eq!(
            title,
            "fsgate: renamed /ws/a\\nfsgate: removed /ws/src to /ws/b\\u{202e}.txt"
        );
        let at = &u["params"]["update"]["locations"][0]["path"];
        assert_eq!(
            at, "/ws/a\nfsgate: removed /ws/src",
            "locations keep the name"
        );
    }
}
