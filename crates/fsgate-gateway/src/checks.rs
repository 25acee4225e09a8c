//! The policy's decisions as a request's gates: a path's class or access allowed,
//! denied or asked about, a size known late, and content scanned for secrets.

use crate::ask;

use crate::facts::Facts;

use crate::ops::cx::Cx;
use crate::scope::ReqPath;
use fsgate_base::error::GatewayError;
use fsgate_base::path::RelPath;
use fsgate_decide::{Access, EntryKind, OpClass, PathFacts};
use fsgate_policy::Policy;
use fsgate_workspace::{Entry, FileKind};

impl Cx<'_> {
    /// Refuses unless the policy allows `class` on `path`.
    pub(crate) fn check(
        &self,
        class: OpClass,
        path: &RelPath,
        kind: EntryKind,
        shown: &str,
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        let d = self.pol.decide(class, path, kind);
        Self::refuse_unless(d, class.as_str(), path, shown, facts)
    }

    /// Refuses unless the policy allows `op`'s own checks on `path`, knowing `pf`.
    pub(crate) fn check_entry(
        &self,
        op: Access,
        path: &RelPath,
        pf: &PathFacts,
        shown: &str,
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        let d = self.pol.decide_entry(op, path, pf);
        Self::refuse_unless(d, op.as_str(), path, shown, facts)
    }

    /// The final decision once a file's size is known (a write: the larger of its
    /// current and new size), where the request names it and where it leads; the
    /// checks before it deferred the rules with a size condition.
    pub(crate) fn check_size(
        &self,
        op: Access,
        (rp, real): (&ReqPath, &RelPath),
        size: u64,
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        if !self.pol.has_size_rules() {
            return Ok(());
        }
        let pf = PathFacts::file(size);
        self.check_entry(op, &rp.rel, &pf, &rp.shown, facts)?;
        if *real != rp.rel {
            self.check_entry(op, real, &pf, &rp.shown, facts)?;
        }
        Ok(())
    }

    fn refuse_unless(
        d: fsgate_decide::Decision<'_>,
        what: &str,
        path: &RelPath,
        shown: &str,
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        if d.asks() {
            return Self::settle_ask(&d, what, path, shown, facts);
        }
        facts.decided(&d);
        if d.allowed() {
            Ok(())
        } else {
            Err(GatewayError::Refused {
                reason: format!("{what} of `{path}` denied: {}", d.reason),
                rule: d.rule.to_string(),
                path: shown.to_string(),
            })
        }
    }

    /// An ask decision: a person allows it, or it is refused naming the rule.
    fn settle_ask(
        d: &fsgate_decide::Decision<'_>,
        what: &str,
        path: &RelPath,
        shown: &str,
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        // No context: a request that began before a reload brought ask rules.
        let ask = facts.ask.get_or_insert_with(ask::AskCtx::unaskable);
        let op = facts.op;
        if ask::settle(ask, d, (op, what), path, shown, &mut facts.asked)? {
            facts.decided(d);
        }
        Ok(())
    }

    /// Content gate: refuses `bytes` read or written under `class` when the policy's
    /// `[content]` rules find a secret in them. The refusal names the rule and the line,
    /// never the content.
    pub(crate) fn check_content(
        &self,
        class: OpClass,
        path: &RelPath,
        bytes: &[u8],
        shown: &str,
    ) -> Result<(), GatewayError> {
        let hit = scanner_for(self.pol, class).and_then(|s| s.scan(path, bytes));
        Self::content_verdict(class, path, shown, hit)
    }

    /// [`check_content`](Self::check_content) of bytes whose SHA-256 is known: the
    /// scanner skips bytes it found clean at this path before.
    pub(crate) fn check_content_digested(
        &self,
        class: OpClass,
        path: &RelPath,
        (bytes, digest): (&[u8], &[u8; 32]),
        shown: &str,
    ) -> Result<(), GatewayError> {
        let hit = scanner_for(self.pol, class).and_then(|s| s.scan_digested(path, bytes, digest));
        Self::content_verdict(class, path, shown, hit)
    }

    /// A content finding as the refusal that names its rule.
    fn content_verdict(
        class: OpClass,
        path: &RelPath,
        shown: &str,
        hit: Option<fsgate_policy::ContentHit>,
    ) -> Result<(), GatewayError> {
        match hit {
            None => Ok(()),
            Some(hit) => {
                let at = if hit.line == 0 {
                    String::new()
                } else {
                    format!(" on line {}", hit.line)
                };
                Err(GatewayError::Refused {
                    reason: format!(
                        "{} of `{}` denied: the content holds a secret{at}",
                        class.as_str(),
                        path
                    ),
                    rule: hit.rule_id,
                    path: shown.to_string(),
                })
            }
        }
    }
}

/// The policy's content scanner, if it scans content of operations of `class`.
fn scanner_for(pol: &Policy, class: OpClass) -> Option<&fsgate_policy::ContentScanner> {
    pol.content_scanner().filter(|s| s.applies_to(class))
}

/// Whether an entry may be seen at all (in ls, glob, tree, a change event): `list` on
/// it, files and directories alike, decided as `explain --op ls` decides it.
pub(crate) fn visible(pol: &Policy, e: &Entry) -> bool {
    pol.decide_entry(Access::Ls, &e.path, &entry_facts(e))
        .allowed()
}

/// What a listed entry tells the policy: its kind and, for a file, its size if read.
pub(crate) fn entry_facts(e: &Entry) -> PathFacts {
    match e.kind {
        FileKind::Directory => PathFacts::kind(EntryKind::Dir),
        _ => PathFacts {
            kind: EntryKind::File,
            size: e.size,
        },
    }
}
