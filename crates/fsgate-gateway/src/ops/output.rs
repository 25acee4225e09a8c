//! What an operation produces, and the small types its arguments and results share.

use fsgate_base::path::RelPath;

use fsgate_workspace::{Entry, GrepMatch, StatInfo};

/// What the filesystem view opens a file for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenAccess {
    /// Reading.
    Read,
    /// Writing, from empty (`O_TRUNC`): nothing is read.
    Write,
    /// Writing what it holds (or reading and writing).
    ReadWrite,
}

impl OpenAccess {
    /// Its name in records (`args.access`; a read names none).
    pub fn as_str(self) -> &'static str {
        match self {
            OpenAccess::Read => "read",
            OpenAccess::Write => "write",
            OpenAccess::ReadWrite => "read-write",
        }
    }
}

/// Content returned by `read_file`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// The content is the text itself.
    Utf8,
    /// The content is base64 of the bytes.
    Base64,
}

impl Encoding {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::Utf8 => "utf-8",
            Encoding::Base64 => "base64",
        }
    }
}

/// What an operation produced; transports render paths in their own style.
#[derive(Debug, Clone)]
pub enum Output {
    /// Text content (`read_text_file`).
    Text(String),
    /// File content with its encoding (`read_file`).
    File {
        /// Text or base64.
        content: String,
        /// Which.
        encoding: Encoding,
    },
    /// Nothing (writes, mkdir, rm, rename, edit).
    Unit,
    /// Directory entries (`ls`), already filtered by the policy.
    Entries {
        /// The entries, in name order.
        entries: Vec<Entry>,
        /// The list stopped (at a page's end or the message limit): there are more.
        truncated: bool,
        /// Where the next page starts (the last entry's name), for a paged listing
        /// that stopped.
        next: Option<String>,
    },
    /// Metadata (`stat`).
    Stat {
        /// The path as resolved lexically.
        path: RelPath,
        /// The metadata.
        info: StatInfo,
    },
    /// Matching paths (`glob`).
    Paths {
        /// The paths, in walk order.
        paths: Vec<RelPath>,
        /// The list stopped at the message limit: there are more.
        truncated: bool,
    },
    /// A file opened for reading (`open`), shared by the view's handles.
    Opened(std::sync::Arc<std::fs::File>),
    /// Grep hits.
    Grep {
        /// The hits, in walk order.
        hits: Vec<GrepMatch>,
        /// The list stopped at the message limit: there are more.
        truncated: bool,
    },
}

impl Output {
    /// The output with `f` applied to every path in it (several workspaces: each
    /// path gets its workspace's name in front).
    pub(crate) fn map_paths(self, f: impl Fn(RelPath) -> RelPath) -> Output {
        match self {
            Output::Entries {
                entries,
                truncated,
                next,
            } => Output::Entries {
                entries: entries
                    .into_iter()
                    .map(|mut e| {
                        e.path = f(std::mem::take(&mut e.path));
                        e
                    })
                    .collect(),
                truncated,
                next,
            },
            Output::Stat { path, info } => Output::Stat {
                path: f(path),
                info,
            },
            Output::Paths { paths, truncated } => Output::Paths {
                paths: paths.into_iter().map(f).collect(),
                truncated,
            },
            Output::Grep { hits, truncated } => Output::Grep {
                hits: hits
                    .into_iter()
                    .map(|mut h| {
                        h.path = f(std::mem::take(&mut h.path));
                        h
                    })
                    .collect(),
                truncated,
            },
            other => other,
        }
    }

    /// A complete list of paths.
    pub fn paths(paths: Vec<RelPath>) -> Output {
        Output::Paths {
            paths,
            truncated: false,
        }
    }
}
