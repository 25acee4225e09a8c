//! The change watcher: inotify (see `inotify`) on every non-ignored directory of the
//! workspace, debounced by `Coalescer`, filtered by the policy, and broadcast to
//! subscribers (the WebSocket door's connections). The door only encodes what it is
//! told: which paths changed and which of them a client may see are decided here.
//!
//! Directories are watched one by one (non-recursive watches) rather than with one
//! recursive watch, so that ignored trees such as `node_modules` cost no inotify
//! watches, symlinks are never followed, and a directory moved inside the workspace is
//! re-watched under its new name. It only reports paths: every read or write still goes
//! through the gateway.
//!
//! # Ambient Authority
//! inotify watches are added by absolute path under the workspace root (the kernel API
//! has no handle-relative form). Which directories to watch is decided by listing them
//! through the workspace's capability handle, never by following a path.

use std::collections::HashSet;
use std::io::{PipeReader, PipeWriter};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::{broadcast, oneshot};

mod changes;
mod inotify;
mod known;

pub use changes::{Change, ChangeKind};
pub use inotify::read_watch_limit;

use crate::gateway::Gateway;
use changes::Coalescer;
use fsgate_base::path::RelPath;
use fsgate_decide::{Access, EntryKind, PathFacts};
use fsgate_policy::Policy;
use fsgate_workspace::{FileKind, MAX_DEPTH, Visit, Walked, is_own_temp};
use inotify::{Kernel, Seen, Woke, watch_limit};

/// Notices buffered per connection before a slow one starts losing them.
const BROADCAST_CAPACITY: usize = 4096;

/// What the watcher tells the connections.
#[derive(Debug, Clone)]
pub enum Notice {
    /// A change to a path the policy lets clients see.
    Change(Change),
    /// Events were lost (the kernel queue overflowed): clients should re-list.
    Overflow,
    /// Directories are not watched: the kernel's inotify watch limit was reached.
    Unwatched(Unwatched),
}

/// Directories left unwatched because the kernel refused more inotify watches
/// (`ENOSPC`): changes in them are not reported. Not retried.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unwatched {
    /// The sysctl that bounds the watches (`fs.inotify.max_user_watches`).
    pub limit: &'static str,
    /// Its value, when it could be read.
    pub limit_value: Option<u64>,
    /// Directories watched.
    pub watched: usize,
    /// Directories not watched.
    pub count: usize,
    /// The first of them the policy lets clients see (at most `MAX_NAMED`).
    pub first: Vec<RelPath>,
    /// The workspace they are in, when several are served (`first` names it too).
    pub workspace: Option<Arc<str>>,
}

/// Unwatched directories named in a notice, at most.
pub(crate) const MAX_NAMED: usize = 8;

impl Unwatched {
    /// One line for people: the limit, and what is not watched.
    pub fn message(&self) -> String {
        let value = self
            .limit_value
            .map_or_else(String::new, |v| format!(" = {v}"));
        format!(
            "the kernel's inotify watch limit is reached ({}{value}): {} of {} directories are not watched, and changes in them are not reported; raise the limit or add [ws] ignore entries",
            self.limit,
            self.count,
            self.count + self.watched
        )
    }
}

/// The running watcher; dropping it stops the threads.
pub struct Watcher {
    /// Dropped to stop the threads (each one's wait sees its pipe's end).
    stops: Vec<PipeWriter>,
    /// Where notices are published.
    notices: broadcast::Sender<Arc<Notice>>,
    /// The watcher threads: one per workspace.
    threads: Vec<JoinHandle<()>>,
    /// What is not watched (the limit reached), for connections that start later: the
    /// latest notice of each workspace, in the gateway's order.
    gap: Gaps,
}

/// Each workspace's latest [`Notice::Unwatched`], if it has one.
type Gaps = Arc<Mutex<Vec<Option<Arc<Notice>>>>>;

/// The initial scans still running, the directories they watch, and who to tell.
type Readiness = Arc<std::sync::Mutex<(usize, usize, Option<oneshot::Sender<usize>>)>>;

impl Watcher {
    /// Starts watching the gateway's workspace. The initial scan runs on the watcher's
    /// own thread; the receiver gets the number of watched directories when it is done
    /// (events from then on are complete).
    pub fn start(
        gw: Arc<Gateway>,
        ignore: &[String],
        debounce: Duration,
    ) -> std::io::Result<(Watcher, oneshot::Receiver<usize>)> {
        let (notices, _) = broadcast::channel(BROADCAST_CAPACITY);
        let (ready_tx, ready_rx) = oneshot::channel();
        // Several workspaces: a thread each, reporting paths as `<name>/...`.
        let mut each = vec![Arc::clone(&gw)];
        each.extend(gw.members().others().iter().cloned());
        let gap: Gaps = Arc::new(Mutex::new(vec![None; each.len()]));
        let ready: Readiness = Arc::new(std::sync::Mutex::new((each.len(), 0, Some(ready_tx))));
        let mut watcher = Watcher {
            stops: Vec::new(),
            notices: notices.clone(),
            threads: Vec::new(),
            gap: Arc::clone(&gap),
        };
        for (slot, member) in each.into_iter().enumerate() {
            let (stop_rx, stop) = std::io::pipe()?;
            let mut state = State {
                root: member.workspace().root_path().to_path_buf(),
                prefix: member.name().map(Arc::from),
                gw: member,
                kernel: Kernel::new()?,
                ignore: ignore.iter().cloned().collect(),
                watched: HashSet::new(),
                co: Coalescer::new(debounce),
                out: notices.clone(),
                unwatched: Unwatched::default(),
                published: 0,
                gap: (Arc::clone(&gap), slot),
            };
            let ready = Arc::clone(&ready);
            let thread = std::thread::Builder::new()
                .name("fsgate-watch".into())
                .spawn(move || {
                    state.scan(&RelPath::root(), Scan::Initial);
                    state.co.compact();
                    scanned(&ready, state.watched.len());
                    state.run(&stop_rx);
                })?;
            watcher.stops.push(stop);
            watcher.threads.push(thread);
        }
        Ok((watcher, ready_rx))
    }

    /// A receiver of every notice from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Notice>> {
        self.notices.subscribe()
    }

    /// The notices of what is not watched, one per workspace where the watch limit
    /// was reached: a new connection gets them first.
    pub fn gap(&self) -> Vec<Arc<Notice>> {
        self.gap
            .lock()
            .map(|g| g.iter().flatten().cloned().collect())
            .unwrap_or_default()
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stops.clear();
        // Not joined: a thread may be in a long initial scan, and drop may run on the
        // async runtime; each exits at its next message.
        self.threads.clear();
    }
}

/// One workspace's initial scan is done, watching `dirs` directories: once every one
/// is, the total is told.
fn scanned(ready: &Readiness, dirs: usize) {
    let mut r = ready
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    r.0 = r.0.saturating_sub(1);
    r.1 += dirs;
    if r.0 == 0
        && let Some(tx) = r.2.take()
    {
        let _ = tx.send(r.1);
    }
}

/// Why a directory is being scanned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scan {
    /// At start: record what exists, report nothing.
    Initial,
    /// A directory appeared: its entries are new too (report them).
    Appeared,
    /// The kernel queue overflowed: compare with what is known.
    Rescan,
}

struct State {
    root: PathBuf,
    /// The workspace's name when several are served: reported paths start with it.
    prefix: Option<Arc<str>>,
    gw: Arc<Gateway>,
    kernel: Kernel,
    ignore: HashSet<String>,
    /// Directories with a watch.
    watched: HashSet<RelPath>,
    co: Coalescer,
    out: broadcast::Sender<Arc<Notice>>,
    /// Directories the watch limit left unwatched.
    unwatched: Unwatched,
    /// `unwatched.count` when it was last published.
    published: usize,
    /// The last published notice of it, for new connections.
    /// Where connections that start later find this workspace's notice: its slot.
    gap: (Gaps, usize),
}

impl State {
    fn run(&mut self, stop: &PipeReader) {
        loop {
            let wait = self
                .co
                .next_deadline()
                .map_or(Duration::from_secs(3600), |d| {
                    d.saturating_duration_since(Instant::now())
                });
            match self.kernel.wait(stop, wait) {
                Ok(Woke::Stop) => return,
                Ok(Woke::Events(seen)) => self.on_events(seen),
                Err(e) => {
                    tracing::error!("watcher: cannot read change events, stopping: {e}");
                    return;
                }
            }
            self.flush(Instant::now());
        }
    }

    fn on_events(&mut self, seen: Vec<Seen>) {
        let now = Instant::now();
        for s in seen {
            match s {
                Seen::Overflow => {
                    tracing::warn!("the kernel's event queue overflowed; rescanning the workspace");
                    let _ = self.out.send(Arc::new(Notice::Overflow));
                    self.scan(&RelPath::root(), Scan::Rescan);
                }
                Seen::Path(p) => {
                    if let Some(rel) = self.rel(&p) {
                        self.co.note(rel, now);
                    }
                }
            }
        }
    }

    fn on_error(&mut self, dir: &RelPath, e: &std::io::Error) {
        // ENOSPC from inotify_add_watch: the watch limit is reached.
        if e.raw_os_error() != Some(rustix::io::Errno::NOSPC.raw_os_error()) {
            tracing::debug!("watcher: {e}");
            return;
        }
        let u = &mut self.unwatched;
        if u.count == 0 {
            (u.limit, u.limit_value) = watch_limit();
        }
        u.count += 1;
        let change = Change {
            kind: ChangeKind::Create,
            path: dir.clone(),
            is_dir: true,
        };
        if u.first.len() < MAX_NAMED && reportable(&self.gw.policy(), &change, None) {
            u.first.push(dir.clone());
        }
    }

    /// Says what is not watched, if more is than was last said: in the log, and to
    /// every connection (now, and to those that connect later).
    fn publish_unwatched(&mut self) {
        if self.unwatched.count <= self.published {
            return;
        }
        self.published = self.unwatched.count;
        self.unwatched.watched = self.watched.len();
        let mut u = self.unwatched.clone();
        if let Some(name) = &self.prefix {
            for p in &mut u.first {
                *p = crate::scope::named(name, p);
            }
            u.workspace = Some(Arc::clone(name));
        }
        let first: Vec<String> = u
            .first
            .iter()
            .map(|p| fsgate_base::text::escape_for_humans(&p.to_rooted()).into_owned())
            .collect();
        tracing::warn!("{}; the first: {}", u.message(), first.join(", "));
        let notice = Arc::new(Notice::Unwatched(u));
        if let Ok(mut g) = self.gap.0.lock()
            && let Some(slot) = g.get_mut(self.gap.1)
        {
            *slot = Some(Arc::clone(&notice));
        }
        let _ = self.out.send(notice);
    }

    /// The workspace path of an absolute event path, unless it is ignored.
    fn rel(&self, p: &std::path::Path) -> Option<RelPath> {
        let rest = p.strip_prefix(&self.root).ok()?.to_str()?;
        let rel = RelPath::parse_rooted(rest).ok()?;
        (!rel.is_root() && !self.ignored(&rel)).then_some(rel)
    }

    fn ignored(&self, rel: &RelPath) -> bool {
        rel.components().any(|c| self.ignore.contains(c))
            || rel.file_name().is_some_and(is_own_temp)
    }

    fn flush(&mut self, now: Instant) {
        let due = self.co.due(now);
        if due.is_empty() {
            return;
        }
        let pol = self.gw.policy();
        for path in due {
            let state = self.kind_now(&path);
            for mut change in self.co.settle(&path, state) {
                match change.kind {
                    ChangeKind::Create if change.is_dir => self.scan(&path, Scan::Appeared),
                    ChangeKind::Delete if change.is_dir => self.unwatch_beneath(&path),
                    _ => {}
                }
                let size = (!change.is_dir && pol.has_size_rules())
                    .then(|| self.size_now(&path))
                    .flatten();
                if reportable(&pol, &change, size) {
                    if let Some(name) = &self.prefix {
                        change.path = crate::scope::named(name, &change.path);
                    }
                    let _ = self.out.send(Arc::new(Notice::Change(change)));
                }
            }
        }
    }

    /// The size of what is at `path` now (symlinks not followed), if anything.
    fn size_now(&self, path: &RelPath) -> Option<u64> {
        let root = self.gw.workspace().root_dir();
        root.symlink_metadata(path.as_fs_path())
            .ok()
            .map(|m| m.len())
    }

    /// `Some(is_dir)` if something is at `path` now (symlinks not followed).
    fn kind_now(&self, path: &RelPath) -> Option<bool> {
        let root = self.gw.workspace().root_dir();
        root.symlink_metadata(path.as_fs_path())
            .ok()
            .map(|m| m.is_dir())
    }

    /// Watches `start` and every non-ignored directory beneath it, watching each
    /// directory before listing it so nothing created in between is missed. The walk is
    /// the gateway's own, with its depth limit: a cut is logged, never silent.
    fn scan(&mut self, start: &RelPath, why: Scan) {
        let mut seen: HashSet<RelPath> = HashSet::new();
        let now = Instant::now();
        self.watch(start);
        let gw = Arc::clone(&self.gw);
        let walked = gw.workspace().walk(start, &mut |e| {
            if self.ignored(&e.path) {
                return Visit::Skip;
            }
            let is_dir = e.kind == FileKind::Directory;
            match why {
                Scan::Initial => self.co.record(&e.path, is_dir),
                Scan::Appeared | Scan::Rescan => {
                    if why == Scan::Rescan {
                        seen.insert(e.path.clone());
                    }
                    if !self.co.knows(&e.path) {
                        self.co.note(e.path.clone(), now);
                        // Its settling scans it; descending here would record it
                        // as known before it is reported.
                        return Visit::Skip;
                    }
                }
            }
            if !is_dir {
                return Visit::Skip;
            }
            self.watch(&e.path);
            Visit::Descend
        });
        // Err: gone already; its own event will say so.
        if let Ok(Walked { cut: Some(at) }) = walked {
            tracing::warn!(
                "watcher: directories more than {MAX_DEPTH} levels below `{start}` are not watched (first: `{at}`); changes there are not reported"
            );
        }
        if why == Scan::Rescan {
            for p in self.co.known_beneath(start) {
                if !seen.contains(&p) {
                    self.co.note(p, now);
                }
            }
        }
        self.publish_unwatched();
    }

    fn watch(&mut self, dir: &RelPath) {
        let abs = self.root.join(dir.as_fs_path());
        match self.kernel.watch(&abs) {
            Ok(()) => {
                self.watched.insert(dir.clone());
            }
            Err(e) => self.on_error(dir, &e),
        }
    }

    fn unwatch_beneath(&mut self, dir: &RelPath) {
        let gone: Vec<RelPath> = self
            .watched
            .iter()
            .filter(|w| w.starts_with(dir))
            .cloned()
            .collect();
        for w in gone {
            // A directory moved out keeps its inotify watch (it follows the inode):
            // remove it, or its new home would be reported under the old name.
            self.kernel.unwatch(&self.root.join(w.as_fs_path()));
            self.watched.remove(&w);
        }
    }
}

/// True if the policy lets a client see `change.path`: `list` on it and on every
/// directory above it, decided as `explain --op tree` decides it (as for a listing),
/// with the file's `size` if known. A file of unknown size (gone) under size
/// conditions is reported only if no size would hide it: its name must not leak.
fn reportable(pol: &Policy, change: &Change, size: Option<u64>) -> bool {
    let seen = |facts: PathFacts| {
        pol.decide_access(Access::Tree, &change.path, &facts)
            .allowed()
    };
    if change.is_dir {
        return seen(PathFacts::kind(EntryKind::Dir));
    }
    match size {
        Some(s) => seen(PathFacts::file(s)),
        None if pol.has_size_rules() => seen(PathFacts::file(0)) && seen(PathFacts::file(u64::MAX)),
        None => seen(PathFacts::kind(EntryKind::File)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(path: &str, is_dir: bool) -> Change {
        Change {
            kind: ChangeKind::Create,
            path: RelPath::parse_rooted(path).expect("path"),
            is_dir,
        }
    }

    fn reportable_now(pol: &Policy, c: &Change) -> bool {
        reportable(pol, c, Some(9))
    }

    #[test]
    fn a_file_hidden_by_its_size_is_not_reported() {
        let pol = Policy::from_toml(
            r#"
version = 1
[[rule]]
id = "all"
effect = "allow"
ops = ["*"]
paths = ["**"]
[[rule]]
id = "hide-big"
effect = "deny"
ops = ["list"]
paths = ["**"]
min_size = 101
"#,
            "test",
        )
        .expect("policy");
        let big = change("d/big.bin", false);
        assert!(!reportable(&pol, &big, Some(2000)));
        assert!(reportable(&pol, &big, Some(100)));
        // Gone, size unknown: some size would hide it, so it is not named.
        assert!(!reportable(&pol, &big, None));
        assert!(reportable(&pol, &change("d", true), None));
    }

    #[test]
    fn the_default_policy_hides_secrets_and_what_lies_beneath_them() {
        let pol = Policy::builtin_default().expect("default policy");
        assert!(reportable_now(&pol, &change("src/a.ts", false)));
        assert!(reportable_now(&pol, &change("src", true)));
        assert!(!reportable_now(&pol, &change(".env", false)));
        assert!(!reportable_now(&pol, &change("config/.env.local", false)));
        assert!(!reportable_now(&pol, &change(".ssh", true)));
        assert!(!reportable_now(&pol, &change(".ssh/known_hosts", false)));
    }

    #[test]
    fn a_readable_file_under_an_unlistable_directory_is_not_reported() {
        let pol = Policy::from_toml(
            r#"
version = 1
[[rule]]
id = "read-all"
effect = "allow"
ops = ["read", "list"]
paths = ["**"]
[[rule]]
id = "no-listing-private"
effect = "deny"
ops = ["list"]
paths = ["private"]
"#,
            "test",
        )
        .expect("policy");
        assert!(reportable_now(&pol, &change("public/a.txt", false)));
        assert!(!reportable_now(&pol, &change("private/a.txt", false)));
    }
}
