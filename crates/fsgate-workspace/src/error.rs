//! [`WsError`]: why a workspace operation failed.

use std::io;

use fsgate_base::path::RelPath;

/// Why a workspace operation failed, before it is mapped to a protocol error.
#[derive(Debug, thiserror::Error)]
pub enum WsError {
    /// Nothing at that path.
    #[error("no such file or directory")]
    NotFound,
    /// A symlink leads outside the workspace (or is dangling, or loops).
    #[error("a symlink on this path leads outside the workspace or nowhere")]
    SymlinkEscape,
    /// A symlink (or, for a new file, a file) appeared on an already-resolved path
    /// during the request.
    #[error("the path changed during the request (a symlink or file appeared)")]
    Raced,
    /// The file at a write's name is no longer the one its backup saved: another write,
    /// or a program outside, replaced it meanwhile.
    #[error(
        "the file was replaced after its backup was taken; nothing was changed (read it again and retry)"
    )]
    Replaced,
    /// A regular file with more than one hard link (it may be a link to a file outside).
    #[error("file has {0} hard links; files with more than one are refused")]
    HardLink(u64),
    /// A FIFO, socket or device.
    #[error("not a regular file or directory ({0})")]
    Special(&'static str),
    /// Expected a file, found a directory.
    #[error("is a directory")]
    IsDir,
    /// Expected a directory.
    #[error("is not a directory")]
    NotDir,
    /// A directory that is not empty (and recursive was not asked).
    #[error("directory is not empty (pass recursive to remove it)")]
    NotEmpty,
    /// The target exists already.
    #[error("already exists")]
    Exists,
    /// Larger than the limit.
    #[error("{size} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        /// Size seen (or at least this many).
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// A name that is not valid UTF-8 cannot be expressed on the wire.
    #[error("a name on this path is not valid UTF-8")]
    NotUtf8,
    /// A rename the kernel refused with EXDEV: its two ends are on different filesystems
    /// (a mount inside the workspace), or, under Landlock ABI 1 (no Refer right), in
    /// different directories.
    #[error(
        "the kernel refused the rename (EXDEV: the two paths are on different filesystems, or in different directories under Landlock ABI 1); a rename cannot cross filesystems; copy and remove instead"
    )]
    CrossDirRename,
    /// The operating system refused access: file permissions, or the kernel sandbox
    /// (Landlock) fsgate runs under.
    #[error("the operating system refused access (file permissions or fsgate's kernel sandbox)")]
    OsDenied,
    /// A name or the whole path is longer than the filesystem allows.
    #[error("a name on this path, or the path itself, is too long for the filesystem")]
    NameTooLong,
    /// A directory deeper than the walk inspects: a change of the tree is refused.
    #[error(
        "`{at}` lies {limit} levels below the start and is not empty: fsgate inspects at most {limit} levels, so it will not change this tree"
    )]
    TooDeep {
        /// The first directory not entered.
        at: RelPath,
        /// The depth limit.
        limit: usize,
    },
    /// An entry appeared or changed after the tree was inspected (and backed up).
    #[error(
        "`{0}` appeared or changed after the tree was inspected; the removal stopped before it (what was removed had been checked and backed up)"
    )]
    Unseen(RelPath),
    /// A rename that never replaces found something at its destination.
    #[error("the destination already exists, and this move never replaces it")]
    DestinationExists,
    /// The filesystem (or kernel) cannot rename without replacing (`RENAME_NOREPLACE`).
    #[error(
        "this filesystem cannot rename without replacing (no RENAME_NOREPLACE); nothing was moved"
    )]
    NoReplaceUnsupported,
    /// Any other I/O error.
    #[error("{0}")]
    Io(#[from] io::Error),
}

impl WsError {
    /// Classifies an I/O error from an open/stat/rename.
    pub(crate) fn from_io(e: io::Error) -> WsError {
        match e.raw_os_error() {
            Some(libc_enoent) if libc_enoent == rustix::io::Errno::NOENT.raw_os_error() => {
                WsError::NotFound
            }
            Some(c) if c == rustix::io::Errno::LOOP.raw_os_error() => WsError::Raced,
            Some(c) if c == rustix::io::Errno::XDEV.raw_os_error() => WsError::SymlinkEscape,
            Some(c) if c == rustix::io::Errno::NOTDIR.raw_os_error() => WsError::NotDir,
            Some(c) if c == rustix::io::Errno::ISDIR.raw_os_error() => WsError::IsDir,
            Some(c) if c == rustix::io::Errno::NOTEMPTY.raw_os_error() => WsError::NotEmpty,
            Some(c) if c == rustix::io::Errno::EXIST.raw_os_error() => WsError::Exists,
            // open(2) of a Unix socket (or a device with no driver) fails with ENXIO.
            Some(c) if c == rustix::io::Errno::NXIO.raw_os_error() => {
                WsError::Special("a socket or device")
            }
            Some(c) if c == rustix::io::Errno::NAMETOOLONG.raw_os_error() => WsError::NameTooLong,
            Some(c)
                if c == rustix::io::Errno::ACCESS.raw_os_error()
                    || c == rustix::io::Errno::PERM.raw_os_error() =>
            {
                WsError::OsDenied
            }
            _ if e.kind() == io::ErrorKind::NotFound => WsError::NotFound,
            _ => WsError::Io(e),
        }
    }
}
