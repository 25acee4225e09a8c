//! A change as the log tells it: what it changed (and what it replaced or removed,
//! with the backups made of it), and each path's touches by whoever made them.

/// A backup a change made of what it replaced or removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Saved {
    /// The backup's id, as the log names it.
    pub id: String,
    /// The SHA-256 the intent says the replaced content had (`args.oldSha256`).
    pub sha256: Option<String>,
}

/// What a content change's path held before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Before {
    /// Nothing: the change created the file.
    Absent,
    /// A file, saved in this backup.
    Saved(Saved),
    /// A file that was changed without a backup (`[backup] on_limit`).
    Unsaved,
}

/// What a removal removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removed {
    /// A regular file.
    File,
    /// A directory, with everything beneath it.
    Dir,
    /// A symbolic link or special file: fsgate keeps no copy of those.
    Link,
    /// The record does not say (a log written before `args.removed` existed).
    Unknown,
}

/// One change, as its intent recorded it; paths are where the change really was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum What {
    /// `write_text_file`, `edit_text_file`, `restore`: `path` holds `sha256` afterwards.
    Content {
        /// The file.
        path: String,
        /// SHA-256 of the content it wrote.
        sha256: String,
        /// What the file was before.
        before: Before,
        /// Parent directories it made (`args.madeDirs`).
        made_dirs: usize,
    },
    /// `mkdir`: `path` and `made - 1` parents made.
    Mkdir {
        /// The directory.
        path: String,
        /// Directories made, the last one `path` itself.
        made: usize,
    },
    /// `rm`: `path` removed, every file in it saved in `backups`.
    Remove {
        /// What was removed.
        path: String,
        /// What it was.
        removed: Removed,
        /// The backups made of its files.
        backups: Vec<String>,
        /// Directories beneath that held neither a file nor a directory.
        leaf_dirs: Vec<String>,
        /// Files removed without a backup (`[backup] on_limit`).
        unsaved: usize,
        /// The SHA-256 of the one file removed, when it was one (`args.oldSha256`).
        sha256: Option<String>,
    },
    /// `rename`: `from` moved to `to`, replacing what `to` held (saved in `replaced`,
    /// or the link `replaced_link`).
    Rename {
        /// The source.
        from: String,
        /// The target.
        to: String,
        /// The backup of the file the move replaced at `to`.
        replaced: Option<Before>,
        /// Where the moved entry led, when it was a symbolic link (`args.target`).
        link: Option<String>,
        /// Where the link the move replaced at `to` led (`args.oldTarget`).
        replaced_link: Option<String>,
    },
    /// `chmod`: `path`'s permission bits set from `old` to `new`.
    Chmod {
        /// The file or directory.
        path: String,
        /// Its bits before (`args.oldMode`).
        old: u32,
        /// The bits set (`args.mode`).
        new: u32,
    },
    /// `utimes`: `path`'s times set; the times before (`args.oldAtime`,
    /// `args.oldMtime`, nanoseconds since the epoch).
    Utimes {
        /// The file or directory.
        path: String,
        /// Its access time before.
        atime: i64,
        /// Its modification time before.
        mtime: i64,
    },
    /// `symlink`: the link `path` made.
    Symlink {
        /// The link.
        path: String,
    },
}

impl What {
    /// The paths the change touched.
    pub fn paths(&self) -> Vec<&str> {
        match self {
            What::Content { path, .. }
            | What::Mkdir { path, .. }
            | What::Remove { path, .. }
            | What::Chmod { path, .. }
            | What::Utimes { path, .. }
            | What::Symlink { path } => vec![path],
            What::Rename { from, to, .. } => vec![from, to],
        }
    }
}

/// A change that was made (its outcome `ok`, or found applied after a crash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Its place among every change of the log, in the order they were made.
    pub order: usize,
    /// Which chain of the log.
    pub chain: usize,
    /// The seq of its intent.
    pub seq: u64,
    /// When its intent was recorded.
    pub ts: String,
    /// The session that made it.
    pub session: String,
    /// What it did.
    pub what: What,
    /// Later changes of the same file folded into this one (see `plan::fold`).
    pub folded: usize,
}

/// A change of a path by anyone: who, and where in the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Touch {
    /// Its place among every change of the log.
    pub order: usize,
    /// Which chain.
    pub chain: usize,
    /// The seq of its intent.
    pub seq: u64,
    /// The session that made it.
    pub session: String,
    /// Made by `fsgate undo` itself: recorded by the command line (transport `cli`,
    /// which no door writes) with `args.undo`. Never read from the session id, which
    /// an agent chooses.
    pub by_undo: bool,
}
