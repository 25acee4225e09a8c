//! `extends`: the chain of files a policy builds on, base first, each read as a bounded
//! regular file, with no cycle and at most [`MAX_CHAIN`] files; the chain's hash.

use std::path::{Path, PathBuf};

use fsgate_base::sha256::Sha256;

use super::layer::Layer;
use crate::error::PolicyError;
use crate::position::line_col;
use crate::raw::RawPolicy;

/// How many files an `extends` chain may hold, the extending file included.
pub(crate) const MAX_CHAIN: usize = 8;

/// The chain `top` starts, base first. Each `extends` is relative to the file naming it.
pub(super) fn chain(top: Layer) -> Result<Vec<Layer>, PolicyError> {
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
pub(super) fn chain_sha256(layers: &[Layer]) -> String {
    let mut h = Sha256::new();
    for l in layers {
        h.update(l.text.as_bytes());
        h.update([0u8]);
    }
    hex::encode(h.finalize())
}
