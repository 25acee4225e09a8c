//! `[content]` -> [`ContentScanner`]: built-in rules, a gitleaks config file and inline
//! rules merged by id, compiled once (each rule by `rule`), and their true/false-positive
//! examples checked.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use fsgate_base::sha256::Sha256;
use toml::Spanned;

use super::builtin::BUILTIN_CONTENT_RULES;
use super::format::{GitleaksAllowlist, GitleaksExtend, GitleaksFile, GitleaksRule, RawContent};
use super::rule::{At, Errs, Spec, builtin_specs, compile_allow, compile_rule};
#[cfg(test)]
use super::rule::{BUILTIN_ERRS, builtin_set};
use super::{ContentScanner, ContentSource};
use crate::error::PolicyError;
use crate::position::line_col;
use fsgate_decide::OpClass;

/// Gitleaks follows `[extend] path` two levels deep; so do we.
const MAX_EXTEND_DEPTH: usize = 2;

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

fn resolve(base: Option<&Path>, p: &Path) -> PathBuf {
    match base {
        Some(b) if p.is_relative() => b.join(p),
        _ => p.to_path_buf(),
    }
}

fn spec_from(r: &GitleaksRule, at: At, line_of: impl Fn(&Spanned<String>) -> usize) -> Spec {
    let allow_at = |a: &GitleaksAllowlist| match &at {
        At::File { file, .. } => At::File {
            file: file.clone(),
            line: a
                .regexes
                .first()
                .or(a.paths.first())
                .map_or(line_of(&r.id), &line_of),
        },
        other => other.clone(),
    };
    let mut allowlists: Vec<(GitleaksAllowlist, At)> = r
        .allowlists
        .iter()
        .map(|a| (a.clone(), allow_at(a)))
        .collect();
    if let Some(a) = &r.allowlist {
        allowlists.push((a.clone(), allow_at(a)));
    }
    Spec {
        id: r.id.get_ref().trim().to_string(),
        regex: r.regex.as_ref().map(|s| (s.get_ref().clone(), line_of(s))),
        path: r.path.as_ref().map(|s| s.get_ref().clone()),
        secret_group: r.secret_group,
        entropy: r.entropy,
        keywords: r.keywords.clone(),
        allowlists,
        required: r.required.clone(),
        skip_report: r.skip_report,
        tps: r.tps.clone(),
        fps: r.fps.clone(),
        at,
    }
}

type Layer = (Vec<Spec>, Vec<(GitleaksAllowlist, At)>);

/// Loads a gitleaks config and what it extends, merged as gitleaks merges them.
fn load_gitleaks(
    path: &Path,
    depth: usize,
    sources: &mut Vec<ContentSource>,
    errs: &Errs<'_>,
) -> Result<Layer, PolicyError> {
    let text = crate::compose::extends::read_base(path)
        .map_err(|e| file_err(errs, path, 0, format!("cannot read gitleaks config: {e}")))?;
    sources.push(ContentSource {
        path: path.to_path_buf(),
        sha256: hex::encode(Sha256::digest(text.as_bytes())),
    });
    let file: GitleaksFile = toml::from_str(&text).map_err(|e| {
        let line = e.span().map_or(0, |s| line_col(&text, s.start).0);
        let message = format!("not a gitleaks config: {}", e.message().trim());
        file_err(errs, path, line, message)
    })?;
    let (rules, mut allows) = file_layer(path, &text, &file, errs)?;
    let Some(ext) = &file.extend else {
        return Ok((rules, allows));
    };
    let Some(ext_path) = extended_path(path, ext, errs)? else {
        return Ok((rules, allows));
    };
    if depth + 1 > MAX_EXTEND_DEPTH {
        return Ok((rules, allows));
    }
    let ext_path = resolve(path.parent(), Path::new(ext_path));
    let (base_rules, base_allows) = load_gitleaks(&ext_path, depth + 1, sources, errs)?;
    let merged = merge_rules(base_rules, rules, &ext.disabled_rules);
    allows.extend(base_allows);
    Ok((merged, allows))
}

/// A problem in the gitleaks config at `path`, at `line` of it.
fn file_err(errs: &Errs<'_>, path: &Path, line: usize, message: String) -> PolicyError {
    errs.at(
        &At::File {
            file: path.to_path_buf(),
            line,
        },
        "",
        message,
    )
}

/// One gitleaks file's own rules and global allowlists (`text` is its source, for
/// lines); a rule or file with both an `allowlist` and `allowlists` is refused.
fn file_layer(
    path: &Path,
    text: &str,
    file: &GitleaksFile,
    errs: &Errs<'_>,
) -> Result<Layer, PolicyError> {
    let line_of = |s: &Spanned<String>| line_col(text, s.span().start).0;
    let rules: Vec<Spec> = file
        .rules
        .iter()
        .map(|r| {
            let at = At::File {
                file: path.to_path_buf(),
                line: line_of(&r.id),
            };
            spec_from(r, at, line_of)
        })
        .collect();
    for (r, spec) in file.rules.iter().zip(&rules) {
        if r.allowlist.is_some() && !r.allowlists.is_empty() {
            return Err(errs.at(
                &spec.at,
                "",
                format!(
                    "rule `{}`: [rules.allowlist] cannot be used alongside [[rules.allowlists]]",
                    spec.id
                ),
            ));
        }
    }
    if file.allowlist.is_some() && !file.allowlists.is_empty() {
        return Err(file_err(
            errs,
            path,
            0,
            "[allowlist] cannot be used alongside [[allowlists]]".into(),
        ));
    }
    let allows: Vec<(GitleaksAllowlist, At)> = file
        .allowlist
        .iter()
        .chain(&file.allowlists)
        .map(|a| {
            let line = a.regexes.first().or(a.paths.first()).map_or(0, line_of);
            (
                a.clone(),
                At::File {
                    file: path.to_path_buf(),
                    line,
                },
            )
        })
        .collect();
    Ok((rules, allows))
}

/// The file an `[extend]` section names, as written; `useDefault` and `url` are
/// refused (nothing bundled, nothing fetched).
fn extended_path<'e>(
    path: &Path,
    ext: &'e GitleaksExtend,
    errs: &Errs<'_>,
) -> Result<Option<&'e str>, PolicyError> {
    if ext.use_default {
        return Err(file_err(
            errs,
            path,
            0,
            "[extend] useDefault: fsgate does not bundle gitleaks' default rules; copy them into a file and use [extend] path, or use `[content] builtin = true`".into(),
        ));
    }
    if ext.url.is_some() {
        return Err(file_err(
            errs,
            path,
            0,
            "[extend] url: fsgate loads no configuration over the network".into(),
        ));
    }
    Ok(ext.path.as_deref())
}

/// Gitleaks' merge: the extended file's rules come first (less the disabled ones); a
/// rule of the same id here overrides the non-empty fields and appends keywords and
/// allowlists; this file's other rules follow.
fn merge_rules(base_rules: Vec<Spec>, mut rules: Vec<Spec>, disabled: &[String]) -> Vec<Spec> {
    let mut merged: Vec<Spec> = Vec::new();
    for base in base_rules {
        if disabled.contains(&base.id) {
            continue;
        }
        match rules.iter().position(|r| r.id == base.id) {
            Some(i) => merged.push(base.overridden_by(rules.remove(i))),
            None => merged.push(base),
        }
    }
    merged.extend(rules);
    merged
}

impl Spec {
    /// This rule of an extended file, overridden by the rule of the same id in the
    /// extending one (which also says where the merged rule was written).
    fn overridden_by(mut self, cur: Spec) -> Spec {
        if cur.regex.is_some() {
            self.regex = cur.regex;
        }
        if cur.path.is_some() {
            self.path = cur.path;
        }
        if cur.secret_group.is_some() {
            self.secret_group = cur.secret_group;
        }
        if cur.entropy.is_some() {
            self.entropy = cur.entropy;
        }
        self.keywords.extend(cur.keywords);
        self.allowlists.extend(cur.allowlists);
        self.tps.extend(cur.tps);
        self.fps.extend(cur.fps);
        self.at = cur.at;
        self
    }
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

/// Checks that every built-in rule detects (or not) each example it carries, on its
/// own, without a policy's global allowlists.
#[cfg(test)]
pub(super) fn check_builtin_examples() -> Result<(), String> {
    let specs = builtin_specs();
    let scanner = ContentScanner {
        rules: builtin_set()?.to_vec(),
        global: Vec::new(),
        prefilter: super::Prefilter::default(),
        keyword_rules: Vec::new(),
        ops: [false; 4],
        sources: Vec::new(),
        clean: Default::default(),
    };
    check_examples(&scanner, &specs, &BUILTIN_ERRS, false).map_err(|e| e.to_string())
}

/// Every true-positive example must be found by its rule (keywords included, so the
/// prefilter cannot hide it), and no false-positive example may be.
fn check_examples(
    scanner: &ContentScanner,
    specs: &[Spec],
    errs: &Errs<'_>,
    skip_builtin: bool,
) -> Result<(), PolicyError> {
    for (i, s) in specs.iter().enumerate() {
        if skip_builtin && matches!(s.at, At::Builtin) {
            continue; // checked once, on their own, in `builtin_rule`
        }
        let rule = &scanner.rules[i];
        let path_only = rule.regex.is_none();
        let found = |ex: &str| -> bool {
            if path_only {
                !scanner.detect(i, Some(ex), b"", None).is_empty()
            } else {
                let lower = ex.to_lowercase();
                let keyword_ok = rule.keywords.is_empty()
                    || rule.keywords.iter().any(|k| lower.contains(k.as_str()));
                keyword_ok && !scanner.detect(i, None, ex.as_bytes(), None).is_empty()
            }
        };
        for (n, tp) in s.tps.iter().enumerate() {
            if !found(tp) {
                return Err(errs.at(
                    &s.at,
                    &format!(".tps[{n}]"),
                    format!(
                        "rule `{}` does not detect its true-positive example {:?}",
                        s.id,
                        preview(tp)
                    ),
                ));
            }
        }
        for (n, fp) in s.fps.iter().enumerate() {
            if found(fp) {
                return Err(errs.at(
                    &s.at,
                    &format!(".fps[{n}]"),
                    format!(
                        "rule `{}` detects its false-positive example {:?}",
                        s.id,
                        preview(fp)
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn preview(s: &str) -> String {
    let mut p: String = s.chars().take(48).collect();
    if p.len() < s.len() {
        p.push_str("...");
    }
    p
}
