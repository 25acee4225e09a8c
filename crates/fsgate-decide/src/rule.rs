//! A compiled rule: its effect, the op classes it covers, and what it matches on.

use globset::GlobSet;

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

/// Allow, deny, or ask a person.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    /// Grants the operation.
    Allow,
    /// Refuses the operation; wins over any allow or ask.
    Deny,
    /// Grants the operation only if a person says yes when it is requested (through the
    /// client's own prompt); wins over any allow. No answer in time means deny.
    Ask,
}

impl Effect {
    /// `allow`, `deny` or `ask`, as written in a policy.
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Allow => "allow",
            Effect::Deny => "deny",
            Effect::Ask => "ask",
        }
    }

    /// How strongly it holds when two steps of one operation disagree: deny, then ask,
    /// then allow.
    pub fn weight(self) -> u8 {
        match self {
            Effect::Allow => 0,
            Effect::Ask => 1,
            Effect::Deny => 2,
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
    /// Lowercased extensions the rule is limited to.
    pub extensions: Option<Vec<String>>,
    /// Files of at least this many bytes only.
    pub min_size: Option<u64>,
    /// Files of at most this many bytes only.
    pub max_size: Option<u64>,
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
            && self.extensions == other.extensions
            && self.min_size == other.min_size
            && self.max_size == other.max_size
            && self.workspaces == other.workspaces
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
