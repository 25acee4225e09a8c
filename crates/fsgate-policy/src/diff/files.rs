//! `policy diff --workspace`: the files whose content one policy refuses and the other
//! lets through, scanned with both policies' content rules.

use std::io::Read;
use std::path::Path;

use super::item::{Direction, Item};
use crate::full_decision::{decide_with_content, shown};
use crate::{EntryKind, OpClass, Policy};
use fsgate_base::path::RelPath;

/// What the scan did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub(crate) struct FileScan {
    /// Files whose content was scanned.
    pub scanned: usize,
    /// Files not scanned: over both policies' read limits (or [`SCAN_CEILING`]),
    /// unreadable or not regular.
    pub skipped: usize,
    /// One item per file and direction (`content-file` area).
    pub items: Vec<Item>,
}

/// Files larger than this are not scanned, whatever the read limits (memory stays bounded
/// when a policy raises them far).
pub(super) const SCAN_CEILING: u64 = 64 << 20;

/// For every file in `paths` (beneath `root`) no larger than the larger read limit (and
/// [`SCAN_CEILING`]),
/// decides read and write of its content under both policies; a file is listed when the
/// effect differs and a content rule made one of the two decisions (path-only changes
/// are already decision items).
///
/// # Ambient Authority
/// Reads files beneath `root` from the ambient filesystem (an authoring tool).
pub(crate) fn content_files(
    old: &Policy,
    new: &Policy,
    root: &Path,
    paths: &[(RelPath, EntryKind)],
) -> FileScan {
    let mut scan = FileScan::default();
    if old.content_scanner().is_none() && new.content_scanner().is_none() {
        return scan;
    }
    // What any door may read: a model's limit, or a process's through the view.
    let readable = |p: &Policy| {
        p.limits()
            .max_read_bytes
            .max(p.limits().max_process_file_bytes)
    };
    let limit = readable(old).max(readable(new)).min(SCAN_CEILING);
    for (rel, _) in paths.iter().filter(|(_, k)| *k == EntryKind::File) {
        let Some(bytes) = read_bounded(&root.join(rel.as_str()), limit) else {
            scan.skipped += 1;
            continue;
        };
        scan.scanned += 1;
        compare_file(old, new, rel, &bytes, &mut scan.items);
    }
    scan
}

/// The file's bytes, or None if it is not a regular file (symlinks are not followed),
/// cannot be read, or holds more than `limit` bytes (checked while reading, so a file
/// growing meanwhile stays bounded).
fn read_bounded(path: &Path, limit: u64) -> Option<Vec<u8>> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() || meta.len() > limit {
        return None;
    }
    let mut buf = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    let f = std::fs::File::open(path).ok()?;
    f.take(limit.saturating_add(1)).read_to_end(&mut buf).ok()?;
    (buf.len() as u64 <= limit).then_some(buf)
}

fn compare_file(old: &Policy, new: &Policy, rel: &RelPath, bytes: &[u8], out: &mut Vec<Item>) {
    let mut by_dir: Vec<(Direction, Vec<&str>, String, String)> = Vec::new();
    for op in [OpClass::Read, OpClass::Write] {
        let a = decide_with_content(old, op, rel, EntryKind::File, Some(bytes));
        let b = decide_with_content(new, op, rel, EntryKind::File, Some(bytes));
        let by_content = a.rule.starts_with("content:") || b.rule.starts_with("content:");
        if a.effect == b.effect || !by_content {
            continue;
        }
        let d = Direction::wider(b.effect.weight() < a.effect.weight());
        match by_dir.iter_mut().find(|x| x.0 == d) {
            Some(x) => x.1.push(op.as_str()),
            None => by_dir.push((d, vec![op.as_str()], shown(&a), shown(&b))),
        }
    }
    for (d, ops, was, now) in by_dir {
        let subject = format!("{} ({})", rel.as_str(), ops.join(", "));
        out.push(Item::new(d, "content-file", subject, was, now));
    }
}
