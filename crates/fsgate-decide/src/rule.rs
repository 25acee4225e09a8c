//! A compiled rule: its effect, the op classes it covers, and what it matches on.

use globset::GlobSet;

use crate::condition::Condition;
use crate::effect::Effect;

/// Operation classes the policy distinguishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OpClass {
    /// Reading content: read_text_file, read_file, grep.
    Read = 0,
    /// Creating or changing: write, edit, mkdir, rename target.
    Write = 1,
    /// Removing: rm, rename source.
    Delete = 2,
    /// Seeing names and metadata: ls, stat, glob.
    List = 3,
}

impl OpClass {
    /// All classes, in index order.
    pub const ALL: [OpClass; 4] = [
        OpClass::Read,
        OpClass::Write,
        OpClass::Delete,
        OpClass::List,
    ];

    /// Parses `read`, `write`, `delete`, `list`.
    pub fn parse(s: &str) -> Option<OpClass> {
        match s {
            "read" => Some(OpClass::Read),
            "write" => Some(OpClass::Write),
            "delete" => Some(OpClass::Delete),
            "list" => Some(OpClass::List),
            _ => None,
        }
    }

    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            OpClass::Read => "read",
            OpClass::Write => "write",
            OpClass::Delete => "delete",
            OpClass::List => "list",
        }
    }
}

/// A compiled `[[rule]]`.
#[derive(Debug, Clone)]
pub struct Rule {
    /// Unique id.
    pub id: String,
    /// allow or deny.
    pub effect: Effect,
    /// Which op classes it covers, indexed by `OpClass as usize`.
    pub ops: [bool; 4],
    /// The globs as written, for explain and lint.
    pub globs: Vec<String>,
    /// The compiled globs (each also covering what lies beneath); None = any path.
    pub paths: Option<GlobSet>,
    /// Literal directory prefixes of the globs, so listing an ancestor is allowed.
    pub bases: Vec<fsgate_base::path::RelPath>,
    /// Directories whose every descendant the globs match (`**` -> the root, `src/**`
    /// or `src` -> `src`): a listing below one needs no glob match per entry.
    pub whole: Vec<fsgate_base::path::RelPath>,
    /// What else must hold for the rule to apply (extension, size...), in file order.
    pub conditions: Vec<Condition>,
    /// Human explanation.
    pub reason: Option<String>,
    /// Line of the rule's `id` in the source.
    pub line: usize,
    /// The workspaces the rule applies in (None: every one).
    pub workspaces: Option<Vec<String>>,
}

impl Rule {
    /// True if `other` decides what this rule decides, the same way (its reason and
    /// place in the file aside).
    pub fn same_scope(&self, other: &Rule) -> bool {
        self.effect == other.effect
            && self.ops == other.ops
            && self.globs == other.globs
            && self.conditions == other.conditions
            && self.workspaces == other.workspaces
    }

    /// The lowercased extensions the rule is limited to, if it is.
    pub fn extensions(&self) -> Option<&[String]> {
        self.conditions.iter().find_map(|c| match c {
            Condition::Extension(e) => Some(e.as_slice()),
            _ => None,
        })
    }

    /// Files of at least this many bytes only.
    pub fn min_size(&self) -> Option<u64> {
        self.conditions.iter().find_map(|c| match c {
            Condition::Size { min, .. } => *min,
            _ => None,
        })
    }

    /// Files of at most this many bytes only.
    pub fn max_size(&self) -> Option<u64> {
        self.conditions.iter().find_map(|c| match c {
            Condition::Size { max, .. } => *max,
            _ => None,
        })
    }

    /// Whether the rule has a condition judged only once a file's size is known.
    pub fn has_size(&self) -> bool {
        self.conditions.iter().any(Condition::needs_size)
    }

    /// Whether the rule applies in the workspace `name` (None: a workspace with no
    /// name, where only the rules for every workspace apply).
    pub(crate) fn applies_in(&self, name: Option<&str>) -> bool {
        match (&self.workspaces, name) {
            (None, _) => true,
            (Some(names), Some(n)) => names.iter().any(|w| w == n),
            (Some(_), None) => false,
        }
    }
}
