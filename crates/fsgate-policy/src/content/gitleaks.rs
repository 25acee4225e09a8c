//! A gitleaks config file loaded for `[content] gitleaks_config`: read and hashed, its
//! rules and allowlists as specs, its `[extend] path` followed and merged as gitleaks
//! merges them.

use std::path::{Path, PathBuf};

use fsgate_base::sha256::Sha256;
use toml::Spanned;

use super::ContentSource;
use super::format::{GitleaksAllowlist, GitleaksExtend, GitleaksFile, GitleaksRule};
use super::rule::{At, Errs, Spec};
use crate::error::PolicyError;
use crate::position::line_col;

/// Gitleaks follows `[extend] path` two levels deep; so do we.
const MAX_EXTEND_DEPTH: usize = 2;

pub(super) fn resolve(base: Option<&Path>, p: &Path) -> PathBuf {
    match base {
        Some(b) if p.is_relative() => b.join(p),
        _ => p.to_path_buf(),
    }
}

pub(super) fn spec_from(
    r: &GitleaksRule,
    at: At,
    line_of: impl Fn(&Spanned<String>) -> usize,
) -> Spec {
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

pub(super) type Layer = (Vec<Spec>, Vec<(GitleaksAllowlist, At)>);

/// Loads a gitleaks config and what it extends, merged as gitleaks merges them.
pub(super) fn load_gitleaks(
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
