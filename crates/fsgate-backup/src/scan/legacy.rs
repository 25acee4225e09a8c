//! Layout 1, read alike with the one-file versions: `files/<escaped path>/`, a data file
//! and a JSON sidecar per version; no save writes there any more.

use std::io;

use cap_std::fs::Dir;

use crate::error::BackupError;
use crate::layout::{self, FILES_DIR, META_SUFFIX, Sidecar, names};
use crate::store::{BackupStore, Place, Version};

impl BackupStore {
    /// The layout-1 versions whose path `wanted` accepts.
    pub(super) fn scan_legacy(
        &self,
        wanted: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<Version>, BackupError> {
        let mut out = Vec::new();
        let Some(files) = &self.legacy else {
            return Ok(out);
        };
        for entry in files
            .entries()
            .map_err(BackupError::io("list", FILES_DIR))?
        {
            let entry = entry.map_err(BackupError::io("list", FILES_DIR))?;
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                tracing::warn!(name = ?entry.file_name(), "backup store: ignoring foreign entry");
                continue;
            };
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                tracing::warn!(name, "backup store: ignoring non-directory entry");
                continue;
            }
            if layout::decode_dir_name(&name).is_some_and(|p| !wanted(&p)) {
                continue;
            }
            let dir = match entry.open_dir() {
                Ok(d) => d,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue, // pruned meanwhile
                Err(e) => return Err(BackupError::io("open", name)(e)),
            };
            out.extend(
                self.versions_in(&dir, &name)?
                    .into_iter()
                    .filter(|v| wanted(&v.meta.path)),
            );
        }
        Ok(out)
    }

    /// The committed versions in one layout-1 per-path directory, oldest first.
    /// Sidecars that do not parse or do not match their file name are reported and
    /// skipped.
    pub(crate) fn versions_in(
        &self,
        dir: &Dir,
        dir_name: &str,
    ) -> Result<Vec<Version>, BackupError> {
        let mut out = Vec::new();
        for name in names(dir, dir_name)? {
            let Some(stem) = name.strip_suffix(META_SUFFIX) else {
                continue;
            };
            if stem.starts_with('.') {
                continue; // a sidecar being written
            }
            match read_sidecar(dir, dir_name, stem) {
                Ok(v) => out.push(v),
                Err(e) => tracing::warn!(error = %e, "backup store: skipping damaged version"),
            }
        }
        out.sort_by_key(|v| v.at);
        Ok(out)
    }

    /// `files/`, or NotFound if the store has no layout-1 versions.
    pub(crate) fn legacy_dir(&self) -> Result<&Dir, BackupError> {
        self.legacy
            .as_ref()
            .ok_or_else(|| BackupError::io("open", FILES_DIR)(io::ErrorKind::NotFound.into()))
    }

    /// The layout-1 directory of one path, if there is one.
    pub(super) fn legacy_path_dir(&self, dir_name: &str) -> Result<Option<Dir>, BackupError> {
        let Some(files) = &self.legacy else {
            return Ok(None);
        };
        match files.open_dir(dir_name) {
            Ok(d) => Ok(Some(d)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(BackupError::io("open", dir_name)(e)),
        }
    }
}

/// Reads and checks the layout-1 sidecar `<stem>.json` in `dir`.
pub(super) fn read_sidecar(dir: &Dir, dir_name: &str, stem: &str) -> Result<Version, BackupError> {
    let id = format!("{dir_name}/{stem}");
    let corrupt = |reason: String| BackupError::Corrupt {
        id: id.clone(),
        reason,
    };
    let text = dir
        .read_to_string(format!("{stem}{META_SUFFIX}"))
        .map_err(|e| corrupt(format!("sidecar unreadable: {e}")))?;
    let meta: Sidecar =
        serde_json::from_str(&text).map_err(|e| corrupt(format!("sidecar: {e}")))?;
    let at = layout::parse_ts(&meta.ts).map_err(|e| corrupt(e.to_string()))?;
    if meta.format != 1
        || layout::compact_ts(at) != stem
        || layout::dir_name(&meta.path) != dir_name
    {
        return Err(corrupt(format!(
            "sidecar does not match its name ({} at {})",
            meta.path, meta.ts
        )));
    }
    Ok(Version {
        dir: dir_name.to_owned(),
        stem: stem.to_owned(),
        at,
        meta,
        place: Place::Legacy,
    })
}
