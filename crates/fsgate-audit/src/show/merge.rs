//! Several chains in one directory (one per gateway that ran at once): their records
//! interleaved by time, each chain's own order kept.

use std::path::Path;

use serde_json::Value;

use super::lines::{LineReader, Next};
use super::select::{OnRecord, ShowFilter, ShowStats, open, record_of};
use crate::series::Series;

/// Every file of every chain, opened up front: a chain rotated while it is read is still
/// read whole.
pub(super) struct Merged {
    chains: Vec<Vec<LineReader>>,
}

/// One chain's position: which file, and its next record.
struct Cursor {
    file: usize,
    head: Option<(Vec<u8>, Value)>,
}

impl Merged {
    pub(super) fn open(all: &[Series]) -> Result<Merged, String> {
        let chains = all
            .iter()
            .map(|s| s.files.iter().map(|f| open(f)).collect())
            .collect::<Result<_, _>>()?;
        Ok(Merged { chains })
    }

    /// Hands `each` every matching record, the earliest `ts` first.
    pub(super) fn each(
        &mut self,
        filter: &ShowFilter,
        seen: &mut ShowStats,
        each: &mut OnRecord<'_>,
    ) -> Result<(), String> {
        let mut cursors = Vec::with_capacity(self.chains.len());
        for files in &mut self.chains {
            for r in files.iter_mut() {
                r.rewind().map_err(|e| err(r.path(), e))?;
            }
            let mut c = Cursor {
                file: 0,
                head: None,
            };
            c.fill(files, seen)?;
            cursors.push(c);
        }
        loop {
            let next = cursors
                .iter()
                .enumerate()
                .filter_map(|(i, c)| c.head.as_ref().map(|(_, v)| (ts(v), i)))
                .min();
            let Some((_, i)) = next else {
                return Ok(());
            };
            let c = &mut cursors[i];
            if let Some((line, v)) = c.head.take()
                && filter.matches(&v)
            {
                seen.shown += 1;
                each(&line, &v)?;
            }
            c.fill(&mut self.chains[i], seen)?;
        }
    }
}

impl Cursor {
    /// Reads the chain's next record into `head` (None at the end of its last file).
    fn fill(&mut self, files: &mut [LineReader], seen: &mut ShowStats) -> Result<(), String> {
        while let Some(r) = files.get_mut(self.file) {
            match r.next().map_err(|e| err(r.path(), e))? {
                Next::Eof => self.file += 1,
                Next::Overlong => seen.skipped += 1,
                Next::Line => match record_of(r.line()) {
                    Some(v) => {
                        self.head = Some((r.line().to_vec(), v));
                        return Ok(());
                    }
                    None => seen.skipped += 1,
                },
            }
        }
        self.head = None;
        Ok(())
    }
}

/// The record's time (fixed-width UTC, so text order is time order); none sorts first.
fn ts(v: &Value) -> String {
    v.get("ts").and_then(Value::as_str).unwrap_or("").to_owned()
}

fn err(path: &Path, e: std::io::Error) -> String {
    format!("{}: {e}", fsgate_base::text::EscPath(path))
}
