//! `fixed-floor` and `floor-hidden`: rules that name or reach fsgate's own files (the
//! policy, the audit log, the backups), which no policy can open.

use std::collections::HashSet;
use std::path::Path;

use crate::Policy;
use crate::floor::fixed_floor_violations;
use crate::lint::findings::{LintOptions, Severity, Sink};
use fsgate_decide::Effect;
use fsgate_decide::floor::{FixedFloor, FloorKind};

/// Returns the floor built for `--workspace`, for the checks that need it.
pub(super) fn floor(
    policy: &Policy,
    sink: &mut Sink<'_>,
    policy_path: Option<&Path>,
    options: &LintOptions,
) -> Option<FixedFloor> {
    // An ask rule there could never be granted either: the person would be asked for
    // nothing.
    for a in policy.rules().iter().filter(|r| r.effect != Effect::Deny) {
        if let Some(g) = a.globs.iter().find(|g| {
            g.split('/')
                .any(|c| c.to_ascii_lowercase().starts_with(".fsgate"))
        }) {
            sink.at_rule(
 a,
                Severity::Error,
                "fixed-floor",
                format!(
                    "{} rule `{}` names fsgate's own files (`{g}`): the policy, audit log and backups can never be allowed",
                    a.effect.as_str(),
                    a.id
                ),
                "remove the glob; the gateway refuses these paths whatever the policy says",
            );
        }
    }
    let ws = options.workspace.as_ref()?;
    let Ok(ws) = std::fs::canonicalize(ws) else {
        sink.at(
            (1, 1),
            Severity::Error,
            "unreadable",
            format!("cannot resolve the workspace {}", ws.display()),
            "pass an existing directory to --workspace",
        );
        return None;
    };
    let abs = |p: &Path| {
        std::fs::canonicalize(p)
            .or_else(|_| std::path::absolute(p))
            .ok()
    };
    let raw = policy.raw();
    let mut files = Vec::new();
    if let Some(p) = policy_path.and_then(abs) {
        files.push((FloorKind::PolicyFile, p));
    }
    if let Some(p) = raw
        .audit
        .as_ref()
        .and_then(|a| a.path.as_deref())
        .and_then(abs)
    {
        files.push((FloorKind::AuditLog, p));
    }
    if let Some(p) = raw
        .backup
        .as_ref()
        .and_then(|b| b.dir.as_deref())
        .and_then(abs)
    {
        files.push((FloorKind::BackupDir, p));
    }
    let refs: Vec<(FloorKind, &Path)> = files.iter().map(|(k, p)| (*k, p.as_path())).collect();
    let fl = FixedFloor::new(&ws, &refs);
    report_floor(policy, &fl, sink);
    Some(fl)
}

fn report_floor(policy: &Policy, fl: &FixedFloor, sink: &mut Sink<'_>) {
    let mut seen = HashSet::new();
    for v in fixed_floor_violations(policy, fl) {
        if !seen.insert((v.rule.clone(), v.path.clone())) {
            continue;
        }
        let rule = policy.rules().iter().find(|r| r.id == v.rule);
        let line = rule.map_or(1, |r| r.line);
        let effect = rule.map_or("allow", |r| r.effect.as_str());
        if v.explicit {
            sink.at(
                sink.line_pos(line),
                Severity::Error,
                "fixed-floor",
                format!(
                    "{effect} rule `{}` reaches {} (`{}` in the workspace), which no policy can allow",
                    v.rule,
                    v.kind.as_str(),
                    v.path
                ),
                "exclude it with a deny rule, or keep fsgate's files outside the workspace",
            );
        } else {
            sink.at(
                sink.line_pos(line),
                Severity::Note,
                "floor-hidden",
                format!(
                    "the fixed floor refuses {} (`{}`) although rule `{}` would {} it",
                    v.kind.as_str(),
                    v.path,
                    v.rule,
                    if effect == "ask" {
                        "ask about"
                    } else {
                        "allow"
                    }
                ),
                "nothing to do; keeping fsgate's files outside the workspace avoids this",
            );
        }
    }
}
