//! `fsgate undo`: puts back everything a session (or a time range) changed, as it was
//! before its first change, from the audit log (what happened) and the backups (what
//! was there), through the gateway's own path: the fixed floor, a backup of whatever it
//! replaces, and write-ahead records that name the session undone.
//!
//! # Layout
//!
//! - [`history`]: the changes the log says the selection made (from their intents,
//!   once their outcome says they were made), and who else changed which path.
//! - [`plan`]: rewrites of one file folded into one change; who changed a path since.
//! - [`steps`]: undoing one change: still as the change left it? then what puts it back.
//! - [`world`]: what the undo reads and acts on: the workspace through the gateway, or
//!   for `--dry-run` a model of it (the disk with the actions laid over it).
//! - [`schedule`]: changes of unrelated paths undone at once, each after those it
//!   depends on.
//! - `locate`: where the log and backups are; whether a running gateway holds the log.
//! - `report`: what the command prints.
//!
//! The changes are undone newest first, so each is undone on the state it left: a
//! file written twice is put back once, before its directory (made by the session) is
//! removed; a rename is reversed before the file it moved is put back at its old name.

pub mod history;
mod locate;
pub mod plan;
mod report;
pub mod schedule;
pub mod steps;
pub mod world;

use std::collections::HashSet;
use std::path::PathBuf;

use serde_json::{Map, Value, json};

use crate::ops::{PathStyle, RequestCtx};
use crate::policy::Policy;
use history::{Change, History, Selection};
use steps::{Row, Status, Undoer};

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
    fn selection(&self) -> Result<Selection, String> {
        let date = |s: &Option<String>| -> Result<_, String> {
            s.as_deref()
                .map(|s| {
                    crate::audit::prune::parse_date(s)
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
    fn label(&self) -> String {
        format!(
            "{UNDO_SESSION_PREFIX}{}",
            self.session.as_deref().unwrap_or("*")
        )
    }

    /// What the undo's records say it undoes (`args.undo`).
    fn note(&self) -> Map<String, Value> {
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

/// Runs `fsgate undo`; returns its exit status.
pub fn run(args: &UndoArgs) -> i32 {
    let outcome = match args.selection() {
        Ok(sel) => locate::locate(args).and_then(|loc| {
            if args.dry_run {
                dry_run(args, &sel, &loc)
            } else {
                undo(args, &sel, &loc)
            }
        }),
        Err(e) => Err(Refusal::Error(e)),
    };
    match outcome {
        Ok(code) => code,
        Err(Refusal::Busy(e)) => {
            crate::text::eprint_line(&format!("fsgate undo: {e}"));
            EXIT_BUSY
        }
        Err(Refusal::Error(e)) => {
            crate::text::eprint_line(&format!("fsgate undo: {e}; nothing was changed"));
            EXIT_ERROR
        }
    }
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

/// `--dry-run`: the same steps on a model of the workspace; nothing is written.
fn dry_run(args: &UndoArgs, sel: &Selection, loc: &locate::Where) -> Result<i32, Refusal> {
    if let Some(held) = loc.holder() {
        crate::text::eprint_line(&format!(
            "fsgate undo: note: {held}; what it changes next is not in this plan"
        ));
    }
    let places = loc.places();
    let mut opened = Vec::with_capacity(places.len());
    for place in &places {
        let ws = crate::workspace::Workspace::open(place.dir).map_err(|e| {
            format!(
                "cannot open workspace {}: {e}",
                crate::text::EscPath(place.dir)
            )
        })?;
        opened.push((ws, loc.open_store_if_there(place)?));
    }
    let parts = read_parts(sel, loc)?;
    let in_turn = |i: usize, changes: &[Change], u: &Undoer| -> Vec<Row> {
        let Some((ws, store)) = opened.get(i) else {
            return Vec::new();
        };
        let mut model = world::Model::new(world::Sources::new(ws, store.as_ref()));
        changes.iter().map(|c| u.undo(&mut model, c)).collect()
    };
    finish(args, parts, in_turn, None)
}

/// One workspace's part of the undo: its name among several, and what its log says.
struct Part {
    name: Option<String>,
    history: History,
}

/// Reads the log once per workspace: each pass its own workspace's changes (the first
/// also says which changes lie in a workspace the undo was not given).
fn read_parts(sel: &Selection, loc: &locate::Where) -> Result<Vec<Part>, String> {
    let places = loc.places();
    let names: Vec<String> = places
        .iter()
        .filter_map(|p| p.name.map(str::to_owned))
        .collect();
    let mut parts = Vec::with_capacity(places.len());
    for (i, place) in places.iter().enumerate() {
        let mut s = sel.clone();
        s.workspace = place.name.map(str::to_owned);
        s.elsewhere = (i == 0).then(|| names.clone());
        let history = loc.read(&s)?;
        parts.push(Part {
            name: s.workspace,
            history,
        });
    }
    Ok(parts)
}

/// The undo itself: a gateway opened on the workspace's log and store, the changes
/// undone through it, an `undo` record with the summary.
fn undo(args: &UndoArgs, sel: &Selection, loc: &locate::Where) -> Result<i32, Refusal> {
    if let Some(held) = loc.holder() {
        return Err(Refusal::Busy(format!(
            "{held}: stop that gateway first (an undo must not race the changes it makes); nothing was changed"
        )));
    }
    loc.refuse_unsigned()?;
    let opened = loc.open_gateway(args)?;
    let gw = &opened.gateway;
    let parts = match read_parts(sel, loc) {
        Ok(p) => p,
        Err(e) => {
            close(gw, "refused");
            return Err(e.into());
        }
    };
    let ctx = RequestCtx {
        style: PathStyle::Rooted,
        session: args.label(),
        transport: "cli",
        peer: crate::peer::stdio_peer(),
        scope: Default::default(),
        asker: None,
        notifier: None,
    };
    let note = args.note();
    let at_once = |i: usize, changes: &[Change], u: &Undoer| -> Vec<Row> {
        // Each workspace through its own gateway: its handle, policy, store, records.
        let Some(member) = gw.members().nth(i) else {
            return Vec::new();
        };
        let prints: Vec<Vec<String>> = changes.iter().map(schedule::footprint).collect();
        let deps = schedule::dependencies(&prints);
        let make = || world::Real::new(member, ctx.clone(), note.clone());
        let ran = schedule::run_ordered(&deps, WORKERS, make, |w, i| u.undo(w, &changes[i]));
        steps::prune_left(&mut make(), changes);
        let rows = ran.into_iter().zip(changes).map(|(row, c)| {
            row.unwrap_or_else(|| {
                let mut r = Row::of(c);
                r.status = Status::Failed;
                r.note = "internal error (see the log on stderr)".into();
                r
            })
        });
        rows.collect()
    };
    let code = finish(args, parts, at_once, Some(gw));
    close(gw, "undo finished");
    code
}

/// Threads undoing changes of unrelated paths at once: each change waits on its syncs
/// (backup, intent, content, outcome), so more threads than cores keep the disk busy.
const WORKERS: usize = 8;

fn close(gw: &crate::gateway::Gateway, reason: &str) {
    let mut details = Map::new();
    details.insert("reason".into(), reason.into());
    crate::startup::shutdown(gw, details);
}

/// Undoes each workspace's changes with `undo_part` (given its index and the changes
/// newest first), prints the report, and (with a gateway) records the summary.
fn finish(
    args: &UndoArgs,
    parts: Vec<Part>,
    mut undo_part: impl FnMut(usize, &[Change], &Undoer) -> Vec<Row>,
    gw: Option<&crate::gateway::Gateway>,
) -> Result<i32, Refusal> {
    if let Some(s) = &args.session
        && !parts.iter().any(|p| p.history.session_seen)
    {
        return Err(Refusal::Error(format!(
            "the audit log has no record of session {} (`fsgate audit show --stats --workspace DIR` lists the sessions)",
            crate::text::Esc(s)
        )));
    }
    let mut rows = Vec::new();
    let mut all = History::default();
    for (i, part) in parts.into_iter().enumerate() {
        let history = part.history;
        let mut changes = plan::fold(history.selected.clone(), &history.touches);
        changes.reverse();
        let selected = history.selected.iter().map(|c| c.order);
        let undoer = Undoer {
            force: args.force,
            touches: &history.touches,
            selected: selected.collect::<HashSet<_>>(),
        };
        let mut done = undo_part(i, &changes, &undoer);
        for r in &mut done {
            r.workspace.clone_from(&part.name);
        }
        rows.extend(done);
        all.absorb(part.name.as_deref(), history);
    }
    if let Some(gw) = gw {
        gw.record("undo", summary(args, &all, &rows));
    }
    report::print(args, &all, &rows).map_err(|e| format!("cannot print the report: {e}"))?;
    // A change the log names but the undo could not read is left as it is too.
    let left = !all.unreadable.is_empty()
        || rows
            .iter()
            .any(|r| matches!(r.status, Status::Skipped | Status::Failed));
    Ok(if left { EXIT_LEFT } else { EXIT_DONE })
}

/// Paths listed at most per status in the `undo` record.
const MAX_LISTED: usize = 100;

/// The `undo` record's details: what was selected and what became of it.
fn summary(args: &UndoArgs, history: &History, rows: &[Row]) -> Map<String, Value> {
    let mut d = Map::new();
    d.insert("undo".into(), args.note()["undo"].clone());
    for (k, v) in [("since", &args.since), ("until", &args.until)] {
        if let Some(v) = v {
            d.insert(k.into(), v.clone().into());
        }
    }
    d.insert("force".into(), args.force.into());
    d.insert("changes".into(), history.selected.len().into());
    for (key, status) in [
        ("undone", Status::Undone),
        ("already", Status::Already),
        ("skipped", Status::Skipped),
        ("failed", Status::Failed),
    ] {
        let of: Vec<&Row> = rows.iter().filter(|r| r.status == status).collect();
        d.insert(format!("{key}Count"), of.len().into());
        if matches!(status, Status::Skipped | Status::Failed) && !of.is_empty() {
            let listed: Vec<Value> = of
                .iter()
                .take(MAX_LISTED)
                .map(|r| {
                    let mut v = json!({"path": r.path, "seq": r.seq, "why": r.note});
                    if let Some(ws) = &r.workspace {
                        v["workspace"] = ws.as_str().into();
                    }
                    v
                })
                .collect();
            d.insert(key.into(), Value::Array(listed));
        }
    }
    d
}
