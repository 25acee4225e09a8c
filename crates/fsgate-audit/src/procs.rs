//! Which command read or changed what, for `fsgate audit report`: per process a
//! record's `peer` names (each process of `fsgate run`, a stdio peer), its reads
//! (a coalesced `reads` record counts every read it holds), changes and refusals, and
//! the paths of each. Processes and paths are capped; what is left out is counted.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Value;

use super::process::{Process, paths_of};
use super::rows::{MAX_ROWS, text};

/// Paths listed per process and kind at most.
pub(crate) const MAX_PATHS: usize = 20;

/// Paths, the first [`MAX_PATHS`] distinct ones kept, the others counted.
#[derive(Debug, Clone, Default)]
pub(crate) struct Paths {
    pub listed: Vec<String>,
    pub omitted: u64,
}

impl Paths {
    fn add(&mut self, path: &str) {
        if self.listed.iter().any(|p| p == path) {
            return;
        }
        if self.listed.len() >= MAX_PATHS {
            self.omitted += 1;
            return;
        }
        self.listed.push(path.to_owned());
    }
}

/// What one process did.
#[derive(Debug, Clone, Default)]
pub(crate) struct Proc {
    pub process: Process,
    pub session: String,
    pub reads: u64,
    pub changes: u64,
    pub refusals: u64,
    pub read: Paths,
    pub changed: Paths,
    pub refused: Paths,
    pub first_ts: String,
    pub last_ts: String,
}

/// Every process, by its `peer`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Procs {
    pub by_peer: BTreeMap<String, Proc>,
    /// Requests of processes not listed (over [`MAX_ROWS`]).
    pub omitted: u64,
}

impl Procs {
    /// Takes in one request record.
    pub(crate) fn observe(&mut self, v: &Value, is_change: bool) {
        let peer = text(v, "peer");
        let Some(process) = Process::of(peer) else {
            return;
        };
        if !self.by_peer.contains_key(peer) && self.by_peer.len() >= MAX_ROWS {
            self.omitted += 1;
            return;
        }
        let p = self.by_peer.entry(peer.to_owned()).or_insert_with(|| Proc {
            process,
            session: text(v, "session").to_owned(),
            first_ts: text(v, "ts").to_owned(),
            ..Proc::default()
        });
        p.last_ts = text(v, "ts").to_owned();
        let paths = paths_of(v);
        let (counter, list) = match (text(v, "decision"), text(v, "outcome")) {
            ("deny", _) => (&mut p.refusals, &mut p.refused),
            ("allow", _) if is_change => (&mut p.changes, &mut p.changed),
            ("allow", _) => (&mut p.reads, &mut p.read),
            _ => return,
        };
        let n = match text(v, "op") {
            crate::coalesce::OP_READS => v["details"]["count"].as_u64().unwrap_or(1),
            _ => 1,
        };
        *counter += n;
        for path in paths {
            list.add(path);
        }
    }
}

/// The report's section: one row per process.
pub(crate) fn section(o: &mut String, procs: &Procs) {
    use super::rows::esc;
    let _ = writeln!(
        o,
        "<section id=\"processes\"><h2>By process ({})</h2>",
        procs.by_peer.len()
    );
    if procs.by_peer.is_empty() {
        o.push_str("<p>No record names a process.</p></section>\n");
        return;
    }
    o.push_str(
        "<table class=\"reads\"><thead><tr><th>process</th><th>command</th><th>session</th>\
         <th class=\"n\">reads</th><th class=\"n\">changes</th><th class=\"n\">refusals</th>\
         <th>read</th><th>changed</th><th>refused</th><th>first</th><th>last</th></tr></thead><tbody>\n",
    );
    for p in procs.by_peer.values() {
        let _ = writeln!(
            o,
            "<tr><td><code>{}</code></td><td><code>{}</code></td><td><code>{}</code></td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td class=\"t\">{}</td><td class=\"t\">{}</td></tr>",
            esc(&p.process.short()),
            esc(&p.process.command_line()),
            esc(&p.session),
            p.reads,
            p.changes,
            p.refusals,
            paths_cell(&p.read),
            paths_cell(&p.changed),
            paths_cell(&p.refused),
            esc(&p.first_ts),
            esc(&p.last_ts),
        );
    }
    o.push_str("</tbody></table>\n");
    if procs.omitted > 0 {
        let _ = writeln!(
            o,
            "<p class=\"note\">{} requests of further processes are not listed (at most {MAX_ROWS} rows are).</p>",
            procs.omitted
        );
    }
    o.push_str("</section>\n");
}

fn paths_cell(paths: &Paths) -> String {
    let mut cell: Vec<String> = (paths.listed.iter())
        .map(|p| format!("<code>{}</code>", super::rows::esc(p)))
        .collect();
    if paths.omitted > 0 {
        cell.push(format!("and {} more", paths.omitted));
    }
    cell.join(" ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_process_counts_its_reads_changes_and_refusals_with_their_paths() {
        let cat = r#"pid 9 ppid 1 exe "/usr/bin/cat" argv ["cat","a"]"#;
        let mut p = Procs::default();
        p.observe(
            &json!({"peer": cat, "op": "reads", "decision": "allow", "outcome": "ok",
                    "details": {"count": 3, "reads": {"stat": [["a", 2]], "open": [["a", 1, 1, "ab"]]}}}),
            false,
        );
        p.observe(
            &json!({"peer": cat, "op": "write_text_file", "path": "b", "decision": "allow", "outcome": "ok"}),
            true,
        );
        p.observe(
            &json!({"peer": cat, "op": "stat", "path": ".env", "decision": "deny", "outcome": "-32003"}),
            false,
        );
        p.observe(
            &json!({"peer": "10.0.0.1:3", "op": "stat", "decision": "allow"}),
            false,
        );
        let c = &p.by_peer[cat];
        assert_eq!((c.reads, c.changes, c.refusals), (3, 1, 1));
        assert_eq!(c.read.listed, ["a"]);
        assert_eq!(
            (c.changed.listed.as_slice(), c.refused.listed.as_slice()),
            (&["b".to_string()][..], &[".env".to_string()][..])
        );
        assert_eq!(p.by_peer.len(), 1);
        let mut html = String::new();
        section(&mut html, &p);
        assert!(html.contains("cat[9]") && html.contains("cat a"), "{html}");
    }
}
