//! Which files make up a log: the active file `NAME`, rotated files `NAME.<first seq>`,
//! and the sidecars beside them (`.checkpoint`, `.tombstones`, `.lock`, `.broken-*`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Suffix of the latest-checkpoint file.
pub(crate) const CHECKPOINT_SUFFIX: &str = ".checkpoint";
/// Suffix of the tombstone file written by `prune`.
pub(crate) const TOMBSTONES_SUFFIX: &str = ".tombstones";
/// Suffix of the lock file held by a running writer.
pub(crate) const LOCK_SUFFIX: &str = ".lock";
/// Infix of a damaged file set aside at start-up.
pub(crate) const BROKEN_INFIX: &str = ".broken-";

/// The name of the rotated file whose first record has `first_seq`.
pub(crate) fn rotated_name(active: &str, first_seq: u64) -> String {
    format!("{active}.{first_seq:012}")
}

/// The checkpoint file of a log.
pub fn checkpoint_name(active: &str) -> String {
    format!("{active}{CHECKPOINT_SUFFIX}")
}

/// The tombstone file of a log.
pub(crate) fn tombstones_name(active: &str) -> String {
    format!("{active}{TOMBSTONES_SUFFIX}")
}

/// The lock file of a log.
pub fn lock_name(active: &str) -> String {
    format!("{active}{LOCK_SUFFIX}")
}

/// Whether a file name is a sidecar (or a temporary file), never a log file.
pub(crate) fn is_sidecar(name: &str) -> bool {
    name.starts_with('.')
        || name.ends_with(CHECKPOINT_SUFFIX)
        || name.ends_with(TOMBSTONES_SUFFIX)
        || name.ends_with(LOCK_SUFFIX)
        || name.ends_with(".tmp")
        || name.contains(BROKEN_INFIX)
}

/// Splits a log file name into its base (active) name and, for a rotated file, its
/// first seq.
pub(crate) fn split_name(name: &str) -> (&str, Option<u64>) {
    if let Some((base, digits)) = name.rsplit_once('.')
        && !base.is_empty()
        && digits.len() >= 12
        && digits.bytes().all(|b| b.is_ascii_digit())
        && let Ok(n) = digits.parse::<u64>()
    {
        return (base, Some(n));
    }
    (name, None)
}

/// The files of one log, in chain order (rotated files by first seq, the active last).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Series {
    /// The directory holding the files.
    pub dir: PathBuf,
    /// The active file's name.
    pub base: String,
    /// The log files, in order.
    pub files: Vec<PathBuf>,
}

impl Series {
    /// The checkpoint file beside this log.
    pub(crate) fn checkpoint_path(&self) -> PathBuf {
        self.dir.join(checkpoint_name(&self.base))
    }

    /// The tombstone file beside this log.
    pub(crate) fn tombstones_path(&self) -> PathBuf {
        self.dir.join(tombstones_name(&self.base))
    }

    /// A display name for reports.
    pub(crate) fn display_name(&self) -> String {
        self.dir.join(&self.base).display().to_string()
    }
}

/// Groups the given files and directories into series. A directory contributes every
/// log file in it; an active file its whole series (itself and the rotated files beside
/// it); a rotated file itself only.
pub fn discover(paths: &[PathBuf]) -> Result<Vec<Series>, String> {
    // (dir, base) -> (active?, rotation number, name) -> path
    type Files = BTreeMap<(u8, u64, String), PathBuf>;
    let mut groups: BTreeMap<(PathBuf, String), Files> = BTreeMap::new();
    let mut add = |path: PathBuf| {
        let name = file_name(&path);
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let (base, seq) = split_name(&name);
        // The active file sorts after every rotated one; the name breaks ties.
        let key = match seq {
            Some(s) => (0, s, name.clone()),
            None => (1, 0, name.clone()),
        };
        groups
            .entry((dir, base.to_owned()))
            .or_default()
            .insert(key, path);
    };
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|e| format!("{}: {e}", p.display()))?;
        if meta.is_dir() {
            let entries = std::fs::read_dir(p).map_err(|e| format!("{}: {e}", p.display()))?;
            for entry in entries {
                let entry = entry.map_err(|e| format!("{}: {e}", p.display()))?;
                let name = entry.file_name().to_string_lossy().into_owned();
                let is_file = entry.file_type().map(|t| t.is_file()).unwrap_or(false);
                if is_file && !is_sidecar(&name) {
                    add(entry.path());
                }
            }
        } else {
            for file in with_rotated_beside(p)? {
                add(file);
            }
        }
    }
    if groups.is_empty() {
        return Err("no audit log files found".into());
    }
    Ok(groups
        .into_iter()
        .map(|((dir, base), files)| Series {
            dir,
            base,
            files: files.into_values().collect(),
        })
        .collect())
}

/// `file`, and if it is an active file, the rotated files of its series in its
/// directory (`NAME.<first seq>`), which verify, show, report and prune take with it.
fn with_rotated_beside(file: &Path) -> Result<Vec<PathBuf>, String> {
    let name = file_name(file);
    let mut files = vec![file.to_path_buf()];
    if split_name(&name).1.is_some() || is_sidecar(&name) {
        return Ok(files);
    }
    let dir = file.parent().unwrap_or(Path::new(""));
    let listed = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let entries = std::fs::read_dir(listed).map_err(|e| {
        format!(
            "{}: cannot list the directory of {} for its rotated files: {e}",
            listed.display(),
            file.display()
        )
    })?;
    for entry in entries.flatten() {
        let other = entry.file_name().to_string_lossy().into_owned();
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        let (base, seq) = split_name(&other);
        if is_file && seq.is_some() && base == name && !is_sidecar(&other) {
            files.push(dir.join(other));
        }
    }
    Ok(files)
}

/// The last path component as text.
pub fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(
            rotated_name("audit.jsonl", 1001),
            "audit.jsonl.000000001001"
        );
        assert_eq!(
            split_name("audit.jsonl.000000001001"),
            ("audit.jsonl", Some(1001))
        );
        assert_eq!(split_name("audit.jsonl"), ("audit.jsonl", None));
        assert_eq!(split_name("audit.2024"), ("audit.2024", None));
        assert!(is_sidecar("audit.jsonl.checkpoint"));
        assert!(is_sidecar("audit.jsonl.broken-20260101T000000Z"));
        assert!(!is_sidecar("audit.jsonl.000000000001"));
    }

    #[test]
    fn a_directory_becomes_ordered_series() {
        let dir = tempfile::tempdir().unwrap();
        for n in [
            "a.log",
            "a.log.000000000011",
            "a.log.000000000001",
            "a.log.checkpoint",
            "a.log.lock",
            "b.log",
        ] {
            std::fs::write(dir.path().join(n), "").unwrap();
        }
        let s = discover(&[dir.path().to_path_buf()]).unwrap();
        assert_eq!(s.len(), 2);
        let names: Vec<_> = s[0].files.iter().map(|p| file_name(p)).collect();
        assert_eq!(names, ["a.log.000000000001", "a.log.000000000011", "a.log"]);
        assert_eq!(s[1].base, "b.log");
        assert!(discover(&[dir.path().join("missing")]).is_err());
    }

    #[test]
    fn an_active_file_brings_its_rotated_files_and_a_rotated_file_only_itself() {
        let dir = tempfile::tempdir().unwrap();
        for n in [
            "a.log",
            "a.log.000000000011",
            "a.log.000000000001",
            "a.log.checkpoint",
            "a.log.000000000021.tmp",
            "a.log.extra",
            "b.log",
            "b.log.000000000001",
        ] {
            std::fs::write(dir.path().join(n), "").unwrap();
        }
        let names = |s: &Series| -> Vec<String> { s.files.iter().map(|p| file_name(p)).collect() };
        let s = discover(&[dir.path().join("a.log")]).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(
            names(&s[0]),
            ["a.log.000000000001", "a.log.000000000011", "a.log"]
        );
        let s = discover(&[dir.path().join("a.log.000000000011")]).unwrap();
        assert_eq!(names(&s[0]), ["a.log.000000000011"]);
        // Given twice (the file and its directory), each file is taken once.
        let s = discover(&[dir.path().join("b.log"), dir.path().to_path_buf()]).unwrap();
        let b = s.iter().find(|s| s.base == "b.log").unwrap();
        assert_eq!(names(b), ["b.log.000000000001", "b.log"]);
    }
}
