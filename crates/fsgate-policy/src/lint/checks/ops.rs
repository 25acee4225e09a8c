//! Rules whose ops do less than they seem to: `write-without-read` (a write that cannot
//! be read back) and `ask-list` (an ask rule that hides entries from listings).

use super::samples::{allows, samples};
use crate::lint::findings::{Severity, Sink, only};
use crate::{OpClass, Policy};
use fsgate_decide::Effect;

pub(super) fn write_without_read(policy: &Policy, sink: &mut Sink<'_>) {
    for a in policy
        .rules()
        .iter()
        .filter(|r| r.effect == Effect::Allow && r.ops[OpClass::Write as usize])
    {
        let alone = only(policy, vec![a.clone()]);
        let blind = samples(a).into_iter().find(|s| {
            allows(&alone, OpClass::Write, s)
                && allows(policy, OpClass::Write, s)
                && !allows(policy, OpClass::Read, s)
        });
        if let Some(s) = blind {
            sink.at_rule(
                a,
                Severity::Warning,
                "write-without-read",
                format!(
                    "allow rule `{}` lets the agent write `{}` but no rule lets it read it back",
                    a.id,
                    s.as_str()
                ),
                "grant read on the same paths (edits need reads), or narrow the write rule",
            );
        }
    }
}

/// `ask-list`: an ask rule covering `list`. A stat of one path asks, but listings,
/// globs, trees and searches (and the watcher's events) ask nobody: the entries it
/// covers are left out of them, as if denied.
pub(super) fn ask_list(policy: &Policy, sink: &mut Sink<'_>) {
    for r in policy
        .rules()
        .iter()
        .filter(|r| r.effect == Effect::Ask && r.ops[OpClass::List as usize])
    {
        sink.at_rule(
            r,
            Severity::Warning,
            "ask-list",
            format!(
                "ask rule `{}` covers list: directory listings, globs, trees and searches leave out the entries it covers rather than asking a person for each, so the agent does not see them",
                r.id
            ),
            "drop list from the rule's ops (and allow listing with an allow rule) unless hiding these entries from listings is meant",
        );
    }
}
