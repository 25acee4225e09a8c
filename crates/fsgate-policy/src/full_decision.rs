//! A decision as the gateway makes it for one request, content included: the policy's
//! decision, then the content rules on the bytes; what `explain`, `[[test]]` and `diff`
//! show.

use crate::{Access, EntryKind, OpClass, PathFacts, Policy};
use fsgate_base::path::RelPath;
use fsgate_decide::Effect;

/// A decision including the content check: what the gateway does for one request.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FullDecision {
    /// allow, deny or ask.
    pub effect: Effect,
    /// The deciding rule: a `[[rule]]` id, `secrets:<id>`, `content:<id>`, `default-deny`.
    pub rule: String,
    /// One line saying why.
    pub reason: String,
}

/// Decides `op` on `path`, then, if allowed and the policy scans this op's content,
/// scans `content`: a finding turns the decision into a deny by `content:<id>`.
pub(crate) fn decide_with_content(
    policy: &Policy,
    op: OpClass,
    path: &RelPath,
    kind: EntryKind,
    content: Option<&[u8]>,
) -> FullDecision {
    decide_access_with_content(
        policy,
        Access::Class(op),
        path,
        &PathFacts::kind(kind),
        content,
    )
}

/// [`Policy::decide_access`], then the content rules on `content` for the operation's
/// primary class (grep: read), as the gateway does. An ask decision of `ls`, `glob`,
/// `tree` or `grep` is a deny by the ask rule: the gateway leaves such entries out.
pub(crate) fn decide_access_with_content(
    policy: &Policy,
    op: Access,
    path: &RelPath,
    facts: &PathFacts,
    content: Option<&[u8]>,
) -> FullDecision {
    let d = policy.decide_access(op, path, facts);
    let mut out = FullDecision {
        effect: d.effect,
        rule: d.rule.to_string(),
        reason: d.reason.into_owned(),
    };
    // Listings, walks and searches ask nobody: they leave out what an ask rule covers.
    if out.effect == Effect::Ask
        && matches!(op, Access::Ls | Access::Glob | Access::Tree | Access::Grep)
    {
        out.effect = Effect::Deny;
        out.reason = format!(
            "{} leaves out what an ask rule covers, asking nobody ({})",
            op.as_str(),
            out.reason
        );
    }
    // An ask's content is scanned too: a secret is refused whatever the person says.
    if out.effect != Effect::Deny
        && let (Some(text), Some(sc)) = (content, policy.content_scanner())
        && sc.applies_to(op.primary())
        && let Some(hit) = sc.scan(path, text)
    {
        out = FullDecision {
            effect: Effect::Deny,
            reason: if hit.line == 0 {
                "the file's path marks it as a secret".to_string()
            } else {
                format!("the content holds a secret on line {}", hit.line)
            },
            rule: hit.rule_id,
        };
    }
    out
}

/// `allow` / `deny` / `ask`.
pub(crate) fn effect_name(e: Effect) -> &'static str {
    e.as_str()
}

/// A decision as `policy diff` shows it: `allow (rule)`.
pub(crate) fn shown(d: &FullDecision) -> String {
    format!("{} ({})", effect_name(d.effect), d.rule)
}
