//! Merging a file into the base it extends: base rules first, then the extending file's.
//! The extending file may add deny rules, add or substitute allow rules that stay inside
//! the base's allows, lower limits and add secret and content rules; anything that would
//! loosen the base is an error naming the rule (or key), the base file and why.

use std::path::PathBuf;

use super::layer::{Inherited, Layer};
use crate::compile::{self, Compiled};
use crate::content::ContentScanner;
use crate::diff::sections;
use crate::error::PolicyError;
use crate::position::line_col;
use crate::position::{key_line, section_line};
use crate::raw::{RawContent, RawLimits, RawPolicy};
use fsgate_decide::{BinaryMode, Effect};
use fsgate_decide::{Limits, OpClass, Rule, SecretPattern};

/// The chain merged so far.
pub(crate) struct Merged {
    /// The merged file: rules, sections, content, limits, secrets as in force.
    raw: RawPolicy,
    rules: Vec<Rule>,
    /// Per rule: `overridable = true` in the chain's root file.
    overridable: Vec<bool>,
    /// Per rule: the file it comes from.
    files: Vec<String>,
    secrets: Vec<SecretPattern>,
    waivers: Vec<SecretPattern>,
    builtin: bool,
    limits: Limits,
    content: Option<ContentScanner>,
    /// The text and directory `[content]` compiles against: the first file of the chain
    /// with a `[content]` section (only it may name a gitleaks config).
    content_from: (String, Option<PathBuf>),
    /// The nearest base, for messages.
    origin: String,
    dir: Option<PathBuf>,
}

impl Merged {
    /// The chain's root: a file that extends nothing.
    pub(crate) fn root(layer: Layer) -> Result<Merged, PolicyError> {
        let c = compile::compile(&layer.raw, &layer.text, layer.dir.as_deref())?;
        let overridable = layer.raw.rules.iter().map(|r| r.overridable).collect();
        let files = vec![layer.origin.clone(); c.rules.len()];
        Ok(Merged {
            files,
            builtin: layer.raw.secrets.builtin_on(),
            raw: layer.raw,
            rules: c.rules,
            overridable,
            secrets: c.secrets.into_patterns(),
            waivers: c.waivers.patterns,
            limits: c.limits,
            content: c.content,
            content_from: (layer.text, layer.dir.clone()),
            origin: layer.origin,
            dir: layer.dir,
        })
    }

    /// Merges `layer`, which extends what is merged so far.
    pub(crate) fn extend(mut self, layer: Layer) -> Result<Merged, PolicyError> {
        self.check_rule_flags(&layer)?;
        self.check_sections(&layer)?;
        self.check_secrets(&layer)?;
        self.check_content(&layer)?;
        let limits = self.merge_limits(&layer)?;
        let c = compile::compile(&layer.raw, &layer.text, layer.dir.as_deref())?;
        self.merge_rules(&layer, c.rules)?;
        self.merge_secrets(&layer, c.secrets.into_patterns(), c.waivers.patterns);
        self.merge_content(&layer, c.content)?;
        self.merge_sections(&layer);
        self.limits = limits;
        self.raw.limits = RawLimits {
            max_read_bytes: Some(limits.max_read_bytes),
            max_write_bytes: Some(limits.max_write_bytes),
            binary: Some(limits.binary),
            max_message_bytes: Some(limits.max_message_bytes),
        };
        let Layer {
            raw, origin, dir, ..
        } = layer;
        self.raw.version = raw.version;
        self.raw.extends = raw.extends;
        self.raw.sets = raw.sets;
        self.raw.tests = raw.tests;
        self.origin = origin;
        self.dir = dir;
        Ok(self)
    }

    /// The compiled policy, the merged file, and the rules a base file wrote (id, file).
    pub(crate) fn finish(mut self) -> Result<(Compiled, RawPolicy, Inherited), PolicyError> {
        let inherited = self
            .rules
            .iter()
            .zip(&self.files)
            .filter(|(_, f)| **f != self.origin)
            .map(|(r, f)| (r.id.clone(), f.clone()))
            .collect();
        self.raw.secrets.builtin = Some(self.builtin);
        let agent =
            compile::agent::agent_section(&self.raw, self.dir.as_deref()).map_err(|errs| {
                PolicyError::Invalid {
                    key: "agent".into(),
                    line: 0,
                    message: errs.first().map_or_else(String::new, ToString::to_string),
                }
            })?;
        let compiled = Compiled {
            rules: self.rules,
            secrets: compile::secrets::secrets_of(self.secrets),
            waivers: compile::secrets::waivers_of(self.waivers)?,
            limits: self.limits,
            content: self.content,
            agent,
        };
        Ok((compiled, self.raw, inherited))
    }

    fn refuse(&self, key: impl Into<String>, line: usize, message: String) -> PolicyError {
        PolicyError::Invalid {
            key: key.into(),
            line,
            message: format!("{message} (base policy {})", self.origin),
        }
    }

    /// Only the chain's root can mark a rule overridable: otherwise a middle file could
    /// open to its extenders what the root never allowed.
    fn check_rule_flags(&self, layer: &Layer) -> Result<(), PolicyError> {
        match layer
            .raw
            .rules
            .iter()
            .enumerate()
            .find(|(_, r)| r.overridable)
        {
            Some((i, r)) => Err(self.refuse(
                format!("rule[{i}].overridable"),
                line_col(&layer.text, r.id.span().start).0,
                format!(
                    "rule `{}`: only a policy that extends nothing can mark rules overridable",
                    r.id.get_ref()
                ),
            )),
            None => Ok(()),
        }
    }

    fn merge_rules(&mut self, layer: &Layer, rules: Vec<Rule>) -> Result<(), PolicyError> {
        // A new allow rule must lie within a base allow; a new ask rule within a base
        // allow (it then tightens) or ask (see `narrower`).
        let base_allows: Vec<Rule> = self
            .rules
            .iter()
            .filter(|r| r.effect != Effect::Deny)
            .cloned()
            .collect();
        for (i, (rule, raw)) in rules.into_iter().zip(&layer.raw.rules).enumerate() {
            let why = match self.rules.iter().position(|b| b.id == rule.id) {
                Some(at) if self.overridable[at] => None,
                Some(at) => narrower(&rule, &self.rules[at]).err().map(|why| {
                    format!(
                        "replaces the base rule of the same id, which is not `overridable = true`, and is not narrower: {why}"
                    )
                }),
                None if rule.effect == Effect::Deny => None,
                None => uncovered(&rule, &base_allows),
            };
            if let Some(why) = why {
                return Err(self.refuse(
                    format!("rule[{i}]"),
                    rule.line,
                    format!("rule `{}` {why}", rule.id),
                ));
            }
            match self.rules.iter().position(|b| b.id == rule.id) {
                Some(at) => {
                    self.rules[at] = rule;
                    self.raw.rules[at] = raw.clone();
                    self.overridable[at] = false;
                    self.files[at] = layer.origin.clone();
                }
                None => {
                    self.rules.push(rule);
                    self.raw.rules.push(raw.clone());
                    self.overridable.push(false);
                    self.files.push(layer.origin.clone());
                }
            }
        }
        Ok(())
    }

    /// `[limits]`: the stricter value wins; a value looser than the base's is an error.
    fn merge_limits(&self, layer: &Layer) -> Result<Limits, PolicyError> {
        let l = &layer.raw.limits;
        let b = self.limits;
        let key_at = |key: &str| key_line(&layer.text, "limits", key);
        let lower = |key: &str, mine: Option<u64>, base: u64| {
            match mine {
            Some(v) if v > base => Err(self.refuse(
                format!("limits.{key}"),
                key_at(key),
                format!("raises limits.{key} from {base} to {v}: a policy that extends another may only lower its limits"),
            )),
            Some(v) => Ok(v),
            None => Ok(base),
        }
        };
        let rank = |m: BinaryMode| match m {
            BinaryMode::Deny => 0,
            BinaryMode::Media => 1,
            BinaryMode::Base64 => 2,
        };
        let binary = match l.binary {
            Some(m) if rank(m) > rank(b.binary) => {
                return Err(self.refuse(
                    "limits.binary",
                    key_at("binary"),
                    format!(
                        "loosens limits.binary from {:?} to {m:?}: a policy that extends another may only make it stricter (deny, then media, then base64)",
                        b.binary
                    ),
                ));
            }
            Some(m) => m,
            None => b.binary,
        };
        Ok(Limits {
            max_read_bytes: lower("max_read_bytes", l.max_read_bytes, b.max_read_bytes)?,
            max_write_bytes: lower("max_write_bytes", l.max_write_bytes, b.max_write_bytes)?,
            binary,
            max_message_bytes: lower(
                "max_message_bytes",
                l.max_message_bytes,
                b.max_message_bytes,
            )?,
        })
    }

    /// `[audit]`, `[backup]`, `[sandbox]`, `[agent]`, `[acp]`, `[ws]`, `[ask]`, `[notify]`,
    /// `[vcs]`: inherited; an extending file may set one its base does not have, never
    /// change one it has.
    fn check_sections(&self, layer: &Layer) -> Result<(), PolicyError> {
        let (b, p) = (&self.raw, &layer.raw);
        for (name, base_has, mine) in [
            ("audit", b.audit.is_some(), p.audit.is_some()),
            ("backup", b.backup.is_some(), p.backup.is_some()),
            ("sandbox", b.sandbox.is_some(), p.sandbox.is_some()),
            ("agent", b.agent.is_some(), p.agent.is_some()),
            ("acp", b.acp.is_some(), p.acp.is_some()),
            ("ws", b.ws.is_some(), p.ws.is_some()),
            ("http", b.http.is_some(), p.http.is_some()),
            ("ask", b.ask.is_some(), p.ask.is_some()),
            ("notify", b.notify.is_some(), p.notify.is_some()),
            ("vcs", b.vcs.is_some(), p.vcs.is_some()),
        ] {
            if base_has && mine {
                return Err(self.refuse(
                    name,
                    section_line(&layer.text, name),
                    format!("[{name}] is set by the base policy; a policy that extends it inherits it and cannot change it (change it in the base)"),
                ));
            }
            // A section the base lacks leaves the base at the defaults: one looser than
            // them (`allow_terminal = true`, `fsync = "never"`) would loosen the base.
            if !base_has
                && mine
                && let Some(i) = sections::loosened_from_defaults(&layer.text, name).first()
            {
                let key = i.subject.clone();
                let line = match key_line(&layer.text, name, &key) {
                    0 => section_line(&layer.text, name),
                    n => n,
                };
                return Err(self.refuse(
                    format!("{name}.{key}"),
                    line,
                    format!("[{name}] {key} = {} is looser than the default ({}) the base policy leaves in force; a policy that extends it may only tighten (set it in the base)", i.new, i.old),
                ));
            }
        }
        Ok(())
    }

    fn merge_sections(&mut self, layer: &Layer) {
        let p = &layer.raw;
        let r = &mut self.raw;
        r.audit = r.audit.take().or_else(|| p.audit.clone());
        r.backup = r.backup.take().or_else(|| p.backup.clone());
        r.sandbox = r.sandbox.take().or_else(|| p.sandbox.clone());
        r.agent = r.agent.take().or_else(|| p.agent.clone());
        r.acp = r.acp.take().or_else(|| p.acp.clone());
        r.ws = r.ws.take().or_else(|| p.ws.clone());
        r.http = r.http.take().or_else(|| p.http.clone());
        r.ask = r.ask.take().or_else(|| p.ask.clone());
        r.notify = r.notify.take().or_else(|| p.notify.clone());
        r.vcs = r.vcs.take().or_else(|| p.vcs.clone());
    }

    /// `[secrets]`: additive. The base's built-ins stay on and its patterns unwaived.
    fn check_secrets(&self, layer: &Layer) -> Result<(), PolicyError> {
        let s = &layer.raw.secrets;
        if self.builtin && s.builtin == Some(false) {
            return Err(self.refuse(
                "secrets.builtin",
                key_line(&layer.text, "secrets", "builtin"),
                "cannot turn off the base's built-in secret-name patterns".into(),
            ));
        }
        for (i, w) in s.disabled_patterns.iter().enumerate() {
            let name = w.get_ref().trim();
            let id = format!("secrets:{}", name.strip_prefix("secrets:").unwrap_or(name));
            let message = if self.secrets.iter().any(|p| p.id == id) {
                format!("cannot waive `{id}`: the base denies with it (waive it in the base)")
            } else if !self.builtin && s.builtin != Some(true) {
                format!("waives `{id}`, but the base turns the built-in patterns off")
            } else {
                continue;
            };
            let (line, col) = line_col(&layer.text, w.span().start);
            return Err(PolicyError::Located {
                key: format!("secrets.disabled_patterns[{i}]"),
                line,
                col,
                message: format!("{message} (base policy {})", self.origin),
            });
        }
        Ok(())
    }

    fn merge_secrets(
        &mut self,
        layer: &Layer,
        patterns: Vec<SecretPattern>,
        waivers: Vec<SecretPattern>,
    ) {
        // Built-ins come from the extending file only if it turns them on anew.
        let newly_on = !self.builtin && layer.raw.secrets.builtin == Some(true);
        for p in patterns.into_iter().filter(|p| newly_on || !p.builtin) {
            if !self
                .secrets
                .iter()
                .any(|q| q.id == p.id && q.source == p.source)
            {
                self.secrets.push(p);
            }
        }
        for w in waivers.into_iter().filter(|_| newly_on) {
            if !self.waivers.iter().any(|q| q.id == w.id) {
                self.waivers.push(w);
            }
        }
        self.builtin |= newly_on;
        let (r, p) = (&mut self.raw.secrets, &layer.raw.secrets);
        r.patterns.extend(p.patterns.iter().cloned());
        if newly_on {
            r.disabled_patterns
                .extend(p.disabled_patterns.iter().cloned());
        }
    }

    /// `[content]`: additive. The base's built-ins stay on, its rules enabled, and no
    /// allowlist of the extending file lets content through them.
    fn check_content(&self, layer: &Layer) -> Result<(), PolicyError> {
        let (Some(b), Some(p)) = (&self.raw.content, &layer.raw.content) else {
            return Ok(());
        };
        let line = |key: &str| match key_line(&layer.text, "content", key) {
            0 => section_line(&layer.text, "content"),
            n => n,
        };
        if b.builtin && !p.builtin {
            return Err(self.refuse(
                "content.builtin",
                line("builtin"),
                "cannot turn off the base's built-in content rules".into(),
            ));
        }
        let active: Vec<&str> = self.content.iter().flat_map(|c| c.rule_ids()).collect();
        for d in &p.disabled_rules {
            let d = d.get_ref().as_str();
            let bare = d.strip_prefix("content:").unwrap_or(d);
            if active.contains(&format!("content:{bare}").as_str()) {
                return Err(self.refuse(
                    "content.disabled_rules",
                    line("disabled_rules"),
                    format!("cannot disable the base's content rule `{bare}`"),
                ));
            }
        }
        // An inline rule of the same id would replace the base's rule (built-in ones too).
        // (A base's own inline rule, even one it disables, would be a duplicate id.)
        let taken = |id: &str| {
            active.contains(&format!("content:{id}").as_str())
                || b.rules.iter().any(|r| r.id.get_ref() == id)
        };
        if let Some(r) = p.rules.iter().find(|r| taken(r.id.get_ref())) {
            return Err(self.refuse(
                "content.rules",
                line_col(&layer.text, r.id.span().start).0,
                format!(
                    "content rule `{}` is the base's: a rule of the same id here would replace it; use another id",
                    r.id.get_ref()
                ),
            ));
        }
        if !p.allowlists.is_empty() {
            return Err(self.refuse(
                "content.allowlists",
                line("allowlists"),
                "an allowlist here would let content through the base's content rules; add allowlists to the base".into(),
            ));
        }
        // A gitleaks file's global allowlists would apply to the base's rules too.
        if p.gitleaks_config.is_some() {
            return Err(self.refuse(
                "content.gitleaks_config",
                line("gitleaks_config"),
                "a gitleaks config here could allowlist content the base's rules refuse; name it in the base".into(),
            ));
        }
        Ok(())
    }

    fn merge_content(
        &mut self,
        layer: &Layer,
        mine: Option<ContentScanner>,
    ) -> Result<(), PolicyError> {
        let Some(p) = &layer.raw.content else {
            return Ok(());
        };
        if self.raw.content.is_none() {
            self.content_from = (layer.text.clone(), layer.dir.clone());
        }
        let Some(b) = self.raw.content.take() else {
            self.raw.content = Some(p.clone());
            self.content = mine;
            return Ok(());
        };
        let mut disabled = b.disabled_rules.clone();
        disabled.extend(p.disabled_rules.iter().cloned());
        let merged = RawContent {
            builtin: b.builtin || p.builtin,
            gitleaks_config: b.gitleaks_config,
            disabled_rules: disabled,
            ops: match (b.ops, &p.ops) {
                (Some(mut x), Some(y)) => {
                    x.extend(y.iter().cloned());
                    Some(x)
                }
                _ => None,
            },
            rules: b.rules.into_iter().chain(p.rules.iter().cloned()).collect(),
            allowlists: b.allowlists,
        };
        let (src, dir) = &self.content_from;
        self.content = crate::content::build::compile(Some(&merged), src, dir.as_deref())?;
        self.raw.content = Some(merged);
        Ok(())
    }
}

/// None if some allow (or, for a new ask rule, ask) rule of the base covers `rule`, else
/// why not.
fn uncovered(rule: &Rule, base_allows: &[Rule]) -> Option<String> {
    if rule.effect == Effect::Deny {
        return Some("is not an allow or ask rule".into());
    }
    let kind = rule.effect.as_str();
    let mut whys = Vec::new();
    for b in base_allows {
        match narrower(rule, b) {
            Ok(()) => return None,
            Err(why) => whys.push(format!("not within `{}`: {why}", b.id)),
        }
    }
    if whys.is_empty() {
        return Some(format!("is a new {kind} rule, and the base allows nothing"));
    }
    Some(format!(
        "is a new {kind} rule that no {} rule of the base covers ({})",
        if rule.effect == Effect::Ask {
            "allow or ask"
        } else {
            "allow"
        },
        whys.join("; ")
    ))
}

/// Ok if `p` allows nothing `b` does not: both allow, `p`'s ops and extensions are among
/// `b`'s, and every glob of `p` starts with a literal directory `b` already covers (a glob
/// covers its match's subtree, so `b` then covers everything the glob can reach), or
/// has a wildcard after it and `b` has the glob `<directory>/**`.
///
/// An ask rule may narrow an allow rule (a person is then asked where the base allowed)
/// or an ask rule; an allow rule only an allow rule (never an ask: nobody would be asked).
pub(crate) fn narrower(p: &Rule, b: &Rule) -> Result<(), String> {
    narrower_effect(p, b)?;
    narrower_scope(p, b)?;
    narrower_paths(p, b)
}

/// An allow rule may narrow an allow rule; an ask rule an allow or ask rule.
fn narrower_effect(p: &Rule, b: &Rule) -> Result<(), String> {
    match (p.effect, b.effect) {
        (Effect::Allow, Effect::Allow) | (Effect::Ask, Effect::Allow | Effect::Ask) => {}
        (Effect::Allow, Effect::Ask) => {
            return Err(
                "an allow rule cannot replace or widen an ask rule: nobody would be asked".into(),
            );
        }
        _ => return Err("only an allow rule (or an ask rule) can narrow an allow rule".into()),
    }
    Ok(())
}

/// `p` covers no op `b` does not, nor anything beyond one of `b`'s conditions.
fn narrower_scope(p: &Rule, b: &Rule) -> Result<(), String> {
    if let Some(op) = OpClass::ALL
        .iter()
        .find(|op| p.ops[**op as usize] && !b.ops[**op as usize])
    {
        return Err(format!(
            "it covers {}, which the base rule does not",
            op.as_str()
        ));
    }
    // Within each of the base's conditions: a replacement without one would reach
    // files the base rule never allowed.
    for bc in &b.conditions {
        bc.within(p.conditions.iter().find(|pc| pc.same_kind(bc)))?;
    }
    Ok(())
}

/// `p`'s globs reach nothing beyond `b`'s paths, nor let the agent list an ancestor
/// `b` does not.
fn narrower_paths(p: &Rule, b: &Rule) -> Result<(), String> {
    let Some(bset) = &b.paths else {
        return Ok(());
    };
    // `**` matches every path: whatever `p` matches lies within it.
    if b.globs.iter().any(|g| g.trim_matches('/') == "**") {
        return Ok(());
    }
    if p.paths.is_none() {
        return Err("it matches any path".into());
    }
    let lists = p.ops[OpClass::List as usize];
    for (glob, base) in p.globs.iter().zip(&p.bases) {
        if base.is_root() {
            return Err(format!(
                "glob `{glob}` has no literal directory to start from"
            ));
        }
        // `src/**` matches what lies beneath `src`, not `src`: a glob with a wildcard
        // after its literal directory reaches only beneath it too.
        let beneath = glob.contains(['*', '?', '[', '{', '\\'])
            && b.globs
                .iter()
                .any(|g| g.trim_matches('/') == format!("{base}/**"));
        if !beneath && !bset.is_match(base.as_str()) {
            return Err(format!(
                "glob `{glob}` reaches beyond the base rule's paths {:?}",
                b.globs
            ));
        }
        // Listing the ancestors of an allowed subtree is allowed: they must be listable
        // under the base rule too.
        let mut anc = base.parent();
        while let Some(a) = anc.filter(|_| lists) {
            if !bset.is_match(a.as_str()) && !b.bases.iter().any(|bb| bb.starts_with(&a)) {
                return Err(format!(
                    "glob `{glob}` lets the agent list `{a}`, which the base rule does not"
                ));
            }
            anc = a.parent();
        }
    }
    Ok(())
}
