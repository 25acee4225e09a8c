//! Step 2 of verification (FORMAT.md section 9): walking the chain through a series,
//! file by file, in fixed-size chunks (memory stays bounded whatever the log's size),
//! checking the lines of each chunk on all cores.

use std::io::Read;
use std::path::Path;

use super::line::{self, LineFault, LineInfo, check_line};
use super::record::{self, GENESIS_PREV};
use super::report::{FailureKind, FileReport};
use super::series::{self, Series};
use super::signed::{SigStatus, check_signature};
use super::tombstone::Tombstone;
use super::verify_run::Run;

/// Bytes read per chunk.
const CHUNK: usize = 8 << 20;

/// Tests shrink the chunk to cross many chunk boundaries on small logs.
#[cfg(test)]
pub(crate) static CHUNK_OVERRIDE: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

fn chunk_bytes() -> usize {
    #[cfg(test)]
    {
        let n = CHUNK_OVERRIDE.load(std::sync::atomic::Ordering::Relaxed);
        if n > 0 {
            return n;
        }
    }
    CHUNK
}

/// Checks lines on all cores when there are many (each line checks on its own).
fn check_all(lines: &[&[u8]]) -> Vec<Result<LineInfo, LineFault>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    if threads < 2 || lines.len() < 4096 {
        let mut scratch = Vec::new();
        return lines.iter().map(|l| check_line(l, &mut scratch)).collect();
    }
    let chunk = lines.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = lines
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    let mut scratch = Vec::new();
                    part.iter()
                        .map(|l| check_line(l, &mut scratch))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| {
                h.join()
                    .unwrap_or_else(|_| vec![Err(LineFault::Malformed("checker panicked".into()))])
            })
            .collect()
    })
}

/// Reads until `buf` is full or the file ends; returns the bytes read.
fn fill(file: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Whether a line of `path` after byte `from` checks out and has `seq` (only asked on
/// the failure path, to tell reordered records from missing ones).
fn later_line_has_seq(path: &Path, from: u64, seq: u64) -> bool {
    let Ok(bytes) = std::fs::read(path) else {
        return false;
    };
    let from = usize::try_from(from).unwrap_or(usize::MAX).min(bytes.len());
    let mut scratch = Vec::new();
    line::lines(&bytes[from..])
        .any(|(_, l)| check_line(l, &mut scratch).is_ok_and(|i| i.seq == seq))
}

/// Why the records before `first` are absent, when the record at `first` starts a file
/// (it carries the log id, as only a file's first record does): the rotated file that
/// would hold them, `NAME.<from>`, is not among the series' files (not given though
/// there, or missing). `after` names the file before the gap, which may instead have
/// lost its last records. None if that file is among them.
fn absent_file(s: &Series, from: u64, after: Option<&str>) -> Option<String> {
    let held = s.files.iter().any(|f| {
        let name = series::file_name(f);
        series::split_name(&name) == (s.base.as_str(), Some(from))
    });
    if held {
        return None;
    }
    let path = s.dir.join(series::rotated_name(&s.base, from));
    if path.exists() {
        return Some(format!(
            "{} holds them but was not given (name the active file or its directory to take the whole series)",
            path.display()
        ));
    }
    let unless = after.map_or(String::new(), |a| {
        format!(" (unless {a} lost its last records)")
    });
    Some(format!(
        "the rotated file {} is missing{unless}",
        path.display()
    ))
}

/// Where the walk is in the series.
struct Walk<'t> {
    /// The series walked (its files, to name one that is missing).
    series: &'t Series,
    /// Seq and hash of the last record that passed.
    expected: Option<(u64, [u8; 32])>,
    /// The previous file's name, for messages.
    prev_file: Option<String>,
    /// The tombstones that parsed.
    tombs: Vec<&'t Tombstone>,
    /// Write-ahead intents not yet closed by an outcome or a reconciliation.
    intents: super::intents::Unclosed,
}

impl Walk<'_> {
    /// Links one record that checked out on its own into the chain; `false` (with the
    /// failure recorded) if it does not fit. `later` answers "does a later line of this
    /// file have this seq?".
    fn link(
        &mut self,
        run: &mut Run<'_>,
        info: &LineInfo,
        at: (&Path, u64),
        first_in_file: bool,
        later: impl FnOnce(u64) -> bool,
    ) -> bool {
        let fits = match self.expected {
            None if info.prev != GENESIS_PREV => self.starts_after_tombstone(run, info, at),
            None => true,
            Some((eseq, ehash)) if info.seq != eseq + 1 || info.prev != ehash => {
                let (kind, msg) = self.misfit(info, at, first_in_file, eseq, later);
                run.fail(kind, Some(info.seq), Some(at), msg);
                false
            }
            Some(_) => true,
        };
        fits && self.adopt(run, info, at)
    }

    /// A series that does not start at genesis: a tombstone must cover the records
    /// before its first (its signature is reported); `false` with the failure recorded
    /// if none does.
    fn starts_after_tombstone(&self, run: &mut Run<'_>, info: &LineInfo, at: (&Path, u64)) -> bool {
        let found = self.tombs.iter().find(|t| {
            t.last_seq.checked_add(1) == Some(info.seq) && t.last_hash == hex::encode(info.prev)
        });
        let Some(t) = found else {
            let mut msg = format!(
                "records before seq {} are missing: the series does not start at genesis and no tombstone covers them",
                info.seq
            );
            if let Some(why) = info
                .log
                .as_ref()
                .and_then(|_| absent_file(self.series, 1, None))
            {
                msg = format!("{msg}: {why}");
            }
            run.fail(FailureKind::Missing, Some(info.seq), Some(at), msg);
            return false;
        };
        let how = match check_signature(&t.obj, run.opts.pinned.as_ref()) {
            SigStatus::ValidPinned => "signed by the pinned key",
            SigStatus::ValidUnpinned(_) => "signed by a key nobody pinned: pass --pubkey",
            SigStatus::Unsigned => "UNSIGNED: a deletion could look the same",
            SigStatus::Invalid(_) => "with a bad signature",
        };
        run.rep.warnings.push(format!(
            "records {}..{} were pruned on {} (tombstone {how})",
            t.first_seq, t.last_seq, t.ts
        ));
        true
    }

    /// Why a record does not follow seq `eseq` (the last that passed): a rotated file
    /// absent, a file that does not continue the previous one, an altered record,
    /// records out of order, or records missing.
    fn misfit(
        &self,
        info: &LineInfo,
        at: (&Path, u64),
        first_in_file: bool,
        eseq: u64,
        later: impl FnOnce(u64) -> bool,
    ) -> (FailureKind, String) {
        let prev_file = self.prev_file.as_deref().unwrap_or("the previous file");
        let starts_file = first_in_file && info.log.is_some();
        let absent = (starts_file && info.seq > eseq + 1)
            .then(|| absent_file(self.series, eseq + 1, self.prev_file.as_deref()))
            .flatten();
        if let Some(why) = absent {
            (
                FailureKind::Gap,
                format!(
                    "records {}..{} are missing between {prev_file} and {}: {why}",
                    eseq + 1,
                    info.seq - 1,
                    series::file_name(at.0),
                ),
            )
        } else if first_in_file {
            (
                FailureKind::Gap,
                format!(
                    "{} does not continue {prev_file}: it starts at seq {} but seq {} with the previous file's last hash was expected",
                    series::file_name(at.0),
                    info.seq,
                    eseq + 1
                ),
            )
        } else if info.seq == eseq + 1 {
            (
                FailureKind::Modified,
                format!(
                    "record seq {} does not chain on seq {eseq}: one of the two was altered",
                    info.seq
                ),
            )
        } else if info.seq <= eseq || later(eseq + 1) {
            (
                FailureKind::Reordered,
                format!(
                    "records out of order: seq {} where seq {} was expected",
                    info.seq,
                    eseq + 1
                ),
            )
        } else {
            (
                FailureKind::Missing,
                format!("records missing: seq {} follows seq {eseq}", info.seq),
            )
        }
    }

    /// Takes a record that fits the chain: it must belong to the series' log; a break
    /// or a crash recovery is reported; its hash is kept where a checkpoint wants it
    /// and as the one the next record must chain on.
    fn adopt(&mut self, run: &mut Run<'_>, info: &LineInfo, at: (&Path, u64)) -> bool {
        if let Some(log) = &info.log {
            match &run.rep.log_id {
                None => run.rep.log_id = Some(log.clone()),
                Some(id) if id != log => {
                    let msg = format!("record seq {} belongs to another log ({log})", info.seq);
                    run.fail(FailureKind::Gap, Some(info.seq), Some(at), msg);
                    return false;
                }
                Some(_) => {}
            }
        }
        if let Some(kind) = &info.kind {
            run.rep.warnings.push(match kind.as_str() {
                record::KIND_BREAK => format!(
                    "seq {} is a break: an operator started on a log that did not verify (see its details)",
                    info.seq
                ),
                _ => format!(
                    "seq {} records a crash recovery: a torn last line was cut off (see its details)",
                    info.seq
                ),
            });
        }
        if let Some(slot) = run.wanted.get_mut(&info.seq) {
            *slot = Some(info.hash);
        }
        self.expected = Some((info.seq, info.hash));
        true
    }
}

/// Walks the chain through every file of the series (FORMAT.md section 9, step 2).
pub(crate) fn walk(run: &mut Run<'_>, s: &Series, tombs: &[(u64, Result<Tombstone, String>)]) {
    let mut w = Walk {
        series: s,
        expected: None,
        prev_file: None,
        tombs: tombs.iter().filter_map(|(_, t)| t.as_ref().ok()).collect(),
        intents: super::intents::Unclosed::default(),
    };
    let last_index = s.files.len().saturating_sub(1);
    let mut buf: Vec<u8> = Vec::new();
    for (fi, path) in s.files.iter().enumerate() {
        if !w.file(run, path, fi == last_index, &mut buf) {
            return;
        }
        w.prev_file = Some(series::file_name(path));
    }
    if run.rep.records == 0 {
        run.rep.warnings.push("the log holds no records".into());
    }
    run.rep.warnings.extend(w.intents.warnings());
    run.rep.open_intents = w.intents.report();
}

/// Where the walk is in one file.
struct InFile {
    report: FileReport,
    /// The timestamp of the last record that passed in this file.
    last_ts: Option<[u8; super::canonical::TS_LEN]>,
    line_no: u64,
    /// File offset of the buffer's first byte.
    offset: u64,
}

impl InFile {
    /// Counts a record that passed, in the file's report and the series'.
    fn count(&mut self, run: &mut Run<'_>, info: &LineInfo) {
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
fn unreadable(run: &mut Run<'_>, path: &Path, e: std::io::Error) {
    let msg = format!("{}: {e}", path.display());
    run.fail(FailureKind::Unreadable, None, None, msg);
}

impl Walk<'_> {
    /// Walks one file chunk by chunk; `false` when the walk stops (a failure recorded).
    fn file(&mut self, run: &mut Run<'_>, path: &Path, is_last: bool, buf: &mut Vec<u8>) -> bool {
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
    fn chunk(
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
    fn end_file(&self, run: &mut Run<'_>, at: InFile) {
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
    fn torn_tail(
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
