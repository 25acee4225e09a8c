//! What the undo looks at and acts on: the workspace itself (each action a request
//! through the gateway), or for `--dry-run` a model of it, the disk as it is with the
//! actions laid over it, so a dry run checks each step against the state the steps
//! before it would leave.
//!
//! Here: what a world answers and the actions it takes. The workspace: `real.rs`; the
//! model: `model.rs`; what both read (the workspace's handle, the backups): `sources.rs`.

use fsgate_backup::BackupRef;

/// Where a file's content is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// In the workspace file at this path (for a dry run: where it is on disk now).
    Disk(String),
    /// In this backup.
    Saved(String),
}

/// What a path holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// Nothing.
    Absent,
    /// A directory.
    Dir,
    /// A regular file.
    File(Content),
    /// A symbolic link or special file (or a path through one).
    Other,
}

/// One thing the undo does, each one request through the gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Write the content of backup `id` to `path` (parents made as needed).
    Put {
        /// The file.
        path: String,
        /// The backup.
        id: String,
    },
    /// Remove `path` (with all beneath it when `tree`; every file is backed up).
    Remove {
        /// What to remove.
        path: String,
        /// A directory with content.
        tree: bool,
    },
    /// Make the directory `path` and its missing parents.
    Mkdir {
        /// The directory.
        path: String,
    },
    /// Move `from` to `to` (making `to`'s missing parents first).
    Move {
        /// The source.
        from: String,
        /// The target.
        to: String,
        /// The next action writes `from` again (the content the move had replaced): so
        /// where the policy keeps `from` in place, `from`'s content may be written at
        /// `to` instead, which leaves the same tree.
        or_copy: bool,
    },
    /// Make the symbolic link `path` leading to `target`.
    Link {
        /// The link.
        path: String,
        /// Where it leads.
        target: String,
    },
    /// Set `path`'s access and modification times (nanoseconds since the epoch).
    Utimes {
        /// The file or directory.
        path: String,
        /// The access time.
        atime: i64,
        /// The modification time.
        mtime: i64,
    },
    /// Set `path`'s permission bits to `mode`.
    Chmod {
        /// The file or directory.
        path: String,
        /// The permission bits.
        mode: u32,
    },
}

/// The state the undo reads and changes.
pub trait World {
    /// What `path` holds now.
    fn node(&mut self, path: &str) -> Result<Node, String>;
    /// The permission bits of the file or directory `path` (None: nothing there).
    fn mode(&mut self, path: &str) -> Result<Option<u32>, String>;
    /// Whether the directory `path` holds nothing.
    fn is_empty_dir(&mut self, path: &str) -> Result<bool, String>;
    /// Does `action`.
    fn act(&mut self, action: &Action) -> Result<(), String>;
    /// SHA-256 (hex) of `c`.
    fn sha(&mut self, c: &Content) -> Result<String, String>;
    /// The record of backup `id`.
    fn saved(&mut self, id: &str) -> Result<BackupRef, String>;
    /// The bytes of `c`, if it holds at most `limit` (None: more).
    fn bytes(&mut self, c: &Content, limit: u64) -> Result<Option<Vec<u8>>, String>;
}
