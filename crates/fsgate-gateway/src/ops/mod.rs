//! The one internal operation type every transport translates into, and its results.

mod chmod;
pub(crate) mod cx;
mod edit;
mod glob;
mod grep;
pub(crate) mod id;
mod list;
mod ls;
mod mkdir;
mod open;
pub(crate) mod open_cache;
pub(crate) mod operation;
pub(crate) mod output;
mod read_file;
mod read_text;
mod rename;
mod rename_link;
mod rm;
mod stat;
mod symlink;
pub(crate) mod tree;
mod utimes;
mod write;

pub use chmod::{Chmod, RULE_SET_ID};
pub use edit::Edit;
pub use glob::Glob;
pub use grep::Grep;
pub use id::OpId;
pub use ls::Ls;
pub use mkdir::Mkdir;
pub use open::Open;
pub use operation::Places;
use operation::{Operation, operations};
pub use output::OpenAccess;
pub use output::{Encoding, Output};
pub use read_file::ReadFile;
pub use read_text::ReadText;
pub use rename::Rename;
pub use rm::Rm;
pub use stat::Stat;
pub use symlink::{RULE_LINK_TARGET, Symlink, target_refusal};
pub use tree::Tree;
pub use utimes::{SetTime, Utimes};
pub use write::{Content, Write};

use serde_json::{Map, Value};

/// The changes an intent record names (the audit log's own list).
pub use fsgate_audit::ChangeOp;
use fsgate_base::error::GatewayError;
use fsgate_base::path::RelPath;

use crate::ask::Proposed;
use crate::crash::{Disk, Found};
pub use crate::door::PathStyle;
use crate::facts::Facts;
pub use crate::request::RequestCtx;
use crate::vcs::step::Step;
use cx::Cx;

/// The workspace's entries, matches and metadata, as the results carry them; a door
/// encodes them from here (it does not reach into the workspace layer).
pub use fsgate_workspace::{Entry, FileKind, GrepMatch, StatInfo, format_permissions};

list::with_operations!(operations);

impl Op {
    /// The operation's name in audit records.
    pub fn name(&self) -> &'static str {
        self.id().name()
    }

    /// True for operations that change the workspace.
    pub fn is_mutating(&self) -> bool {
        self.id().change().is_some()
    }
}

/// The operation whose intent names `change` (`restore`, a backup put back by the CLI,
/// puts a file's whole content, as a write does).
fn changing(change: ChangeOp) -> OpId {
    OpId::ALL
        .iter()
        .copied()
        .find(|id| id.change() == Some(change))
        .unwrap_or(OpId::Write)
}

/// What a crash in the middle of a change left on disk, judged by the change's own
/// file; an intent naming no change this gateway knows is judged as a write.
pub(crate) fn found_after_crash(change: Option<ChangeOp>, disk: &Disk<'_>) -> Found {
    change.map_or(OpId::Write, changing).found_after_crash(disk)
}

/// What a change asks of the git index, by the change's own file.
pub(crate) fn staging<'a>(
    change: ChangeOp,
    path: &'a RelPath,
    path2: Option<&'a RelPath>,
) -> Vec<Step<'a>> {
    changing(change).staging(path, path2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops;
    use crate::ops::tree::MAX_EXCLUDE_RECORDED;

    #[test]
    fn an_operation_changes_the_workspace_exactly_when_its_record_name_says_so() {
        let p = || "/a".to_string();
        let ops = [
            Op::Ls(ops::Ls {
                path: p(),
                cursor: None,
                kinds_only: false,
            }),
            Op::Stat(ops::Stat {
                path: p(),
                follow: true,
            }),
            Op::Mkdir(ops::Mkdir {
                path: p(),
                recursive: false,
            }),
            Op::Rm(ops::Rm {
                path: p(),
                recursive: false,
            }),
            Op::Rename(ops::Rename {
                from: p(),
                to: p(),
                replace: true,
            }),
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
        let op = Op::Tree(ops::Tree {
            path: "/".into(),
            depth: 2,
            exclude: (0..100_000).map(|i| format!("x{i}")).collect(),
            max_entries: 10,
            cursor: None,
        });
        let args = op.audit_args();
        assert_eq!(
            args["exclude"].as_array().map(Vec::len),
            Some(MAX_EXCLUDE_RECORDED)
        );
        assert_eq!(args["excludeCount"], 100_000);
    }
}
