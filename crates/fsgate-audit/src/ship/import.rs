//! `fsgate audit import-syslog`: rebuilds a log from what a collector wrote: finds the
//! record in each line (the MSG, however the collector's template framed it), drops
//! duplicates by seq, orders by seq, names every gap, and writes a log file that
//! `fsgate audit verify` checks.
//!
//! Memory grows with the number of records (an index entry each), not their bytes: the
//! records are copied from the input files in a second pass.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use fsgate_base::sha256::Sha256;

use super::frame::seq_of;
use super::reader::MAX_LINE;

/// Where a record starts in a line: every record line begins with its seq.
const RECORD_START: &[u8] = b"{\"seq\":";

/// Where one record is, and a digest of its bytes to tell duplicates from conflicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Found {
    file: usize,
    offset: u64,
    len: usize,
    digest: [u8; 16],
}

/// What the import found.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ImportReport {
    /// Records written.
    pub records: u64,
    /// First and last seq written.
    pub first_seq: Option<u64>,
    /// Last seq written.
    pub last_seq: Option<u64>,
    /// Copies of a record already seen (at-least-once delivery), dropped.
    pub duplicates: u64,
    /// Lines without a record (or cut off), skipped.
    pub skipped_lines: u64,
    /// Seqs seen with two different contents (the first is kept).
    pub conflicts: Vec<u64>,
    /// Missing seq ranges, `first..=last` (from seq 1).
    pub gaps: Vec<(u64, u64)>,
}

impl ImportReport {
    /// 0 complete, 1 gaps or conflicts.
    pub(crate) fn exit_code(&self) -> i32 {
        if self.gaps.is_empty() && self.conflicts.is_empty() && self.records > 0 {
            0
        } else {
            1
        }
    }

    /// One line per finding, for stderr.
    pub(crate) fn render(&self, out: &Path) -> String {
        let mut s = match (self.first_seq, self.last_seq) {
            (Some(a), Some(b)) => format!(
                "imported {} records, seq {a}..{b}, into {}; {} duplicates dropped, {} lines without a record skipped\n",
                self.records,
                out.display(),
                self.duplicates,
                self.skipped_lines
            ),
            _ => "no record found in the input\n".to_owned(),
        };
        for (a, b) in &self.gaps {
            if a == b {
                s.push_str(&format!("gap: seq {a} is missing\n"));
            } else {
                s.push_str(&format!(
                    "gap: seq {a}..{b} are missing ({} records)\n",
                    b - a + 1
                ));
            }
        }
        if !self.conflicts.is_empty() {
            let shown: Vec<String> = self.conflicts.iter().take(10).map(u64::to_string).collect();
            s.push_str(&format!(
                "conflict: {} seqs arrived with two different records (two logs in one input? filter with --log-id): {}{}\n",
                self.conflicts.len(),
                shown.join(", "),
                if self.conflicts.len() > 10 { ", ..." } else { "" }
            ));
        }
        s
    }
}

/// Imports `inputs` into the new file `out`. `log_id`: keep only lines that carry
/// this token (the PROCID of fsgate's RFC 5424 messages) before the record.
pub(crate) fn import(
    inputs: &[PathBuf],
    out: &Path,
    log_id: Option<&str>,
) -> Result<ImportReport, String> {
    let mut report = ImportReport::default();
    let mut index: BTreeMap<u64, Found> = BTreeMap::new();
    for (n, path) in inputs.iter().enumerate() {
        let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        scan(file, &mut |offset, line| {
            let Some((seq, at)) = find_record(line, log_id) else {
                report.skipped_lines += 1;
                return;
            };
            let rec = &line[at..];
            let digest = digest16(rec);
            let found = Found {
                file: n,
                offset: offset + at as u64,
                len: rec.len(),
                digest,
            };
            match index.get(&seq) {
                None => {
                    index.insert(seq, found);
                }
                Some(f) if f.digest == digest => report.duplicates += 1,
                Some(_) => report.conflicts.push(seq),
            }
        })
        .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    report.conflicts.sort_unstable();
    report.conflicts.dedup();
    report.gaps = gaps(index.keys().copied());
    report.first_seq = index.keys().next().copied();
    report.last_seq = index.keys().next_back().copied();
    report.records = index.len() as u64;
    write_out(inputs, &index, out)?;
    Ok(report)
}

/// The seq of the record in `line` and where it starts, if the line has one (and, with
/// `log_id`, carries that token before it).
fn find_record(line: &[u8], log_id: Option<&str>) -> Option<(u64, usize)> {
    let at = memchr::memmem::find(line, RECORD_START)?;
    if let Some(id) = log_id
        && !line[..at]
            .split(|b| *b == b' ')
            .any(|tok| tok == id.as_bytes())
    {
        return None;
    }
    // A record is a JSON object: the line ends with it (a collector's template may
    // add nothing after the MSG but the newline).
    let rec = &line[at..];
    if rec.last() != Some(&b'}') {
        return None;
    }
    Some((seq_of(rec)?, at))
}

fn digest16(b: &[u8]) -> [u8; 16] {
    let full = Sha256::digest(b);
    let mut d = [0; 16];
    d.copy_from_slice(&full[..16]);
    d
}

/// The missing ranges between seq 1 and the last seq present.
fn gaps(seqs: impl Iterator<Item = u64>) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut expected = 1;
    for s in seqs {
        if s > expected {
            out.push((expected, s - 1));
        }
        expected = s + 1;
    }
    out
}

/// Calls `each(offset, line)` for every line (without its newline, a trailing `\r`
/// kept); a line longer than [`MAX_LINE`] is handed over empty.
fn scan(mut file: File, each: &mut dyn FnMut(u64, &[u8])) -> std::io::Result<()> {
    let mut buf: Vec<u8> = Vec::with_capacity(128 * 1024);
    let mut chunk = vec![0u8; 64 * 1024];
    let mut base = 0u64; // file offset of buf[0]
    let mut overlong = false;
    loop {
        let n = file.read(&mut chunk)?;
        if n == 0 {
            if !buf.is_empty() && !overlong {
                each(base, &buf);
            }
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut start = 0;
        while let Some(nl) = memchr::memchr(b'\n', &buf[start..]) {
            if overlong {
                each(base + start as u64, &[]);
                overlong = false;
            } else {
                each(base + start as u64, &buf[start..start + nl]);
            }
            start += nl + 1;
        }
        buf.drain(..start);
        base += start as u64;
        if buf.len() > MAX_LINE {
            overlong = true;
            base += buf.len() as u64;
            buf.clear();
        }
    }
}

/// Writes the records in seq order, one per line, into the new file `out`.
fn write_out(inputs: &[PathBuf], index: &BTreeMap<u64, Found>, out: &Path) -> Result<(), String> {
    let err = |e: std::io::Error| format!("{}: {e}", out.display());
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(out)
        .map_err(err)?;
    let mut w = BufWriter::new(file);
    let mut files: Vec<File> = inputs
        .iter()
        .map(|p| File::open(p).map_err(|e| format!("{}: {e}", p.display())))
        .collect::<Result<_, _>>()?;
    let mut rec = Vec::new();
    for f in index.values() {
        let input = &mut files[f.file];
        rec.resize(f.len, 0);
        input
            .seek(SeekFrom::Start(f.offset))
            .and_then(|_| input.read_exact(&mut rec))
            .map_err(|e| format!("{}: {e}", inputs[f.file].display()))?;
        w.write_all(&rec)
            .and_then(|()| w.write_all(b"\n"))
            .map_err(err)?;
    }
    w.flush().map_err(err)?;
    w.get_ref().sync_all().map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(seq: u64, x: &str) -> String {
        format!("{{\"seq\":{seq},\"ts\":\"t\",\"x\":\"{x}\"}}")
    }

    #[test]
    fn dedupes_orders_and_names_gaps() {
        let tmp = tempfile::tempdir().unwrap();
        let a = tmp.path().join("a.log");
        let b = tmp.path().join("b.log");
        // Two collector files, framed differently, with a resend after a reconnect.
        let text_a = format!(
            "LOGID 1 {}\nLOGID 2 {}\nsome other line\nLOGID 3 {}\nLOGID 2 {}\n",
            rec(1, "a"),
            rec(2, "b"),
            rec(3, "c"),
            rec(2, "b")
        );
        let text_b = format!(
            "<37>1 T h fsgate LOGID 6 - {}\n{}\n",
            rec(6, "f"),
            rec(4, "d")
        );
        std::fs::write(&a, text_a).unwrap();
        std::fs::write(&b, text_b).unwrap();
        let out = tmp.path().join("out.jsonl");
        let r = import(&[b.clone(), a.clone()], &out, None).unwrap();
        assert_eq!(r.records, 5);
        assert_eq!((r.first_seq, r.last_seq), (Some(1), Some(6)));
        assert_eq!(r.duplicates, 1);
        assert_eq!(r.skipped_lines, 1);
        assert_eq!(r.gaps, [(5, 5)]);
        assert_eq!(r.exit_code(), 1);
        let written = std::fs::read_to_string(&out).unwrap();
        let want: String = [(1, "a"), (2, "b"), (3, "c"), (4, "d"), (6, "f")]
            .iter()
            .map(|(s, x)| rec(*s, x) + "\n")
            .collect();
        assert_eq!(written, want);
        assert!(r.render(&out).contains("gap: seq 5 is missing"));
        // The output is never overwritten.
        assert!(import(std::slice::from_ref(&a), &out, None).is_err());
        // Only one log's lines with --log-id; a conflicting copy is named.
        let out2 = tmp.path().join("out2.jsonl");
        std::fs::write(&b, format!("OTHER 1 {}\n", rec(1, "z"))).unwrap();
        let r2 = import(&[a.clone(), b.clone()], &out2, Some("LOGID")).unwrap();
        assert_eq!((r2.records, r2.skipped_lines), (3, 2));
        assert!(r2.conflicts.is_empty() && r2.gaps.is_empty());
        let out3 = tmp.path().join("out3.jsonl");
        let r3 = import(&[a, b], &out3, None).unwrap();
        assert_eq!(r3.conflicts, [1]);
    }
}
