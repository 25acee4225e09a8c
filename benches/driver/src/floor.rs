//! The bare system calls of one durable 4 KiB write as fsgate makes them, with no
//! server: no request to read, no path to resolve, no policy, no hashing, no JSON. What a
//! write costs on this disk before any server's own work: the floor of the write
//! targets, measured in the same run, on a filesystem of its own as each workload is.
//!
//! The calls are fsgate's, in kind and order, as `strace -f` shows one write of the
//! gateway (docs/benchmarks.md, "The floor: fsgate's calls"; `tests/durable_order.rs`
//! checks the order in the product): the content written into an unnamed file made
//! ahead, off the write's path (fsgate's spares), its mode set; over a file, the backup
//! written first into an unnamed file made ahead in the backup store, linked into its
//! shard directory, locked, the old content and a trailer written; the backup's, its
//! shard's and the content's syncs started on helper threads while this thread appends
//! the intent record and syncs the log, whose space is reserved ahead (`fallocate`
//! with `KEEP_SIZE`, as fsgate's audit log does: an append then changes no allocation);
//! then the name (a new file linked at it; an overwrite linked at a temporary name
//! renamed over it), and its directory's sync on a helper while this thread appends and
//! syncs the outcome record.

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

/// About one audit record of a write (fsgate's intent and outcome records of a 4 KiB
/// write take 650-790 bytes).
const RECORD: &[u8] = &[b'r'; 720];

/// A backup's trailer (fsgate's record after the old content, about 220 bytes).
const TRAILER: &[u8] = &[b't'; 220];

/// The log's space reserved ahead at a time, and the room left that renews it (fsgate's
/// audit log's).
const RESERVE: u64 = 256 * 1024;
const RESERVE_LOW: u64 = 64 * 1024;

/// The backup store's shard directory of the file the serial overwrites replace.
const SHARD: &str = "4e";

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
    fn record(&mut self) -> std::io::Result<()> {
        std::fs::metadata(&self.path)?;
        self.file.write_all(RECORD)?;
        self.len += RECORD.len() as u64;
        self.reserve();
        self.file.sync_data()
    }
}

/// A workspace directory, a backup store and a log, under a scratch directory, with the
/// unnamed files made ahead for the next write (fsgate's spares).
struct Scratch {
    ws: PathBuf,
    ws_dir: File,
    backups: PathBuf,
    log: Log,
    /// Content, backup file, shard directory: each overlapping sync has its own.
    helpers: [Helper; 3],
    /// The next write's unnamed files: in the workspace, in the backup store.
    spare: Option<File>,
    spare_backup: Option<File>,
    n: usize,
}

impl Scratch {
    fn new(root: &Path) -> std::io::Result<Scratch> {
        let (ws, backups) = (root.join("ws"), root.join("backups"));
        std::fs::create_dir_all(&ws)?;
        std::fs::create_dir_all(backups.join(SHARD))?;
        std::fs::create_dir_all(root.join("audit"))?;
        Ok(Scratch {
            ws_dir: File::open(&ws)?,
            log: Log::open(root.join("audit").join("audit.jsonl"))?,
            ws,
            backups,
            helpers: [Helper::new(), Helper::new(), Helper::new()],
            spare: None,
            spare_backup: None,
            n: 0,
        })
    }

    /// Makes the next write's unnamed files, as fsgate's helper does once a write's
    /// syncs are done: off every write's path (the caller does it between writes).
    fn make_spares(&mut self, backup: bool) -> std::io::Result<()> {
        if self.spare.is_none() {
            self.spare = Some(unnamed_in(&self.ws)?);
        }
        if backup && self.spare_backup.is_none() {
            self.spare_backup = Some(unnamed_in(&self.backups)?);
        }
        Ok(())
    }

    /// The content, written into the spare (or a file made now if none), its mode a
    /// new file's.
    fn staged(&mut self, data: &[u8]) -> std::io::Result<File> {
        let mut f = match self.spare.take() {
            Some(f) => f,
            None => unnamed_in(&self.ws)?,
        };
        f.write_all(data)?;
        f.set_permissions(std::fs::Permissions::from_mode(0o644))?;
        Ok(f)
    }

    /// A new file: content || intent; the name; its directory || the outcome.
    fn write_new(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.n += 1;
        let f = self.staged(data)?;
        let g = f.try_clone()?;
        let content = self.helpers[0].start(Box::new(move || g.sync_all()));
        let intent = self.log.record();
        join(content)?;
        intent?;
        link_at(&f, &self.ws_dir, &format!("new-{}", self.n))?;
        self.entry_and_outcome()
    }

    /// The directory's sync on a helper while this thread appends and syncs the outcome.
    fn entry_and_outcome(&mut self) -> std::io::Result<()> {
        let d = self.ws_dir.try_clone()?;
        let dir = self.helpers[0].start(Box::new(move || d.sync_all()));
        let outcome = self.log.record();
        join(dir)?;
        outcome
    }

    /// The backup of `old`: the backup store's spare linked into its shard, locked, the
    /// old content and its trailer written; its sync and its shard's started.
    fn backup(&mut self, old: &[u8]) -> std::io::Result<[mpsc::Receiver<std::io::Result<()>>; 2]> {
        let shard = File::open(self.backups.join(SHARD))?;
        let b = match self.spare_backup.take() {
            Some(b) => b,
            None => unnamed_in(&self.backups)?,
        };
        link_at(&b, &shard, &format!("b-{}.backup", self.n))?;
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

    /// Over `name`: its backup (file and shard) || content || intent; a temporary name
    /// renamed over it; its directory || the outcome.
    fn overwrite(&mut self, name: &str, data: &[u8]) -> std::io::Result<()> {
        self.n += 1;
        let target = self.ws.join(name);
        let old = std::fs::read(&target)?;
        let [backup, shard] = self.backup(&old)?;
        let f = self.staged(data)?;
        let g = f.try_clone()?;
        let content = self.helpers[0].start(Box::new(move || g.sync_all()));
        let intent = self.log.record();
        for rx in [backup, shard, content] {
            join(rx)?;
        }
        intent?;
        // What is replaced is still what was backed up.
        std::fs::symlink_metadata(&target)?;
        let tmp = format!(".tmp-{}", self.n);
        link_at(&f, &self.ws_dir, &tmp)?;
        std::fs::rename(self.ws.join(&tmp), &target)?;
        self.entry_and_outcome()
    }
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
/// made ahead, between writes, as fsgate's spares are), µs, in a scratch directory
/// `root` (on a filesystem of its own: see [`crate::fresh_fs`]).
pub fn bare_new(root: &Path, n: usize) -> Result<f64, Error> {
    bare_serial(root, n, false)
}

/// The same for overwrites of one file with their backups (the backup's and the
/// content's unnamed files made ahead), µs.
pub fn bare_overwrite(root: &Path, n: usize) -> Result<f64, Error> {
    bare_serial(root, n, true)
}

fn bare_serial(root: &Path, n: usize, over: bool) -> Result<f64, Error> {
    let mut floor = SerialFloor::new(root, over)?;
    floor.run(n)?;
    Ok(floor.p50_us())
}

/// The one-at-a-time floor, timed a chunk at a time: the suite runs its chunks between
/// fsgate's, so that both see the same minutes of the disk.
pub struct SerialFloor {
    root: PathBuf,
    s: Scratch,
    over: bool,
    data: Vec<u8>,
    /// Each write's time, µs.
    times: Vec<f64>,
}

impl SerialFloor {
    /// A scratch directory `root` (on a filesystem of its own: see [`crate::fresh_fs`])
    /// ready for new files, or (`over`) for overwrites of one file with their backups.
    pub fn new(root: &Path, over: bool) -> Result<SerialFloor, Error> {
        let io = |e| Error::io(root, e);
        let s = Scratch::new(root).map_err(io)?;
        let data = vec![b'x'; 4096];
        std::fs::write(s.ws.join("over"), &data).map_err(io)?;
        // SAFETY: a sync with no preconditions; the set-up starts the clock on disk.
        unsafe { libc::sync() };
        Ok(SerialFloor {
            root: root.to_path_buf(),
            s,
            over,
            data,
            times: Vec::new(),
        })
    }

    /// `n` more writes, each timed (its unnamed files made ahead, untimed, as fsgate's
    /// spares are).
    pub fn run(&mut self, n: usize) -> Result<(), Error> {
        let io = |e| Error::io(&self.root, e);
        for _ in 0..n {
            self.s.make_spares(self.over).map_err(io)?;
            let t = Instant::now();
            if self.over {
                self.s.overwrite("over", &self.data).map_err(io)?;
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

/// Where [`overwrite_one`] works: the workspace, the backup shards and the log, with
/// the syncs threads share (the workspace directory's, the log's).
struct Shared {
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
        let ws = root.join("ws");
        std::fs::create_dir_all(&ws)?;
        let data = vec![b'x'; 4096];
        for i in 0..n {
            std::fs::write(ws.join(format!("o{i}")), &data)?;
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
/// name renamed over the file, the workspace directory synced, the outcome record. The
/// log's and the workspace directory's syncs are shared between the threads (group
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

/// One overwrite of `ws/o<i>` for [`bare_overwrites_in_flight`], as fsgate's backup
/// store makes it: an unnamed file in the store linked into the file's shard directory,
/// locked, the old content and a trailer written, it and its shard synced.
fn overwrite_one(s: &Shared, i: usize, data: &[u8]) -> std::io::Result<()> {
    overwrite_backed_up(s, i, data, |old| {
        let (_, shard_dir) = &s.shards[i % SHARDS];
        let b = unnamed_in(&s.backups)?;
        link_at(&b, shard_dir, &format!("o{i}.backup"))?;
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

/// One overwrite of `ws/o<i>` for [`Calls::SharedBackups`]: its backup appended to the
/// shared file instead, a record's worth of trailer after it.
fn overwrite_shared_backup(s: &Shared, i: usize, data: &[u8]) -> std::io::Result<()> {
    overwrite_backed_up(s, i, data, |mut old| {
        old.extend_from_slice(RECORD);
        // One `write` with `O_APPEND`: the threads' backups never interleave.
        s.pack.append(&old)
    })
}

/// fsgate's calls for one overwrite of `ws/o<i>` around `backup`, given the old
/// content, in fsgate's order (each thread makes its syncs in turn, as a request does
/// when fsgate's helpers are busy): the backup, the content synced, the intent record,
/// the name, the outcome record.
fn overwrite_backed_up(
    s: &Shared,
    i: usize,
    data: &[u8],
    backup: impl FnOnce(Vec<u8>) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let old = std::fs::read(s.ws.join(format!("o{i}")))?;
    backup(old)?;
    let content = staged(s, data)?;
    s.log.append(RECORD)?;
    publish(s, i, &content)?;
    s.log.append(RECORD)
}

/// One durable replace of `ws/o<i>`, nothing else: the old content read (a server
/// checks what it replaces), an unnamed file filled and synced, a temporary name
/// renamed over the file, the workspace directory synced (shared).
fn replace_one(s: &Shared, i: usize, data: &[u8]) -> std::io::Result<()> {
    std::fs::read(s.ws.join(format!("o{i}")))?;
    let content = staged(s, data)?;
    publish(s, i, &content)
}

/// `data` in a new unnamed file in the workspace, its mode a new file's, synced.
fn staged(s: &Shared, data: &[u8]) -> std::io::Result<File> {
    let mut content = unnamed_in(&s.ws)?;
    content.write_all(data)?;
    content.set_permissions(std::fs::Permissions::from_mode(0o644))?;
    content.sync_all()?;
    Ok(content)
}

/// `content` made `ws/o<i>`: the target checked, linked at a temporary name renamed
/// over it, the workspace directory synced (shared).
fn publish(s: &Shared, i: usize, content: &File) -> std::io::Result<()> {
    let target = s.ws.join(format!("o{i}"));
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
    /// ahead, and the spares made between writes are what the writes fill.
    #[test]
    fn bare_writes_leave_their_files_a_backup_and_two_records_each() {
        let (root, mut s) = scratch();
        s.write_new(b"one").unwrap();
        assert_eq!(std::fs::read(s.ws.join("new-1")).unwrap(), b"one");
        let mode = std::fs::metadata(s.ws.join("new-1")).unwrap().permissions();
        assert_eq!(mode.mode() & 0o777, 0o644);
        s.make_spares(true).unwrap();
        let spare = s.spare.as_ref().unwrap().metadata().unwrap().ino();
        std::fs::write(s.ws.join("f"), b"old").unwrap();
        s.overwrite("f", b"new").unwrap();
        assert!(s.spare.is_none() && s.spare_backup.is_none(), "spares used");
        assert_eq!(std::fs::metadata(s.ws.join("f")).unwrap().ino(), spare);
        assert_eq!(std::fs::read(s.ws.join("f")).unwrap(), b"new");
        let backup = std::fs::read(s.backups.join(SHARD).join("b-2.backup")).unwrap();
        assert_eq!(backup, [&b"old"[..], TRAILER].concat());
        let log = root.join("audit").join("audit.jsonl");
        assert_eq!(
            std::fs::metadata(&log).unwrap().len(),
            4 * RECORD.len() as u64
        );
        let blocks = std::fs::metadata(&log).unwrap().blocks() * 512;
        assert!(blocks >= RESERVE, "space reserved ahead: {blocks}");
        let names: Vec<_> = std::fs::read_dir(&s.ws).unwrap().collect();
        assert_eq!(names.len(), 2, "no temporary name left behind");
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
        for i in 0..300 {
            assert_eq!(
                std::fs::read(shared.ws.join(format!("o{i}"))).unwrap(),
                b"new"
            );
            let backup = shared.shards[i % SHARDS].0.join(format!("o{i}.backup"));
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
        let left = std::fs::read_dir(root.join("ws")).unwrap().count();
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
            let now = std::fs::read(root.join("ws").join(format!("o{i}"))).unwrap();
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
        let mut floor = SerialFloor::new(&root, false).unwrap();
        floor.run(3).unwrap();
        floor.run(4).unwrap();
        assert_eq!(floor.count(), 7);
        assert!(!floor.over());
        assert!(floor.p50_us() > 0.0);
        let made = std::fs::read_dir(root.join("ws")).unwrap().count();
        assert_eq!(made, 8, "seven new files and the one to overwrite");
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
            let now = std::fs::read(root.join("ws").join(format!("o{i}"))).unwrap();
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
        assert_eq!(std::fs::read_dir(root.join("ws")).unwrap().count(), 200);
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
