//! The bare system calls of one durable 4 KiB write as fsgate makes them, with no
//! server: no request to read, no path to resolve, no policy, no hashing, no JSON. What a
//! write costs on this disk before any server's own work: the floor of the write
//! targets, measured in the same run, on a filesystem of its own as each workload is.
//!
//! The calls are fsgate's, in kind and order, as `strace -f` shows one write of the
//! gateway (docs/benchmarks.md, "The floor: fsgate's calls"; `tests/durable_order.rs`
//! checks the order in the product): the content written into an unnamed file made
//! ahead (fsgate's spares: asked for during the write before, when fsgate asks for
//! them, a new file's next one once its content's sync has started, an overwrite's next
//! two once its name's directory is synced, and made by a helper beside the rest of that
//! write; what is still being made when it ends is waited for off the clock, as
//! fsgate's next request only comes after its reply), its mode set; over a file, the backup
//! written first into an unnamed file made ahead in the backup store, linked into its
//! shard directory, locked, the old content and a trailer written; the backup's, its
//! shard's and the content's syncs started on helper threads while this thread appends
//! the intent record and syncs the log, whose space is reserved ahead (`fallocate`
//! with `KEEP_SIZE`, as fsgate's audit log does: an append then changes no allocation);
//! then the name (a new file linked at it; an overwrite linked at a temporary name
//! renamed over it), and its directory's sync on a helper while this thread appends and
//! syncs the outcome record.
//!
//! The writes are laid out as the workloads' first repetition on fsgate is: each
//! overwrite over a file of its own (`over/k1-r0/o<i>.txt` one at a time,
//! `over/k32-r0/o<i>.txt` in flight, made and synced before the clock starts), its name
//! published in that file's directory, its backup in the shard its path hashes to
//! (SHA-256, first byte, as fsgate's store picks it) among 256 shard directories, under a
//! name of the store's form; new files in `new/k1-r0`. Which directory blocks and inodes
//! a write's syncs carry depends on this: one file overwritten again and again, with
//! every backup in one shard, is not the work fsgate's writes give the disk.
//!
//! Left as they are, and so not fsgate's: the shard directories are made and synced
//! before the clock (fsgate makes them on a helper at its first backup of a run and
//! syncs `versions/` once then); the old content is read and written back (fsgate's
//! store copies it, or clones it where the filesystem can); with 32 in flight, each
//! write makes its unnamed files on its path (fsgate's helpers make spares only when
//! one is free).

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::time::Instant;

use crate::Error;

/// About one audit record of an overwrite (fsgate's intent and outcome records of a
/// 4 KiB overwrite take 806-809 bytes, as `strace` shows them written: they name the
/// backup and the old content's hash).
const RECORD: &[u8] = &[b'r'; 800];

/// About one audit record of a new file's write (656 and 738 bytes, intent and
/// outcome, as `strace` shows them written).
const RECORD_NEW: &[u8] = &[b'r'; 700];

/// A backup's trailer (fsgate's record after the old content: 256 bytes, as `strace`
/// shows it written).
const TRAILER: &[u8] = &[b't'; 256];

/// The log's space reserved ahead at a time, and the room left that renews it (fsgate's
/// audit log's).
const RESERVE: u64 = 256 * 1024;
const RESERVE_LOW: u64 = 64 * 1024;

/// The directory of the files the serial overwrites replace, in the workspace: the
/// one `overwrite_serial`'s first repetition writes in (so that its paths, and the
/// shards they hash to, are the workload's).
const OVER_DIR: &str = "over/k1-r0";

/// The directory the serial new files are written in (`write_new_serial`'s first
/// repetition's).
const NEW_DIR: &str = "new/k1-r0";

type Job = Box<dyn FnOnce() -> std::io::Result<()> + Send>;
type Done = mpsc::SyncSender<std::io::Result<()>>;

/// One long-lived thread that runs the syncs a write overlaps with its intent's.
struct Helper {
    jobs: mpsc::Sender<(Job, Done)>,
}

impl Helper {
    fn new() -> Helper {
        let (jobs, rx) = mpsc::channel::<(Job, Done)>();
        std::thread::spawn(move || {
            for (job, done) in rx {
                let _ = done.send(job());
            }
        });
        Helper { jobs }
    }

    /// Starts `job`; the receiver gets its result.
    fn start(&self, job: Job) -> mpsc::Receiver<std::io::Result<()>> {
        let (done, rx) = mpsc::sync_channel(1);
        if let Err(mpsc::SendError((job, done))) = self.jobs.send((job, done)) {
            let _ = done.send(job());
        }
        rx
    }
}

fn join(rx: mpsc::Receiver<std::io::Result<()>>) -> std::io::Result<()> {
    rx.recv()
        .unwrap_or_else(|_| Err(std::io::Error::other("helper thread gone")))
}

/// An audit log as fsgate keeps it: appended to, its space reserved ahead.
struct Log {
    path: PathBuf,
    file: File,
    len: u64,
    reserved_to: u64,
}

impl Log {
    fn open(path: PathBuf) -> std::io::Result<Log> {
        let file = OpenOptions::new().append(true).create(true).open(&path)?;
        let mut log = Log {
            path,
            file,
            len: 0,
            reserved_to: 0,
        };
        log.reserve();
        Ok(log)
    }

    /// Keeps [`RESERVE`] bytes reserved past the end, renewed when under [`RESERVE_LOW`].
    fn reserve(&mut self) {
        if self.reserved_to >= self.len + RESERVE_LOW {
            return;
        }
        // SAFETY: fallocate on a descriptor we own; a failure leaves it unreserved.
        let r = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                libc::FALLOC_FL_KEEP_SIZE,
                self.len as i64,
                RESERVE as i64,
            )
        };
        if r == 0 {
            self.reserved_to = self.len + RESERVE;
        }
    }

    /// One record appended and synced, as fsgate's writer does (the log's path checked
    /// first).
    fn record(&mut self, record: &[u8]) -> std::io::Result<()> {
        std::fs::metadata(&self.path)?;
        self.file.write_all(record)?;
        self.len += record.len() as u64;
        self.reserve();
        self.file.sync_data()
    }
}

/// The unnamed files made ahead for the next write (fsgate's spares), by a helper.
#[derive(Default)]
struct Spares {
    /// In the directory the next write publishes in (and that directory).
    content: Mutex<Option<(PathBuf, File)>>,
    /// In the backup store.
    backup: Mutex<Option<File>>,
}

impl Spares {
    fn take(slot: &Mutex<Option<File>>) -> Option<File> {
        slot.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// The content's spare if it was made in `dir` (as fsgate keeps one per directory).
    fn take_content(&self, dir: &Path) -> Option<File> {
        let mut slot = self.content.lock().unwrap_or_else(|e| e.into_inner());
        match slot.take() {
            Some((made_in, f)) if made_in == dir => Some(f),
            other => {
                *slot = other;
                None
            }
        }
    }

    /// Makes the spares missing: the content's in `dir`, and (with `backups`) one in
    /// the store. Each is made with no lock held, as fsgate's are: a write that comes
    /// meanwhile never waits for it, it makes its own.
    fn make(&self, dir: &Path, backups: Option<&Path>) -> std::io::Result<()> {
        let empty = |m: &Mutex<Option<File>>| m.lock().unwrap_or_else(|e| e.into_inner()).is_none();
        let wanted = |slot: &Mutex<Option<(PathBuf, File)>>| {
            let slot = slot.lock().unwrap_or_else(|e| e.into_inner());
            slot.as_ref().is_none_or(|(made_in, _)| made_in != dir)
        };
        if wanted(&self.content) {
            let made = unnamed_in(dir)?;
            *self.content.lock().unwrap_or_else(|e| e.into_inner()) =
                Some((dir.to_path_buf(), made));
        }
        let Some(store) = backups else { return Ok(()) };
        if empty(&self.backup) {
            let made = unnamed_in(store)?;
            let mut slot = self.backup.lock().unwrap_or_else(|e| e.into_inner());
            slot.get_or_insert(made);
        }
        Ok(())
    }
}

/// A workspace directory, a backup store and a log, under a scratch directory, with the
/// unnamed files made ahead for the next write (fsgate's spares).
struct Scratch {
    ws: PathBuf,
    /// The directory new files are written in (opened once: no path to resolve).
    new_dir: File,
    backups: PathBuf,
    log: Log,
    /// Content, backup file, shard directory: each overlapping sync has its own; the
    /// fourth makes the spares.
    helpers: [Helper; 4],
    /// The directory the overwrites' files are in (opened once: no path to resolve).
    over_dir: File,
    /// The next write's unnamed files: in the workspace, in the backup store.
    spares: Arc<Spares>,
    n: usize,
    /// Unnamed files a write had to make on its own path (no spare was there).
    made_on_path: usize,
}

impl Scratch {
    fn new(root: &Path) -> std::io::Result<Scratch> {
        let (ws, backups) = (root.join("ws"), root.join("backups"));
        std::fs::create_dir_all(ws.join(OVER_DIR))?;
        std::fs::create_dir_all(ws.join(NEW_DIR))?;
        for b in 0..SHARDS {
            std::fs::create_dir_all(backups.join(format!("{b:02x}")))?;
        }
        std::fs::create_dir_all(root.join("audit"))?;
        Ok(Scratch {
            new_dir: File::open(ws.join(NEW_DIR))?,
            over_dir: File::open(ws.join(OVER_DIR))?,
            log: Log::open(root.join("audit").join("audit.jsonl"))?,
            ws,
            backups,
            helpers: [Helper::new(), Helper::new(), Helper::new(), Helper::new()],
            spares: Arc::default(),
            n: 0,
            made_on_path: 0,
        })
    }

    /// The job that makes the next write's unnamed files (over a file, the backup's
    /// too), in the directory the next write publishes in, as fsgate's helper does.
    fn spare_job(&self, over: bool) -> Job {
        let spares = Arc::clone(&self.spares);
        let dir = self.ws.join(if over { OVER_DIR } else { NEW_DIR });
        let store = over.then(|| self.backups.clone());
        Box::new(move || spares.make(&dir, store.as_deref()))
    }

    /// Waits until the spare helper is done (what it makes is there for the next
    /// write).
    fn settle(&self) -> std::io::Result<()> {
        join(self.helpers[3].start(Box::new(|| Ok(()))))
    }

    /// The content, written into the spare (or a file made now if none), its mode a
    /// new file's.
    fn staged(&mut self, data: &[u8], dir: &Path) -> std::io::Result<File> {
        let mut f = match self.spares.take_content(dir) {
            Some(f) => f,
            None => {
                self.made_on_path += 1;
                unnamed_in(dir)?
            }
        };
        f.write_all(data)?;
        f.set_permissions(std::fs::Permissions::from_mode(0o644))?;
        Ok(f)
    }

    /// A new file: content || intent; the name; its directory || the outcome.
    fn write_new(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.n += 1;
        let f = self.staged(data, &self.ws.join(NEW_DIR))?;
        let g = f.try_clone()?;
        let content = self.helpers[0].start(Box::new(move || g.sync_all()));
        // fsgate asks for the next new file's spare once this one's sync has started.
        drop(self.helpers[3].start(self.spare_job(false)));
        let intent = self.log.record(RECORD_NEW);
        join(content)?;
        intent?;
        link_at(&f, &self.new_dir, &format!("w{}.txt", self.n))?;
        self.entry_and_outcome(false)
    }

    /// The directory's sync (the new files', or `over` the overwrites') on a helper
    /// while this thread appends and syncs the outcome; over a file, the next write's
    /// spares asked for once the directory is synced (as fsgate's helper does).
    fn entry_and_outcome(&mut self, over: bool) -> std::io::Result<()> {
        let d = if over { &self.over_dir } else { &self.new_dir }.try_clone()?;
        let then = over.then(|| (self.helpers[3].jobs.clone(), self.spare_job(true)));
        let dir = self.helpers[0].start(Box::new(move || {
            let synced = d.sync_all();
            if let Some((spare_helper, job)) = then {
                // Nobody waits for it: its result is dropped.
                let (done, _) = mpsc::sync_channel(1);
                let _ = spare_helper.send((job, done));
            }
            synced
        }));
        let outcome = self.log.record(if over { RECORD } else { RECORD_NEW });
        join(dir)?;
        outcome
    }

    /// The backup of `old`, the content of `rel`: the backup store's spare linked into
    /// the shard `rel` hashes to, locked, the old content and its trailer written; its
    /// sync and its shard's started.
    fn backup(
        &mut self,
        rel: &str,
        old: &[u8],
    ) -> std::io::Result<[mpsc::Receiver<std::io::Result<()>>; 2]> {
        let shard = File::open(self.backups.join(shard_of(rel)))?;
        let b = match Spares::take(&self.spares.backup) {
            Some(b) => b,
            None => {
                self.made_on_path += 1;
                unnamed_in(&self.backups)?
            }
        };
        link_at(&b, &shard, &backup_name(rel, self.n))?;
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(b.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        b.write_all_at(old, 0)?;
        b.write_all_at(TRAILER, old.len() as u64)?;
        let file = self.helpers[1].start(Box::new(move || b.sync_data()));
        let dir = self.helpers[2].start(Box::new(move || shard.sync_all()));
        Ok([file, dir])
    }

    /// Over `name` in the overwrites' directory: its backup (file and shard) ||
    /// content || intent; a temporary name renamed over it; its directory || the
    /// outcome.
    fn overwrite(&mut self, name: &str, data: &[u8]) -> std::io::Result<()> {
        self.n += 1;
        let rel = format!("{OVER_DIR}/{name}");
        let target = self.ws.join(&rel);
        let old = std::fs::read(&target)?;
        let [backup, shard] = self.backup(&rel, &old)?;
        let f = self.staged(data, &self.ws.join(OVER_DIR))?;
        let g = f.try_clone()?;
        let content = self.helpers[0].start(Box::new(move || g.sync_all()));
        let intent = self.log.record(RECORD);
        for rx in [backup, shard, content] {
            join(rx)?;
        }
        intent?;
        // What is replaced is still what was backed up.
        std::fs::symlink_metadata(&target)?;
        let tmp = format!(".tmp-{}", self.n);
        link_at(&f, &self.over_dir, &tmp)?;
        std::fs::rename(self.ws.join(OVER_DIR).join(&tmp), &target)?;
        self.entry_and_outcome(true)
    }
}

/// The shard directory a backup of `rel` goes to: the first byte of its path's
/// SHA-256, in hex, as fsgate's store picks it.
fn shard_of(rel: &str) -> String {
    format!("{:02x}", shard_index(rel))
}

/// The number of the shard [`shard_of`] names.
fn shard_index(rel: &str) -> usize {
    usize::from(ring::digest::digest(&ring::digest::SHA256, rel.as_bytes()).as_ref()[0])
}

/// A backup's file name of fsgate's form and length: the path escaped (`/` as `%2F`),
/// `@`, a timestamp (the write's number in its nanoseconds), `.backup`.
fn backup_name(rel: &str, n: usize) -> String {
    format!("{}@20261128T000000.{n:09}Z.backup", rel.replace('/', "%2F"))
}

/// What the files the serial overwrites replace hold before the first (4 KiB, as the
/// writes).
const OLD_CONTENT: &[u8] = &[b'o'; 4096];

/// The name of the `i`th file the overwrites replace, in their directory.
fn file_name(i: usize) -> String {
    format!("o{i}.txt")
}

/// A new unnamed file (`O_TMPFILE`, read and write, as fsgate's spares) in `dir`.
fn unnamed_in(dir: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .mode(0o600)
        .open(dir)
}

/// Gives the unnamed file `f` the name `name` in `dir`: by its descriptor
/// (`AT_EMPTY_PATH`), else through `/proc/self/fd`, as fsgate does.
fn link_at(f: &File, dir: &File, name: &str) -> std::io::Result<()> {
    let dst = CString::new(name)?;
    // SAFETY: both strings are NUL-terminated and outlive the call; the descriptors
    // are open.
    let r = unsafe {
        libc::linkat(
            f.as_raw_fd(),
            c"".as_ptr(),
            dir.as_raw_fd(),
            dst.as_ptr(),
            libc::AT_EMPTY_PATH,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let src = CString::new(format!("/proc/self/fd/{}", f.as_raw_fd()))?;
    // SAFETY: as above.
    let r = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            src.as_ptr(),
            dir.as_raw_fd(),
            dst.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The p50 of `n` bare durable writes of 4 KiB to new files (each with its unnamed file
/// made during the write before, as fsgate's spares are), µs, in a scratch directory
/// `root` (on a filesystem of its own: see [`crate::fresh_fs`]).
pub fn bare_new(root: &Path, n: usize) -> Result<f64, Error> {
    bare_serial(root, n, false)
}

/// The same for overwrites with their backups, each over a file of its own (the
/// backup's and the content's unnamed files made ahead), µs.
pub fn bare_overwrite(root: &Path, n: usize) -> Result<f64, Error> {
    bare_serial(root, n, true)
}

fn bare_serial(root: &Path, n: usize, over: bool) -> Result<f64, Error> {
    let mut floor = SerialFloor::new(root, over, n)?;
    floor.run(n)?;
    Ok(floor.p50_us())
}

/// The one-at-a-time floor, timed a chunk at a time: the suite runs its chunks between
/// fsgate's, so that both see the same minutes of the disk.
pub struct SerialFloor {
    root: PathBuf,
    s: Scratch,
    over: bool,
    /// Files made for the overwrites (each overwrite its own, round and round).
    files: usize,
    data: Vec<u8>,
    /// Each write's time, µs.
    times: Vec<f64>,
}

impl SerialFloor {
    /// A scratch directory `root` (on a filesystem of its own: see [`crate::fresh_fs`])
    /// ready for new files, or (`over`) for overwrites with their backups of `files`
    /// files of 4 KiB made now, each overwrite its own file (as the workload's are).
    pub fn new(root: &Path, over: bool, files: usize) -> Result<SerialFloor, Error> {
        let io = |e| Error::io(root, e);
        let s = Scratch::new(root).map_err(io)?;
        let data = vec![b'x'; 4096];
        let files = if over { files.max(1) } else { 0 };
        for i in 0..files {
            let p = s.ws.join(OVER_DIR).join(file_name(i));
            std::fs::write(&p, OLD_CONTENT).map_err(io)?;
        }
        // SAFETY: a sync with no preconditions; the set-up starts the clock on disk.
        unsafe { libc::sync() };
        Ok(SerialFloor {
            root: root.to_path_buf(),
            s,
            over,
            files,
            data,
            times: Vec::new(),
        })
    }

    /// `n` more writes, each timed (its unnamed files asked for during the write
    /// before, as fsgate's spares are: the first write makes its own). Between writes,
    /// off the clock, what the spare helper still makes is waited for: fsgate's next
    /// request comes after its reply and the client's next request, about 150 µs later
    /// here, while the floor's would come at once and find no spare yet.
    pub fn run(&mut self, n: usize) -> Result<(), Error> {
        let io = |e| Error::io(&self.root, e);
        for _ in 0..n {
            self.s.settle().map_err(io)?;
            let t = Instant::now();
            if self.over {
                let name = file_name(self.times.len() % self.files);
                self.s.overwrite(&name, &self.data).map_err(io)?;
            } else {
                self.s.write_new(&self.data).map_err(io)?;
            }
            self.times.push(t.elapsed().as_secs_f64() * 1e6);
        }
        Ok(())
    }

    /// The p50 of every write so far, µs.
    pub fn p50_us(&self) -> f64 {
        crate::suite::mid(self.times.clone())
    }

    /// Writes timed so far.
    pub fn count(&self) -> usize {
        self.times.len()
    }

    /// True for overwrites, false for new files.
    pub fn over(&self) -> bool {
        self.over
    }

    /// Unnamed files the writes had to make on their own path (no spare ready).
    pub fn made_on_path(&self) -> usize {
        self.s.made_on_path
    }
}

/// An `fsync` shared by the threads that need it (a group commit): a sync that starts
/// after a thread's change covers it, so a thread waits for at most the one running
/// and the next. For a directory's entries, and for the log's appends.
struct SharedSync {
    file: File,
    state: Mutex<Syncs>,
    done: Condvar,
}

#[derive(Default)]
struct Syncs {
    /// Syncs started, and finished, so far.
    started: u64,
    finished: u64,
    running: bool,
    failed: Option<std::io::ErrorKind>,
}

impl SharedSync {
    fn new(file: File) -> SharedSync {
        SharedSync {
            file,
            state: Mutex::new(Syncs::default()),
            done: Condvar::new(),
        }
    }

    /// Appends `record` to the file (a log), then syncs it, shared.
    fn append(&self, record: &[u8]) -> std::io::Result<()> {
        (&self.file).write_all(record)?;
        self.sync()
    }

    /// Returns once a sync started after this call has finished.
    fn sync(&self) -> std::io::Result<()> {
        let lock = || self.state.lock().unwrap_or_else(|p| p.into_inner());
        let mut st = lock();
        // A sync running now may have started before the caller's change.
        let want = st.started + 1;
        while st.finished < want {
            if st.running {
                st = self.done.wait(st).unwrap_or_else(|p| p.into_inner());
                continue;
            }
            st.running = true;
            st.started += 1;
            let this = st.started;
            drop(st);
            let r = self.file.sync_data();
            st = lock();
            st.running = false;
            st.finished = this;
            st.failed = r.err().map(|e| e.kind());
            self.done.notify_all();
        }
        match st.failed {
            Some(kind) => Err(kind.into()),
            None => Ok(()),
        }
    }
}

/// What [`bare_overwrites_in_flight`] measured.
#[derive(Debug, Clone, Copy, Default)]
pub struct InFlight {
    /// Overwrites a second.
    pub ops_per_s: f64,
    /// CPU (user + system, all threads) per overwrite, µs.
    pub cpu_us: f64,
}

/// Backup directories: fsgate's store spreads versions over 256 by path.
const SHARDS: usize = 256;

/// The directory of the files the overwrites in flight replace (`overwrite`'s first
/// repetition's).
const IN_FLIGHT_DIR: &str = "over/k32-r0";

/// The workspace path of the `i`th file the overwrites in flight replace.
fn in_flight_rel(i: usize) -> String {
    format!("{IN_FLIGHT_DIR}/o{i}.txt")
}

/// Where [`overwrite_one`] works: the files' directory in the workspace, the backup
/// shards and the log, with the syncs threads share (the files' directory's, the log's).
struct Shared {
    /// The directory the files are in, in the workspace.
    ws: PathBuf,
    ws_dir: SharedSync,
    /// The backup store, whose unnamed files are linked into its shards.
    backups: PathBuf,
    shards: Vec<(PathBuf, File)>,
    log: SharedSync,
    /// One file the backups are appended to, for [`Calls::SharedBackups`].
    pack: SharedSync,
}

impl Shared {
    fn new(root: &Path, n: usize) -> std::io::Result<Shared> {
        let ws = root.join("ws").join(IN_FLIGHT_DIR);
        std::fs::create_dir_all(&ws)?;
        let data = vec![b'x'; 4096];
        for i in 0..n {
            std::fs::write(ws.join(file_name(i)), &data)?;
        }
        let mut shards = Vec::with_capacity(SHARDS);
        for s in 0..SHARDS {
            let d = root.join("backups").join(format!("{s:02x}"));
            std::fs::create_dir_all(&d)?;
            shards.push((d.clone(), File::open(&d)?));
        }
        let log = OpenOptions::new()
            .append(true)
            .create(true)
            .open(root.join("log"))?;
        // Reserved ahead as fsgate's audit log is (here, at once, for every record).
        let len = (2 * n * RECORD.len()) as i64 + RESERVE as i64;
        // SAFETY: fallocate on a descriptor we own; a failure leaves it unreserved.
        unsafe { libc::fallocate(log.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, 0, len) };
        let pack = OpenOptions::new()
            .append(true)
            .create(true)
            .open(root.join("backups").join("pack"))?;
        // SAFETY: a sync with no preconditions; the set-up starts the clock on disk.
        unsafe { libc::sync() };
        Ok(Shared {
            ws_dir: SharedSync::new(File::open(&ws)?),
            ws,
            backups: root.join("backups"),
            shards,
            log: SharedSync::new(log),
            pack: SharedSync::new(pack),
        })
    }
}

/// Which calls [`bare_overwrites_in_flight`] makes for each overwrite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Calls {
    /// fsgate's: the records, the backup and the durable replace.
    Fsgates,
    /// The durable replace alone, no backup and no records: what any
    /// server that makes an overwrite durable before answering must do, at the least.
    ReplaceOnly,
    /// fsgate's records and durable replace, but each backup (the old content and a
    /// record's worth of trailer) appended to one file whose syncs the threads share:
    /// what a backup store of shared files would cost at best, with no inode and no
    /// directory sync of its own per backup.
    SharedBackups,
}

/// `n` bare overwrites of 4 KiB with their backups, `k` threads at once, each over its
/// own file: what fsgate's `overwrite` workload asks of the kernel, with no server.
/// Each thread makes the calls of the bare overwrite one at a time, in fsgate's order:
/// the backup (an unnamed file in the store linked into its shard, written, synced, the
/// shard synced), an unnamed file filled and synced, the intent record, a temporary
/// name renamed over the file, its directory synced, the outcome record. The log's and
/// the directory's syncs are shared between the threads (group
/// commits, as fsgate's are).
///
/// Its files are made under `root` and left there: the caller gives it a filesystem
/// of its own and removes it whole ([`crate::fresh_fs`]).
pub fn bare_overwrites_in_flight(
    root: &Path,
    n: usize,
    k: usize,
    calls: Calls,
) -> Result<InFlight, Error> {
    let mut floor = InFlightFloor::new(root, n, calls)?;
    floor.run(n, k)?;
    Ok(floor.figures())
}

/// [`bare_overwrites_in_flight`] timed a chunk at a time: the suite runs its chunks
/// between fsgate's, so that both see the same minutes of the disk. Threads start anew
/// for each chunk, as fsgate's chunk starts with nothing in flight.
pub struct InFlightFloor {
    root: PathBuf,
    shared: Arc<Shared>,
    calls: Calls,
    /// Files overwritten so far (the next chunk starts at this one), of `n` made.
    done: usize,
    n: usize,
    /// Time and CPU (this process's, all threads) over the chunks so far.
    secs: f64,
    cpu_s: f64,
}

impl InFlightFloor {
    /// `n` files of 4 KiB under `root` (on a filesystem of its own: see
    /// [`crate::fresh_fs`]), with the backup store's shards and a log.
    pub fn new(root: &Path, n: usize, calls: Calls) -> Result<InFlightFloor, Error> {
        let shared = Shared::new(root, n).map_err(|e| Error::io(root, e))?;
        Ok(InFlightFloor {
            root: root.to_path_buf(),
            shared: Arc::new(shared),
            calls,
            done: 0,
            n,
            secs: 0.0,
            cpu_s: 0.0,
        })
    }

    /// The next `count` files overwritten, `k` threads at once.
    pub fn run(&mut self, count: usize, k: usize) -> Result<(), Error> {
        let (from, to) = (self.done, (self.done + count).min(self.n));
        let next = Arc::new(AtomicUsize::new(from));
        let cpu0 = crate::workloads::rusage_cpu(libc::RUSAGE_SELF);
        let t = Instant::now();
        let threads: Vec<_> = (0..k.max(1))
            .map(|_| {
                let (shared, next, calls) =
                    (Arc::clone(&self.shared), Arc::clone(&next), self.calls);
                std::thread::spawn(move || overwrite_until(&shared, &next, to, calls))
            })
            .collect();
        for th in threads {
            th.join()
                .unwrap_or_else(|_| Err(std::io::Error::other("a writer panicked")))
                .map_err(|e| Error::io(&self.root, e))?;
        }
        self.secs += t.elapsed().as_secs_f64();
        self.cpu_s += crate::workloads::rusage_cpu(libc::RUSAGE_SELF) - cpu0;
        self.done = to;
        Ok(())
    }

    /// The rate and CPU per overwrite over the chunks so far.
    pub fn figures(&self) -> InFlight {
        let n = self.done.max(1) as f64;
        InFlight {
            ops_per_s: match self.secs > 0.0 {
                true => self.done as f64 / self.secs,
                false => 0.0,
            },
            cpu_us: self.cpu_s * 1e6 / n,
        }
    }
}

/// One thread's share: overwrites of the files `next` hands out, until `to`.
fn overwrite_until(
    shared: &Shared,
    next: &AtomicUsize,
    to: usize,
    calls: Calls,
) -> std::io::Result<()> {
    let data = vec![b'y'; 4096];
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= to {
            return Ok(());
        }
        match calls {
            Calls::Fsgates => overwrite_one(shared, i, &data)?,
            Calls::ReplaceOnly => replace_one(shared, i, &data)?,
            Calls::SharedBackups => overwrite_shared_backup(shared, i, &data)?,
        }
    }
}

/// One overwrite of `over/k32/o<i>.txt` for [`bare_overwrites_in_flight`], as fsgate's backup
/// store makes it: an unnamed file in the store linked into the file's shard directory,
/// locked, the old content and a trailer written, it and its shard synced.
fn overwrite_one(s: &Shared, i: usize, data: &[u8]) -> std::io::Result<()> {
    overwrite_backed_up(s, i, data, |old| {
        let rel = in_flight_rel(i);
        let (_, shard_dir) = &s.shards[shard_index(&rel)];
        let b = unnamed_in(&s.backups)?;
        link_at(&b, shard_dir, &backup_name(&rel, i))?;
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(b.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        b.write_all_at(&old, 0)?;
        b.write_all_at(TRAILER, old.len() as u64)?;
        b.sync_data()?;
        shard_dir.sync_all()
    })
}

/// One overwrite of `over/k32/o<i>.txt` for [`Calls::SharedBackups`]: its backup appended to the
/// shared file instead, a record's worth of trailer after it.
fn overwrite_shared_backup(s: &Shared, i: usize, data: &[u8]) -> std::io::Result<()> {
    overwrite_backed_up(s, i, data, |mut old| {
        old.extend_from_slice(RECORD);
        // One `write` with `O_APPEND`: the threads' backups never interleave.
        s.pack.append(&old)
    })
}

/// fsgate's calls for one overwrite of `over/k32/o<i>.txt` around `backup`, given the old
/// content, in fsgate's order (each thread makes its syncs in turn, as a request does
/// when fsgate's helpers are busy): the backup, the content synced, the intent record,
/// the name, the outcome record.
fn overwrite_backed_up(
    s: &Shared,
    i: usize,
    data: &[u8],
    backup: impl FnOnce(Vec<u8>) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let old = std::fs::read(s.ws.join(file_name(i)))?;
    backup(old)?;
    let content = staged(s, data)?;
    s.log.append(RECORD)?;
    publish(s, i, &content)?;
    s.log.append(RECORD)
}

/// One durable replace of `over/k32/o<i>.txt`, nothing else: the old content read (a server
/// checks what it replaces), an unnamed file filled and synced, a temporary name
/// renamed over the file, its directory synced (shared).
fn replace_one(s: &Shared, i: usize, data: &[u8]) -> std::io::Result<()> {
    std::fs::read(s.ws.join(file_name(i)))?;
    let content = staged(s, data)?;
    publish(s, i, &content)
}

/// `data` in a new unnamed file in the files' directory, its mode a new file's, synced.
fn staged(s: &Shared, data: &[u8]) -> std::io::Result<File> {
    let mut content = unnamed_in(&s.ws)?;
    content.write_all(data)?;
    content.set_permissions(std::fs::Permissions::from_mode(0o644))?;
    content.sync_all()?;
    Ok(content)
}

/// `content` made `over/k32/o<i>.txt`: the target checked, linked at a temporary name renamed
/// over it, its directory synced (shared).
fn publish(s: &Shared, i: usize, content: &File) -> std::io::Result<()> {
    let target = s.ws.join(file_name(i));
    std::fs::symlink_metadata(&target)?;
    let tmp = format!(".tmp-{i}");
    link_at(content, &s.ws_dir.file, &tmp)?;
    std::fs::rename(s.ws.join(&tmp), &target)?;
    s.ws_dir.sync()
}

/// About a 4 KiB write's request on the wire, newline included.
const REQUEST_BYTES: usize = 4_400;

/// The p50 of `n` round trips, µs, of a write request's size through pipes to a child
/// process that only echoes it (`cat`): what any server on stdio adds to a request,
/// before it does anything (the client's write, two wake-ups, the answer's read).
pub fn echo_round_trip(n: usize) -> Result<f64, Error> {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let cat = Path::new("cat");
    let io = |e| Error::io(cat, e);
    let mut child = Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(io)?;
    let (Some(mut to), Some(mut from)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(Error::Setup("cat: no pipes".into()));
    };
    let mut line = vec![b'x'; REQUEST_BYTES - 1];
    line.push(b'\n');
    let mut back = vec![0u8; line.len()];
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        to.write_all(&line).map_err(io)?;
        from.read_exact(&mut back).map_err(io)?;
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    drop(to);
    child.wait().map_err(io)?;
    if back != line {
        return Err(Error::Answer("cat echoed other bytes".into()));
    }
    Ok(crate::suite::mid(times))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn scratch() -> (PathBuf, Scratch) {
        let root = std::env::temp_dir().join(format!("fsgate-floor-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let s = Scratch::new(&root).unwrap();
        (root, s)
    }

    /// A bare write does the write as fsgate does: the name holds the content (mode
    /// 0644), an overwrite backs up what it replaces (content, then its trailer) in its
    /// shard, each write appends its intent and outcome to a log whose space is reserved
    /// ahead, and the spares a helper makes during one write, where fsgate makes them,
    /// are what the next write fills.
    #[test]
    fn bare_writes_leave_their_files_a_backup_and_two_records_each() {
        let (root, mut s) = scratch();
        let ino = |p: &Path| std::fs::metadata(p).unwrap().ino();
        let made_in = |f: &File| {
            let link = std::fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd())).unwrap();
            link.parent().unwrap().to_path_buf()
        };
        let (new_dir, over) = (s.ws.join(NEW_DIR), s.ws.join(OVER_DIR));
        s.write_new(b"one").unwrap();
        assert_eq!(std::fs::read(new_dir.join("w1.txt")).unwrap(), b"one");
        let mode = std::fs::metadata(new_dir.join("w1.txt"))
            .unwrap()
            .permissions();
        assert_eq!(mode.mode() & 0o777, 0o644);
        // The next new file's spare, made in its directory during the first write.
        s.settle().unwrap();
        let spare = {
            let slot = s.spares.content.lock().unwrap();
            let (dir, f) = slot.as_ref().expect("a spare made during the write");
            assert_eq!((dir, &made_in(f)), (&new_dir, &new_dir));
            f.metadata().unwrap().ino()
        };
        s.write_new(b"two").unwrap();
        assert_eq!(ino(&new_dir.join("w2.txt")), spare, "the spare filled");
        std::fs::write(over.join("f"), b"old").unwrap();
        std::fs::write(over.join("g"), b"old g").unwrap();
        s.overwrite("f", b"new").unwrap();
        s.settle().unwrap();
        let (spare, spare_backup) = {
            let c = s.spares.content.lock().unwrap();
            let (dir, f) = c.as_ref().expect("the next overwrite's spare");
            assert_eq!((dir, &made_in(f)), (&over, &over));
            let b = s.spares.backup.lock().unwrap();
            let b = b.as_ref().expect("the next backup's spare");
            assert_eq!(made_in(b), s.backups);
            (f.metadata().unwrap().ino(), b.metadata().unwrap().ino())
        };
        assert_eq!(std::fs::read(over.join("f")).unwrap(), b"new");
        // In the shard fsgate's store would pick for the path (its first SHA-256 byte).
        assert_eq!(shard_of("over/k1-r0/f"), "b5");
        let backup = s
            .backups
            .join("b5")
            .join("over%2Fk1-r0%2Ff@20261128T000000.000000003Z.backup");
        assert_eq!(
            std::fs::read(backup).unwrap(),
            [&b"old"[..], TRAILER].concat()
        );
        s.overwrite("g", b"new g").unwrap();
        assert_eq!(ino(&over.join("g")), spare, "the content's spare filled");
        let g_backup = s
            .backups
            .join(shard_of("over/k1-r0/g"))
            .join("over%2Fk1-r0%2Fg@20261128T000000.000000004Z.backup");
        assert_eq!(ino(&g_backup), spare_backup, "the backup's spare filled");
        let log = root.join("audit").join("audit.jsonl");
        assert_eq!(
            std::fs::metadata(&log).unwrap().len(),
            4 * (RECORD_NEW.len() + RECORD.len()) as u64,
            "two records for each of two new files and two overwrites"
        );
        let blocks = std::fs::metadata(&log).unwrap().blocks() * 512;
        assert!(blocks >= RESERVE, "space reserved ahead: {blocks}");
        let names: Vec<_> = std::fs::read_dir(s.ws.join(NEW_DIR)).unwrap().collect();
        assert_eq!(names.len(), 2, "no temporary name left beside w1 and w2");
        assert_eq!(
            std::fs::read_dir(&over).unwrap().count(),
            2,
            "nor beside f and g"
        );
        assert!(bare_new(&root.join("n"), 5).unwrap() > 0.0);
        assert!(bare_overwrite(&root.join("o"), 5).unwrap() > 0.0);
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// A round trip through `cat` is timed, and is a positive time.
    #[test]
    fn an_echo_round_trip_is_timed() {
        let us = echo_round_trip(20).unwrap();
        assert!(us > 0.0 && us < 1e6, "{us}");
    }

    /// Every file is overwritten once and backed up in its shard, with two records
    /// each, whatever the threads' interleaving.
    #[test]
    fn overwrites_in_flight_overwrite_and_back_up_every_file_once() {
        let root = std::env::temp_dir().join(format!("fsgate-floor-k-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let shared = Arc::new(Shared::new(&root, 300).unwrap());
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let s = Arc::clone(&shared);
                std::thread::spawn(move || {
                    for i in (t..300).step_by(8) {
                        overwrite_one(&s, i, b"new").unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // The shard fsgate's store picks for the first path (its SHA-256's first byte).
        assert_eq!(shard_index(&in_flight_rel(0)), 0xe8);
        for i in 0..300 {
            assert_eq!(std::fs::read(shared.ws.join(file_name(i))).unwrap(), b"new");
            let rel = in_flight_rel(i);
            let backup = shared.shards[shard_index(&rel)]
                .0
                .join(backup_name(&rel, i));
            let backup = std::fs::read(backup).unwrap();
            assert_eq!(backup.len(), 4096 + TRAILER.len());
            assert!(backup.ends_with(TRAILER));
        }
        let log = std::fs::metadata(root.join("log")).unwrap().len();
        assert_eq!(log, 600 * RECORD.len() as u64);
        assert_eq!(
            std::fs::read_dir(&shared.ws).unwrap().count(),
            300,
            "no temporary name left"
        );
        std::fs::remove_dir_all(&root).unwrap();
        let got = bare_overwrites_in_flight(&root, 64, 8, Calls::Fsgates).unwrap();
        assert!(got.ops_per_s > 0.0 && got.ops_per_s.is_finite(), "{got:?}");
        let left = std::fs::read_dir(root.join("ws").join(IN_FLIGHT_DIR))
            .unwrap()
            .count();
        assert_eq!(left, 64, "its files are left for the caller");
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// The in-flight floor timed in chunks overwrites each file once, in order, and
    /// stops at the files it made: chunks past the end overwrite nothing more.
    #[test]
    fn an_in_flight_floor_in_chunks_overwrites_each_file_once() {
        let root = std::env::temp_dir().join(format!("fsgate-floor-ch-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let mut floor = InFlightFloor::new(&root, 50, Calls::Fsgates).unwrap();
        floor.run(20, 4).unwrap();
        for i in 0..50 {
            let now = std::fs::read(root.join("ws").join(in_flight_rel(i))).unwrap();
            assert_eq!(now[0], if i < 20 { b'y' } else { b'x' }, "o{i}");
        }
        floor.run(20, 4).unwrap();
        floor.run(20, 4).unwrap();
        let log = std::fs::metadata(root.join("log")).unwrap().len();
        assert_eq!(log, 100 * RECORD.len() as u64, "two records for each of 50");
        let got = floor.figures();
        assert!(got.ops_per_s > 0.0 && got.ops_per_s.is_finite(), "{got:?}");
        assert!(got.cpu_us > 0.0, "{got:?}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// The one-at-a-time floor timed in chunks keeps every write's time: its p50 is
    /// over all the chunks' writes.
    #[test]
    fn a_serial_floor_in_chunks_times_every_write() {
        let root = std::env::temp_dir().join(format!("fsgate-floor-sc-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let mut floor = SerialFloor::new(&root, false, 0).unwrap();
        floor.run(3).unwrap();
        floor.run(4).unwrap();
        assert_eq!(floor.count(), 7);
        assert_eq!(floor.made_on_path(), 1, "the first write only: then spares");
        assert!(!floor.over());
        assert!(floor.p50_us() > 0.0);
        let made = std::fs::read_dir(root.join("ws").join(NEW_DIR))
            .unwrap()
            .count();
        assert_eq!(made, 7, "seven new files");
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// The one-at-a-time overwrites each replace a file of their own, round and round,
    /// each backed up in the shard its path hashes to.
    #[test]
    fn serial_overwrites_replace_files_of_their_own_backed_up_in_their_shards() {
        let root = std::env::temp_dir().join(format!("fsgate-floor-so-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        // The shard fsgate's store picks for the first path (its SHA-256's first byte).
        assert_eq!(shard_of(&format!("{OVER_DIR}/{}", file_name(0))), "cf");
        let mut floor = SerialFloor::new(&root, true, 3).unwrap();
        floor.run(4).unwrap();
        assert_eq!(floor.count(), 4);
        assert_eq!(floor.made_on_path(), 2, "the first write's two files only");
        let over = root.join("ws").join(OVER_DIR);
        let mut backups = 0;
        for i in 0..3 {
            let rel = format!("{OVER_DIR}/{}", file_name(i));
            assert_eq!(
                std::fs::read(root.join("ws").join(&rel)).unwrap(),
                vec![b'x'; 4096],
                "{rel} replaced"
            );
            let shard = root.join("backups").join(shard_of(&rel));
            let mine: Vec<Vec<u8>> = std::fs::read_dir(&shard)
                .unwrap()
                .map(|e| e.unwrap())
                .filter(|e| {
                    let name = e.file_name();
                    name.to_string_lossy().starts_with(&rel.replace('/', "%2F"))
                })
                .map(|e| std::fs::read(e.path()).unwrap())
                .collect();
            assert_eq!(
                mine.len(),
                if i == 0 { 2 } else { 1 },
                "{rel}: the first file twice"
            );
            let first = [OLD_CONTENT, TRAILER].concat();
            assert!(mine.contains(&first), "{rel}: its old content backed up");
            backups += mine.len();
        }
        assert_eq!(backups, 4);
        assert_eq!(
            std::fs::read_dir(&over).unwrap().count(),
            3,
            "no temporary names"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// 200 bare overwrites made with `calls` on 8 threads in a new scratch directory
    /// (named with `tag`), checked to have replaced every file; the directory is
    /// returned for the caller's checks.
    fn replaced_by_200(calls: Calls, tag: &str) -> PathBuf {
        let root = std::env::temp_dir().join(format!("fsgate-floor-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let got = bare_overwrites_in_flight(&root, 200, 8, calls).unwrap();
        assert!(got.ops_per_s > 0.0 && got.ops_per_s.is_finite(), "{got:?}");
        for i in 0..200 {
            let now = std::fs::read(root.join("ws").join(in_flight_rel(i))).unwrap();
            assert_eq!(now, vec![b'y'; 4096], "o{i} was replaced");
        }
        root
    }

    /// With shared backups, every file is overwritten and its old content appended to
    /// the one backup file, whole, with two records each and no backup file of its own.
    #[test]
    fn shared_backups_append_every_old_content_whole_to_one_file() {
        let root = replaced_by_200(Calls::SharedBackups, "p");
        let pack = std::fs::read(root.join("backups").join("pack")).unwrap();
        let one = 4096 + RECORD.len();
        assert_eq!(pack.len(), 200 * one);
        for (k, backup) in pack.chunks(one).enumerate() {
            assert!(
                backup[..4096].iter().all(|b| *b == b'x'),
                "backup {k} whole"
            );
            assert_eq!(&backup[4096..], RECORD, "backup {k}'s trailer");
        }
        let log = std::fs::metadata(root.join("log")).unwrap().len();
        assert_eq!(log, 400 * RECORD.len() as u64);
        for shard in std::fs::read_dir(root.join("backups")).unwrap() {
            let shard = shard.unwrap().path();
            if shard.is_dir() {
                assert_eq!(
                    std::fs::read_dir(shard).unwrap().count(),
                    0,
                    "no backup file"
                );
            }
        }
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// The replace alone overwrites every file and makes no backup and no record.
    #[test]
    fn replaces_in_flight_overwrite_every_file_and_nothing_else() {
        let root = replaced_by_200(Calls::ReplaceOnly, "r");
        assert_eq!(
            std::fs::read_dir(root.join("ws").join(IN_FLIGHT_DIR))
                .unwrap()
                .count(),
            200
        );
        assert_eq!(
            std::fs::metadata(root.join("log")).unwrap().len(),
            0,
            "no record"
        );
        let backups = std::fs::read_dir(root.join("backups")).unwrap();
        for entry in backups {
            let path = entry.unwrap().path();
            let n = match path.is_dir() {
                true => std::fs::read_dir(&path).unwrap().count() as u64,
                false => std::fs::metadata(&path).unwrap().len(),
            };
            assert_eq!(n, 0, "no backup in {}", path.display());
        }
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// A sync shared by threads: each caller's wait ends with a sync that started after
    /// it called.
    #[test]
    fn a_shared_sync_covers_every_caller() {
        let root = std::env::temp_dir().join(format!("fsgate-floor-d-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        let shared = Arc::new(SharedSync::new(File::open(&root).unwrap()));
        let threads: Vec<_> = (0..16)
            .map(|_| {
                let s = Arc::clone(&shared);
                std::thread::spawn(move || {
                    let before = s.state.lock().unwrap().started;
                    s.sync().unwrap();
                    let after = s.state.lock().unwrap().finished;
                    assert!(after > before, "a sync started after the call finished");
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let st = shared.state.lock().unwrap();
        assert!(st.finished >= 1 && st.finished <= 16, "{}", st.finished);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
