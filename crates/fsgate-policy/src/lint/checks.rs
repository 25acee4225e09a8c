//! The semantic checks of `policy check`, run on a policy that loads.
//!
//! Questions about what a rule covers are answered by the real decision function on
//! reduced copies of the policy (one rule, no secret names), never by a second
//! implementation of the matching semantics that could drift from it.

use std::collections::HashSet;
use std::path::Path;

use regex::{RegexSet, RegexSetBuilder};

use super::findings::{LintOptions, Severity, Sink, only};
use super::shadow;
use crate::compile::BUILTIN_SECRETS;
use crate::floor::fixed_floor_violations;
use crate::testrun::{own_rules, run_cases};
use crate::{EntryKind, OpClass, Policy, Rule};
use fsgate_base::path::RelPath;
use fsgate_decide::Condition;
use fsgate_decide::Effect;
use fsgate_decide::floor::{FixedFloor, FloorKind};
use fsgate_sandbox::Protected;
use fsgate_sandbox::agent_config::user_home;
use fsgate_sandbox::agent_config::validate::credential_env_name;

/// Read and write limits above this are flagged (100 MiB).
pub(super) const SANE_MAX_FILE_BYTES: u64 = 100 * 1024 * 1024;
/// Message limits above this are flagged (256 MiB).
pub(super) const SANE_MAX_MESSAGE_BYTES: u64 = 256 * 1024 * 1024;

/// Paths a default secret-name pattern catches, one or two per built-in pattern.
const SECRET_SAMPLES: &[&str] = &[
    ".env",
    "config/.env.production",
    "id_rsa",
    ".ssh/id_ed25519",
    "certs/server.pem",
    "credentials.json",
    "config/secrets.yaml",
    ".netrc",
    ".npmrc",
    ".aws/credentials",
    ".git/config",
    ".git",
];

pub(super) fn run(
    policy: &Policy,
    src: &str,
    sink: &mut Sink<'_>,
    policy_path: Option<&Path>,
    options: &LintOptions,
) {
    duplicates(policy, sink);
    dead_rules(policy, sink);
    secrets(policy, sink);
    waivers(policy, sink);
    write_without_read(policy, sink);
    ask_list(policy, sink);
    limits(policy, sink);
    let fl = floor(policy, sink, policy_path, options);
    super::reach::run(policy, sink, fl.as_ref(), options);
    super::shadow::shadowed(policy, sink);
    untested(policy, src, sink);
    content(policy, sink);
    agent_reach(policy, sink, options);
    agent_credentials(policy, sink);
}

/// `waived-pattern`: a built-in secret-name pattern this file waives, so a reviewer
/// sees every waiver where it is written.
fn waivers(policy: &Policy, sink: &mut Sink<'_>) {
    for w in &policy.raw().secrets.disabled_patterns {
        let name = w.get_ref().trim();
        let id = format!("secrets:{}", name.strip_prefix("secrets:").unwrap_or(name));
        let Some(p) = policy.waived_patterns().iter().find(|p| p.id == id) else {
            continue;
        };
        sink.at(
            sink.pos(w.span().start),
            Severity::Note,
            "waived-pattern",
            format!(
                "the built-in secret-name pattern `{id}` (/{}/) is waived: paths it matches are decided by the rules; `policy explain` shows the waiver and each audit record of such a request carries it",
                p.source
            ),
            "keep the waiver as narrow as the need: a deny rule can still cover the paths that remain secret",
        );
    }
}

fn allows(p: &Policy, op: OpClass, path: &RelPath) -> bool {
    p.decide(op, path, EntryKind::File).allowed()
}

fn op_names(ops: &[OpClass]) -> String {
    ops.iter()
        .map(|o| o.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn rule_ops(r: &Rule) -> Vec<OpClass> {
    OpClass::ALL
        .into_iter()
        .filter(|o| r.ops[*o as usize])
        .collect()
}

/// `ask-list`: an ask rule covering `list`. A stat of one path asks, but listings,
/// globs, trees and searches (and the watcher's events) ask nobody: the entries it
/// covers are left out of them, as if denied.
fn ask_list(policy: &Policy, sink: &mut Sink<'_>) {
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

fn duplicates(policy: &Policy, sink: &mut Sink<'_>) {
    let key = |r: &Rule| {
        let mut g = r.globs.clone();
        g.sort();
        // Every condition, an extension list in any order.
        let conditions: Vec<Condition> = r
            .conditions
            .iter()
            .map(|c| match c {
                Condition::Extension(e) => {
                    let mut e = e.clone();
                    e.sort();
                    Condition::Extension(e)
                }
                c => c.clone(),
            })
            .collect();
        (r.effect, r.ops, g, conditions)
    };
    let rules = policy.rules();
    for (i, r) in rules.iter().enumerate() {
        if let Some(first) = rules[..i].iter().find(|f| key(f) == key(r)) {
            sink.at_rule(
 r,
                Severity::Warning,
                "duplicate-rule",
                format!(
                    "rule `{}` duplicates rule `{}` (line {}): same effect, ops, paths, extensions and size range",
                    r.id, first.id, first.line
                ),
                "remove one of them",
            );
        }
    }
}

fn is_literal(s: &str) -> bool {
    !s.contains(['*', '?', '[', '{', '\\'])
}

/// True if some glob of `deny` textually covers everything `glob` matches: the same
/// glob, `**`, or a literal directory (`dir` or `dir/**`) that `glob` lies beneath.
fn glob_covered_textually(deny: &Rule, glob: &str) -> bool {
    let g = glob.trim_start_matches('/');
    deny.globs.iter().any(|h| {
        let h = h.trim_start_matches('/');
        let prefix = h.strip_suffix("/**").unwrap_or(h);
        h == "**"
            || h == g
            || (is_literal(prefix) && !prefix.is_empty() && g.starts_with(&format!("{prefix}/")))
    })
}

/// True if `deny` denies `op` on every path `allow` matches (ancestor listing aside).
fn deny_covers(policy: &Policy, deny: &Rule, allow: &Rule, op: OpClass) -> bool {
    if deny.effect != Effect::Deny || !deny.ops[op as usize] {
        return false;
    }
    // Only the conditions weighed below: a deny narrowed by any other may leave some
    // of the allow's paths to it.
    let weighed = |c: &Condition| matches!(c, Condition::Extension(_) | Condition::Size { .. });
    if !deny.conditions.iter().all(weighed) {
        return false;
    }
    if let Some(dx) = &deny.extensions() {
        // An allow's extensions do not limit it on directories, a deny's do: the allow
        // still decides listing, creating and removing directories (reading one is moot).
        if op != OpClass::Read {
            return false;
        }
        match &allow.extensions() {
            Some(ax) if ax.iter().all(|e| dx.contains(e)) => {}
            _ => return false,
        }
    }
    // A size-conditioned deny covers only files within its range (never directories):
    // the allow must be limited to that range too.
    let sized = |r: &Rule| r.min_size().is_some() || r.max_size().is_some();
    let within = !sized(deny)
        || (sized(allow)
            && deny.min_size().unwrap_or(0) <= allow.min_size().unwrap_or(0)
            && deny.max_size().unwrap_or(u64::MAX) >= allow.max_size().unwrap_or(u64::MAX));
    if !within {
        return false;
    }
    let mut d = deny.clone();
    d.conditions.clear();
    let reduced = only(policy, vec![d]);
    let covered = |glob: &str, base: &RelPath| {
        glob_covered_textually(deny, glob)
            || reduced.decide(op, base, EntryKind::Unknown).rule == deny.id
    };
    if allow.globs.is_empty() {
        return covered("**", &RelPath::root());
    }
    allow
        .globs
        .iter()
        .zip(&allow.bases)
        .all(|(g, b)| covered(g, b))
}

fn dead_rules(policy: &Policy, sink: &mut Sink<'_>) {
    let denies: Vec<&Rule> = policy
        .rules()
        .iter()
        .filter(|r| r.effect == Effect::Deny)
        .collect();
    for a in policy.rules().iter().filter(|r| r.effect == Effect::Allow) {
        let ops = rule_ops(a);
        let mut dead = Vec::new();
        let mut by = Vec::new();
        for op in &ops {
            // Each glob may be covered by a different deny rule.
            let per_glob: Vec<Option<&Rule>> = if a.globs.is_empty() {
                vec![
                    denies
                        .iter()
                        .copied()
                        .find(|d| deny_covers(policy, d, a, *op)),
                ]
            } else {
                (0..a.globs.len())
                    .map(|i| {
                        let mut one = a.clone();
                        one.globs = vec![a.globs[i].clone()];
                        one.bases = vec![a.bases[i].clone()];
                        denies
                            .iter()
                            .copied()
                            .find(|d| deny_covers(policy, d, &one, *op))
                    })
                    .collect()
            };
            if per_glob.iter().all(Option::is_some) {
                dead.push(*op);
                for d in per_glob.into_iter().flatten() {
                    if !by.contains(&d.id) {
                        by.push(d.id.clone());
                    }
                }
            }
        }
        if dead.is_empty() {
            continue;
        }
        let by = by
            .iter()
            .map(|i| format!("`{i}`"))
            .collect::<Vec<_>>()
            .join(", ");
        if dead.len() == ops.len() {
            sink.at_rule(
 a,
                Severity::Warning,
                "dead-rule",
                format!(
                    "allow rule `{}` never takes effect: deny rule {by} covers every path it matches for every op it names",
                    a.id
                ),
                "remove the allow rule, or narrow the deny rule if the allow was meant",
            );
        } else {
            sink.at_rule(
                a,
                Severity::Warning,
                "shadowed-ops",
                format!(
                    "ops [{}] of allow rule `{}` are always denied by {by}",
                    op_names(&dead),
                    a.id
                ),
                "drop those ops from the allow rule",
            );
        }
    }
}

/// A concrete path a glob matches: wildcards replaced by `x`, classes by a member,
/// alternatives by the first one.
pub(crate) fn concretize(glob: &str) -> String {
    let first = super::globs::expand_braces(glob.trim_start_matches('/'))
        .into_iter()
        .next()
        .unwrap_or_default();
    super::globs::fill(&first, "x")
}

/// Concrete files a rule matches: each glob made concrete, and a file beneath it with
/// one of the rule's extensions.
fn samples(rule: &Rule) -> Vec<RelPath> {
    let ext = rule
        .extensions()
        .and_then(|e| e.first().cloned())
        .unwrap_or_else(|| "txt".into());
    let globs: Vec<String> = if rule.globs.is_empty() {
        vec!["x".into()]
    } else {
        rule.globs.iter().map(|g| concretize(g)).collect()
    };
    let mut out = Vec::new();
    for g in globs {
        for s in [g.clone(), format!("{g}/x.{ext}"), format!("{g}.{ext}")] {
            if let Ok(p) = RelPath::parse_rooted(&format!("/{s}"))
                && !p.is_root()
                && !out.contains(&p)
            {
                out.push(p);
            }
        }
    }
    out
}

fn builtin_set() -> Option<RegexSet> {
    RegexSetBuilder::new(BUILTIN_SECRETS.iter().map(|(_, re)| *re))
        .case_insensitive(true)
        .build()
        .ok()
}

fn secrets(policy: &Policy, sink: &mut Sink<'_>) {
    let Some(builtin) = builtin_set() else { return };
    let builtin_id = |comp: &str| {
        builtin
            .matches(comp)
            .iter()
            .next()
            .map(|i| BUILTIN_SECRETS[i].0)
    };
    for a in policy.rules().iter().filter(|r| r.effect == Effect::Allow) {
        let alone = only(policy, vec![a.clone()]);
        let mut candidates: Vec<RelPath> = SECRET_SAMPLES
            .iter()
            .filter_map(|s| RelPath::parse_rooted(s).ok())
            .collect();
        candidates.extend(samples(a));
        let mut exposed: Vec<(String, &str, OpClass)> = Vec::new();
        for s in &candidates {
            let Some(id) = s.components().find_map(builtin_id) else {
                continue;
            };
            // A pattern waived by `disabled_patterns` is let through on purpose.
            if policy
                .waived_patterns()
                .iter()
                .any(|w| w.id.strip_prefix("secrets:") == Some(id))
            {
                continue;
            }
            for op in rule_ops(a) {
                if allows(&alone, op, s) && allows(policy, op, s) {
                    exposed.push((s.as_str().to_string(), id, op));
                    break;
                }
            }
        }
        if let Some((path, id, op)) = exposed.first() {
            let more = if exposed.len() > 1 {
                format!(", and {} more secret path(s)", exposed.len() - 1)
            } else {
                String::new()
            };
            sink.at_rule(
 a,
                Severity::Error,
                "secret-exposed",
                format!(
                    "allow rule `{}` exposes `{path}` (a default secret name, secrets:{id}) to {}{more}",
                    a.id,
                    op.as_str()
                ),
                "keep `[secrets] builtin = true`, or add a deny rule for these paths before the allow",
            );
        }
        // A glob naming a secret literally can never allow anything there.
        for g in &a.globs {
            let hit = g
                .split('/')
                .filter(|c| is_literal(c) && !c.is_empty())
                .find_map(|c| {
                    let i = policy.secrets().first_match(c).ok().flatten()?;
                    Some((c.to_string(), policy.secrets().patterns()[i].id.clone()))
                });
            if let Some((comp, id)) = hit {
                sink.at_rule(
 a,
                    Severity::Warning,
                    "secret-glob",
                    format!(
                        "glob `{g}` of allow rule `{}` names `{comp}`, which {id} always denies first",
                        a.id
                    ),
                    "remove the glob; secret names cannot be allowed while their pattern is on",
                );
            }
        }
    }
}

fn write_without_read(policy: &Policy, sink: &mut Sink<'_>) {
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

fn limits(policy: &Policy, sink: &mut Sink<'_>) {
    let l = policy.limits();
    for (key, value, max) in [
        ("max_read_bytes", l.max_read_bytes, SANE_MAX_FILE_BYTES),
        ("max_write_bytes", l.max_write_bytes, SANE_MAX_FILE_BYTES),
        (
            "max_message_bytes",
            l.max_message_bytes,
            SANE_MAX_MESSAGE_BYTES,
        ),
    ] {
        if value > max {
            sink.at(
                sink.key_pos(key),
                Severity::Warning,
                "limit-ceiling",
                format!(
                    "limits.{key} = {value} is above the sane ceiling of {max} bytes ({} MiB)",
                    max >> 20
                ),
                "agents rarely need files this large; keep it at or below the ceiling",
            );
        }
    }
    if l.max_write_bytes > l.max_message_bytes && policy.can_ever(OpClass::Write) {
        sink.at(
            sink.key_pos("max_write_bytes"),
            Severity::Note,
            "limit-unreachable",
            format!(
                "max_write_bytes ({}) exceeds max_message_bytes ({}): a write that large cannot arrive in one message",
                l.max_write_bytes, l.max_message_bytes
            ),
            "lower max_write_bytes or raise max_message_bytes",
        );
    }
}

fn untested(policy: &Policy, src: &str, sink: &mut Sink<'_>) {
    let run = run_cases(policy, src);
    let decided: HashSet<String> = run
        .cases
        .iter()
        .filter_map(|c| c.got.as_ref().map(|g| g.rule.clone()))
        .collect();
    for u in own_rules(policy, src) {
        if decided.contains(&u.rule) || u.rule.starts_with("content:") {
            continue;
        }
        let rule = policy.rules().iter().find(|r| r.id == u.rule);
        // Deny and ask rules are safeguards: one no case decides may not hold.
        if rule.is_some_and(|r| r.effect == Effect::Allow) {
            continue;
        }
        let effect = rule.map_or(Effect::Deny, |r| r.effect);
        // A suggestion is run as `policy test` would run it before it is offered; a
        // rule no sample lets decide is reported as `shadowed-rule` instead.
        if rule.is_some_and(|r| {
            let s = shadow::sample(policy, r);
            s.matched && !s.decides
        }) {
            continue;
        }
        let suggestion = rule.and_then(|r| shadow::suggest(policy, r));
        let hint = suggestion.unwrap_or_else(|| {
            format!(
                "add a [[test]] with a path this {} {}, expect = \"{}\", rule = \"{}\"",
                if rule.is_some() { "rule" } else { "pattern" },
                if effect == Effect::Ask {
                    "asks about"
                } else {
                    "denies"
                },
                effect.as_str(),
                u.rule
            )
        });
        // An inherited rule's tests live in the base that wrote it.
        if policy.rule_origin(&u.rule).is_some() {
            continue;
        }
        sink.at(
            sink.line_pos(u.line),
            Severity::Warning,
            if effect == Effect::Ask {
                "untested-ask"
            } else {
                "untested-deny"
            },
            format!(
                "{} rule `{}` has no [[test]] that it decides",
                effect.as_str(),
                u.rule
            ),
            &hint,
        );
    }
    let mut known: HashSet<String> = policy.rules().iter().map(|r| r.id.clone()).collect();
    known.extend(policy.secret_patterns().iter().map(|p| p.id.clone()));
    if let Some(sc) = policy.content_scanner() {
        known.extend(sc.rule_ids().map(str::to_string));
    }
    known.insert(crate::DEFAULT_DENY.to_string());
    for (t, c) in policy.raw().tests.iter().zip(&run.cases) {
        if let Some(r) = &t.rule
            && !known.contains(r)
        {
            sink.at(
                sink.line_pos(c.line),
                Severity::Warning,
                "unknown-test-rule",
                format!("[[test]] expects rule `{r}`, which this policy does not have"),
                "use a rule id, secrets:<id>, content:<id> or default-deny",
            );
        }
    }
}

/// Returns the floor built for `--workspace`, for the checks that need it.
fn floor(
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

fn content(policy: &Policy, sink: &mut Sink<'_>) {
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
        let line = crate::compile::key_line(sink.src, "content", "builtin");
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

/// With `--workspace`, `[agent]` entries reaching the workspace or fsgate's state
/// directory for it (the policy's own files were refused when it loaded).
fn agent_reach(policy: &Policy, sink: &mut Sink<'_>, options: &LintOptions) {
    let protect = |path: std::path::PathBuf, label: &str| Protected {
        path,
        label: label.to_owned(),
    };
    let mut protected = Vec::new();
    if let Some(ws) = &options.workspace {
        let ws = std::fs::canonicalize(ws).unwrap_or_else(|_| ws.clone());
        if let Ok(state) = fsgate_backup::workspace_state_dir(&ws) {
            protected.push(protect(
                state,
                "fsgate state directory (default audit log and backups)",
            ));
        }
        protected.push(protect(ws, "workspace"));
    }
    let home = user_home();
    for e in policy
        .agent()
        .protected_violations(&protected, home.as_deref())
    {
        sink.at(
            sink.agent_pos(&e),
            Severity::Error,
            "agent-protected",
            e.to_string(),
            "remove the entry or narrow it: the agent reaches the workspace only through the gateway, and fsgate's own files never",
        );
    }
}

/// `[agent]` grants of well-known credential places, and `env` names that look like
/// credentials other than a model service's key.
fn agent_credentials(policy: &Policy, sink: &mut Sink<'_>) {
    let agent = policy.agent();
    if let Some(home) = user_home() {
        for (key, span, place) in agent.credential_grants(&home) {
            let pos =
                span.map_or_else(|| sink.key_pos("agent_system_paths"), |s| sink.pos(s.start));
            sink.at(
                pos,
                Severity::Warning,
                "agent-credentials",
                format!("{key} reaches {place}, where credentials usually live"),
                "grant the directories the agent needs, not a credential store or a directory holding one",
            );
        }
    }
    for (i, name) in agent.env.iter().enumerate() {
        if credential_env_name(name.get_ref()) {
            sink.at(
                sink.pos(name.span().start),
                Severity::Warning,
                "agent-env-credential",
                format!(
                    "agent.env[{i}]: `{}` looks like a credential that is not a model service's key",
                    name.get_ref()
                ),
                "pass only the model API keys the agent needs; cloud and forge tokens let it act as you",
            );
        }
    }
}
