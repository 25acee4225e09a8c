//! Finding versions on disk: one-file versions in `versions/<shard>/` and the versions
//! of layout 1 in `files/<escaped path>/` (`legacy`), read alike.

mod legacy;

use std::io::{self, Read};
use std::sync::atomic::{AtomicBool, Ordering};

use cap_std::fs::{Dir, File};

use super::layout::{self, META_SUFFIX, VERSIONS_DIR, names};
use super::packed;
use super::store::{BackupStore, Place, Version};
use crate::error::{BackupError, BackupRef};
use legacy::read_sidecar;

/// A file in a shard that is not a complete version (being written, or a crash's
/// leftover): `(shard, name)`.
pub(crate) type Incomplete = (String, String);

/// The way a visit goes through the shards: in name order from `from` (the first shard
/// at or after it, on round to the one before), or from the first without it; with
/// `stop`, it ends before the next shard once that is set, having visited one at least.
#[derive(Debug, Default)]
pub(crate) struct Course<'a> {
    pub(crate) from: Option<String>,
    pub(crate) stop: Option<&'a AtomicBool>,
}

impl Course<'_> {
    /// Puts `shards` in the order this course visits them.
    fn order(&self, shards: &mut [String]) {
        shards.sort_unstable();
        if let Some(from) = &self.from {
            let first = shards.partition_point(|s| s < from);
            shards.rotate_left(first);
        }
    }
}

/// What a visit found: the files found incomplete, and, when its course's stop ended
/// it early, the first shard it did not visit.
#[derive(Debug, Default)]
pub(crate) struct Visited {
    pub(crate) incomplete: Vec<Incomplete>,
    pub(crate) stopped_before: Option<String>,
}

/// What one version file turned out to be.
enum Found {
    Version(Box<Version>),
    /// No complete trailer.
    Incomplete,
    /// A complete record that does not match its name, or unreadable: skipped.
    Damaged(BackupError),
}

impl BackupStore {
    /// Opens one version of `rel_path`: the latest, or with `at` the one whose
    /// timestamp or id is `at`, else the latest saved at or before the time `at`. The
    /// reader yields the content only (not a one-file version's trailer).
    pub(crate) fn open_version(
        &self,
        rel_path: &str,
        at: Option<&str>,
    ) -> Result<(BackupRef, io::Take<File>), BackupError> {
        layout::validate_rel_path(rel_path)?;
        let not_found = || BackupError::NotFound {
            path: rel_path.to_owned(),
            at: at.map(str::to_owned),
        };
        let versions = self.versions_of(rel_path)?;
        let chosen = select(&versions, at)?.ok_or_else(not_found)?;
        self.open_found(chosen)
    }

    /// Opens the version the audit log names by its id (`<escaped path>/<stamp>`),
    /// whichever path it was saved from (a long path's escaped name is hashed, so its
    /// shard is looked for among all of them).
    pub fn open_id(&self, id: &str) -> Result<(BackupRef, io::Take<File>), BackupError> {
        let not_found = || BackupError::NotFound {
            path: id.to_owned(),
            at: None,
        };
        let (dir_name, stem) = id.split_once('/').ok_or_else(not_found)?;
        if let Some(rel) = layout::decode_dir_name(dir_name) {
            let versions = self.versions_of(&rel)?;
            let chosen = versions
                .iter()
                .find(|v| v.dir == dir_name && v.stem == stem);
            return self.open_found(chosen.ok_or_else(not_found)?);
        }
        let name = layout::packed_name(dir_name, stem);
        for shard in (0..=255u8).map(|b| format!("{b:02x}")) {
            if let Some(dir) = self.shard_dir(&shard)?
                && let Found::Version(v) = read_packed(&dir, &shard, &name)
            {
                return self.open_found(&v);
            }
        }
        let legacy = self.legacy_path_dir(dir_name)?;
        let v = legacy.and_then(|d| read_sidecar(&d, dir_name, stem).ok());
        self.open_found(&v.ok_or_else(not_found)?)
    }

    /// Opens a version found by name: its content only (not a trailer).
    fn open_found(&self, chosen: &Version) -> Result<(BackupRef, io::Take<File>), BackupError> {
        let (dir, name) = match &chosen.place {
            Place::Packed { shard } => (
                self.versions.open_dir(shard),
                layout::packed_name(&chosen.dir, &chosen.stem),
            ),
            Place::Legacy => (
                self.legacy_dir()?.open_dir(&chosen.dir),
                format!("{}{}", chosen.stem, layout::DATA_SUFFIX),
            ),
        };
        let shown = chosen.to_ref().id;
        let file = dir
            .and_then(|d| d.open(&name))
            .map_err(BackupError::io("open", shown))?;
        Ok((chosen.to_ref(), file.take(chosen.meta.size)))
    }

    /// The versions of `rel_path` alone, oldest first (reads only its shard's names
    /// and its own records).
    pub(crate) fn versions_of(&self, rel_path: &str) -> Result<Vec<Version>, BackupError> {
        let dir_name = layout::dir_name(rel_path);
        let mut out = Vec::new();
        if let Some(dir) = self.legacy_path_dir(&dir_name)? {
            out.extend(self.versions_in(&dir, &dir_name)?);
        }
        let shard = layout::shard(rel_path);
        if let Some(dir) = self.shard_dir(&shard)? {
            for name in names(&dir, &shard)? {
                if layout::parse_packed_name(&name).is_some_and(|(d, _)| d == dir_name)
                    && let Found::Version(v) = read_packed(&dir, &shard, &name)
                {
                    out.push(*v);
                }
            }
        }
        out.retain(|v| v.meta.path == rel_path);
        out.sort_by_key(|v| v.at);
        Ok(out)
    }

    /// How many versions `rel_path` has by their names, without reading any.
    pub(crate) fn count_of(&self, rel_path: &str) -> Result<usize, BackupError> {
        let dir_name = layout::dir_name(rel_path);
        let mut n = 0;
        if let Some(dir) = self.legacy_path_dir(&dir_name)? {
            n += names(&dir, &dir_name)?
                .iter()
                .filter(|name| !name.starts_with('.') && name.ends_with(META_SUFFIX))
                .count();
        }
        let shard = layout::shard(rel_path);
        if let Some(dir) = self.shard_dir(&shard)? {
            n += names(&dir, &shard)?
                .iter()
                .filter(|name| layout::parse_packed_name(name).is_some_and(|(d, _)| d == dir_name))
                .count();
        }
        Ok(n)
    }

    /// Every complete version whose path `wanted` accepts.
    pub(crate) fn scan(&self, wanted: &dyn Fn(&str) -> bool) -> Result<Vec<Version>, BackupError> {
        Ok(self.scan_all(wanted)?.0)
    }

    /// [`scan`](Self::scan), with the one-file versions found incomplete.
    pub(crate) fn scan_all(
        &self,
        wanted: &dyn Fn(&str) -> bool,
    ) -> Result<(Vec<Version>, Vec<Incomplete>), BackupError> {
        let mut out = self.scan_legacy(wanted)?;
        let incomplete = self.visit_shards(wanted, &mut |versions| {
            out.extend(versions);
            Ok(())
        })?;
        Ok((out, incomplete))
    }

    /// Gives `each` the complete one-file versions whose path `wanted` accepts, one
    /// shard at a time (every version of a path is in its path's shard), and returns
    /// the files found incomplete. Layout-1 versions are not visited.
    pub(crate) fn visit_shards(
        &self,
        wanted: &dyn Fn(&str) -> bool,
        each: &mut dyn FnMut(Vec<Version>) -> Result<(), BackupError>,
    ) -> Result<Vec<Incomplete>, BackupError> {
        let whole = Course::default();
        Ok(self.visit_shards_on(wanted, &whole, each)?.incomplete)
    }

    /// [`visit_shards`](Self::visit_shards) along `course`: from its shard on, ending
    /// early once its stop is set.
    pub(crate) fn visit_shards_on(
        &self,
        wanted: &dyn Fn(&str) -> bool,
        course: &Course<'_>,
        each: &mut dyn FnMut(Vec<Version>) -> Result<(), BackupError>,
    ) -> Result<Visited, BackupError> {
        let mut shards: Vec<String> = names(&self.versions, VERSIONS_DIR)?
            .into_iter()
            .filter(|s| layout::is_shard_name(s))
            .collect();
        course.order(&mut shards);
        let mut visited = Visited::default();
        for (i, shard) in shards.iter().enumerate() {
            if i > 0 && course.stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
                visited.stopped_before = Some(shard.clone());
                break;
            }
            let Some(dir) = self.shard_dir(shard)? else {
                continue;
            };
            each(self.read_shard(&dir, shard, wanted, &mut visited.incomplete)?)?;
        }
        Ok(visited)
    }

    /// The complete versions in `shard` whose path `wanted` accepts; its incomplete
    /// files are added to `incomplete`.
    fn read_shard(
        &self,
        dir: &Dir,
        shard: &str,
        wanted: &dyn Fn(&str) -> bool,
        incomplete: &mut Vec<Incomplete>,
    ) -> Result<Vec<Version>, BackupError> {
        let mut out = Vec::new();
        for name in names(dir, shard)? {
            let Some((dir_name, _)) = layout::parse_packed_name(&name) else {
                continue;
            };
            // Plain names decode to their path, so unwanted ones are skipped unread.
            if layout::decode_dir_name(dir_name).is_some_and(|p| !wanted(&p)) {
                continue;
            }
            match read_packed(dir, shard, &name) {
                Found::Version(v) if wanted(&v.meta.path) => out.push(*v),
                Found::Version(_) => {}
                Found::Incomplete => incomplete.push((shard.to_owned(), name)),
                Found::Damaged(e) => {
                    tracing::warn!(error = %e, "backup store: skipping damaged version");
                }
            }
        }
        Ok(out)
    }

    /// The data bytes of every complete version, counted one shard at a time.
    pub(crate) fn stored_total(&self) -> Result<u64, BackupError> {
        let all = |_: &str| true;
        let legacy = self.scan_legacy(&all)?;
        let mut total = legacy
            .iter()
            .map(Version::stored)
            .fold(0, u64::saturating_add);
        self.visit_shards(&all, &mut |versions| {
            total = versions
                .iter()
                .map(Version::stored)
                .fold(total, u64::saturating_add);
            Ok(())
        })?;
        Ok(total)
    }

    /// The one-file version `name` in `shard` read again, if it is still there.
    pub(crate) fn reread(&self, shard: &str, name: &str) -> Result<Option<Version>, BackupError> {
        let Some(dir) = self.shard_dir(shard)? else {
            return Ok(None);
        };
        Ok(match read_packed(&dir, shard, name) {
            Found::Version(v) => Some(*v),
            _ => None,
        })
    }

    /// A shard directory, if it exists (something else in its place holds no versions).
    pub(crate) fn shard_dir(&self, shard: &str) -> Result<Option<Dir>, BackupError> {
        match self.versions.open_dir(shard) {
            Ok(d) => Ok(Some(d)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotADirectory => {
                tracing::warn!(shard, "backup store: ignoring non-directory entry");
                Ok(None)
            }
            Err(e) => Err(BackupError::io("open", shard)(e)),
        }
    }
}

/// Opens `name` in `dir` for reading without blocking: a FIFO put in the store must not
/// hold a pass over it (it reads as an incomplete version).
pub(crate) fn open_nonblocking(dir: &Dir, name: &str) -> io::Result<File> {
    let mut opts = cap_std::fs::OpenOptions::new();
    opts.read(true);
    let nonblock = rustix::fs::OFlags::NONBLOCK.bits() as i32;
    cap_std::fs::OpenOptionsExt::custom_flags(&mut opts, nonblock);
    dir.open_with(name, &opts)
}

/// Reads and checks the one-file version `name` in shard `shard`.
fn read_packed(dir: &Dir, shard: &str, name: &str) -> Found {
    let Some((dir_name, stem)) = layout::parse_packed_name(name) else {
        return Found::Incomplete;
    };
    let id = format!("{dir_name}/{stem}");
    let corrupt = |reason: String| BackupError::Corrupt {
        id: id.clone(),
        reason,
    };
    let file = match open_nonblocking(dir, name) {
        Ok(f) => f,
        // Pruned meanwhile: nothing to list (and nothing a leftover sweep can remove).
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Found::Incomplete,
        Err(e) => return Found::Damaged(corrupt(format!("unreadable: {e}"))),
    };
    let meta = match packed::read_record(&file) {
        Ok((meta, _)) => meta,
        Err(packed::Unread::Incomplete(_)) => return Found::Incomplete,
        // A trailer is there: a version, maybe damaged, never a leftover to sweep.
        Err(packed::Unread::Damaged(reason)) => return Found::Damaged(corrupt(reason)),
    };
    let at = match layout::parse_ts(&meta.ts) {
        Ok(at) => at,
        Err(e) => return Found::Damaged(corrupt(e.to_string())),
    };
    if meta.format != 2
        || layout::compact_ts(at) != stem
        || layout::dir_name(&meta.path) != dir_name
        || layout::shard(&meta.path) != shard
    {
        return Found::Damaged(corrupt(format!(
            "record does not match its name ({} at {})",
            meta.path, meta.ts
        )));
    }
    Found::Version(Box::new(Version {
        dir: dir_name.to_owned(),
        stem: stem.to_owned(),
        at,
        meta,
        place: Place::Packed {
            shard: shard.to_owned(),
        },
    }))
}

/// Picks the version `at` designates among `versions` (sorted oldest first).
pub(crate) fn select<'v>(
    versions: &'v [Version],
    at: Option<&str>,
) -> Result<Option<&'v Version>, BackupError> {
    let Some(at) = at else {
        return Ok(versions.last());
    };
    let exact = versions
        .iter()
        .find(|v| v.stem == at || v.meta.ts == at || format!("{}/{}", v.dir, v.stem) == at);
    if exact.is_some() {
        return Ok(exact);
    }
    let t = layout::parse_ts(at)?;
    Ok(versions.iter().rev().find(|v| v.at <= t))
}

#[cfg(test)]
mod tests {
    use super::Course;

    fn visited(from: Option<&str>, names: &[&str]) -> Vec<String> {
        let mut shards: Vec<String> = names.iter().map(|s| (*s).to_owned()).collect();
        let course = Course {
            from: from.map(str::to_owned),
            stop: None,
        };
        course.order(&mut shards);
        shards
    }

    /// A course goes through the shards in name order from its start, round to the one
    /// before it; a start that names no shard present begins at the next one there is.
    #[test]
    fn a_course_goes_round_from_its_start() {
        let names = ["ff", "00", "7f", "3a", "80"];
        assert_eq!(visited(None, &names), ["00", "3a", "7f", "80", "ff"]);
        assert_eq!(visited(Some("7f"), &names), ["7f", "80", "ff", "00", "3a"]);
        assert_eq!(visited(Some("40"), &names), ["7f", "80", "ff", "00", "3a"]);
        assert_eq!(visited(Some("00"), &names), ["00", "3a", "7f", "80", "ff"]);
        let short = ["00", "3a"];
        assert_eq!(visited(Some("ff"), &short), ["00", "3a"]);
    }
}
