//! Merging a file into the base it extends: base rules first, then the extending file's.
//! The extending file may add deny rules, add or substitute allow rules that stay inside
//! the base's allows, lower limits and add secret and content rules; anything that would
//! loosen the base is an error naming the rule (or key), the base file and why.
//!
//! Here the chain and its rules; each section's merge in a file of its own beneath.

mod content;
mod inherited;
mod limits;
mod secrets;

use std::path::PathBuf;

use super::layer::{Inherited, Layer};
use super::narrower::{narrower, uncovered};
use crate::compile::{self, Compiled};
use crate::content::ContentScanner;
use crate::error::PolicyError;
use crate::position::line_col;
use crate::raw::{RawLimits, RawPolicy};
use fsgate_decide::{Effect, Limits, Rule, SecretPattern};

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
            max_process_file_bytes: Some(limits.max_process_file_bytes),
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
}
