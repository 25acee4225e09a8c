//! What `fsgate undo` prints: one line per change undone (or left), newest first, with
//! the line counts each file gains and loses, then a summary; or the same as JSON lines.
//! Paths, sessions and reasons an agent chose are escaped for the terminal.

use std::io::{self, Write};

use serde_json::json;

use super::args::UndoArgs;
use super::history::History;
use super::row::{Diff, Row, Status};
use fsgate_base::text::{Esc, eprint_line};

/// Prints the report of `rows` to stdout, and notes about the log to stderr.
pub(super) fn print(args: &UndoArgs, history: &History, rows: &[Row]) -> io::Result<()> {
    for (chain, seq, path) in &history.unsettled {
        eprint_line(&format!(
            "fsgate undo: note: the change of intent {seq} (chain {chain}) to {} has no outcome in the log (a crash?): not undone; `fsgate undo` without --dry-run settles it first",
            path
        ));
    }
    for why in &history.lost {
        eprint_line(&format!("fsgate undo: {why}"));
    }
    for (seq, why) in &history.unreadable {
        eprint_line(&format!(
            "fsgate undo: the change of intent {seq} is left as it is: {}",
            why
        ));
    }
    let mut out = io::stdout().lock();
    if args.json {
        json_lines(&mut out, args, rows)
    } else {
        table(&mut out, args, history, rows)
    }
}

fn count(rows: &[Row], status: Status) -> usize {
    rows.iter().filter(|r| r.status == status).count()
}

fn json_lines(out: &mut dyn Write, args: &UndoArgs, rows: &[Row]) -> io::Result<()> {
    for r in rows {
        serde_json::to_writer(&mut *out, r).map_err(io::Error::other)?;
        writeln!(out)?;
    }
    let summary = json!({"summary": {
        "dryRun": args.dry_run,
        "session": args.session,
        "changes": rows.len(),
        "undone": count(rows, Status::Undone),
        "already": count(rows, Status::Already),
        "skipped": count(rows, Status::Skipped),
        "failed": count(rows, Status::Failed),
    }});
    writeln!(out, "{summary}")
}

fn table(out: &mut dyn Write, args: &UndoArgs, history: &History, rows: &[Row]) -> io::Result<()> {
    let whose = match &args.session {
        Some(s) => format!("session {}", Esc(s)),
        None => "every session".to_owned(),
    };
    let range = match (&args.since, &args.until) {
        (Some(s), Some(u)) => format!(" from {} until {}", Esc(s), Esc(u)),
        (Some(s), None) => format!(" since {}", Esc(s)),
        (None, Some(u)) => format!(" until {}", Esc(u)),
        (None, None) => String::new(),
    };
    let dry = if args.dry_run {
        " (dry run: nothing is changed)"
    } else {
        ""
    };
    let n = history.selected.len();
    writeln!(out, "Undo of {whose}{range}: {n} changes{dry}")?;
    if rows.is_empty() {
        return writeln!(out, "nothing to undo");
    }
    for r in rows {
        writeln!(out, "{}", line(r, args.dry_run))?;
    }
    let verb = if args.dry_run { "would be " } else { "" };
    writeln!(
        out,
        "{} {verb}undone, {} already as before, {} {verb}left as changed since, {} {verb}failed",
        count(rows, Status::Undone),
        count(rows, Status::Already),
        count(rows, Status::Skipped),
        count(rows, Status::Failed)
    )?;
    if count(rows, Status::Skipped) > 0 && !args.force {
        writeln!(
            out,
            "--force puts back the files changed since too (what they hold now is backed up first)"
        )?;
    }
    Ok(())
}

/// One row: status, what is done, the path, the line counts, and why.
fn line(r: &Row, dry: bool) -> String {
    let status = match (r.status, dry) {
        (Status::Undone, false) => "undone",
        (Status::Undone, true) => "undo",
        (Status::Already, _) => "already",
        (Status::Skipped, false) => "skipped",
        (Status::Skipped, true) => "skip",
        (Status::Failed, false) => "failed",
        (Status::Failed, true) => "fail",
    };
    let place = r
        .workspace
        .as_ref()
        .map(|w| format!("{}:", Esc(w)))
        .unwrap_or_default();
    let mut text = format!("  {status:<8} {:<19} {place}{}", r.action, Esc(&r.path));
    if let Some(from) = &r.from {
        text.push_str(&format!(" <- {}", Esc(from)));
    }
    if let Some(d) = &r.diff {
        text.push_str(&format!("  {}", diff_text(d)));
    }
    if r.folded > 0 {
        text.push_str(&format!("  ({} changes)", r.folded + 1));
    }
    let mut notes = Vec::new();
    if r.forced {
        notes.push("forced".to_owned());
    }
    if !r.note.is_empty() {
        notes.push(Esc(&r.note).to_string());
    }
    if let Some(by) = r
        .changed_by
        .as_ref()
        .filter(|_| r.status != Status::Already)
    {
        notes.push(format!(
            "by session {}, record {}",
            Esc(&by.session),
            by.seq
        ));
    }
    if !notes.is_empty() {
        text.push_str(&format!("  [{}]", notes.join("; ")));
    }
    text
}

fn diff_text(d: &Diff) -> String {
    match d {
        Diff::Lines { added, removed } => format!("+{added} -{removed}"),
        Diff::Bytes { now, after } => {
            let size = |s: &Option<u64>| s.map_or("-".to_owned(), |n| format!("{n} bytes"));
            format!("binary: {} -> {}", size(now), size(after))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::undo::row::ChangedBy;

    #[test]
    fn a_row_escapes_what_an_agent_chose() {
        let r = Row {
            status: Status::Skipped,
            action: "restore",
            workspace: None,
            path: "a\u{1b}[2Jb.txt".into(),
            from: None,
            diff: Some(Diff::Lines {
                added: 3,
                removed: 1,
            }),
            note: "changed since".into(),
            changed_by: Some(ChangedBy {
                session: "evil\u{202e}".into(),
                seq: 9,
                chain: 0,
                by_undo: false,
            }),
            forced: false,
            session: "s".into(),
            seq: 4,
            folded: 1,
        };
        let text = line(&r, false);
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{202e}'),
            "{text}"
        );
        assert!(text.contains("skipped") && text.contains("+3 -1"), "{text}");
        assert!(
            text.contains("(2 changes)") && text.contains("record 9"),
            "{text}"
        );
    }
}
