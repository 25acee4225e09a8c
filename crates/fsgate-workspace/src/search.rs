//! glob and grep over the tree, with ripgrep's searcher on files opened beneath the root.
//!
//! A tree is searched by up to one thread per core ([`super::search_pool`]); each file's
//! hits are taken into the answer in walk order, so the answer is the one a single
//! thread would give.

use globset::GlobMatcher;
use grep_regex::RegexMatcher;
use grep_searcher::sinks::Lossy;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder};

use std::fs::{File, Metadata};
use std::io::Read as _;

use std::borrow::Cow;

use cap_std::fs::Dir;

use super::gather::answer::{Cut, Reading, Room, Take};
use super::kind::FileKind;
use super::open::open_file_in;
use super::permits::Permits;
use super::read::{check_regular, is_binary};
use super::walk::{Entry, Visit};
use crate::error::WsError;
use crate::root::Workspace;
use fsgate_base::path::RelPath;

/// Longest line returned by grep; longer lines are cut (minified files).
const MAX_LINE_BYTES: usize = 4096;

/// One grep hit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrepMatch {
    /// The file.
    pub path: RelPath,
    /// 1-based line number.
    pub line_number: u64,
    /// The line, without its line ending.
    pub line: String,
}

/// Decides from a file's path and whole content whether grep may show its lines. Called
/// from the threads searching, hence `Sync`.
pub type ContentGate<'a> = dyn Fn(&RelPath, &[u8]) -> bool + Sync + 'a;

/// What to grep for.
pub struct GrepOptions<'a> {
    /// The compiled regex.
    pub matcher: &'a RegexMatcher,
    /// Only files whose name (or, for patterns with `/`, relative path) matches.
    pub include: Option<&'a IncludeGlob>,
    /// Stop after this many matches.
    pub max_results: usize,
    /// Skip files larger than this.
    pub max_file_bytes: u64,
    /// Stop once the hits would take this many bytes in the answer (then say so).
    pub max_answer_bytes: u64,
    /// Bytes each hit adds to the answer beyond its path and line (the root, when
    /// paths are shown absolute).
    pub item_extra: u64,
    /// A gate on each file's content: when given, the file is read whole and its lines
    /// are shown only if the gate passes those very bytes (so a file cannot change
    /// between the check and the search). A file met in a walk is judged only if it has
    /// a match (a file without one shows nothing either way); a file named on its own
    /// is judged first. `None`: no content check. Either way a file is read whole, and
    /// one a text read refuses as binary is not searched.
    pub content_gate: Option<&'a ContentGate<'a>>,
    /// Whether deciding which entries may be read needs each file's size (some rule
    /// has a size condition): a walk then reads each entry's metadata, else only its
    /// name and kind.
    pub entry_sizes: bool,
}

/// What a grep found.
#[derive(Debug, Default)]
pub struct GrepOutcome {
    /// The hits, in walk order and line order.
    pub hits: Vec<GrepMatch>,
    /// Cut at the answer's size or at the depth limit.
    pub truncated: bool,
    /// Files with a match (or, named on their own, any file) that the content gate
    /// refused: none of their lines is shown.
    pub withheld: usize,
}

/// An include filter: matched on the file name, or on the path if it contains `/`.
pub struct IncludeGlob {
    matcher: GlobMatcher,
    on_path: bool,
}

impl IncludeGlob {
    /// Compiles an include glob.
    pub fn new(pattern: &str) -> Result<IncludeGlob, globset::Error> {
        let on_path = pattern.contains('/');
        let glob = globset::GlobBuilder::new(pattern.trim_start_matches('/'))
            .literal_separator(true)
            .build()?;
        Ok(IncludeGlob {
            matcher: glob.compile_matcher(),
            on_path,
        })
    }

    fn matches(&self, e: &Entry) -> bool {
        if self.on_path {
            self.matcher.is_match(e.path.as_str())
        } else {
            self.matcher.is_match(&e.name)
        }
    }
}

impl Workspace {
    /// Paths under `base` matching `glob`, in walk order. Each `new_visible()` decides,
    /// per entry, whether it may be seen (and, for directories, entered); each thread
    /// of the walk makes its own (see [`Workspace::gather`]). `metadata`: `visible`
    /// needs entries' metadata (else they carry names and kinds only: a `statx` of
    /// every entry was most of a large glob's time).
    pub fn glob<V: FnMut(&Entry) -> bool>(
        &self,
        glob: &GlobMatcher,
        base: &RelPath,
        (max_answer_bytes, item_extra): (u64, u64),
        (new_visible, metadata): (&(dyn Fn() -> V + Sync), bool),
    ) -> Result<(Vec<RelPath>, bool), WsError> {
        let new_decider = || {
            let mut visible = new_visible();
            move |e: Cow<'_, Entry>| {
                if !visible(&e) {
                    Take::Skip
                } else if glob.is_match(e.path.as_str()) {
                    let cost = path_cost(&e.path, item_extra);
                    let item = match e {
                        Cow::Owned(e) => e.path,
                        Cow::Borrowed(e) => e.path.clone(),
                    };
                    Take::Keep {
                        item,
                        cost,
                        enter: true,
                    }
                } else {
                    Take::Enter
                }
            }
        };
        let reading = match metadata {
            true => Reading::Metadata,
            false => Reading::Names,
        };
        let room = Room {
            bytes: max_answer_bytes,
            items: usize::MAX,
        };
        // A base that is gone answers nothing (the walk reads leniently). Cut at the
        // depth limit: say so, as for the answer's size.
        let found = self.gather(base, (reading, room), &new_decider)?;
        Ok((found.items, found.cut != Cut::None))
    }

    /// Searches the file or tree at `start` (canonical). `readable` decides per entry
    /// whether it may be seen; a file it refuses is never opened.
    pub fn grep(
        &self,
        start: &RelPath,
        start_is_dir: bool,
        opts: &GrepOptions<'_>,
        readable: &dyn Fn(&Entry) -> bool,
    ) -> Result<GrepOutcome, WsError> {
        if start_is_dir {
            return self.grep_tree(start, opts, readable, Permits::take());
        }
        // Named on its own: judged whole first (refused as a read would be), and a file
        // that cannot be searched is an error, not passed over.
        let mut merge = Merge::new(opts);
        let mut scratch = Scratch::new();
        let found = self.search_file(&mut scratch, start, opts, merge.caps(u64::MAX), true)?;
        merge.take(start, found);
        Ok(merge.finish(false))
    }

    /// Searches the file at `path`, opened from the root: its hits within `caps`. With a
    /// content gate the file is read whole into `sc`'s buffer, and the gate judges those
    /// bytes: first if `gate_first`, else only once there is a hit to show.
    pub(super) fn search_file(
        &self,
        sc: &mut Scratch,
        path: &RelPath,
        opts: &GrepOptions<'_>,
        caps: Caps,
        gate_first: bool,
    ) -> Result<Found, WsError> {
        let (file, meta) = self.open_regular(path)?;
        search_opened(sc, (&file, &meta), path, opts, caps, gate_first)
    }
}

/// Searches the file `name` of the directory `dir` (a walk's handle), shown as `path`:
/// [`Workspace::search_file`] of a file met in a walk, opened where the walk holds its
/// directory, with the same checks on what was opened. A file within the size limit
/// is read only if `admit` takes its size (else [`Found::Later`]).
pub(super) fn search_in(
    sc: &mut Scratch,
    (dir, name): (&Dir, &str),
    path: &RelPath,
    opts: &GrepOptions<'_>,
    caps: Caps,
    admit: &mut dyn FnMut(u64) -> bool,
) -> Result<Found, WsError> {
    let file = open_file_in(dir, name).map_err(WsError::from_io)?;
    let meta = file.metadata()?;
    check_regular(&meta)?;
    if meta.len() <= opts.max_file_bytes && !admit(meta.len()) {
        return Ok(Found::Later);
    }
    search_opened(sc, (&file, &meta), path, opts, caps, false)
}

/// Searches an opened regular file (see [`Workspace::search_file`]).
fn search_opened(
    sc: &mut Scratch,
    (file, meta): (&File, &Metadata),
    path: &RelPath,
    opts: &GrepOptions<'_>,
    caps: Caps,
    gate_first: bool,
) -> Result<Found, WsError> {
    let limit = opts.max_file_bytes;
    if meta.len() > limit {
        return Err(WsError::TooLarge {
            size: meta.len(),
            limit,
        });
    }
    let mut hits = Collect::new(path, opts, caps);
    // A NUL in its first 8 KiB makes a file binary: known without reading the rest (a
    // build's objects and images are large).
    if starts_binary(file)? {
        return Ok(Found::Hits(Vec::new()));
    }
    read_whole(file, &mut sc.buf, meta.len(), limit)?;
    sc.shrink_later = sc.buf.capacity() > KEEP_BUFFER_BYTES;
    if sc.buf.len() as u64 > limit {
        return Err(WsError::TooLarge {
            size: sc.buf.len() as u64,
            limit,
        });
    }
    // What a text read refuses as binary (invalid UTF-8 among them, and UTF-16) is
    // not searched either: its lines would show what no read shows.
    if is_binary(&sc.buf) {
        return Ok(Found::Hits(Vec::new()));
    }
    let gate = opts.content_gate;
    if gate_first && gate.is_some_and(|g| !g(path, &sc.buf)) {
        return Ok(Found::Withheld);
    }
    let _ = sc.searcher.search_slice(opts.matcher, &sc.buf, hits.sink());
    let found = hits.finish();
    let shown = matches!(&found, Found::Hits(h) if !h.is_empty());
    if shown && !gate_first && gate.is_some_and(|g| !g(path, &sc.buf)) {
        return Ok(Found::Withheld);
    }
    Ok(found)
}

/// Whether the first 8 KiB of `file` hold a NUL byte (see [`is_binary`]).
fn starts_binary(file: &File) -> Result<bool, WsError> {
    use std::os::unix::fs::FileExt;
    let mut head = [0u8; 8192];
    let mut got = 0;
    while got < head.len() {
        match file.read_at(&mut head[got..], got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(WsError::from_io(e)),
        }
    }
    Ok(head[..got].contains(&0))
}

/// Reads `file` whole into `buf`, stopping one byte past `limit` (the file may have
/// grown since `size` was read from fstat). The first read asks for one byte more than
/// the whole file: when it gives exactly `size` bytes, that is the file as fstat saw it,
/// and no second read looks for its end (one read for a small file, where
/// `read_to_end`, starting at 8 KiB a read, makes three for 10 KiB).
fn read_whole(
    mut file: &std::fs::File,
    buf: &mut Vec<u8>,
    size: u64,
    limit: u64,
) -> std::io::Result<()> {
    let cap = usize::try_from(limit.saturating_add(1)).unwrap_or(usize::MAX);
    let mut want = usize::try_from(size.saturating_add(1))
        .unwrap_or(usize::MAX)
        .min(cap);
    let mut filled = 0;
    // Truncated, not cleared: the bytes kept are overwritten by the reads (and cut off
    // after), so a reused buffer is not zeroed again for each file.
    buf.truncate(want);
    loop {
        if buf.len() < want {
            buf.resize(want, 0);
        }
        let n = match file.read(&mut buf[filled..]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                buf.clear();
                return Err(e);
            }
        };
        if n == 0 {
            break;
        }
        filled += n;
        if filled as u64 == size && filled < buf.len() {
            break;
        }
        if filled == buf.len() {
            if filled >= cap {
                break;
            }
            want = want.saturating_mul(2).min(cap);
        }
    }
    buf.truncate(filled);
    Ok(())
}

/// A buffer larger than this is given back after the file that needed it.
const KEEP_BUFFER_BYTES: usize = 1 << 20;

/// What one searching thread reuses from file to file.
pub(super) struct Scratch {
    searcher: Searcher,
    buf: Vec<u8>,
    shrink_later: bool,
}

impl Scratch {
    pub(super) fn new() -> Scratch {
        Scratch {
            searcher: SearcherBuilder::new()
                .line_number(true)
                .binary_detection(BinaryDetection::quit(0))
                // Never decoded: a file is searched as the bytes a read gives.
                .bom_sniffing(false)
                .build(),
            buf: Vec::new(),
            shrink_later: false,
        }
    }

    /// Gives back a large file's buffer (the next file is likely small).
    pub(super) fn tidy(&mut self) {
        if self.shrink_later {
            self.buf = Vec::new();
            self.shrink_later = false;
        }
    }
}

/// One hit of one file, before the answer's bounds are applied.
#[derive(Debug)]
pub(super) struct Hit {
    line_number: u64,
    line: String,
    /// What it adds to the answer.
    size: u64,
}

/// How many of a file's hits a search keeps: what the answer can still take (as far as
/// is known when the search starts; the answer only fills up since) and what a result
/// waiting its turn may hold.
#[derive(Debug, Clone, Copy)]
pub(super) struct Caps {
    /// Hits still wanted.
    pub hits: usize,
    /// Bytes the answer still has room for: the hit that crosses it is kept (the
    /// answer is cut there or before), the rest not searched for.
    pub room: u64,
    /// Bytes of hits a result waiting its turn may hold; beyond, [`Found::Overflow`].
    pub hold: u64,
}

/// What searching one file gave.
#[derive(Debug)]
pub(super) enum Found {
    /// Its hits (maybe none), within the caps.
    Hits(Vec<Hit>),
    /// The content gate refused it.
    Withheld,
    /// More hits than a waiting result may hold: searched again when its turn comes.
    Overflow,
    /// Not searched: more bytes than may be read ahead of its turn. Searched when its
    /// turn comes.
    Later,
}

/// Collects one file's hits within its caps.
struct Collect {
    /// What each hit adds beyond its line.
    path_bytes: u64,
    caps: Caps,
    hits: Vec<Hit>,
    total: u64,
    overflow: bool,
}

impl Collect {
    fn new(path: &RelPath, opts: &GrepOptions<'_>, caps: Caps) -> Collect {
        Collect {
            path_bytes: path_cost(path, opts.item_extra),
            caps,
            hits: Vec::new(),
            total: 0,
            overflow: false,
        }
    }

    fn sink(&mut self) -> Lossy<impl FnMut(u64, &str) -> Result<bool, std::io::Error> + '_> {
        Lossy(|line_number, line| {
            let line = clip(line.trim_end_matches(['\n', '\r']));
            let size = json_string_len(&line) + self.path_bytes;
            self.total = self.total.saturating_add(size);
            if self.total > self.caps.hold && self.total <= self.caps.room {
                self.overflow = true;
                return Ok(false);
            }
            self.hits.push(Hit {
                line_number,
                line,
                size,
            });
            Ok(self.total <= self.caps.room && self.hits.len() < self.caps.hits)
        })
    }

    fn finish(self) -> Found {
        if self.overflow {
            Found::Overflow
        } else {
            Found::Hits(self.hits)
        }
    }
}

/// The answer being built, file by file in walk order, within its bounds.
pub(super) struct Merge<'o> {
    opts: &'o GrepOptions<'o>,
    out: Vec<GrepMatch>,
    used: u64,
    truncated: bool,
    withheld: usize,
}

impl<'o> Merge<'o> {
    pub(super) fn new(opts: &'o GrepOptions<'o>) -> Merge<'o> {
        Merge {
            opts,
            out: Vec::new(),
            used: 0,
            truncated: false,
            withheld: 0,
        }
    }

    /// True once the answer is full (maxResults reached, or cut at its size).
    pub(super) fn done(&self) -> bool {
        self.out.len() >= self.opts.max_results || self.truncated
    }

    /// What a file searched from now on may keep.
    pub(super) fn caps(&self, hold: u64) -> Caps {
        Caps {
            hits: self.opts.max_results.saturating_sub(self.out.len()),
            room: self.opts.max_answer_bytes.saturating_sub(self.used),
            hold,
        }
    }

    /// Takes a file's hits into the answer, in order, until it is full.
    pub(super) fn take(&mut self, path: &RelPath, found: Found) {
        let hits = match found {
            Found::Hits(hits) => hits,
            Found::Withheld => {
                self.withheld += 1;
                return;
            }
            // Searched again by the caller before it gets here.
            Found::Overflow | Found::Later => return,
        };
        for h in hits {
            if self.used + h.size > self.opts.max_answer_bytes {
                self.truncated = true;
                return;
            }
            self.used += h.size;
            self.out.push(GrepMatch {
                path: path.clone(),
                line_number: h.line_number,
                line: h.line,
            });
            if self.out.len() >= self.opts.max_results {
                return;
            }
        }
    }

    pub(super) fn finish(self, cut: bool) -> GrepOutcome {
        GrepOutcome {
            hits: self.out,
            truncated: self.truncated || cut,
            withheld: self.withheld,
        }
    }
}

/// Whether grep searches the entry `e` met in a walk: a file it may read that the
/// include filter takes.
pub(super) fn wanted(opts: &GrepOptions<'_>, e: &Entry) -> bool {
    e.kind == FileKind::File && opts.include.is_none_or(|g| g.matches(e))
}

/// What a walk does with `e` once it is known to be readable.
pub(super) fn descend_or_skip(e: &Entry) -> Visit {
    if e.kind == FileKind::Directory {
        Visit::Descend
    } else {
        Visit::Skip
    }
}

/// What one listed item adds to an answer beyond its strings (field names, numbers).
pub(crate) const PER_ITEM: u64 = 48;

/// What listing `path` adds to an answer: its JSON string, [`PER_ITEM`] and `extra`.
/// The threaded glob counts with it too, so that both walks cut at the same path.
pub(crate) fn path_cost(path: &RelPath, extra: u64) -> u64 {
    json_string_len(path.as_str()) + PER_ITEM + extra
}

/// The size of `s` once written as a JSON string (quotes included), without building it.
pub fn json_string_len(s: &str) -> u64 {
    let extra: u64 = s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | 0x08 | 0x09 | 0x0a | 0x0c | 0x0d => 1,
            0..=0x1f => 5,
            _ => 0,
        })
        .sum();
    s.len() as u64 + extra + 2
}

fn clip(line: &str) -> String {
    if line.len() <= MAX_LINE_BYTES {
        return line.to_string();
    }
    let mut end = MAX_LINE_BYTES;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &line[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &[u8], size: u64, limit: u64) -> Vec<u8> {
        let tmp = tempfile::tempdir().expect("tempdir");
        let p = tmp.path().join("f");
        std::fs::write(&p, text).expect("write");
        let file = std::fs::File::open(&p).expect("open");
        let mut buf = b"left over from the last file".to_vec();
        read_whole(&file, &mut buf, size, limit).expect("read");
        buf
    }

    #[test]
    fn read_whole_reads_the_file_as_it_is_now_up_to_one_byte_past_the_limit() {
        let text: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
        // Size as from fstat; empty; grown since (a stale, smaller size).
        assert_eq!(read(&text, text.len() as u64, 1 << 20), text);
        assert_eq!(read(b"", 0, 1 << 20), b"");
        assert_eq!(read(&text, 10, 1 << 20), text);
        // Larger than the limit: one byte past it, whatever size was given.
        assert_eq!(read(&text, text.len() as u64, 1000), &text[..1001]);
        assert_eq!(read(&text, 10, 1000), &text[..1001]);
        // Exactly the limit.
        assert_eq!(read(&text[..1000], 1000, 1000), &text[..1000]);
    }
}
