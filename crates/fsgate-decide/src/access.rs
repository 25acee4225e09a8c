//! One decision per operation (D2): which op classes an operation needs on which paths,
//! checked in order. `explain`, `[[test]]` and the gateway all decide through
//! [`Policy::decide_access`](crate::Policy::decide_access), so the simulator cannot
//! disagree with the gateway.
//!
//! A composite operation needs every class it needs: the first refusal names its rule,
//! else the rule allowing the operation's primary class decides. What an operation needs
//! is here; deciding it, in `decide`.

mod decide;

use crate::facts::{EntryKind, PathFacts};
use crate::rule::OpClass;
use fsgate_base::path::RelPath;

/// An operation as the gateway performs it, or a bare op class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// One op class on the path.
    Class(OpClass),
    /// Metadata of the path: `list` on it.
    Stat,
    /// The path appears in its parent directory's listing: `list` on the parent (as a
    /// directory) and on the path.
    Ls,
    /// The path appears in a glob: `list` on it and on every directory above it.
    Glob,
    /// The path appears in a directory tree: as [`Access::Glob`].
    Tree,
    /// The file's lines can appear in search results: `list` on every directory above
    /// it, then `list` and `read` on it (a directory: `list`, to be searched).
    Grep,
    /// Edit a file: `write`, then `read` (the text it replaces).
    Edit,
    /// Create a directory: `write` on it as a directory.
    Mkdir,
    /// Remove: `delete`.
    Rm,
}

/// One check a composite operation makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessStep {
    /// The class checked.
    pub class: OpClass,
    /// On which path.
    pub path: RelPath,
    /// As a directory.
    pub dir: bool,
    /// Why the operation needs it.
    pub why: &'static str,
}

/// Every operation name `explain` and `[[test]]` accept.
pub const ACCESS_NAMES: &[&str] = &[
    "read", "write", "delete", "list", "stat", "ls", "glob", "tree", "grep", "edit", "mkdir", "rm",
];

impl Access {
    /// Parses an op class or a gateway operation name.
    pub fn parse(s: &str) -> Option<Access> {
        Some(match s {
            "stat" => Access::Stat,
            "ls" => Access::Ls,
            "glob" => Access::Glob,
            "tree" => Access::Tree,
            "grep" => Access::Grep,
            "edit" => Access::Edit,
            "mkdir" => Access::Mkdir,
            "rm" => Access::Rm,
            other => Access::Class(OpClass::parse(other)?),
        })
    }

    /// The name as written.
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Class(c) => c.as_str(),
            Access::Stat => "stat",
            Access::Ls => "ls",
            Access::Glob => "glob",
            Access::Tree => "tree",
            Access::Grep => "grep",
            Access::Edit => "edit",
            Access::Mkdir => "mkdir",
            Access::Rm => "rm",
        }
    }

    /// The class whose allowing rule names an allowed operation.
    pub fn primary(self) -> OpClass {
        match self {
            Access::Class(c) => c,
            Access::Stat | Access::Ls | Access::Glob | Access::Tree => OpClass::List,
            Access::Grep => OpClass::Read,
            Access::Edit | Access::Mkdir => OpClass::Write,
            Access::Rm => OpClass::Delete,
        }
    }

    /// The checks on the path itself, in order (no allocation: walks call this per
    /// entry through [`Policy::decide_entry`](crate::Policy::decide_entry)).
    pub(super) fn own(self, kind: EntryKind) -> (OpClass, Option<OpClass>) {
        match self {
            Access::Grep if kind != EntryKind::Dir => (OpClass::List, Some(OpClass::Read)),
            Access::Grep => (OpClass::List, None),
            Access::Edit => (OpClass::Write, Some(OpClass::Read)),
            other => (other.primary(), None),
        }
    }

    /// The directories above `path` that must be listable first.
    fn above(self, path: &RelPath) -> Vec<RelPath> {
        let Some(parent) = path.parent() else {
            return Vec::new();
        };
        match self {
            Access::Ls => vec![parent],
            Access::Glob | Access::Tree | Access::Grep => {
                let mut chain = vec![parent];
                while let Some(p) = chain.last().and_then(RelPath::parent) {
                    chain.push(p);
                }
                chain.reverse();
                chain
            }
            _ => Vec::new(),
        }
    }

    /// Every check the operation makes, in order.
    pub fn steps(self, path: &RelPath, facts: &PathFacts) -> Vec<AccessStep> {
        let mut out: Vec<AccessStep> = self
            .above(path)
            .into_iter()
            .map(|p| AccessStep {
                class: OpClass::List,
                path: p,
                dir: true,
                why: if self == Access::Ls {
                    "the directory listing it"
                } else {
                    "a directory above it, entered to reach it"
                },
            })
            .collect();
        let kind = if self == Access::Mkdir {
            EntryKind::Dir
        } else {
            facts.kind
        };
        let (first, second) = self.own(kind);
        for class in std::iter::once(first).chain(second) {
            out.push(AccessStep {
                class,
                path: path.clone(),
                dir: kind == EntryKind::Dir,
                why: "the path itself",
            });
        }
        out
    }
}
