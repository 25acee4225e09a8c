//! The workspace: every filesystem operation, through one `cap_std::fs::Dir` on the root.
//!
//! # Layer
//!
//! Owns: every filesystem operation on a workspace, beneath one root handle. Depends on
//! `fsgate-base` only. May not touch: the policy (it never decides what is allowed:
//! the gateway asks before it calls), the audit log, the backups.
//!
//! No `std::fs` call here ever receives a path from a request: paths are resolved
//! beneath the root handle (cap-std, openat2 `RESOLVE_BENEATH`), and what was opened is
//! checked by type (regular file, one hard link) on the open descriptor.

mod atomic;
mod chmod;
mod dir_cache;
mod dir_sync;
mod gather;
mod kind;
mod open;
mod page;
mod permits;
mod read;
mod remove;
mod resolve;
mod search;
mod search_pool;
pub mod spare;
mod symlink;
pub mod sync_pool;
mod temp_name;
mod unnamed;
mod walk;
mod write;

use std::io;
use std::path::{Path, PathBuf};

use cap_std::fs::Dir;

use fsgate_base::path::RelPath;

pub use atomic::move_into_place;
pub use dir_sync::sync_dir_shared;
pub use gather::{Cut, Gathered, Reading, Room, Take, Tally};
pub use kind::FileKind;
pub use open::open_dir_no_links;
pub use page::{Page, PageSpec};
pub use read::{FileContent, StatInfo, format_permissions, is_binary, text_window};
pub use resolve::{Follow, Resolved};
pub use search::{ContentGate, GrepMatch, GrepOptions, GrepOutcome, IncludeGlob, json_string_len};
pub use symlink::MAX_TARGET_BYTES;
pub use temp_name::{TempName, is_own_temp};
pub use walk::{Entry, MAX_DEPTH, Visit, Walked, height};
pub use write::{EntrySync, EntrySyncing, Removal, Replace, StagedWrite};

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
    /// A cross-directory rename refused by the kernel (Landlock ABI 1 has no Refer right).
    #[error(
        "cross-directory rename refused by the kernel sandbox (Landlock ABI 1 lacks the Refer right); rename within one directory instead"
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

/// The workspace root: one capability handle, opened once at start-up.
#[derive(Debug)]
pub struct Workspace {
    /// Every operation resolves beneath this handle.
    root: Dir,
    /// The canonical absolute root path, to turn request paths into relative ones.
    root_path: PathBuf,
    /// The root as the operator named it, when that differs from the canonical path
    /// (a symlinked directory such as `/home/me/proj` -> `/data/proj`): requests naming
    /// the root this way are accepted too, since editors send the path they were given.
    alias: Option<String>,
}

impl Workspace {
    /// Opens the workspace root.
    ///
    /// # Ambient Authority
    /// Canonicalises and opens `path` from the ambient filesystem; start-up code only.
    pub fn open(path: &Path) -> io::Result<Workspace> {
        let root_path = std::fs::canonicalize(path)?;
        if !root_path.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not a directory", root_path.display()),
            ));
        }
        let root = Dir::open_ambient_dir(&root_path, cap_std::ambient_authority())?;
        let alias = std::path::absolute(path)
            .ok()
            .and_then(|p| p.to_str().map(str::to_string))
            .and_then(|p| fsgate_base::path::RelPath::parse_rooted(&p).ok())
            .map(|rel| format!("/{}", rel.as_str()))
            .filter(|a| Path::new(a) != root_path);
        Ok(Workspace {
            root,
            root_path,
            alias,
        })
    }

    /// The canonical absolute path of the root.
    pub fn root_path(&self) -> &Path {
        &self.root_path
    }

    /// `input` with the operator's name for the root (see [`Workspace::open`]) replaced
    /// by the canonical root, so that both name the same workspace. Lexical only.
    pub fn dealias<'a>(&self, input: &'a str) -> std::borrow::Cow<'a, str> {
        if let Some(alias) = &self.alias
            && let Some(rest) = input.strip_prefix(alias.as_str())
            && (rest.is_empty() || rest.starts_with('/'))
        {
            return std::borrow::Cow::Owned(format!("{}{rest}", self.root_path.display()));
        }
        std::borrow::Cow::Borrowed(input)
    }

    /// The root handle (for Landlock rules bound to the same descriptor).
    pub fn root_dir(&self) -> &Dir {
        &self.root
    }
}
