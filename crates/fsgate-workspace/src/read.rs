//! Reading files and metadata: open, then check what was opened.

use super::kind::FileKind;
use std::fs::{File, Metadata};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::time::SystemTime;

use super::open::{OpenKind, open_beneath};
use crate::error::WsError;
use crate::root::Workspace;
use fsgate_base::path::RelPath;

/// Bytes read from a file, with the metadata of the opened descriptor.
#[derive(Debug)]
pub struct FileContent {
    /// The content (at most the limit).
    pub bytes: Vec<u8>,
}

/// What `stat` reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatInfo {
    /// What the entry is (a final symlink not followed).
    pub kind: FileKind,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, RFC 3339 UTC.
    pub modified: Option<String>,
    /// `rwxr-xr-x` form of the permission bits.
    pub permissions: String,
    /// Hard links to the inode (a regular file with more than one may be a link to a
    /// file outside the workspace).
    pub nlink: u64,
    /// Mode bits (type and permissions).
    pub mode: u32,
    /// Modification, last access and birth times; None where the platform or file
    /// system does not give one (birth time: statx without `STATX_BTIME`).
    pub times: [Option<SystemTime>; 3],
    /// The inode number, owner, group and status-change time, as `stat(2)` gives them
    /// (a filesystem view reports the real ones: git compares them).
    pub ino: u64,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Status change time (seconds, nanoseconds).
    pub ctime: (i64, i64),
    /// Where a symlink leads, as its target is written (only from
    /// [`Workspace::lstat`](crate::Workspace::lstat), which does not follow it).
    pub target: Option<std::path::PathBuf>,
}

impl Workspace {
    /// Opens a regular file with a single hard link for reading. The checks are on the
    /// opened descriptor, so a swap between check and open cannot win.
    pub fn open_regular(&self, real: &RelPath) -> Result<(File, Metadata), WsError> {
        let file = open_beneath(&self.root, real, OpenKind::ReadFile).map_err(WsError::from_io)?;
        let meta = file.metadata()?;
        check_regular(&meta)?;
        Ok((file, meta))
    }

    /// Reads a whole regular file of at most `limit` bytes.
    pub fn read_file(&self, real: &RelPath, limit: u64) -> Result<FileContent, WsError> {
        self.read_file_sized(real, limit, |_| {})
    }

    /// [`read_file`](Self::read_file), telling `sized` the file's size (from the fstat
    /// of the opened file) before its content is read: the gateway holds budget for it.
    pub fn read_file_sized(
        &self,
        real: &RelPath,
        limit: u64,
        sized: impl FnOnce(u64),
    ) -> Result<FileContent, WsError> {
        let (file, meta) = self.open_regular(real)?;
        read_checked(file, &meta, limit, sized)
    }

    /// Opens `rel` for reading if it exists and no component of it is a symlink (one
    /// `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`): then `rel` is its own real
    /// path, as [`resolve`](Self::resolve) would find, and this open can serve the read,
    /// instead of one open to resolve and another to read. None on any failure (a
    /// symlink, a missing name, no permission, an old kernel): resolve as usual, which
    /// also gives the errors.
    #[cfg(target_os = "linux")]
    pub fn open_plain(&self, rel: &RelPath) -> Option<File> {
        use rustix::fs::{Mode, OFlags, ResolveFlags, openat2};
        let resolve =
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        let flags = OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::RDONLY | OFlags::NONBLOCK;
        openat2(&self.root, rel.as_fs_path(), flags, Mode::empty(), resolve)
            .ok()
            .map(File::from)
    }

    #[cfg(not(target_os = "linux"))]
    pub fn open_plain(&self, _rel: &RelPath) -> Option<File> {
        None
    }

    /// [`read_file_sized`](Self::read_file_sized) of a file [`open_plain`](Self::open_plain)
    /// opened: the same checks on the descriptor (a regular file, one link), the same read.
    pub fn read_opened(
        &self,
        file: File,
        limit: u64,
        sized: impl FnOnce(u64),
    ) -> Result<FileContent, WsError> {
        let meta = file.metadata()?;
        check_regular(&meta)?;
        read_checked(file, &meta, limit, sized)
    }

    /// Metadata of the entry at `real` (following nothing: `real` is canonical).
    pub fn stat(&self, real: &RelPath) -> Result<StatInfo, WsError> {
        let file = open_beneath(&self.root, real, OpenKind::Path).map_err(WsError::from_io)?;
        let meta = file.metadata()?;
        Ok(stat_info(&meta))
    }
}

/// Reads the whole of `file` (checked: `meta` is its fstat) if at most `limit` bytes.
fn read_checked(
    file: File,
    meta: &Metadata,
    limit: u64,
    sized: impl FnOnce(u64),
) -> Result<FileContent, WsError> {
    sized(meta.len().min(limit));
    if meta.len() > limit {
        return Err(WsError::TooLarge {
            size: meta.len(),
            limit,
        });
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // Read one byte past the limit: the file may have grown since fstat. (Not cut at
    // the fstat size: a filesystem may say less than it holds, and an edit would then
    // write back a cut file.)
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(WsError::TooLarge {
            size: bytes.len() as u64,
            limit,
        });
    }
    Ok(FileContent { bytes })
}

/// Refuses anything but a regular file with exactly one hard link.
pub(crate) fn check_regular(meta: &Metadata) -> Result<(), WsError> {
    let ft = meta.file_type();
    if ft.is_dir() {
        return Err(WsError::IsDir);
    }
    if !ft.is_file() {
        return Err(WsError::Special(special_name(&ft)));
    }
    if meta.nlink() > 1 {
        return Err(WsError::HardLink(meta.nlink()));
    }
    Ok(())
}

fn special_name(ft: &std::fs::FileType) -> &'static str {
    if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_block_device() || ft.is_char_device() {
        "a device file"
    } else if ft.is_symlink() {
        "a symlink"
    } else {
        "a special file"
    }
}

pub(crate) fn stat_info(meta: &Metadata) -> StatInfo {
    let ft = meta.file_type();
    StatInfo {
        kind: FileKind::from_predicates(ft.is_file(), ft.is_dir(), ft.is_symlink()),
        size: meta.len(),
        modified: meta.modified().ok().map(format_time),
        permissions: format_permissions(meta.mode()),
        nlink: meta.nlink(),
        mode: meta.mode(),
        times: [
            meta.modified().ok(),
            meta.accessed().ok(),
            meta.created().ok(),
        ],
        ino: meta.ino(),
        uid: meta.uid(),
        gid: meta.gid(),
        ctime: (meta.ctime(), meta.ctime_nsec()),
        target: None,
    }
}

/// RFC 3339 UTC with sub-second precision.
pub(crate) fn format_time(t: SystemTime) -> String {
    let dt = time::OffsetDateTime::from(t);
    dt.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| String::from("1970-01-01T00:00:00Z"))
}

/// `rw-r--r--` from mode bits.
pub fn format_permissions(mode: u32) -> String {
    let bits = [
        (0o400, 'r'),
        (0o200, 'w'),
        (0o100, 'x'),
        (0o040, 'r'),
        (0o020, 'w'),
        (0o010, 'x'),
        (0o004, 'r'),
        (0o002, 'w'),
        (0o001, 'x'),
    ];
    bits.iter()
        .map(|(b, c)| if mode & b != 0 { *c } else { '-' })
        .collect()
}

/// Binary = a NUL byte in the first 8 KiB, or not valid UTF-8.
pub fn is_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(8192)].contains(&0) || std::str::from_utf8(bytes).is_err()
}

/// Where the window of `text` starting at 1-based `line`, `limit` lines long, lies in
/// `text`, in bytes (on line ends, so always on character boundaries). A window past the
/// end is empty.
pub fn text_window_range(
    text: &str,
    line: Option<u64>,
    limit: Option<u64>,
) -> std::ops::Range<usize> {
    let skip = usize::try_from(line.unwrap_or(1).max(1) - 1).unwrap_or(usize::MAX);
    let before: usize = text.split_inclusive('\n').take(skip).map(str::len).sum();
    let rest = &text[before..];
    let len = match limit {
        None => rest.len(),
        Some(l) => {
            let take = usize::try_from(l).unwrap_or(usize::MAX);
            rest.split_inclusive('\n').take(take).map(str::len).sum()
        }
    };
    before..before + len
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_window(text: &str, line: Option<u64>, limit: Option<u64>) -> &str {
        &text[text_window_range(text, line, limit)]
    }

    #[test]
    fn windows() {
        let t = "a\nb\nc\n";
        assert_eq!(text_window(t, None, None), t);
        assert_eq!(text_window(t, Some(2), None), "b\nc\n");
        assert_eq!(text_window(t, Some(2), Some(1)), "b\n");
        assert_eq!(text_window(t, Some(1), Some(2)), "a\nb\n");
        assert_eq!(text_window(t, Some(3), Some(5)), "c\n");
        assert_eq!(text_window(t, Some(4), None), "");
        assert_eq!(text_window(t, Some(9), Some(2)), "");
        assert_eq!(text_window("a\nb", Some(2), Some(1)), "b");
        assert_eq!(text_window("a\nb", Some(1), Some(0)), "");
        assert_eq!(text_window("", Some(1), Some(3)), "");
    }

    #[test]
    fn a_plain_open_serves_exactly_the_paths_resolve_leaves_as_they_are() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::create_dir_all(p.join("a")).unwrap();
        std::fs::write(p.join("a/f.txt"), "text").unwrap();
        std::fs::write(p.join("two"), "x").unwrap();
        std::fs::hard_link(p.join("two"), p.join("a/link")).unwrap();
        std::os::unix::fs::symlink("a", p.join("la")).unwrap();
        std::os::unix::fs::symlink("f.txt", p.join("a/lf")).unwrap();
        let ws = Workspace::open(p).unwrap();
        let rel = |s: &str| RelPath::parse_rooted(s).unwrap();
        let read = |s: &str| {
            ws.open_plain(&rel(s))
                .map(|f| ws.read_opened(f, 100, |_| {}))
        };
        // No symlink: opened, and read as read_file reads it.
        assert_eq!(read("a/f.txt").unwrap().unwrap().bytes, b"text");
        assert!(matches!(read("a").unwrap(), Err(WsError::IsDir)));
        assert!(matches!(read("a/link").unwrap(), Err(WsError::HardLink(2))));
        assert!(matches!(
            ws.open_plain(&rel("a/f.txt"))
                .map(|f| ws.read_opened(f, 2, |_| {})),
            Some(Err(WsError::TooLarge { size: 4, limit: 2 }))
        ));
        // A symlink anywhere, or nothing there: not opened (the caller resolves).
        for s in ["la/f.txt", "a/lf", "la", "missing", "a/f.txt/x"] {
            assert!(ws.open_plain(&rel(s)).is_none(), "{s}");
        }
    }

    #[test]
    fn permissions() {
        assert_eq!(format_permissions(0o644), "rw-r--r--");
        assert_eq!(format_permissions(0o755), "rwxr-xr-x");
    }

    #[test]
    fn binary() {
        assert!(is_binary(b"a\0b"));
        assert!(is_binary(&[0xff, 0xfe]));
        assert!(!is_binary("héllo\n".as_bytes()));
    }
}
