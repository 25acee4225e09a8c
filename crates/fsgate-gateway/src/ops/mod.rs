//! The one internal operation type every transport translates into, and its results.

mod chmod;
pub use chmod::RULE_SET_ID;
mod edit;
mod glob;
mod grep;
mod ls;
mod mkdir;
mod open;
pub(crate) use open::CleanOpens;
mod read_file;
mod read_text;
mod rename;
mod rm;
mod stat;
mod symlink;
pub use symlink::{RULE_LINK_TARGET, target_refusal};
pub(crate) mod tree;
mod write;

use serde_json::{Map, Value};

/// The changes an intent record names (the audit log's own list).
pub use fsgate_audit::ChangeOp;
use fsgate_base::error::GatewayError;
use fsgate_base::path::RelPath;
use fsgate_policy::Policy;

use crate::Facts;
use crate::reconcile::{Disk, Found};
use crate::vcs::Step;

/// The workspace's entries, matches and metadata, as the results carry them; a door
/// encodes them from here (it does not reach into the workspace layer).
pub use fsgate_workspace::{Entry, FileKind, GrepMatch, StatInfo, format_permissions};

/// How a transport writes paths: what it accepts, and how results are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathStyle {
    /// ACP: absolute paths under the workspace root only.
    Absolute,
    /// MCP: absolute under the root, or relative to it; results absolute.
    AbsoluteOrRelative,
    /// WebSocket files channel: `/src/a.ts` is `<root>/src/a.ts`.
    Rooted,
}

/// Who is asking: carried into refusals and audit records.
#[derive(Debug, Clone)]
pub struct RequestCtx {
    /// The transport's path convention.
    pub style: PathStyle,
    /// The session id the request named (or the connection's).
    pub session: String,
    /// The door it came through: its name for the records, the shape of its answers.
    pub door: &'static crate::DoorSpec,
    /// pid/uid of the stdio peer, or the remote address.
    pub peer: String,
    /// The parts of the workspace the session may reach (MCP roots narrow it).
    pub scope: crate::Scope,
    /// Who to ask when an `ask` rule decides (None: the client cannot be asked).
    pub asker: Option<std::sync::Arc<dyn crate::ask::Asker>>,
    /// Who to tell of each change the gateway made (None: nobody).
    pub notifier: Option<std::sync::Arc<dyn crate::ChangeSink>>,
}

/// A `tree`'s exclude patterns recorded at most (`args.excludeCount` says how many).
pub(crate) const MAX_EXCLUDE_RECORDED: usize = 32;
/// The bytes a record gives a `tree`'s exclude patterns at most, as written (escapes
/// included): the first patterns that fit, at least one (cut if it is long).
const EXCLUDE_RECORDED_BYTES: usize = 4096;

/// How many of `exclude`'s first patterns the record keeps.
fn excludes_recorded(exclude: &[String]) -> usize {
    let mut total = 0;
    let fit = exclude
        .iter()
        .take(MAX_EXCLUDE_RECORDED)
        .take_while(|e| {
            total += fsgate_audit::cut::written_len(e);
            total <= EXCLUDE_RECORDED_BYTES
        })
        .count();
    fit.max(1).min(exclude.len())
}

/// One operation, with paths exactly as the request gave them.
#[derive(Debug, Clone)]
pub enum Op {
    /// `fs/read_text_file`: 1-based `line`, `limit` in lines.
    ReadText {
        /// Path as given.
        path: String,
        /// First line (1-based).
        line: Option<u64>,
        /// Number of lines.
        limit: Option<u64>,
    },
    /// `_fsgate/read_file`: text, or base64 for binary where the policy allows.
    ReadFile {
        /// Path as given.
        path: String,
    },
    /// `fs/write_text_file`: create or atomically replace.
    WriteText {
        /// Path as given.
        path: String,
        /// New content.
        content: String,
    },
    /// Write raw bytes (WebSocket base64 writes).
    WriteBytes {
        /// Path as given.
        path: String,
        /// New content.
        content: Vec<u8>,
    },
    /// `_fsgate/edit_text_file`: replace the single occurrence of `old_text`.
    Edit {
        /// Path as given.
        path: String,
        /// Text that must occur exactly once.
        old_text: String,
        /// Replacement.
        new_text: String,
    },
    /// `_fsgate/ls`: one page of a directory's entries.
    Ls {
        /// Directory as given.
        path: String,
        /// Only entries named after this (a previous page's `nextCursor`).
        cursor: Option<String>,
    },
    /// Names and kinds beneath a directory, without metadata (MCP `list_directory` and
    /// `directory_tree`): one request, one record, however many directories it holds.
    Tree {
        /// Directory as given.
        path: String,
        /// Levels to descend: 1 lists the directory itself.
        depth: usize,
        /// Globs, relative to `path`, of entries left out with all beneath them (a
        /// pattern without `*` also matches that name at any depth).
        exclude: Vec<String>,
        /// The list stops at this many entries, and says it was cut if there are more.
        max_entries: usize,
        /// With `depth` 1: only entries named after this (a previous page's cursor).
        cursor: Option<String>,
    },
    /// A file opened through the filesystem view (`fsgate run`): for reading, the
    /// read's decision, then the opened file ([`Output::Opened`]); for writing, the
    /// write's decision on the path first (its content is decided when it is written).
    Open {
        /// Path as given.
        path: String,
        /// What the file is opened for.
        access: OpenAccess,
    },
    /// `_fsgate/stat`.
    Stat {
        /// Path as given.
        path: String,
        /// A final symlink is followed (every door's `stat`); if not (the filesystem
        /// view's lookup, `lstat`), the link itself is stated, with its target.
        follow: bool,
    },
    /// `_fsgate/glob`.
    Glob {
        /// Pattern, relative to the root or absolute under it.
        pattern: String,
    },
    /// `_fsgate/grep`.
    Grep {
        /// Regex.
        pattern: String,
        /// File or directory to search (default: the root).
        path: Option<String>,
        /// Case-insensitive.
        ignore_case: bool,
        /// Only files matching this glob.
        include_glob: Option<String>,
        /// Stop after this many matches.
        max_results: Option<u64>,
    },
    /// `_fsgate/mkdir`.
    Mkdir {
        /// Directory as given.
        path: String,
        /// Create missing parents too.
        recursive: bool,
    },
    /// `_fsgate/rm`.
    Rm {
        /// Path as given.
        path: String,
        /// Remove directories with their content.
        recursive: bool,
    },
    /// `_fsgate/rename`.
    Rename {
        /// Source as given.
        from: String,
        /// Destination as given.
        to: String,
        /// May replace a file at the destination (kept as a backup); if not, the move
        /// is refused when anything is there, checked by the rename itself.
        replace: bool,
    },
    /// A file's or directory's permission bits (the filesystem view's chmod).
    Chmod {
        /// Path as given.
        path: String,
        /// The new permission bits (set-ID and sticky bits are refused).
        mode: u32,
    },
    /// A symbolic link made (the filesystem view's symlink).
    Symlink {
        /// The link's path as given.
        path: String,
        /// Where it leads, as the link will hold it (relative, within the workspace).
        target: String,
    },
}

/// Declares [`OpId`] and [`OpId::ALL`] from one list, so that the two cannot disagree.
macro_rules! op_ids {
    ($($(#[$doc:meta])* $variant:ident,)*) => {
        /// Which operation a request is, without its arguments. Every question about an
        /// operation's kind is answered by one `match` on this enum, so a new operation is
        /// listed by the compiler everywhere it must be decided (each door's decoder too).
        ///
        /// (`Default` only so that a request's `crate::Facts` can start empty;
        /// `Facts::new` sets the request's own.)
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        pub enum OpId {
            $($(#[$doc])* $variant,)*
        }

        impl OpId {
            /// Every operation, in declaration order: what a door searches to decode a
            /// method name it has mapped each operation to.
            pub const ALL: &'static [OpId] = &[$(OpId::$variant,)*];
        }
    };
}

op_ids! {
    /// [`Op::ReadText`]: `read_text.rs`.
    #[default]
    ReadText,
    /// [`Op::ReadFile`]: `read_file.rs`.
    ReadFile,
    /// [`Op::WriteText`] and [`Op::WriteBytes`]: `write.rs`.
    Write,
    /// [`Op::Edit`]: `edit.rs`.
    Edit,
    /// [`Op::Ls`]: `ls.rs`.
    Ls,
    /// [`Op::Tree`]: `tree.rs`.
    Tree,
    /// [`Op::Stat`]: `stat.rs`.
    Stat,
    /// [`Op::Open`]: `open.rs`.
    Open,
    /// [`Op::Glob`]: `glob.rs`.
    Glob,
    /// [`Op::Grep`]: `grep.rs`.
    Grep,
    /// [`Op::Mkdir`]: `mkdir.rs`.
    Mkdir,
    /// [`Op::Rm`]: `rm.rs`.
    Rm,
    /// [`Op::Rename`]: `rename.rs`.
    Rename,
    /// [`Op::Chmod`]: `chmod.rs`.
    Chmod,
    /// [`Op::Symlink`]: `symlink.rs`.
    Symlink,
}

impl OpId {
    /// The change the operation makes (what its intent record names, how a crash in
    /// the middle of it is reconciled and how it is staged), or `None` for a read.
    pub fn change(self) -> Option<ChangeOp> {
        match self {
            OpId::Write => Some(ChangeOp::Write),
            OpId::Edit => Some(ChangeOp::Edit),
            OpId::Mkdir => Some(ChangeOp::Mkdir),
            OpId::Rm => Some(ChangeOp::Rm),
            OpId::Rename => Some(ChangeOp::Rename),
            OpId::Chmod => Some(ChangeOp::Chmod),
            OpId::Symlink => Some(ChangeOp::Symlink),
            OpId::ReadText
            | OpId::ReadFile
            | OpId::Ls
            | OpId::Tree
            | OpId::Stat
            | OpId::Open
            | OpId::Glob
            | OpId::Grep => None,
        }
    }

    /// The operation's name in audit records.
    pub fn name(self) -> &'static str {
        match self {
            OpId::ReadText => "read_text_file",
            OpId::ReadFile => "read_file",
            OpId::Ls => "ls",
            OpId::Tree => "tree",
            OpId::Stat => "stat",
            OpId::Open => "open",
            OpId::Glob => "glob",
            OpId::Grep => "grep",
            OpId::Write => ChangeOp::Write.name(),
            OpId::Edit => ChangeOp::Edit.name(),
            OpId::Mkdir => ChangeOp::Mkdir.name(),
            OpId::Rm => ChangeOp::Rm.name(),
            OpId::Rename => ChangeOp::Rename.name(),
            OpId::Chmod => ChangeOp::Chmod.name(),
            OpId::Symlink => ChangeOp::Symlink.name(),
        }
    }

    /// Quick and read-only: a door may serve it in a batch, beside others, on the
    /// thread that reads the requests (it never walks a tree or waits for a person's
    /// answer to change something).
    pub fn is_quick_read(self) -> bool {
        match self {
            OpId::ReadText | OpId::ReadFile | OpId::Stat | OpId::Ls | OpId::Open => true,
            OpId::Tree
            | OpId::Glob
            | OpId::Grep
            | OpId::Write
            | OpId::Edit
            | OpId::Mkdir
            | OpId::Rm
            | OpId::Rename
            | OpId::Chmod
            | OpId::Symlink => false,
        }
    }
}

impl Op {
    /// Which operation this is.
    pub fn id(&self) -> OpId {
        match self {
            Op::ReadText { .. } => OpId::ReadText,
            Op::ReadFile { .. } => OpId::ReadFile,
            Op::WriteText { .. } | Op::WriteBytes { .. } => OpId::Write,
            Op::Edit { .. } => OpId::Edit,
            Op::Ls { .. } => OpId::Ls,
            Op::Tree { .. } => OpId::Tree,
            Op::Stat { .. } => OpId::Stat,
            Op::Open { .. } => OpId::Open,
            Op::Glob { .. } => OpId::Glob,
            Op::Grep { .. } => OpId::Grep,
            Op::Mkdir { .. } => OpId::Mkdir,
            Op::Rm { .. } => OpId::Rm,
            Op::Rename { .. } => OpId::Rename,
            Op::Chmod { .. } => OpId::Chmod,
            Op::Symlink { .. } => OpId::Symlink,
        }
    }

    /// The operation's name in audit records.
    pub fn name(&self) -> &'static str {
        self.id().name()
    }

    /// The paths and patterns the request gives, as given, each with what it is:
    /// `path`, `path2` (a rename's destination), `pattern`, `includeGlob`, `exclude`.
    pub(crate) fn path_texts(&self) -> Vec<(&'static str, &str)> {
        let mut out = Vec::with_capacity(2);
        match self {
            Op::ReadText { path, .. }
            | Op::ReadFile { path }
            | Op::WriteText { path, .. }
            | Op::WriteBytes { path, .. }
            | Op::Edit { path, .. }
            | Op::Ls { path, .. }
            | Op::Stat { path, .. }
            | Op::Open { path, .. }
            | Op::Mkdir { path, .. }
            | Op::Chmod { path, .. }
            | Op::Symlink { path, .. }
            | Op::Rm { path, .. } => out.push(("path", path.as_str())),
            Op::Tree { path, exclude, .. } => {
                out.push(("path", path.as_str()));
                out.extend(exclude.iter().map(|e| ("exclude", e.as_str())));
            }
            Op::Glob { pattern } => out.push(("pattern", pattern.as_str())),
            Op::Grep {
                pattern,
                path,
                include_glob,
                ..
            } => {
                out.push(("pattern", pattern.as_str()));
                out.extend(path.as_deref().map(|p| ("path", p)));
                out.extend(include_glob.as_deref().map(|g| ("includeGlob", g)));
            }
            Op::Rename { from, to, .. } => {
                out.push(("path", from.as_str()));
                out.push(("path2", to.as_str()));
            }
        }
        out
    }

    /// The texts that say where the operation acts, to choose its workspace when
    /// several are served: the path (a rename's source, a glob's pattern, a grep's
    /// path if it has one), and a rename's destination.
    pub(crate) fn places_mut(&mut self) -> (Option<&mut String>, Option<&mut String>) {
        match self {
            Op::ReadText { path, .. }
            | Op::ReadFile { path }
            | Op::WriteText { path, .. }
            | Op::WriteBytes { path, .. }
            | Op::Edit { path, .. }
            | Op::Ls { path, .. }
            | Op::Stat { path, .. }
            | Op::Open { path, .. }
            | Op::Mkdir { path, .. }
            | Op::Rm { path, .. }
            | Op::Chmod { path, .. }
            | Op::Symlink { path, .. }
            | Op::Tree { path, .. } => (Some(path), None),
            Op::Glob { pattern } => (Some(pattern), None),
            Op::Grep { path, .. } => (path.as_mut(), None),
            Op::Rename { from, to, .. } => (Some(from), Some(to)),
        }
    }

    /// True for operations that change the workspace.
    pub fn is_mutating(&self) -> bool {
        self.id().change().is_some()
    }

    /// The arguments that matter for the audit record (never content).
    pub(crate) fn audit_args(&self) -> Map<String, Value> {
        let mut m = Map::new();
        match self {
            Op::ReadText { line, limit, .. } => {
                if let Some(l) = line {
                    m.insert("line".into(), (*l).into());
                }
                if let Some(l) = limit {
                    m.insert("limit".into(), (*l).into());
                }
            }
            Op::Glob { pattern } => {
                m.insert("pattern".into(), pattern.clone().into());
            }
            Op::Grep {
                pattern,
                ignore_case,
                include_glob,
                max_results,
                ..
            } => {
                m.insert("pattern".into(), pattern.clone().into());
                m.insert("ignoreCase".into(), (*ignore_case).into());
                if let Some(g) = include_glob {
                    m.insert("includeGlob".into(), g.clone().into());
                }
                if let Some(n) = max_results {
                    m.insert("maxResults".into(), (*n).into());
                }
            }
            Op::Ls {
                cursor: Some(c), ..
            } => {
                m.insert("cursor".into(), c.clone().into());
            }
            Op::Tree {
                depth,
                exclude,
                cursor,
                ..
            } => {
                m.insert("depth".into(), (*depth).into());
                if let Some(c) = cursor {
                    m.insert("cursor".into(), c.clone().into());
                }
                if !exclude.is_empty() {
                    // The agent's list: its first patterns, and how many there were.
                    let shown = &exclude[..excludes_recorded(exclude)];
                    m.insert("exclude".into(), shown.to_vec().into());
                    if exclude.len() > shown.len() {
                        m.insert("excludeCount".into(), exclude.len().into());
                    }
                }
            }
            Op::Open { access, .. } => {
                if *access != OpenAccess::Read {
                    m.insert("access".into(), access.as_str().into());
                }
            }
            Op::Mkdir { recursive, .. } | Op::Rm { recursive, .. } => {
                m.insert("recursive".into(), (*recursive).into());
            }
            Op::Chmod { mode, .. } => {
                m.insert("mode".into(), chmod::octal(*mode).into());
            }
            Op::Symlink { target, .. } => {
                m.insert("target".into(), target.clone().into());
            }
            // Named only when false, so a replacing rename's record is as it always was.
            Op::Rename { replace: false, .. } => {
                m.insert("replace".into(), false.into());
            }
            Op::Ls { cursor: None, .. }
            | Op::ReadFile { .. }
            | Op::WriteText { .. }
            | Op::WriteBytes { .. }
            | Op::Edit { .. }
            | Op::Stat { .. }
            | Op::Rename { replace: true, .. } => {}
        }
        m
    }
}

impl crate::Gateway {
    /// Runs `op`: its policy checks and its work, in its own file.
    pub(crate) fn execute(
        &self,
        pol: &Policy,
        ctx: &RequestCtx,
        op: &Op,
        facts: &mut Facts,
    ) -> Result<Output, GatewayError> {
        match op {
            Op::ReadText { path, line, limit } => {
                self.read_text(pol, ctx, path, *line, *limit, facts)
            }
            Op::ReadFile { path } => self.read_file(pol, ctx, path, facts),
            Op::WriteText { path, content } => {
                self.write(pol, ctx, path, content.as_bytes(), facts)
            }
            Op::WriteBytes { path, content } => self.write(pol, ctx, path, content, facts),
            Op::Edit {
                path,
                old_text,
                new_text,
            } => self.edit(pol, ctx, path, old_text, new_text, facts),
            Op::Ls { path, cursor } => self.ls(pol, ctx, path, cursor.as_deref(), facts),
            Op::Tree {
                path,
                depth,
                exclude,
                max_entries,
                cursor,
            } => {
                let limits = (*depth, *max_entries, cursor.as_deref());
                self.tree(pol, ctx, path, limits, exclude, facts)
            }
            Op::Stat { path, follow } => self.stat(pol, ctx, path, *follow, facts),
            Op::Open { path, access } => self.open(pol, ctx, path, *access, facts),
            Op::Glob { pattern } => self.glob(pol, ctx, pattern, facts),
            Op::Grep {
                pattern,
                path,
                ignore_case,
                include_glob,
                max_results,
            } => self.grep(
                pol,
                ctx,
                pattern,
                path.as_deref(),
                *ignore_case,
                include_glob.as_deref(),
                *max_results,
                facts,
            ),
            Op::Mkdir { path, recursive } => self.mkdir(pol, ctx, path, *recursive, facts),
            Op::Rm { path, recursive } => self.rm(pol, ctx, path, *recursive, facts),
            Op::Rename { from, to, replace } => self.rename(pol, ctx, (from, to), *replace, facts),
            Op::Chmod { path, mode } => self.chmod(pol, ctx, path, *mode, facts),
            Op::Symlink { path, target } => self.symlink(pol, ctx, (path, target), facts),
        }
    }
}

/// What a crash in the middle of a change left on disk, judged by the change's own
/// file. `restore` (a backup put back by the CLI) and an intent naming no change this
/// gateway knows put a file's whole content, as a write does, and are judged as one.
pub(crate) fn found_after_crash(change: Option<ChangeOp>, disk: &Disk<'_>) -> Found {
    match change {
        Some(ChangeOp::Write | ChangeOp::Restore) | None => write::found_after_crash(disk),
        Some(ChangeOp::Edit) => edit::found_after_crash(disk),
        Some(ChangeOp::Mkdir) => mkdir::found_after_crash(disk),
        Some(ChangeOp::Rm) => rm::found_after_crash(disk),
        Some(ChangeOp::Rename) => rename::found_after_crash(disk),
        Some(ChangeOp::Chmod) => chmod::found_after_crash(disk),
        Some(ChangeOp::Symlink) => symlink::found_after_crash(disk),
    }
}

/// What a change asks of the git index, by the change's own file (`restore` puts a
/// file's content, as a write does).
pub(crate) fn staging<'a>(
    change: ChangeOp,
    path: &'a RelPath,
    path2: Option<&'a RelPath>,
) -> Vec<Step<'a>> {
    match change {
        ChangeOp::Write | ChangeOp::Restore => write::staging(path),
        ChangeOp::Edit => edit::staging(path),
        ChangeOp::Mkdir => mkdir::staging(),
        ChangeOp::Rm => rm::staging(path),
        ChangeOp::Rename => rename::staging(path, path2),
        ChangeOp::Chmod => chmod::staging(path),
        ChangeOp::Symlink => symlink::staging(path),
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operation_changes_the_workspace_exactly_when_its_record_name_says_so() {
        let p = || "/a".to_string();
        let ops = [
            Op::Ls {
                path: p(),
                cursor: None,
            },
            Op::Stat {
                path: p(),
                follow: true,
            },
            Op::Mkdir {
                path: p(),
                recursive: false,
            },
            Op::Rm {
                path: p(),
                recursive: false,
            },
            Op::Rename {
                from: p(),
                to: p(),
                replace: true,
            },
        ];
        for op in ops {
            let named = ChangeOp::from_name(op.name());
            assert_eq!(named.is_some(), op.is_mutating(), "{}", op.name());
        }
        for c in ChangeOp::ALL {
            assert_eq!(ChangeOp::from_name(c.name()), Some(c));
        }
        assert_eq!(ChangeOp::from_name("read_text_file"), None);
    }

    #[test]
    fn a_long_exclude_list_is_recorded_as_its_first_patterns_and_its_count() {
        let op = Op::Tree {
            path: "/".into(),
            depth: 2,
            exclude: (0..100_000).map(|i| format!("x{i}")).collect(),
            max_entries: 10,
            cursor: None,
        };
        let args = op.audit_args();
        assert_eq!(
            args["exclude"].as_array().map(Vec::len),
            Some(MAX_EXCLUDE_RECORDED)
        );
        assert_eq!(args["excludeCount"], 100_000);
    }
}
