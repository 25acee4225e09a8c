//! The walk through one file: chunk by chunk, each line counted or linked, and a torn
//! last line told from a broken one.

use std::path::Path;

use super::Walk;
use super::chunks::{check_all, chunk_bytes, fill, later_line_has_seq};
use crate::line::{self, LineFault, LineInfo};
use crate::report::{FailureKind, FileReport};
use crate::series::{self};
use crate::verify_run::Run;

/// Where the walk is in one file.
pub(super) struct InFile {
    report: FileReport,
    /// The timestamp of the last record that passed in this file.
    last_ts: Option<[u8; crate::canonical::TS_LEN]>,
    line_no: u64,
    /// File offset of the buffer's first byte.
    offset: u64,
}

impl InFile {
    /// Counts a record that passed, in the file's report and the series'.
    pub(super) fn count(&mut self, run: &mut Run<'_>, info: &LineInfo) {
        let fr = &mut self.report;
        if fr.records == 0 {
            fr.first_seq = Some(info.seq);
            fr.first_ts = Some(info.ts_str().to_owned());
            if run.rep.records == 0 {
                run.rep.first_seq = Some(info.seq);
                run.rep.first_ts.clone_from(&fr.first_ts);
            }
        }
        fr.records += 1;
        run.rep.records += 1;
        self.last_ts = Some(info.ts);
    }
}

/// Records that `path` could not be read.
pub(super) fn unreadable(run: &mut Run<'_>, path: &Path, e: std::io::Error) {
    let msg = format!("{}: {e}", path.display());
    run.fail(FailureKind::Unreadable, None, None, msg);
}

impl Walk<'_> {
    /// Walks one file chunk by chunk; `false` when the walk stops (a failure recorded).
    pub(super) fn file(
        &mut self,
        run: &mut Run<'_>,
        path: &Path,
        is_last: bool,
        buf: &mut Vec<u8>,
    ) -> bool {
        let mut file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) => {
                unreadable(run, path, e);
                return false;
            }
        };
        let mut at = InFile {
            report: FileReport {
                path: path.to_path_buf(),
                records: 0,
                first_seq: None,
                last_seq: None,
                first_ts: None,
                last_ts: None,
                last_hash: None,
            },
            last_ts: None,
            line_no: 0,
            offset: 0,
        };
        buf.clear();
        loop {
            let old = buf.len();
            buf.resize(old + chunk_bytes(), 0);
            let n = match fill(&mut file, &mut buf[old..]) {
                Ok(n) => n,
                Err(e) => {
                    unreadable(run, path, e);
                    return false;
                }
            };
            buf.truncate(old + n);
            let eof = n == 0;
            let complete = buf.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            self.chunk(run, path, (&buf[..complete], eof), &mut at);
            if run.failed() {
                break;
            }
            buf.drain(..complete);
            at.offset += complete as u64;
            if eof {
                break;
            }
        }
        let line_no = at.line_no;
        self.end_file(run, at);
        if run.failed() {
            return false;
        }
        if !buf.is_empty() {
            self.torn_tail(run, path, (line_no + 1, buf.len()), is_last);
            return false;
        }
        true
    }

    /// Checks the complete lines of one chunk (on all cores) and links them in order,
    /// stopping at the first that fails.
    pub(super) fn chunk(
        &mut self,
        run: &mut Run<'_>,
        path: &Path,
        (bytes, eof): (&[u8], bool),
        at: &mut InFile,
    ) {
        let lines: Vec<&[u8]> = line::lines(bytes).map(|(_, l)| l).collect();
        let infos = check_all(&lines);
        let end = at.offset + bytes.len() as u64;
        for (i, res) in infos.iter().enumerate() {
            at.line_no += 1;
            let here = (path, at.line_no);
            let info = match res {
                Ok(info) => info,
                Err(LineFault::Malformed(m)) => {
                    run.fail(
                        FailureKind::Malformed,
                        None,
                        Some(here),
                        format!("malformed record: {m}"),
                    );
                    break;
                }
                Err(LineFault::Modified { seq }) => {
                    run.fail(
                        FailureKind::Modified,
                        Some(*seq),
                        Some(here),
                        format!(
                            "record seq {seq} was modified: its hash does not match its content"
                        ),
                    );
                    break;
                }
            };
            let later = |seq: u64| {
                infos[i + 1..]
                    .iter()
                    .any(|r| r.as_ref().is_ok_and(|x| x.seq == seq))
                    || (!eof && later_line_has_seq(path, end, seq))
            };
            if !self.link(run, info, here, at.line_no == 1, later) {
                break;
            }
            self.intents.observe_line(lines[i]);
            run.observe_leaf(info.seq, lines[i]);
            at.count(run, info);
        }
    }

    /// The file's last record that passed, in its report and the series', and the
    /// report added to the run.
    pub(super) fn end_file(&self, run: &mut Run<'_>, at: InFile) {
        let mut fr = at.report;
        if let (Some((seq, hash)), Some(ts)) = (self.expected, at.last_ts) {
            let ts = String::from_utf8_lossy(&ts).into_owned();
            fr.last_seq = Some(seq);
            fr.last_hash = Some(hex::encode(hash));
            fr.last_ts = Some(ts.clone());
            run.rep.last_seq = Some(seq);
            run.rep.last_ts = Some(ts);
            run.last_hash = Some(hash);
        }
        run.rep.files.push(fr);
    }

    /// A file that ends without a newline: a truncated tail when it is the series'
    /// last file (the next seq is what was lost), else a malformed file.
    pub(super) fn torn_tail(
        &self,
        run: &mut Run<'_>,
        path: &Path,
        (line_no, torn): (u64, usize),
        is_last: bool,
    ) {
        let at = Some((path, line_no));
        let name = series::file_name(path);
        if is_last {
            run.fail(
                FailureKind::Truncated,
                self.expected.map(|(s, _)| s + 1),
                at,
                format!(
                    "truncated tail: the last line of {name} is torn ({torn} bytes without a newline)"
                ),
            );
        } else {
            run.fail(
                FailureKind::Malformed,
                None,
                at,
                format!("{name} ends with {torn} bytes without a newline"),
            );
        }
    }
}
