//! grep over a tree on up to one thread per core. The walk hands files out in walk
//! order; helper threads search them; the walk's own thread takes each file's hits into
//! the answer in that same order (and searches files itself rather than wait), so the
//! answer is the one a single thread gives.
//!
//! Bounds: helper threads across all greps at most one less than the cores (the thread
//! that asked searches too); files handed out and not yet taken into the answer at most
//! [`WINDOW_PER_THREAD`] per searching thread; bytes read ahead of their turn (before
//! every file before them is in the answer), with the file being searched in its turn,
//! at most [`WINDOW_BYTES_PER_THREAD`] per searching thread beyond that file (a search
//! far ahead of a full answer only wastes reads: a file past that is searched in its
//! turn); one file's content in memory
//! per searching thread; the hits of files waiting their turn at most about the answer's
//! size in all.
//!
//! Hand-overs are batched: an idle helper is woken once [`WAKE_AT`] files wait, and the
//! walk takes results into the answer every [`MERGE_EVERY`] files (a wake-up, and the
//! lock it contends for, per file cost more than searching a small file). The walk
//! searches a file itself only when more than [`HELP_AT`] wait (the helpers are behind),
//! or when its window is full: walking is cheaper than searching, so the walk stays
//! ahead and the helpers are not left idle while it catches up.

use std::borrow::Cow;
use std::collections::{BTreeMap, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::Scope;

use cap_std::fs::Dir;

use super::kind::FileKind;
use super::open::open_dir;
use super::permits::Permits;
use super::search::{
    Caps, Found, GrepOptions, GrepOutcome, Merge, Scratch, descend_or_skip, search_in, wanted,
};
use super::walk::{Entry, MAX_DEPTH, Mode, Visit, Visitor, walk_dir};
use crate::error::WsError;
use crate::root::Workspace;
use fsgate_base::path::RelPath;

/// Files handed out and not yet taken into the answer, per searching thread.
const WINDOW_PER_THREAD: usize = 32;

/// Bytes of files read ahead of their turn and not yet taken in, per searching thread
/// (past them, a file is left to be searched in its turn).
const WINDOW_BYTES_PER_THREAD: u64 = 4 << 20;

/// Files waiting before an idle helper is woken.
const WAKE_AT: usize = 8;

/// Files waiting beyond which the walk searches one itself.
const HELP_AT: usize = 16;

/// Files handed out between two takes of the results into the answer.
const MERGE_EVERY: usize = 8;

/// A file met in the walk: the handle of its directory (shared by the files of one
/// directory), its name there, its path.
struct Target {
    dir: Arc<Dir>,
    name: compact_str::CompactString,
    path: RelPath,
}

impl Target {
    /// Searches the file: in its turn (counted in `ahead` whatever its size, so that
    /// no file is read ahead alongside a large one), or ahead of it, and then only if
    /// its bytes fit what may be read ahead (else [`Found::Later`]). Also says how many
    /// bytes it counted in.
    fn search(
        &self,
        sc: &mut Scratch,
        opts: &GrepOptions<'_>,
        caps: Caps,
        (ahead, in_turn): (&ReadAhead, bool),
    ) -> (Result<Found, WsError>, u64) {
        let mut reserved = 0;
        let mut admit = |size: u64| {
            let ok = in_turn || ahead.reserve(size);
            if ok {
                if in_turn {
                    ahead.used.fetch_add(size, Ordering::AcqRel);
                }
                reserved = size;
            }
            ok
        };
        let r = search_in(
            sc,
            (&self.dir, &self.name),
            &self.path,
            opts,
            caps,
            &mut admit,
        );
        sc.tidy();
        (r, reserved)
    }
}

/// A file to search, numbered in walk order, with what it may keep.
struct Job {
    seq: usize,
    target: Target,
    caps: Caps,
}

impl Job {
    /// Searches the file ahead of its turn.
    fn run(self, sc: &mut Scratch, opts: &GrepOptions<'_>, ahead: &ReadAhead) -> Done {
        let (result, reserved) = self.target.search(sc, opts, self.caps, (ahead, false));
        Done {
            target: self.target,
            result,
            reserved,
        }
    }
}

/// A searched file, what the search gave, and the bytes it counts as read ahead.
struct Done {
    target: Target,
    result: Result<Found, WsError>,
    reserved: u64,
}

/// Bytes of the files read ahead of their turn and not yet taken into the answer,
/// across the threads searching one grep.
struct ReadAhead {
    used: AtomicU64,
    /// Set before the helpers start.
    limit: AtomicU64,
}

impl Default for ReadAhead {
    fn default() -> ReadAhead {
        ReadAhead {
            used: AtomicU64::new(0),
            limit: AtomicU64::new(u64::MAX),
        }
    }
}

impl ReadAhead {
    /// Counts `size` bytes in if they fit (with the files searched in their turn: a
    /// file larger than the whole allowance is searched only in its turn).
    fn reserve(&self, size: u64) -> bool {
        let limit = self.limit.load(Ordering::Relaxed);
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |cur| {
                let next = cur.saturating_add(size);
                (next <= limit).then_some(next)
            })
            .is_ok()
    }

    fn release(&self, size: u64) {
        self.used.fetch_sub(size, Ordering::AcqRel);
    }
}

#[derive(Default)]
struct State {
    jobs: VecDeque<Job>,
    done: BTreeMap<usize, Done>,
    closed: bool,
    /// Helpers waiting for a job (woken only then: a futex call per file otherwise).
    idle: usize,
    /// The walk's thread waits for a result.
    waiting: bool,
}

/// The files handed out and the results not yet taken, shared by the threads.
#[derive(Default)]
struct Queue {
    st: Mutex<State>,
    work: Condvar,
    ready: Condvar,
    ahead: ReadAhead,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(PoisonError::into_inner)
    }

    // Condvars are notified after the lock is let go: a thread woken under it would
    // only wait again, for the lock.

    /// Queues `job`; says how many wait now.
    fn push(&self, job: Job) -> usize {
        let (queued, wake) = {
            let mut st = self.lock();
            st.jobs.push_back(job);
            (st.jobs.len(), st.idle > 0 && st.jobs.len() >= WAKE_AT)
        };
        if wake {
            self.work.notify_one();
        }
        queued
    }

    /// Wakes idle helpers if any file waits (the walk is about to wait or search).
    fn kick(&self) {
        let wake = {
            let st = self.lock();
            st.idle > 0 && !st.jobs.is_empty()
        };
        if wake {
            self.work.notify_all();
        }
    }

    fn pop(&self) -> Option<Job> {
        self.lock().jobs.pop_front()
    }

    /// A helper's next job, after handing in its last one; None once the grep is over.
    fn next_job(&self, last: Option<(usize, Done)>) -> Option<Job> {
        let mut st = self.lock();
        if let Some((seq, done)) = last {
            st.done.insert(seq, done);
            if st.waiting {
                drop(st);
                self.ready.notify_one();
                st = self.lock();
            }
        }
        loop {
            if st.closed {
                return None;
            }
            if let Some(job) = st.jobs.pop_front() {
                return Some(job);
            }
            st.idle += 1;
            st = self.work.wait(st).unwrap_or_else(PoisonError::into_inner);
            st.idle -= 1;
        }
    }

    fn finish(&self, seq: usize, done: Done) {
        self.lock().done.insert(seq, done);
    }

    /// Moves the results from `seq` on that are ready, in order, into `into`.
    fn take_ready(&self, mut seq: usize, into: &mut Vec<Done>) {
        let mut st = self.lock();
        while let Some(d) = st.done.remove(&seq) {
            into.push(d);
            seq += 1;
        }
    }

    /// Waits for the result `seq`, which a helper is searching.
    fn wait_for(&self, seq: usize) {
        let mut st = self.lock();
        while !st.done.contains_key(&seq) {
            st.waiting = true;
            st = self.ready.wait(st).unwrap_or_else(PoisonError::into_inner);
        }
        st.waiting = false;
    }

    /// Ends the grep: jobs not started are dropped, helpers finish their file and leave.
    fn close(&self) {
        let jobs = {
            let mut st = self.lock();
            st.closed = true;
            std::mem::take(&mut st.jobs)
        };
        self.work.notify_all();
        drop(jobs);
    }
}

/// Closes the queue however the walk ends (an error, a panic), so the helpers leave.
struct CloseOnDrop<'q>(&'q Queue);

impl Drop for CloseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// A helper thread: searches files until the grep is over.
fn helper(opts: &GrepOptions<'_>, queue: &Queue) {
    let mut sc = Scratch::new();
    let mut last = None;
    while let Some(job) = queue.next_job(last.take()) {
        let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
            job.target
                .search(&mut sc, opts, job.caps, (&queue.ahead, false))
        }));
        // A panic must still answer the job, or the walk's thread would wait for it.
        let (result, reserved) = r.unwrap_or_else(|_| {
            sc = Scratch::new();
            let failed = std::io::Error::other("grep: search failed");
            (Err(WsError::Io(failed)), 0)
        });
        let done = Done {
            target: job.target,
            result,
            reserved,
        };
        last = Some((job.seq, done));
    }
}

/// The walk's side of a threaded grep.
struct Tree<'a, 'o, 's, 'e> {
    opts: &'o GrepOptions<'o>,
    readable: &'a dyn Fn(&Entry) -> bool,
    queue: &'e Queue,
    scope: &'s Scope<'s, 'e>,
    permits: usize,
    merge: Merge<'o>,
    scratch: Scratch,
    /// Files handed out, and taken into the answer.
    next: usize,
    merged: usize,
    /// Most files handed out and not yet taken.
    window: usize,
    /// Bytes of hits a waiting result may hold.
    hold: u64,
    start_depth: usize,
    ready: Vec<Done>,
    closed: bool,
    /// The handle of the directory whose files the walk is handing out, and its path.
    dir: Option<(String, Arc<Dir>)>,
}

impl<'a, 'o, 's, 'e> Tree<'a, 'o, 's, 'e>
where
    'a: 'e,
    'o: 'e,
{
    /// What to do with `e`, a file (to hand out) or not; Err: the walk's directory
    /// handle could not be shared (the walk ends with that error).
    fn visit_entry(&mut self, dir: &Dir, e: Cow<'_, Entry>) -> Result<Visit, WsError> {
        // (Results are taken in only when the window is full: a walk may run ahead of
        // the answer by that much, which changes nothing but the depth cut, below.)
        if self.merge.done() {
            return Ok(Visit::Stop);
        }
        if !(self.readable)(&e) {
            return Ok(Visit::Skip);
        }
        let depth = e.path.components().count() - self.start_depth;
        if e.kind == FileKind::Directory && depth >= MAX_DEPTH {
            // The walk notes a cut here: only if one thread alone would have got here.
            self.drain(0);
            if self.merge.done() {
                return Ok(Visit::Stop);
            }
        }
        let visit = descend_or_skip(&e);
        if wanted(self.opts, &e) {
            let dir = self.dir_of(dir, &e)?;
            let e = e.into_owned();
            let target = Target {
                dir,
                name: e.name,
                path: e.path,
            };
            self.dispatch(target);
        }
        Ok(visit)
    }

    /// A shared handle of `dir`, the directory holding `e`: one for all its files (a
    /// walk enters each directory once, so its path names it).
    fn dir_of(&mut self, dir: &Dir, e: &Entry) -> Result<Arc<Dir>, WsError> {
        let p = e.path.as_str();
        let parent = p[..p.len() - e.name.len()].trim_end_matches('/');
        match &self.dir {
            Some((at, d)) if at == parent => Ok(Arc::clone(d)),
            _ => {
                let d = Arc::new(dir.try_clone()?);
                self.dir = Some((parent.to_string(), Arc::clone(&d)));
                Ok(d)
            }
        }
    }

    fn dispatch(&mut self, target: Target) {
        if self.next == 0 {
            self.spawn_helpers();
        }
        let caps = self.merge.caps(self.hold);
        let queued = self.queue.push(Job {
            seq: self.next,
            target,
            caps,
        });
        self.next += 1;
        if queued > HELP_AT {
            self.help_one();
        }
        if self.next - self.merged >= self.window {
            self.drain(self.window - 1);
        } else if self.next.is_multiple_of(MERGE_EVERY) {
            self.merge_ready();
        }
    }

    /// Searches the oldest waiting file.
    fn help_one(&mut self) {
        if let Some(job) = self.queue.pop() {
            let seq = job.seq;
            let done = job.run(&mut self.scratch, self.opts, &self.queue.ahead);
            self.queue.finish(seq, done);
        }
    }

    /// Starts the helpers (at the first file: a grep of nothing starts none).
    fn spawn_helpers(&mut self) {
        let (opts, queue) = (self.opts, self.queue);
        // Set before any helper starts (spawning orders it before their loads).
        let bytes = WINDOW_BYTES_PER_THREAD * (self.permits as u64 + 1);
        queue.ahead.limit.store(bytes, Ordering::Relaxed);
        let mut started = 0;
        for _ in 0..self.permits {
            let spawned = std::thread::Builder::new()
                .name("fsgate-grep".into())
                .spawn_scoped(self.scope, move || helper(opts, queue));
            if spawned.is_err() {
                break;
            }
            started += 1;
        }
        if started > 0 {
            self.window = WINDOW_PER_THREAD * (started + 1);
            self.hold = self.opts.max_answer_bytes / self.window as u64;
        }
    }

    /// Takes results into the answer, searching files itself while it would wait, until
    /// at most `target` files are out.
    fn drain(&mut self, target: usize) {
        self.queue.kick();
        loop {
            self.merge_ready();
            let out = self.next - self.merged;
            if self.merge.done() || out <= target {
                return;
            }
            match self.queue.pop() {
                Some(job) => {
                    let seq = job.seq;
                    let done = job.run(&mut self.scratch, self.opts, &self.queue.ahead);
                    self.queue.finish(seq, done);
                }
                None => self.queue.wait_for(self.merged),
            }
        }
    }

    /// Takes the results that are next in walk order into the answer.
    fn merge_ready(&mut self) {
        let mut ready = std::mem::take(&mut self.ready);
        self.queue.take_ready(self.merged, &mut ready);
        for done in ready.drain(..) {
            self.merged += 1;
            self.queue.ahead.release(done.reserved);
            if self.merge.done() {
                continue;
            }
            let r = match done.result {
                // Its turn now: searched (again) within what the answer can still take.
                Ok(Found::Overflow | Found::Later) => {
                    let caps = self.merge.caps(u64::MAX);
                    let t = &done.target;
                    let ahead = &self.queue.ahead;
                    let (r, counted) = t.search(&mut self.scratch, self.opts, caps, (ahead, true));
                    ahead.release(counted);
                    r
                }
                r => r,
            };
            // A file that cannot be searched (special, hard-linked, too large, gone) is
            // passed over, as in a walk.
            if let Ok(found) = r {
                self.merge.take(&done.target.path, found);
            }
        }
        self.ready = ready;
        if self.merge.done() && !self.closed {
            self.closed = true;
            self.queue.close();
        }
    }
}

impl<'a, 'o, 's, 'e> Visitor for Tree<'a, 'o, 's, 'e>
where
    'a: 'e,
    'o: 'e,
{
    fn visit(&mut self, dir: &Dir, e: &Entry) -> Result<Visit, WsError> {
        self.visit_entry(dir, Cow::Borrowed(e))
    }

    fn visit_owned(&mut self, dir: &Dir, e: Entry) -> Result<Visit, WsError> {
        self.visit_entry(dir, Cow::Owned(e))
    }
}

impl Workspace {
    /// Searches the tree at `start` with the helpers `permits` allows.
    pub(super) fn grep_tree(
        &self,
        start: &RelPath,
        opts: &GrepOptions<'_>,
        readable: &dyn Fn(&Entry) -> bool,
        permits: Permits,
    ) -> Result<GrepOutcome, WsError> {
        let queue = Queue::default();
        std::thread::scope(|scope| {
            let _close = CloseOnDrop(&queue);
            let mut tree = Tree {
                opts,
                readable,
                queue: &queue,
                scope,
                permits: permits.0,
                merge: Merge::new(opts),
                scratch: Scratch::new(),
                next: 0,
                merged: 0,
                window: 1,
                hold: u64::MAX,
                start_depth: start.components().count(),
                ready: Vec::new(),
                closed: false,
                dir: None,
            };
            let dir = open_dir(&self.root, start).map_err(WsError::from_io)?;
            // Each entry's metadata only if deciding what may be read needs its size.
            let mode = if opts.entry_sizes {
                Mode::Lenient
            } else {
                Mode::LenientNames
            };
            let walked = walk_dir(dir, start, MAX_DEPTH, mode, &mut tree)?;
            tree.drain(0);
            Ok(tree.merge.finish(walked.truncated()))
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use grep_regex::RegexMatcher;

    use super::*;
    use crate::GrepMatch;

    fn ws() -> (tempfile::TempDir, Workspace) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let ws = Workspace::open(tmp.path()).expect("open");
        (tmp, ws)
    }

    fn put(tmp: &tempfile::TempDir, rel: &str, text: &str) {
        let p = tmp.path().join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }

    fn opts<'a>(m: &'a RegexMatcher, max_results: usize, room: u64) -> GrepOptions<'a> {
        GrepOptions {
            matcher: m,
            include: None,
            max_results,
            max_file_bytes: 1 << 20,
            max_answer_bytes: room,
            item_extra: 0,
            content_gate: None,
            entry_sizes: false,
        }
    }

    fn grep(ws: &Workspace, o: &GrepOptions<'_>, helpers: usize) -> GrepOutcome {
        ws.grep_tree(&RelPath::root(), o, &|_| true, Permits::forced(helpers))
            .expect("grep")
    }

    fn lines(hits: &[GrepMatch]) -> Vec<(String, u64)> {
        hits.iter()
            .map(|h| (h.path.as_str().to_string(), h.line_number))
            .collect()
    }

    /// 8 directories of 25 files; file k holds k % 9 matching lines (some none, some
    /// many), and every 11th a refused word.
    fn tree(tmp: &tempfile::TempDir) {
        for k in 0..200 {
            let mut text = String::new();
            for i in 0..40 {
                if i < k % 9 {
                    text.push_str(&format!("line {i} has the needle {k}\n"));
                } else {
                    text.push_str(&format!("line {i} is plain filler text\n"));
                }
            }
            if k % 11 == 0 {
                text.push_str("FORBIDDEN\n");
            }
            put(tmp, &format!("d{}/f{:03}.txt", k / 25, k), &text);
        }
    }

    #[test]
    fn threads_give_the_answer_one_thread_gives() {
        let (tmp, ws) = ws();
        tree(&tmp);
        let m = RegexMatcher::new("needle").expect("regex");
        let gate = |_: &RelPath, b: &[u8]| !b.windows(9).any(|w| w == b"FORBIDDEN");
        // Rooms: a few hits; a file's hits more than a waiting result may hold (then
        // searched again in turn); everything.
        for room in [300, 2_000, 9_000, 1 << 30] {
            for max in [1, 7, 100, 100_000] {
                for gated in [false, true] {
                    let mut o = opts(&m, max, room);
                    if gated {
                        o.content_gate = Some(&gate);
                    }
                    let one = grep(&ws, &o, 0);
                    for helpers in [1, 3] {
                        let many = grep(&ws, &o, helpers);
                        let case = format!("room {room} max {max} gated {gated} helpers {helpers}");
                        assert_eq!(lines(&many.hits), lines(&one.hits), "{case}");
                        assert_eq!(many.hits, one.hits, "{case}");
                        assert_eq!(many.truncated, one.truncated, "{case}");
                        assert_eq!(many.withheld, one.withheld, "{case}");
                    }
                }
            }
        }
        // The whole answer, checked against the tree itself.
        let m2 = RegexMatcher::new("needle").expect("regex");
        let mut o = opts(&m2, 100_000, 1 << 30);
        o.content_gate = Some(&gate);
        let all = grep(&ws, &o, 1);
        let want: Vec<(String, u64)> = (0..200)
            .filter(|k| k % 11 != 0)
            .flat_map(|k| {
                (0..k % 9).map(move |i| (format!("d{}/f{:03}.txt", k / 25, k), i as u64 + 1))
            })
            .collect();
        assert_eq!(lines(&all.hits), want);
        assert!(!all.truncated);
        // Refused files with a match: k % 11 == 0 and k % 9 != 0.
        let refused = (0..200).filter(|k| k % 11 == 0 && k % 9 != 0).count();
        assert_eq!(all.withheld, refused);
    }

    #[test]
    fn a_small_room_cuts_the_answer_where_one_thread_would() {
        let (tmp, ws) = ws();
        tree(&tmp);
        let m = RegexMatcher::new("needle").expect("regex");
        let o = opts(&m, 100_000, 5_000);
        let one = grep(&ws, &o, 0);
        assert!(one.truncated);
        assert!(!one.hits.is_empty());
        let used: u64 = one
            .hits
            .iter()
            .map(|h| crate::json_string_len(&h.line) + crate::json_string_len(h.path.as_str()) + 48)
            .sum();
        assert!(used <= 5_000, "{used}");
        assert_eq!(grep(&ws, &o, 1).hits, one.hits);
    }

    #[test]
    fn the_gate_judges_only_files_with_a_match_in_a_walk() {
        let (tmp, ws) = ws();
        put(&tmp, "a.txt", "needle\nSECRET\n");
        put(&tmp, "b.txt", "SECRET only\n");
        put(&tmp, "c.txt", "a needle\n");
        let m = RegexMatcher::new("needle").expect("regex");
        let judged = AtomicUsize::new(0);
        let gate = |_: &RelPath, b: &[u8]| {
            judged.fetch_add(1, Ordering::Relaxed);
            !b.windows(6).any(|w| w == b"SECRET")
        };
        let mut o = opts(&m, 100, 1 << 20);
        o.content_gate = Some(&gate);
        for helpers in [0, 1] {
            judged.store(0, Ordering::Relaxed);
            let found = grep(&ws, &o, helpers);
            assert_eq!(lines(&found.hits), vec![("c.txt".to_string(), 1)]);
            assert_eq!(found.withheld, 1);
            // a.txt and c.txt, not b.txt (no match).
            assert_eq!(judged.load(Ordering::Relaxed), 2);
        }
        // Named on its own, a file is judged first, match or not.
        judged.store(0, Ordering::Relaxed);
        let b = RelPath::parse_rooted("/b.txt").expect("path");
        let found = ws.grep(&b, false, &o, &|_| true).expect("grep");
        assert!(found.hits.is_empty());
        assert_eq!(found.withheld, 1);
        assert_eq!(judged.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_depth_cut_counts_only_if_one_thread_would_have_reached_it() {
        let (tmp, ws) = ws();
        put(&tmp, "a/f.txt", "needle\n");
        let deep = vec!["d"; MAX_DEPTH].join("/");
        put(&tmp, &format!("b/{deep}/g.txt"), "needle\n");
        put(&tmp, "c/h.txt", "needle\n");
        let m = RegexMatcher::new("needle").expect("regex");
        for helpers in [0, 1] {
            // Full after a/f.txt: the walk stops before b's depth cut.
            let found = grep(&ws, &opts(&m, 1, 1 << 20), helpers);
            assert_eq!(found.hits.len(), 1);
            assert!(!found.truncated, "helpers {helpers}");
            // Room for more: the walk goes through b, cut, and on to c.
            let found = grep(&ws, &opts(&m, 2, 1 << 20), helpers);
            assert_eq!(
                lines(&found.hits),
                vec![("a/f.txt".to_string(), 1), ("c/h.txt".to_string(), 1)]
            );
            assert!(found.truncated, "helpers {helpers}");
        }
    }

    #[test]
    fn files_larger_than_the_byte_window_are_searched_in_turn() {
        let (tmp, ws) = ws();
        let filler = "x".repeat(WINDOW_BYTES_PER_THREAD as usize + 1000);
        for k in 0..3 {
            put(
                &tmp,
                &format!("big{k}.txt"),
                &format!("{filler}\nneedle {k}\n"),
            );
        }
        put(&tmp, "small.txt", "needle\n");
        let m = RegexMatcher::new("needle").expect("regex");
        let mut o = opts(&m, 100, 1 << 20);
        o.max_file_bytes = 1 << 30;
        let want = vec![
            ("big0.txt".to_string(), 2),
            ("big1.txt".to_string(), 2),
            ("big2.txt".to_string(), 2),
            ("small.txt".to_string(), 1),
        ];
        for helpers in [0, 1] {
            assert_eq!(
                lines(&grep(&ws, &o, helpers).hits),
                want,
                "helpers {helpers}"
            );
        }
    }

    #[test]
    fn a_symlink_swapped_in_during_the_walk_is_not_followed() {
        let (tmp, ws) = ws();
        let outside = tempfile::tempdir().expect("tempdir");
        std::fs::write(outside.path().join("f.txt"), "needle outside\n").expect("write");
        put(&tmp, "d/a.txt", "needle a\n");
        put(&tmp, "d/b.txt", "needle b\n");
        put(&tmp, "d/c.txt", "needle c\n");
        let m = RegexMatcher::new("needle").expect("regex");
        let o = opts(&m, 100, 1 << 20);
        for helpers in [0, 1] {
            // Once the walk has listed d (and decided a.txt may be read), a.txt becomes
            // a symlink out of the workspace, b.txt one to c.txt.
            let swapped = std::cell::Cell::new(false);
            let swap = |e: &Entry| {
                if e.path.as_str() == "d/a.txt" && !swapped.replace(true) {
                    let d = tmp.path().join("d");
                    std::fs::remove_file(d.join("a.txt")).expect("rm");
                    std::os::unix::fs::symlink(outside.path().join("f.txt"), d.join("a.txt"))
                        .expect("symlink");
                    std::fs::remove_file(d.join("b.txt")).expect("rm");
                    std::os::unix::fs::symlink("c.txt", d.join("b.txt")).expect("symlink");
                }
                true
            };
            let found = ws
                .grep_tree(&RelPath::root(), &o, &swap, Permits::forced(helpers))
                .expect("grep");
            assert!(swapped.get());
            assert_eq!(lines(&found.hits), vec![("d/c.txt".to_string(), 1)]);
            assert!(
                found.hits.iter().all(|h| h.line == "needle c"),
                "{:?}",
                found.hits
            );
            // Back as they were (the symlinks removed, not written through).
            for name in ["a", "b"] {
                std::fs::remove_file(tmp.path().join(format!("d/{name}.txt"))).expect("rm");
                put(&tmp, &format!("d/{name}.txt"), &format!("needle {name}\n"));
            }
        }
    }

    #[test]
    fn sizes_are_read_in_the_walk_only_when_asked() {
        let (tmp, ws) = ws();
        put(&tmp, "d/a.txt", "needle\n");
        let m = RegexMatcher::new("needle").expect("regex");
        for entry_sizes in [false, true] {
            let mut o = opts(&m, 100, 1 << 20);
            o.entry_sizes = entry_sizes;
            let seen = Mutex::new(Vec::new());
            let readable = |e: &Entry| {
                seen.lock()
                    .expect("lock")
                    .push((e.path.as_str().to_string(), e.size));
                true
            };
            let found = ws
                .grep_tree(&RelPath::root(), &o, &readable, Permits::forced(1))
                .expect("grep");
            assert_eq!(lines(&found.hits), vec![("d/a.txt".to_string(), 1)]);
            let file = seen
                .into_inner()
                .expect("lock")
                .into_iter()
                .find(|(p, _)| p == "d/a.txt");
            let want = if entry_sizes { Some(7) } else { None };
            assert_eq!(file, Some(("d/a.txt".to_string(), want)));
        }
    }

    #[test]
    fn read_ahead_counts_bytes_up_to_its_limit_past_the_first_file() {
        let ahead = ReadAhead::default();
        ahead.limit.store(100, Ordering::Relaxed);
        // A file larger than the whole allowance: only in its turn.
        assert!(!ahead.reserve(101));
        assert!(ahead.reserve(60));
        assert!(ahead.reserve(40));
        assert!(!ahead.reserve(1));
        ahead.release(60);
        assert!(ahead.reserve(60));
        assert!(!ahead.reserve(1));
        ahead.release(60);
        ahead.release(40);
        assert_eq!(ahead.used.load(Ordering::Relaxed), 0);
    }

    /// Words of the generated files: some match the patterns below, one is refused.
    const WORDS: [&str; 9] = [
        "alpha", "needle", "Needle", "zqab123", "zqab12", "zqxy9990", "x", "SECRET", "",
    ];

    const PATTERNS: [&str; 6] = [
        "needle",
        r"zq[a-z]{2}[0-9]{3}\b",
        "(?i)needle",
        "^x$",
        "a.*a",
        "^$",
    ];

    /// What grep must find: every line of every file, in walk order (depth first, names
    /// bytewise), that the regex matches on its own; a refused file with a match shows
    /// none and counts as withheld.
    fn reference(root: &std::path::Path, pattern: &str) -> (Vec<(String, u64, String)>, usize) {
        fn visit(
            dir: &std::path::Path,
            rel: &str,
            re: &regex::bytes::Regex,
            out: &mut (Vec<(String, u64, String)>, usize),
        ) {
            let mut names: Vec<_> = std::fs::read_dir(dir)
                .expect("read_dir")
                .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
                .collect();
            names.sort();
            for name in names {
                let path = if rel.is_empty() {
                    name.clone()
                } else {
                    format!("{rel}/{name}")
                };
                let full = dir.join(&name);
                if full.is_dir() {
                    visit(&full, &path, re, out);
                    continue;
                }
                let bytes = std::fs::read(&full).expect("read");
                if bytes.is_empty() {
                    continue; // No line at all.
                }
                let body = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
                let hits: Vec<_> = body
                    .split(|b| *b == b'\n')
                    .zip(1u64..)
                    .filter(|(l, _)| re.is_match(l))
                    .map(|(l, n)| (path.clone(), n, String::from_utf8_lossy(l).into_owned()))
                    .collect();
                if hits.is_empty() {
                    continue;
                }
                if bytes.windows(6).any(|w| w == b"SECRET") {
                    out.1 += 1;
                } else {
                    out.0.extend(hits);
                }
            }
        }
        let re = regex::bytes::Regex::new(pattern).expect("regex");
        let mut out = (Vec::new(), 0);
        visit(root, "", &re, &mut out);
        out
    }

    type Files = Vec<(usize, usize, Vec<Vec<usize>>, bool)>;

    fn files() -> impl proptest::strategy::Strategy<Value = Files> {
        use proptest::prelude::*;
        let line = proptest::collection::vec(0..WORDS.len(), 0..4);
        let file = (
            0usize..4,
            0usize..5,
            proptest::collection::vec(line, 0..6),
            any::<bool>(),
        );
        proptest::collection::vec(file, 0..14)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

        #[test]
        fn grep_finds_what_a_line_by_line_reference_finds(
            files in files(),
            pattern in 0..PATTERNS.len(),
            max in proptest::prop_oneof![1usize..6, proptest::strategy::Just(100_000usize)],
            helpers in 0usize..3,
        ) {
            let (tmp, ws) = ws();
            let dirs = ["", "d0/", "d1/", "d0/e0/"];
            for (d, n, lines, newline) in &files {
                let mut text = lines
                    .iter()
                    .map(|l| l.iter().map(|w| WORDS[*w]).collect::<Vec<_>>().join(" "))
                    .collect::<Vec<_>>()
                    .join("\n");
                if *newline {
                    text.push('\n');
                }
                put(&tmp, &format!("{}f{n}.txt", dirs[*d]), &text);
            }
            let (want, withheld) = reference(tmp.path(), PATTERNS[pattern]);
            let m = RegexMatcher::new(PATTERNS[pattern]).expect("regex");
            let gate = |_: &RelPath, b: &[u8]| !b.windows(6).any(|w| w == b"SECRET");
            let mut o = opts(&m, max, 1 << 30);
            o.content_gate = Some(&gate);
            let found = grep(&ws, &o, helpers);
            let got: Vec<_> = found
                .hits
                .iter()
                .map(|h| (h.path.as_str().to_string(), h.line_number, h.line.clone()))
                .collect();
            let n = want.len().min(max);
            proptest::prop_assert_eq!(&got[..], &want[..n]);
            if want.len() < max {
                proptest::prop_assert_eq!(found.withheld, withheld);
            }
            proptest::prop_assert!(!found.truncated);
        }
    }

    #[test]
    fn permits_never_exceed_one_less_than_the_cores() {
        // Two at once (other tests may hold some, even more than the limit: forced).
        let a = Permits::take();
        let b = Permits::take();
        assert!(
            a.0 + b.0 <= crate::permits::helper_limit(),
            "{} + {}",
            a.0,
            b.0
        );
        drop(a);
        drop(b);
    }
}
