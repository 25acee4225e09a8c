//! A change as the editor is shown it, in ACP's words: its tool-call kind, its diff (or
//! why its old text is not shown); and a message as the line written to the editor.

use serde_json::{Value, json};

use fsgate_gateway::ask::{Proposed, Replaced};
use fsgate_gateway::ops::ChangeOp;

/// ACP's tool-call kind of a change.
pub(crate) fn change_kind(op: ChangeOp) -> &'static str {
    match op {
        ChangeOp::Rm => "delete",
        ChangeOp::Rename => "move",
        // Every other change (a new one too) edits what is there.
        _ => "edit",
    }
}

/// The `diff` content of a write or edit (`oldText` null for a write: ACP's new file).
fn diff(path: &std::path::Path, p: &Proposed) -> Value {
    json!({"type": "diff", "path": path, "oldText": p.old_text, "newText": p.new_text})
}

/// A write's or edit's diff, with a write's old text when it replaces a file (ACP reads
/// a diff without one as a new file), or, when that text is not shown, a sentence
/// saying so instead of a diff. `asking`: for a question (the change is not made yet).
pub(crate) fn diff_content(
    path: &std::path::Path,
    p: &Proposed,
    replaced: Option<&Replaced>,
    asking: bool,
) -> Vec<Value> {
    match (replaced, &p.old_text) {
        (Some(Replaced::Text(old)), None) => {
            vec![json!({"type": "diff", "path": path, "oldText": old, "newText": p.new_text})]
        }
        (Some(Replaced::Unshown { bytes, why }), None) => {
            let (verb, backup) = match asking {
                true => ("would replace", "it is backed up first"),
                false => ("replaced", "the backup holds the old content"),
            };
            let text = format!(
                "fsgate {verb} the file's previous content ({bytes} bytes; not shown: {why}) with {} bytes; {backup}",
                p.new_text.len()
            );
            vec![json!({"type": "content", "content": {"type": "text", "text": text}})]
        }
        _ => vec![diff(path, p)],
    }
}

pub(crate) fn line_of(v: &Value) -> Vec<u8> {
    let mut b = serde_json::to_vec(v).unwrap_or_default();
    b.push(b'\n');
    b
}
