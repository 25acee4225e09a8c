//! What happens before compilation: named path sets (`[sets]`, `"@name"` in a rule's
//! `paths`) and `extends` chains, merged into one policy that is never looser than its
//! base. Each file is compiled on its own first, so every error names its own file and
//! line; the merge then works on the compiled rules ([`merge`]).

mod merge;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use toml::Spanned;

use super::PolicyError;
use super::compile::{self, Compiled, line_col};
use super::raw::RawPolicy;

/// How many files an `extends` chain may hold, the extending file included.
pub(crate) const MAX_CHAIN: usize = 8;

/// One file of a chain.
pub(crate) struct Layer {
    pub raw: RawPolicy,
    pub text: String,
    /// The file's name in errors.
    pub origin: String,
    /// The directory its relative paths are relative to.
    pub dir: Option<PathBuf>,
}

/// Rules a base file wrote: (rule id, file).
pub(crate) type Inherited = Vec<(String, String)>;

/// A compiled policy and what it was built from.
pub(crate) struct Built {
    pub compiled: Compiled,
    /// The merged file (the extending file's own `[[test]]` cases).
    pub raw: RawPolicy,
    pub sha256: String,
    /// The base files read, base first.
    pub bases: Vec<String>,
    /// Their texts, as read, in the same order.
    pub base_texts: Vec<String>,
    pub inherited: Inherited,
    /// The sets each rule's `paths` named: (rule id, set name), in order.
    pub set_refs: Vec<(String, String)>,
}

/// Expands sets, follows `extends`, compiles every file and merges them.
///
/// # Ambient Authority
/// Reads the base files `extends` names (and the gitleaks configs they name).
pub(crate) fn build(
    mut raw: RawPolicy,
    text: &str,
    origin: &str,
    dir: Option<&Path>,
) -> Result<Built, PolicyError> {
    if raw.extends.is_none() {
        let set_refs = expand_sets(&mut raw, text, &BTreeMap::new())?;
        let compiled = compile::compile(&raw, text, dir)?;
        return Ok(Built {
            compiled,
            raw,
            sha256: hex::encode(Sha256::digest(text.as_bytes())),
            bases: Vec::new(),
            base_texts: Vec::new(),
            inherited: Vec::new(),
            set_refs,
        });
    }
    let top = Layer {
        raw,
        text: text.to_string(),
        origin: origin.to_string(),
        dir: dir.map(Path::to_path_buf),
    };
    let layers = chain(top)?;
    let sha256 = chain_sha256(&layers);
    let last = layers.len() - 1;
    let bases = layers[..last].iter().map(|l| l.origin.clone()).collect();
    let base_texts = layers[..last].iter().map(|l| l.text.clone()).collect();
    let mut sets: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut set_refs = Vec::new();
    let mut merged: Option<merge::Merged> = None;
    for (k, mut layer) in layers.into_iter().enumerate() {
        let file = layer.origin.clone();
        let named = |e: PolicyError| match k == last {
            true => e,
            false => PolicyError::InFile {
                file: file.clone(),
                source: Box::new(e),
            },
        };
        let refs = expand_sets(&mut layer.raw, &layer.text, &sets).map_err(named)?;
        // A rule of this file replaces the base's rule of the same id, sets and all.
        set_refs.retain(|(id, _)| !layer.raw.rules.iter().any(|r| r.id.get_ref() == id));
        set_refs.extend(refs);
        for (name, globs) in &layer.raw.sets {
            sets.insert(
                name.clone(),
                globs.iter().map(|g| g.get_ref().clone()).collect(),
            );
        }
        merged = Some(match merged {
            None => merge::Merged::root(layer).map_err(named)?,
            Some(base) => base.extend(layer).map_err(named)?,
        });
    }
    let (compiled, raw, inherited) = merged
        .ok_or_else(|| PolicyError::Invalid {
            key: "extends".into(),
            line: 0,
            message: "empty chain".into(),
        })?
        .finish()?;
    Ok(Built {
        compiled,
        raw,
        sha256,
        bases,
        base_texts,
        inherited,
        set_refs,
    })
}

/// The chain `top` starts, base first. Each `extends` is relative to the file naming it.
fn chain(top: Layer) -> Result<Vec<Layer>, PolicyError> {
    let mut seen: Vec<PathBuf> = std::fs::canonicalize(&top.origin).into_iter().collect();
    let mut layers = vec![top];
    while let Some((current, ext)) = layers
        .last()
        .and_then(|c| c.raw.extends.as_ref().map(|e| (c, e)))
    {
        let (line, col) = line_col(&current.text, ext.span().start);
        let located = |message: String| PolicyError::InFile {
            file: current.origin.clone(),
            source: Box::new(PolicyError::Located {
                key: "extends".into(),
                line,
                col,
                message,
            }),
        };
        if layers.len() >= MAX_CHAIN {
            return Err(located(format!(
                "an extends chain may hold at most {MAX_CHAIN} files"
            )));
        }
        let path = match &current.dir {
            Some(d) => d.join(ext.get_ref()),
            None => PathBuf::from(ext.get_ref()),
        };
        let text = read_base(&path).map_err(|e| {
            located(format!(
                "cannot read the base policy {}: {e}",
                path.display()
            ))
        })?;
        let canon = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        if seen.contains(&canon) {
            return Err(located(format!(
                "extends {} again: the chain is a cycle",
                path.display()
            )));
        }
        seen.push(canon);
        let origin = path.display().to_string();
        // Where, not what: a base path can name any file (`~/.ssh/id_rsa`), and a
        // quoted line would carry it into a CI log.
        let raw: RawPolicy = toml::from_str(&text).map_err(|e| {
            let (line, col) = line_col(&text, e.span().map_or(0, |s| s.start));
            PolicyError::Parse {
                origin: origin.clone(),
                message: format!(
                    "line {line}, column {col}: not a policy file ({})",
                    e.message().lines().next().unwrap_or_default().trim()
                ),
            }
        })?;
        let dir = path.parent().map(|p| match p.as_os_str().is_empty() {
            true => PathBuf::from("."),
            false => p.to_path_buf(),
        });
        layers.push(Layer {
            raw,
            text,
            origin,
            dir,
        });
    }
    layers.reverse();
    Ok(layers)
}

/// A file a policy names (a base policy, a gitleaks config) is at most this large.
const MAX_BASE_BYTES: u64 = 1024 * 1024;

/// The text of a file a policy names: a regular file (a device or FIFO would never end,
/// or block) of at most [`MAX_BASE_BYTES`].
pub(crate) fn read_base(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut text = String::new();
    file.take(MAX_BASE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    if text.len() as u64 > MAX_BASE_BYTES {
        return Err(format!("larger than {MAX_BASE_BYTES} bytes"));
    }
    Ok(text)
}

/// SHA-256 of every file's text, base first, each followed by a NUL byte (which TOML
/// text cannot hold): a changed base is a changed policy.
fn chain_sha256(layers: &[Layer]) -> String {
    let mut h = Sha256::new();
    for l in layers {
        h.update(l.text.as_bytes());
        h.update([0u8]);
    }
    hex::encode(h.finalize())
}

/// Replaces every `"@name"` entry of a rule's `paths` by the set's globs, keeping the
/// entry's position so that errors in them point at `@name`. `inherited`: the sets of
/// the files this one extends. Returns the (rule id, set name) pairs expanded.
pub(crate) fn expand_sets(
    raw: &mut RawPolicy,
    src: &str,
    inherited: &BTreeMap<String, Vec<String>>,
) -> Result<Vec<(String, String)>, PolicyError> {
    check_sets(raw, src, inherited)?;
    let mut refs = Vec::new();
    for (i, rule) in raw.rules.iter_mut().enumerate() {
        if !rule.paths.iter().any(|p| p.get_ref().starts_with('@')) {
            continue;
        }
        let mut out = Vec::with_capacity(rule.paths.len());
        for entry in std::mem::take(&mut rule.paths) {
            let Some(name) = entry.get_ref().strip_prefix('@') else {
                out.push(entry);
                continue;
            };
            let globs: Vec<String> = match raw.sets.get(name) {
                Some(own) => own.iter().map(|g| g.get_ref().clone()).collect(),
                None => match inherited.get(name) {
                    Some(globs) => globs.clone(),
                    None => {
                        return Err(at(
                            src,
                            &entry,
                            format!("rule[{i}].paths"),
                            format!("unknown set `@{name}`: define it under [sets]"),
                        ));
                    }
                },
            };
            out.extend(globs.into_iter().map(|g| Spanned::new(entry.span(), g)));
            refs.push((rule.id.get_ref().trim().to_string(), name.to_string()));
        }
        rule.paths = out;
    }
    Ok(refs)
}

/// A set is a non-empty list of globs; it names no other set and does not redefine a set
/// of a base (a set naming a set is refused rather than expanded: no cycles to chase).
fn check_sets(
    raw: &RawPolicy,
    src: &str,
    inherited: &BTreeMap<String, Vec<String>>,
) -> Result<(), PolicyError> {
    for (name, globs) in &raw.sets {
        let key = format!("sets.{name}");
        let line = match compile::key_line(src, "sets", name) {
            0 => compile::section_line(src, "sets"),
            n => n,
        };
        let invalid = |message: String| PolicyError::Invalid {
            key: key.clone(),
            line,
            message,
        };
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c))
        {
            return Err(invalid(format!(
                "set name `{name}`: use letters, digits, `-` and `_`"
            )));
        }
        if inherited.contains_key(name) {
            return Err(invalid(format!(
                "set `{name}` is defined by the base policy already; use another name"
            )));
        }
        if globs.is_empty() {
            return Err(invalid(format!(
                "set `{name}` is empty: a rule naming it would lose its paths"
            )));
        }
        if let Some(g) = globs.iter().find(|g| g.get_ref().starts_with('@')) {
            return Err(at(
                src,
                g,
                key.clone(),
                format!(
                    "a set cannot name another set (`{}`): list the globs",
                    g.get_ref()
                ),
            ));
        }
    }
    Ok(())
}

fn at(src: &str, s: &Spanned<String>, key: String, message: String) -> PolicyError {
    let (line, col) = line_col(src, s.span().start);
    PolicyError::Located {
        key,
        line,
        col,
        message,
    }
}

#[cfg(test)]
mod tests;
