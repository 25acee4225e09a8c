//! `policy diff`: everything that loosens or tightens between two policies, on a
//! workspace's tree or the paths their tests name, as lines or one JSON document.

use std::io::Write;
use std::path::Path;

use super::columns::shown_len;
use super::exit::{EXIT_FINDINGS, EXIT_INVALID, EXIT_OK, Res};
use super::load::load;
use crate::diff::item::{Direction, Item};
use crate::diff::{
    DiffReport, FileScan, content_files, decision_items, diff, setting_items, sort_items,
    test_paths, workspace_paths,
};
use fsgate_base::text::{Esc, EscPath};

#[allow(clippy::too_many_arguments)]
pub(super) fn policy_diff(
    old: &Path,
    new: &Path,
    (workspace, name): (Option<&Path>, Option<&str>),
    max_paths: usize,
    json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Res {
    let (Some((a, ta)), Some((b, tb))) = (load(old, err)?, load(new, err)?) else {
        return Ok(EXIT_INVALID);
    };
    let (a, b) = match name {
        Some(n) => (a.for_workspace(n), b.for_workspace(n)),
        None => (a, b),
    };
    let (paths, truncated, source) = match workspace {
        Some(ws) => match workspace_paths(ws, max_paths) {
            Ok((p, t)) => (p, t, format!("the tree of {}", ws.display())),
            Err(e) => {
                writeln!(
                    err,
                    "fsgate policy diff: cannot walk {}: {}",
                    EscPath(ws),
                    Esc(&e.to_string())
                )?;
                return Ok(EXIT_INVALID);
            }
        },
        None => (
            test_paths(&[&a, &b]),
            false,
            "the paths named by both policies' tests".into(),
        ),
    };
    let mut report: DiffReport = diff(&a, &b, &paths);
    report.truncated = truncated;
    let files = workspace.map(|ws| content_files(&a, &b, ws, &paths));
    let mut items = decision_items(&report);
    items.extend(setting_items(&a, &ta, &b, &tb));
    if let Some(f) = &files {
        items.extend(f.items.iter().cloned());
    }
    sort_items(&mut items);
    let count = |d: Direction| items.iter().filter(|i| i.direction == d).count();
    let (loosens, tightens, changes) = (
        count(Direction::Loosens),
        count(Direction::Tightens),
        count(Direction::Changes),
    );
    if json {
        let doc = serde_json::json!({
            "source": source,
            "loosens": loosens,
            "tightens": tightens,
            "changes": changes,
            "items": items,
            "decisions": report,
            "content_files": files.as_ref().map(|f| serde_json::json!({ "scanned": f.scanned, "skipped": f.skipped })),
        });
        writeln!(out, "{doc:#}")?;
    } else {
        print_items(out, &items)?;
        print_diff_summary(out, &report, files.as_ref(), &source)?;
        writeln!(
            out,
            "{loosens} loosen(s), {tightens} tighten(s), {changes} other change(s)"
        )?;
    }
    Ok(if loosens > 0 { EXIT_FINDINGS } else { EXIT_OK })
}

/// One line per item: `loosens  area  subject: old -> new`, policy text escaped.
fn print_items(out: &mut dyn Write, items: &[Item]) -> std::io::Result<()> {
    let area_w = items.iter().map(|i| shown_len(&i.area)).max().unwrap_or(0);
    for i in items {
        writeln!(
            out,
            "{:8} {:area_w$}  {}: {} -> {}",
            i.direction.as_str(),
            Esc(&i.area),
            Esc(&i.subject),
            Esc(&i.old),
            Esc(&i.new)
        )?;
    }
    Ok(())
}

fn print_diff_summary(
    out: &mut dyn Write,
    r: &DiffReport,
    files: Option<&FileScan>,
    source: &str,
) -> std::io::Result<()> {
    let widened = r.changes.iter().filter(|c| c.widens()).count();
    let narrowed = r.changes.len() - widened;
    writeln!(
        out,
        "{} decision(s) changed: {widened} loosened, {narrowed} tightened; {} keep their effect under another rule; compared {} path(s) x 4 ops from {}{}",
        r.changes.len(),
        r.rule_changes.len(),
        r.paths,
        Esc(source),
        if r.truncated {
            " (walk truncated: raise --max-paths)"
        } else {
            ""
        }
    )?;
    if let Some(f) = files {
        writeln!(
            out,
            "content scanned in {} file(s) with both policies' rules ({} skipped: over the read limits or 64 MiB, unreadable or not regular)",
            f.scanned, f.skipped
        )?;
    }
    Ok(())
}
