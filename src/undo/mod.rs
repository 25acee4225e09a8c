//! `fsgate undo`: puts back everything a session (or a time range) changed, as it was
//! before its first change, from the audit log (what happened) and the backups (what
//! was there), through the gateway's own path: the fixed floor, a backup of whatever it
//! replaces, and write-ahead records that name the session undone.
//!
//! # Layout
//!
//! - [`history`]: the changes the log says the selection made (from their intents,
//!   once their outcome says they were made), and who else changed which path.
//!   A change as the log tells it: [`change`]; what an intent says: `intent`.
//! - [`plan`]: rewrites of one file folded into one change; who changed a path since.
//! - [`steps`]: undoing one change: still as the change left it? then what puts it back.
//! - `restore`: what puts back each kind of change, planned from the path as it is now.
//! - [`row`]: what became of one change, as the report shows it; `diff`: the lines it
//!   puts back.
//! - `prune`: the directories the undone changes made, removed once empty.
//! - [`world`]: what the undo reads and acts on: the workspace through the gateway
//!   ([`real`]), or for `--dry-run` a model of it ([`model`]: the disk with the actions
//!   laid over it), both reading through [`sources`].
//! - [`schedule`]: changes of unrelated paths undone at once, each after those it
//!   depends on.
//! - `locate`: where the log and backups are; whether a running gateway holds the log.
//! - `report`: what the command prints.
//!
//! The changes are undone newest first, so each is undone on the state it left: a
//! file written twice is put back once, before its directory (made by the session) is
//! removed; a rename is reversed before the file it moved is put back at its old name.

mod args;
pub mod change;
mod diff;
pub mod history;
mod intent;
mod locate;
pub mod model;
pub mod plan;
mod prune;
pub mod real;
mod report;
mod restore;
pub mod row;
pub mod schedule;
pub mod sources;
pub mod steps;
pub mod world;

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use args::{Refusal, close};
use change::Change;
use fsgate_gateway::ops::{PathStyle, RequestCtx};
use history::{History, Selection};

pub use args::{
    EXIT_BUSY, EXIT_DONE, EXIT_ERROR, EXIT_LEFT, UNDO_SESSION_PREFIX, UndoArgs, undo_policy,
};
use row::{Row, Status};
use steps::Undoer;

/// `fsgate undo`, as the requests it makes carry it: it reads no file as text for
/// anyone, so it names no way to read one otherwise.
pub const DOOR: fsgate_gateway::DoorSpec = fsgate_gateway::DoorSpec {
    name: "cli",
    content_copies: 1,
    read_in_parts: "",
    binary_read: "",
    media_read: "",
    for_processes: false,
};

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
            fsgate_base::text::eprint_line(&format!("fsgate undo: {e}"));
            EXIT_BUSY
        }
        Err(Refusal::Error(e)) => {
            fsgate_base::text::eprint_line(&format!("fsgate undo: {e}; nothing was changed"));
            EXIT_ERROR
        }
    }
}

/// `--dry-run`: the same steps on a model of the workspace; nothing is written.
fn dry_run(args: &UndoArgs, sel: &Selection, loc: &locate::Where) -> Result<i32, Refusal> {
    if let Some(held) = loc.holder() {
        fsgate_base::text::eprint_line(&format!(
            "fsgate undo: note: {held}; what it changes next is not in this plan"
        ));
    }
    let places = loc.places();
    let mut opened = Vec::with_capacity(places.len());
    for place in &places {
        let ws = fsgate_workspace::Workspace::open(place.dir).map_err(|e| {
            format!(
                "cannot open workspace {}: {e}",
                fsgate_base::text::EscPath(place.dir)
            )
        })?;
        opened.push((ws, loc.open_store_if_there(place)?));
    }
    let parts = read_parts(sel, loc)?;
    let in_turn = |i: usize, changes: &[Change], u: &Undoer| -> Vec<Row> {
        let Some((ws, store)) = opened.get(i) else {
            return Vec::new();
        };
        let mut model = model::Model::new(sources::Sources::new(ws, store.as_ref()));
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
        door: &DOOR,
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
        let make = || real::Real::new(member, ctx.clone(), note.clone());
        let ran = schedule::run_ordered(&deps, WORKERS, make, |w, i| u.undo(w, &changes[i]));
        prune::prune_left(&mut make(), changes);
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

/// Undoes each workspace's changes with `undo_part` (given its index and the changes
/// newest first), prints the report, and (with a gateway) records the summary.
fn finish(
    args: &UndoArgs,
    parts: Vec<Part>,
    mut undo_part: impl FnMut(usize, &[Change], &Undoer) -> Vec<Row>,
    gw: Option<&fsgate_gateway::Gateway>,
) -> Result<i32, Refusal> {
    if let Some(s) = &args.session
        && !parts.iter().any(|p| p.history.session_seen)
    {
        return Err(Refusal::Error(format!(
            "the audit log has no record of session {} (`fsgate audit show --stats --workspace DIR` lists the sessions)",
            fsgate_base::text::Esc(s)
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
            changes: &history.selected,
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
        || !all.lost.is_empty()
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
