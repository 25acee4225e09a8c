//! `fsgate audit ship-status`: per log and destination, the seq delivered, the log's
//! head, how far behind, the state and the last error, from the files alone (the
//! gateway may be running or not).

use std::path::PathBuf;

use super::cursor::{CursorDoc, DestState, cursor_name};
use crate::series::{self, Series};
use fsgate_base::text::Esc;

/// One destination's line.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DestStatus {
    /// The destination's name.
    pub destination: String,
    /// Records of the log not known delivered.
    pub behind: u64,
    /// The rest of what the cursor file says.
    #[serde(flatten)]
    pub state: DestState,
}

/// One log's status.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LogStatus {
    /// The active log file.
    pub log: String,
    /// The seq of its last complete record.
    pub head: u64,
    /// Its destinations (none if nothing was ever shipped from it).
    pub destinations: Vec<DestStatus>,
}

/// Reads the status of every log among `paths`.
pub(crate) fn collect(paths: &[PathBuf]) -> Result<Vec<LogStatus>, String> {
    series::discover(paths)?.iter().map(log_status).collect()
}

fn log_status(s: &Series) -> Result<LogStatus, String> {
    let path = if s.dir.as_os_str().is_empty() {
        std::path::Path::new(".")
    } else {
        &s.dir
    };
    let dir = cap_std::fs::Dir::open_ambient_dir(path, cap_std::ambient_authority())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let head = super::reader::head_seq(&dir, &s.base).map_err(|e| e.to_string())?;
    let doc = CursorDoc::read(&dir, &cursor_name(&s.base));
    let destinations = doc
        .destinations
        .into_iter()
        .map(|(destination, state)| DestStatus {
            destination,
            behind: head.saturating_sub(state.seq),
            state,
        })
        .collect();
    Ok(LogStatus {
        log: s.display_name(),
        head,
        destinations,
    })
}

/// The table people read.
pub(crate) fn render(logs: &[LogStatus]) -> String {
    let mut out = String::new();
    for l in logs {
        out.push_str(&format!("log {} (head seq {})\n", Esc(&l.log), l.head));
        if l.destinations.is_empty() {
            out.push_str("  nothing shipped from this log (no [audit] ship destination has run)\n");
            continue;
        }
        let width = l
            .destinations
            .iter()
            .map(|d| d.destination.chars().count())
            .max()
            .unwrap_or(0)
            .max("destination".len());
        out.push_str(&format!(
            "  {:<width$}  {:<10} {:>12} {:>10}  last error\n",
            "destination", "state", "shipped", "behind"
        ));
        for d in &l.destinations {
            let error = match (&d.state.error, &d.state.error_at) {
                (Some(e), Some(at)) => format!("{at}: {}", Esc(e)),
                (Some(e), None) => Esc(e).to_string(),
                _ => "-".into(),
            };
            let state = if d.state.state.is_empty() {
                "-"
            } else {
                &d.state.state
            };
            out.push_str(&format!(
                "  {:<width$}  {:<10} {:>12} {:>10}  {error}\n",
                Esc(&d.destination).to_string(),
                Esc(state).to_string(),
                d.state.seq,
                d.behind
            ));
            if let Some(lost) = &d.state.lost {
                out.push_str(&format!(
                    "  {:<width$}  records {} were pruned before they could be shipped\n",
                    "",
                    Esc(lost)
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_reads_the_cursor_and_the_head() {
        let tmp = tempfile::tempdir().unwrap();
        let mut text = String::new();
        for seq in 1..=5 {
            text.push_str(&format!("{{\"seq\":{seq},\"ts\":\"x\"}}\n"));
        }
        std::fs::write(tmp.path().join("audit.jsonl"), text).unwrap();
        std::fs::write(
            tmp.path().join(".audit.jsonl.ship"),
            r#"{"log":"ab","destinations":{"127.0.0.1:514":{"shipped":3,"state":"retrying","error":"connect: refused","errorAt":"2026-01-01T00:00:00.000000Z"}}}"#,
        )
        .unwrap();
        let logs = collect(&[tmp.path().to_path_buf()]).unwrap();
        assert_eq!(logs.len(), 1);
        assert_eq!(logs[0].head, 5);
        let d = &logs[0].destinations[0];
        assert_eq!((d.state.seq, d.behind), (3, 2));
        let table = render(&logs);
        assert!(table.contains("retrying"), "{table}");
        assert!(table.contains("connect: refused"), "{table}");
        let json = serde_json::to_value(&logs).unwrap();
        assert_eq!(json[0]["destinations"][0]["behind"], 2);
        assert_eq!(json[0]["destinations"][0]["shipped"], 3);
        assert_eq!(
            json[0]["destinations"][0]["errorAt"],
            "2026-01-01T00:00:00.000000Z"
        );
    }
}
