//! What happens before compilation: named path sets (`[sets]`, `"@name"` in a rule's
//! `paths`) and `extends` chains, merged into one policy that is never looser than its
//! base. Each file is compiled on its own first, so every error names its own file and
//! line; the merge then works on the compiled rules ([`merge`]). The chain is read in
//! [`extends`], the sets expanded in [`sets`].

pub(crate) mod extends;
mod layer;
mod merge;
mod narrower;
mod sets;

use std::collections::BTreeMap;
use std::path::Path;

use fsgate_base::sha256::Sha256;

use super::compile::{self, Compiled};
use super::error::PolicyError;
use super::raw::RawPolicy;
use extends::{chain, chain_sha256};
use layer::{Inherited, Layer};
use sets::expand_sets;

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

#[cfg(test)]
mod tests;
