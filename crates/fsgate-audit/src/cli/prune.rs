//! `audit prune` on the log named, or else the workspace's.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::exit::{fail, written};
use crate::{keys, prune};

/// `audit prune` on the log named, or else the workspace's.
pub(super) fn prune_log(
    before: &str,
    (path, workspace): (Option<PathBuf>, Option<&Path>),
    key: Option<&Path>,
    dry_run: bool,
    out: &mut dyn Write,
) -> i32 {
    let paths: Vec<PathBuf> = path.into_iter().collect();
    match crate::locate::log_paths(&paths, workspace) {
        Ok(p) => match p.first() {
            Some(p) => prune_cmd(before, p, key, dry_run, out),
            None => fail("prune", "name the log (FILE|DIR) or --workspace"),
        },
        Err(e) => fail("prune", &e),
    }
}

pub(super) fn prune_cmd(
    before: &str,
    path: &Path,
    signing_key: Option<&Path>,
    dry_run: bool,
    out: &mut dyn Write,
) -> i32 {
    let Some(cutoff) = prune::parse_date(before) else {
        return fail("prune", &format!("not a date: {before}"));
    };
    let key = match signing_key.map(keys::load_signing_key).transpose() {
        Ok(k) => k,
        Err(e) => return fail("prune", &e.to_string()),
    };
    if key.is_none() {
        // A log whose checkpoints are signed would not accept an unsigned tombstone at
        // the gateway's next start: refuse rather than strand it.
        if crate::checkpoints_are_signed(path) && !dry_run {
            return fail(
                "prune",
                "this log's checkpoints are signed: pass --signing-key (the policy's [audit] signing_key) so the tombstone is signed too",
            );
        }
        eprintln!(
            "fsgate audit prune: warning: no --signing-key, the tombstone is unsigned and retention cannot be told apart from deletion"
        );
    }
    match prune::prune(path, cutoff, key.as_ref(), dry_run) {
        Ok(outcome) => {
            let verb = if dry_run { "would remove" } else { "removed" };
            let mut text = String::new();
            for p in &outcome.removed {
                text.push_str(&format!("{verb} {}\n", fsgate_base::text::EscPath(p)));
            }
            match &outcome.tombstone {
                Some(t) => text.push_str(&format!(
                    "tombstone: seq {}..{} (last hash {})\n",
                    t.first_seq, t.last_seq, t.last_hash
                )),
                None => text.push_str("nothing to prune\n"),
            }
            written(out.write_all(text.as_bytes()))
        }
        Err(e @ prune::PruneError::Refused(_)) => {
            fsgate_base::text::eprint_line(&format!("fsgate audit prune: {e}"));
            1
        }
        Err(e) => fail("prune", &e.to_string()),
    }
}
