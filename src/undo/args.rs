//! What an undo is asked (`fsgate undo`'s arguments and exit statuses), the policy it
//! runs under, and how it ends when nothing can be done.

use std::path::PathBuf;

use serde_json::{Map, Value};

use super::history::Selection;

use fsgate_policy::Policy;

/// The session of the records an undo writes: this, then what it undoes (the session,
/// or `*` for every session in a time range). Undoing that session redoes the changes.
pub const UNDO_SESSION_PREFIX: &str = "undo:";

/// Exit status: everything selected is undone (or already was); or nothing to undo.
pub const EXIT_DONE: i32 = 0;
/// Exit status: some changes were left as they are (changed since, or they failed).
pub const EXIT_LEFT: i32 = 1;
/// Exit status: nothing was done (bad arguments, unknown session, unusable log).
pub const EXIT_ERROR: i32 = 2;
/// Exit status: nothing was done: a running gateway holds the audit log.
pub const EXIT_BUSY: i32 = 3;

// These doc comments are `--help` text: `[audit]` names a policy section and `<name>` a
// placeholder, not a link or an HTML tag.
#[allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]
/// `fsgate undo`'s arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct UndoArgs {
    /// The workspace the changes were made in. Give every `--workspace` the gateway
    /// was given, as it was given (`[NAME=]DIR`): with several, each change is put back
    /// in the workspace its record names (docs/workspaces.md).
    #[arg(long, value_name = "[NAME=]DIR", required = true)]
    pub workspace: Vec<crate::startup::WorkspaceArg>,
    /// The session whose changes to undo: its `session` in the audit log (the ACP
    /// sessionId, the MCP or WebSocket connection id; `fsgate audit show --stats`
    /// lists them).
    #[arg(long, value_name = "ID", required_unless_present_any = ["since", "until"])]
    pub session: Option<String>,
    /// Only changes recorded at or after this time (RFC 3339, or YYYY-MM-DD in UTC);
    /// without --session, every session's.
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Only changes recorded before this time (RFC 3339, or YYYY-MM-DD in UTC).
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// Print what would be put back, with each file's line counts, and change nothing
    /// (nor write to the log).
    #[arg(long)]
    pub dry_run: bool,
    /// Put back files changed since by someone else too (another session, a person);
    /// what they hold now is backed up first.
    #[arg(long)]
    pub force: bool,
    /// Print one JSON object per change, then a summary object, instead of the table.
    #[arg(long)]
    pub json: bool,
    /// The gateway's audit log (its --audit-log) [default: the policy's [audit] path,
    /// else every chain of the workspace's log under your state dir].
    #[arg(long, value_name = "FILE")]
    pub audit_log: Option<PathBuf>,
    /// The gateway's backup store (its --backup-dir) [default: the policy's [backup]
    /// dir, else the workspace's store under your state dir].
    #[arg(long, value_name = "DIR")]
    pub backup_dir: Option<PathBuf>,
    /// The policy the gateway serves the workspace with: its [audit] settings (signing
    /// key, fsync) and its [audit] path and [backup] dir apply. Its rules do not: they
    /// allowed the changes; the undo is bound by its refusals only (the fixed floor,
    /// secret names, deny rules).
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
}

impl UndoArgs {
    pub(super) fn selection(&self) -> Result<Selection, String> {
        let date = |s: &Option<String>| -> Result<_, String> {
            s.as_deref()
                .map(|s| {
                    fsgate_audit::prune::parse_date(s)
                        .ok_or(format!("not a time: {s} (RFC 3339, or YYYY-MM-DD)"))
                })
                .transpose()
        };
        Ok(Selection {
            session: self.session.clone(),
            since: date(&self.since)?,
            until: date(&self.until)?,
            workspace: None,
            elsewhere: None,
        })
    }

    /// The session the undo's own records carry.
    pub(super) fn label(&self) -> String {
        format!(
            "{UNDO_SESSION_PREFIX}{}",
            self.session.as_deref().unwrap_or("*")
        )
    }

    /// What the undo's records say it undoes (`args.undo`).
    pub(super) fn note(&self) -> Map<String, Value> {
        let mut note = Map::new();
        note.insert("undo".into(), self.session.as_deref().unwrap_or("*").into());
        note
    }
}

/// The policy an undo runs under: every operation allowed, no content rules, no size
/// limits a backup could exceed. The changes it undoes were allowed when made, and it
/// touches only their paths; what no agent may reach still holds, carried over from
/// the gateway's policy: the fixed floor (fsgate's own files), the secret names and
/// the deny rules ([`Policy::with_denials_of`]).
pub fn undo_policy() -> Result<Policy, String> {
    let text = "version = 1\n\
        [secrets]\nbuiltin = false\n\
        [limits]\nmax_read_bytes = 1099511627776\nmax_write_bytes = 1099511627776\nbinary = \"base64\"\n\
        [[rule]]\nid = \"undo\"\neffect = \"allow\"\nops = [\"*\"]\npaths = [\"**\"]\n\
        reason = \"fsgate undo puts back what the changes it undoes changed\"\n";
    Policy::from_toml(text, "fsgate undo").map_err(|e| format!("the undo's policy: {e}"))
}

/// Why nothing was done.
pub(crate) enum Refusal {
    /// A running gateway holds the log.
    Busy(String),
    /// Anything else.
    Error(String),
}

impl From<String> for Refusal {
    fn from(e: String) -> Refusal {
        Refusal::Error(e)
    }
}

/// Closes the undo's gateway, its stop record saying why.
pub(super) fn close(gw: &fsgate_gateway::Gateway, reason: &str) {
    let mut details = Map::new();
    details.insert("reason".into(), reason.into());
    crate::startup::shutdown(gw, details);
}
