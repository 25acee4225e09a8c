//! `content-disabled` and `content-no-keywords`: content scanning switched off or made
//! slow.

use crate::lint::findings::{Severity, Sink};
use crate::{OpClass, Policy};

/// High-confidence built-in content rules: switching one off is worth a warning
/// (`generic-api-key` is weak, and turning it off is common).
const STRONG_CONTENT_RULES: &[&str] = &[
    "private-key",
    "aws-access-key-id",
    "github-token",
    "github-fine-grained-pat",
    "gitlab-pat",
    "slack-token",
    "stripe-live-key",
];

pub(super) fn content(policy: &Policy, sink: &mut Sink<'_>) {
    let Some(c) = &policy.raw().content else {
        if policy.can_ever(OpClass::Read) || policy.can_ever(OpClass::Write) {
            sink.at(
                sink.key_pos("version"),
                Severity::Warning,
                "content-disabled",
                "the policy has no [content] section: file contents are never scanned for private keys or cloud and forge tokens".into(),
                "add `[content]` (its built-in rules are on by default)",
            );
        }
        return;
    };
    if !c.builtin {
        let line = crate::position::key_line(sink.src, "content", "builtin");
        sink.at(
            sink.line_pos(line),
            Severity::Warning,
            "content-disabled",
            "[content] builtin = false switches off every built-in content rule (private keys, cloud and forge tokens)".into(),
            "keep builtin = true and switch off single weak rules with disabled_rules",
        );
    }
    for id in &c.disabled_rules {
        if c.builtin && STRONG_CONTENT_RULES.contains(&id.get_ref().as_str()) {
            sink.at(
                sink.pos(id.span().start),
                Severity::Warning,
                "content-disabled",
                format!(
                    "disabled_rules switches off `{}`, a high-confidence built-in content rule: such secrets pass in file contents",
                    id.get_ref()
                ),
                "remove it from disabled_rules; add an allowlist for the files it misjudges",
            );
        }
    }
    for r in &c.rules {
        if r.keywords.is_empty() && r.regex.is_some() {
            sink.at(
                sink.pos(r.id.span().start),
                Severity::Note,
                "content-no-keywords",
                format!(
                    "content rule `{}` has no keywords: its regex runs on every file read and written",
                    r.id.get_ref()
                ),
                "add keywords: short literals every match contains (they prefilter the scan)",
            );
        }
    }
}
