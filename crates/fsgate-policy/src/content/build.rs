//! `[content]` -> [`ContentScanner`]: built-in rules, a gitleaks config file
//! (`gitleaks.rs`) and inline rules merged by id, compiled once (each rule by `rule`), and
//! their true/false-positive examples checked (`examples.rs`).

use std::collections::HashMap;
use std::path::Path;

use super::builtin::BUILTIN_CONTENT_RULES;
use super::examples::check_examples;
use super::format::{GitleaksAllowlist, RawContent};
use super::gitleaks::{Layer, load_gitleaks, resolve, spec_from};
use super::rule::{At, Errs, Spec, builtin_specs, compile_allow, compile_rule};
use super::{ContentScanner, ContentSource};
use crate::error::PolicyError;
use fsgate_decide::OpClass;

/// Compiles the `[content]` section; `None` if the policy has none.
///
/// # Ambient Authority
/// Reads the gitleaks config it names (relative to `base`, the policy's directory).
pub(crate) fn compile(
    raw: Option<&RawContent>,
    src: &str,
    base: Option<&Path>,
) -> Result<Option<ContentScanner>, PolicyError> {
    let Some(raw) = raw else { return Ok(None) };
    let mut errs = Errs {
        src,
        config_line: 0,
    };
    let ops = parse_ops(raw, &errs)?;

    let mut layers: Vec<Layer> = Vec::new();
    if raw.builtin {
        layers.push((builtin_specs(), Vec::new()));
    }
    let mut sources = Vec::new();
    if let Some(cfg) = &raw.gitleaks_config {
        errs.config_line = errs.line(cfg);
        let path = resolve(base, Path::new(cfg.get_ref()));
        layers.push(load_gitleaks(&path, 0, &mut sources, &errs)?);
    }
    layers.push(inline_layer(raw, &errs));
    let (mut specs, globals) = stack_layers(layers, &errs)?;
    disable_rules(&mut specs, raw, &errs)?;
    let scanner = build(specs, globals, ops, sources, &errs)?;
    Ok(Some(scanner))
}

/// The rules and allowlists written in the policy's `[content]` section itself.
fn inline_layer(raw: &RawContent, errs: &Errs<'_>) -> Layer {
    let inline: Vec<Spec> = raw
        .rules
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let key = format!("content.rules[{i}]");
            let line = errs.line(&r.id);
            spec_from(r, At::Inline { key, line }, |s| errs.line(s))
        })
        .collect();
    let inline_allows = raw
        .allowlists
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let line = a
                .regexes
                .first()
                .or(a.paths.first())
                .map_or(0, |s| errs.line(s));
            (
                a.clone(),
                At::Inline {
                    key: format!("content.allowlists[{i}]"),
                    line,
                },
            )
        })
        .collect();
    (inline, inline_allows)
}

/// The layers stacked: later layers replace earlier rules of the same id (built-in <
/// gitleaks < inline), and every layer's global allowlists apply. An id twice in one
/// layer is refused.
fn stack_layers(layers: Vec<Layer>, errs: &Errs<'_>) -> Result<Layer, PolicyError> {
    let mut specs: Vec<Spec> = Vec::new();
    let mut globals: Vec<(GitleaksAllowlist, At)> = Vec::new();
    for (rules, allows) in layers {
        let mut ids = std::collections::HashSet::new();
        for spec in rules {
            if !ids.insert(spec.id.clone()) {
                return Err(errs.at(
                    &spec.at,
                    ".id",
                    format!("duplicate content rule id `{}`", spec.id),
                ));
            }
            match specs.iter().position(|s| s.id == spec.id) {
                Some(i) => specs[i] = spec,
                None => specs.push(spec),
            }
        }
        globals.extend(allows);
    }
    Ok((specs, globals))
}

/// Leaves out the rules `disabled_rules` names; each must name one.
fn disable_rules(
    specs: &mut Vec<Spec>,
    raw: &RawContent,
    errs: &Errs<'_>,
) -> Result<(), PolicyError> {
    for (i, id) in raw.disabled_rules.iter().enumerate() {
        let before = specs.len();
        specs.retain(|s| s.id != *id.get_ref());
        if specs.len() == before {
            let line = errs.line(id);
            let id = id.get_ref();
            return Err(PolicyError::Invalid {
                key: format!("content.disabled_rules[{i}]"),
                line,
                message: format!("no content rule has the id `{id}`"),
            });
        }
    }
    Ok(())
}

fn parse_ops(raw: &RawContent, errs: &Errs<'_>) -> Result<[bool; 4], PolicyError> {
    let Some(list) = &raw.ops else {
        let mut ops = [false; 4];
        ops[OpClass::Read as usize] = true;
        ops[OpClass::Write as usize] = true;
        return Ok(ops);
    };
    let mut ops = [false; 4];
    for op in list {
        match OpClass::parse(op.get_ref()) {
            Some(c @ (OpClass::Read | OpClass::Write)) => ops[c as usize] = true,
            _ => {
                return Err(PolicyError::Invalid {
                    key: "content.ops".into(),
                    line: errs.line(op),
                    message: format!(
                        "`{}`: content is scanned on \"read\" and/or \"write\" only",
                        op.get_ref()
                    ),
                });
            }
        }
    }
    Ok(ops)
}

fn build(
    specs: Vec<Spec>,
    globals: Vec<(GitleaksAllowlist, At)>,
    ops: [bool; 4],
    sources: Vec<ContentSource>,
    errs: &Errs<'_>,
) -> Result<ContentScanner, PolicyError> {
    let index: HashMap<String, usize> = specs
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.clone(), i))
        .collect();
    let mut rules = Vec::with_capacity(specs.len());
    for s in &specs {
        let builtin = match s.at {
            At::Builtin => Some(
                BUILTIN_CONTENT_RULES
                    .iter()
                    .position(|b| b.id == s.id)
                    .ok_or_else(|| {
                        errs.at(&s.at, "", format!("no built-in content rule `{}`", s.id))
                    })?,
            ),
            _ => None,
        };
        rules.push(compile_rule(s, &index, errs, builtin)?);
    }
    let mut global = Vec::new();
    for (a, at) in &globals {
        let allow = compile_allow(a, at, errs)?;
        if a.target_rules.is_empty() {
            global.push(allow);
            continue;
        }
        for id in &a.target_rules {
            let Some(&i) = index.get(id) else {
                return Err(errs.at(
                    at,
                    ".targetRules",
                    format!("target rule `{id}` does not exist"),
                ));
            };
            rules[i].allowlists.push(allow.clone());
        }
    }
    let mut keywords: Vec<String> = Vec::new();
    let mut keyword_rules: Vec<Vec<usize>> = Vec::new();
    for (i, r) in rules.iter().enumerate() {
        for k in &r.keywords {
            match keywords.iter().position(|x| x == k) {
                Some(p) => keyword_rules[p].push(i),
                None => {
                    keywords.push(k.clone());
                    keyword_rules.push(vec![i]);
                }
            }
        }
    }
    let scanner = ContentScanner {
        rules,
        global,
        prefilter: super::Prefilter::new(keywords),
        keyword_rules,
        ops,
        sources,
        clean: Default::default(),
    };
    check_examples(&scanner, &specs, errs, true)?;
    Ok(scanner)
}
