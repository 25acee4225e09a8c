//! The bare system calls of one durable 4 KiB write in fsgate's order, with no server:
//! no request to read, no path to resolve, no policy, no hashing, no JSON. What a write
//! one at a time costs on this disk before any server's own work: the floor for the
//! one-at-a-time write targets, measured in the same run as them.
//!
//! The order kept is the one fsgate promises (docs/benchmarks.md, "Profiles: the syncs
//! of one write"; `tests/durable_order.rs` checks it in the product): the intent record and
//! the content (and, over a file, its backup and the backup's directory) durable, at once,
//! before the name; then the name's directory and the outcome record durable, at once,
//! before the answer. The syncs that may overlap run on long-lived helper threads, one
//! each, as fsgate's do.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::time::Instant;

use crate::Error;

/// About one audit record: the intent's and the outcome's appends.
const RECORD: &[u8] = &[b'r'; 400];

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

/// A workspace directory, a backup directory and a log, under a scratch directory.
struct Scratch {
    ws: PathBuf,
    ws_dir: File,
    backup: PathBuf,
    backup_dir: File,
    log: File,
    /// Content, backup file, backup directory: each overlapping sync has its own.
    helpers: [Helper; 3],
    n: usize,
}

impl Scratch {
    fn new(root: &Path) -> std::io::Result<Scratch> {
        let (ws, backup) = (root.join("ws"), root.join("backups"));
        std::fs::create_dir_all(&ws)?;
        std::fs::create_dir_all(&backup)?;
        let log = OpenOptions::new()
            .append(true)
            .create(true)
            .open(root.join("log"))?;
        Ok(Scratch {
            ws_dir: File::open(&ws)?,
            backup_dir: File::open(&backup)?,
            ws,
            backup,
            log,
            helpers: [Helper::new(), Helper::new(), Helper::new()],
            n: 0,
        })
    }

    fn record(&mut self) -> std::io::Result<()> {
        self.log.write_all(RECORD)?;
        self.log.sync_data()
    }

    /// A new unnamed file in the workspace (ext4 allocates its inode here).
    fn unnamed(&self) -> std::io::Result<File> {
        unnamed_in(&self.ws)
    }

    /// A new unnamed file in the backup directory.
    fn unnamed_backup(&self) -> std::io::Result<File> {
        unnamed_in(&self.backup)
    }

    /// The content, written into a new unnamed file in the workspace.
    fn staged(&self, data: &[u8]) -> std::io::Result<File> {
        let mut f = self.unnamed()?;
        f.write_all(data)?;
        Ok(f)
    }

    /// Gives the unnamed file `f` the name `name` in the workspace.
    fn link(&self, f: &File, name: &str) -> std::io::Result<()> {
        link_at(f, &self.ws_dir, name)
    }

    /// A new file: content || intent; the name; its directory || the outcome.
    fn write_new(&mut self, data: &[u8]) -> std::io::Result<()> {
        let f = self.staged(data)?;
        self.publish_new(f)
    }

    /// The same, into an unnamed file made before (`unnamed`), off the write's path.
    fn write_new_into(&mut self, mut f: File, data: &[u8]) -> std::io::Result<()> {
        f.write_all(data)?;
        self.publish_new(f)
    }

    fn publish_new(&mut self, f: File) -> std::io::Result<()> {
        self.n += 1;
        let g = f.try_clone()?;
        let content = self.helpers[0].start(Box::new(move || g.sync_all()));
        let intent = self.record();
        join(content)?;
        intent?;
        self.link(&f, &format!("new-{}", self.n))?;
        self.entry_and_outcome()
    }

    /// The directory's sync on a helper while this thread appends and syncs the outcome.
    fn entry_and_outcome(&mut self) -> std::io::Result<()> {
        let d = self.ws_dir.try_clone()?;
        let dir = self.helpers[0].start(Box::new(move || d.sync_all()));
        let outcome = self.record();
        join(dir)?;
        outcome
    }

    /// Over `name`: its backup (file and directory) || content || intent; a temporary
    /// name renamed over it; its directory || the outcome.
    fn overwrite(&mut self, name: &str, data: &[u8]) -> std::io::Result<()> {
        self.overwrite_with(name, data, None)
    }

    /// The same, with `made`: an unnamed file in the backup directory and one in the
    /// workspace, made before (off the write's path, as fsgate's spares are), given the
    /// backup's name and the content.
    fn overwrite_with(
        &mut self,
        name: &str,
        data: &[u8],
        made: Option<(File, File)>,
    ) -> std::io::Result<()> {
        self.n += 1;
        let old = std::fs::read(self.ws.join(name))?;
        let backup_name = format!("b-{}", self.n);
        let (b, content) = match made {
            Some((b, mut content)) => {
                link_at(&b, &self.backup_dir, &backup_name)?;
                content.write_all(data)?;
                (b, content)
            }
            None => {
                let b = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(self.backup.join(&backup_name))?;
                (b, self.staged(data)?)
            }
        };
        b.write_all_at(&old, 0)?;
        let bdir = self.backup_dir.try_clone()?;
        let backup = self.helpers[1].start(Box::new(move || b.sync_data()));
        let backup_dir = self.helpers[2].start(Box::new(move || bdir.sync_all()));
        let f = content;
        let g = f.try_clone()?;
        let content = self.helpers[0].start(Box::new(move || g.sync_all()));
        let intent = self.record();
        for rx in [backup, backup_dir, content] {
            join(rx)?;
        }
        intent?;
        let tmp = format!(".tmp-{}", self.n);
        self.link(&f, &tmp)?;
        std::fs::rename(self.ws.join(&tmp), self.ws.join(name))?;
        self.entry_and_outcome()
    }
}

/// A new unnamed file (`O_TMPFILE`) in `dir`.
fn unnamed_in(dir: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .mode(0o600)
        .open(dir)
}

/// Gives the unnamed file `f` the name `name` in `dir`.
fn link_at(f: &File, dir: &File, name: &str) -> std::io::Result<()> {
    let src = CString::new(format!("/proc/self/fd/{}", f.as_raw_fd()))?;
    let dst = CString::new(name)?;
    // SAFETY: both strings are NUL-terminated and outlive the call; the directory
    // descriptor is open.
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

/// The p50s of bare durable writes of 4 KiB, µs.
#[derive(Debug, Clone, Copy, Default)]
pub struct BareWrites {
    /// To a new file.
    pub new_us: f64,
    /// To a new file, its unnamed file (its inode) made before the clock starts.
    pub new_premade_us: f64,
    /// Over a file, with its backup.
    pub overwrite_us: f64,
    /// The same, the backup's and the content's unnamed files made before the clock
    /// starts.
    pub overwrite_premade_us: f64,
}

/// `n` bare writes of each kind ([`BareWrites`]), in turn, in a scratch directory under
/// `dir`.
pub fn bare_writes(dir: &Path, n: usize) -> Result<BareWrites, Error> {
    let root = dir.join("bare-writes");
    let _ = std::fs::remove_dir_all(&root);
    let io = |e| Error::io(&root, e);
    let mut s = Scratch::new(&root).map_err(io)?;
    let data = vec![b'x'; 4096];
    std::fs::write(s.ws.join("over"), &data).map_err(io)?;
    let mut times: [Vec<f64>; 4] = Default::default();
    let us = |t: Instant| t.elapsed().as_secs_f64() * 1e6;
    for _ in 0..n {
        let t = Instant::now();
        s.write_new(&data).map_err(io)?;
        times[0].push(us(t));
        let f = s.unnamed().map_err(io)?;
        let t = Instant::now();
        s.write_new_into(f, &data).map_err(io)?;
        times[1].push(us(t));
        let t = Instant::now();
        s.overwrite("over", &data).map_err(io)?;
        times[2].push(us(t));
        let made = (s.unnamed_backup().map_err(io)?, s.unnamed().map_err(io)?);
        let t = Instant::now();
        s.overwrite_with("over", &data, Some(made)).map_err(io)?;
        times[3].push(us(t));
    }
    drop(s);
    let _ = std::fs::remove_dir_all(&root);
    let [new, premade, over, over_premade] = times.map(crate::suite::mid);
    Ok(BareWrites {
        new_us: new,
        new_premade_us: premade,
        overwrite_us: over,
        overwrite_premade_us: over_premade,
    })
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
        let pack = OpenOptions::new()
            .append(true)
            .create(true)
            .open(root.join("backups").join("pack"))?;
        // SAFETY: a sync with no preconditions; the set-up starts the clock on disk.
        unsafe { libc::sync() };
        Ok(Shared {
            ws_dir: SharedSync::new(File::open(&ws)?),
            ws,
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
/// Each thread makes the calls of the bare overwrite one at a time, in turn: the intent
/// record, a backup file made and synced in its shard directory (synced too), an
/// unnamed file filled and synced, a temporary name renamed over the file, the
/// workspace directory synced, the outcome record. The log's and the workspace
/// directory's syncs are shared between the threads (group commits, as fsgate's are).
///
/// Its files are made under `root`, which is left for the caller to remove once the
/// workloads after it have run: on ext4 without a journal, files removed moments
/// before slow down the making of new ones.
pub fn bare_overwrites_in_flight(
    root: &Path,
    n: usize,
    k: usize,
    calls: Calls,
) -> Result<InFlight, Error> {
    let io = |e| Error::io(root, e);
    let shared = Arc::new(Shared::new(root, n).map_err(io)?);
    let next = Arc::new(AtomicUsize::new(0));
    let cpu0 = crate::workloads::rusage_cpu(libc::RUSAGE_SELF);
    let t = Instant::now();
    let threads: Vec<_> = (0..k.max(1))
        .map(|_| {
            let (shared, next) = (Arc::clone(&shared), Arc::clone(&next));
            std::thread::spawn(move || -> std::io::Result<()> {
                let data = vec![b'y'; 4096];
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        return Ok(());
                    }
                    match calls {
                        Calls::Fsgates => overwrite_one(&shared, i, &data)?,
                        Calls::ReplaceOnly => replace_one(&shared, i, &data)?,
                        Calls::SharedBackups => overwrite_shared_backup(&shared, i, &data)?,
                    }
                }
            })
        })
        .collect();
    for th in threads {
        th.join()
            .unwrap_or_else(|_| Err(std::io::Error::other("a writer panicked")))
            .map_err(io)?;
    }
    let secs = t.elapsed().as_secs_f64();
    let cpu = crate::workloads::rusage_cpu(libc::RUSAGE_SELF) - cpu0;
    Ok(InFlight {
        ops_per_s: n as f64 / secs,
        cpu_us: cpu * 1e6 / n.max(1) as f64,
    })
}

/// One overwrite of `ws/o<i>` for [`bare_overwrites_in_flight`], its backup a file of
/// its own in its shard directory (both synced).
fn overwrite_one(s: &Shared, i: usize, data: &[u8]) -> std::io::Result<()> {
    overwrite_backed_up(s, i, data, |old| {
        let (shard, shard_dir) = &s.shards[i % SHARDS];
        let mut b = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(shard.join(format!("o{i}")))?;
        b.write_all(&old)?;
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
/// content: the intent record, the backup, the durable replace, the outcome record.
fn overwrite_backed_up(
    s: &Shared,
    i: usize,
    data: &[u8],
    backup: impl FnOnce(Vec<u8>) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let old = std::fs::read(s.ws.join(format!("o{i}")))?;
    s.log.append(RECORD)?;
    backup(old)?;
    replace(s, i, data)?;
    s.log.append(RECORD)
}

/// One durable replace of `ws/o<i>`, nothing else: the old content read (a server
/// checks what it replaces), an unnamed file filled and synced, a temporary name
/// renamed over the file, the workspace directory synced (shared).
fn replace_one(s: &Shared, i: usize, data: &[u8]) -> std::io::Result<()> {
    std::fs::read(s.ws.join(format!("o{i}")))?;
    replace(s, i, data)
}

/// `ws/o<i>` replaced durably by `data`: an unnamed file filled and synced, linked at a
/// temporary name renamed over it, the workspace directory synced (shared).
fn replace(s: &Shared, i: usize, data: &[u8]) -> std::io::Result<()> {
    let mut content = unnamed_in(&s.ws)?;
    content.write_all(data)?;
    content.sync_all()?;
    let tmp = format!(".tmp-{i}");
    link_at(&content, &s.ws_dir.file, &tmp)?;
    std::fs::rename(s.ws.join(&tmp), s.ws.join(format!("o{i}")))?;
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

    fn scratch() -> (PathBuf, Scratch) {
        let root = std::env::temp_dir().join(format!("fsgate-floor-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let s = Scratch::new(&root).unwrap();
        (root, s)
    }

    /// A bare write does the write: the name holds the content, an overwrite backs up what
    /// it replaces, and each write appends its intent and outcome.
    #[test]
    fn bare_writes_leave_their_files_a_backup_and_two_records_each() {
        let (root, mut s) = scratch();
        s.write_new(b"one").unwrap();
        assert_eq!(std::fs::read(s.ws.join("new-1")).unwrap(), b"one");
        let premade = s.unnamed().unwrap();
        s.write_new_into(premade, b"two").unwrap();
        assert_eq!(std::fs::read(s.ws.join("new-2")).unwrap(), b"two");
        std::fs::write(s.ws.join("f"), b"old").unwrap();
        s.overwrite("f", b"new").unwrap();
        assert_eq!(std::fs::read(s.ws.join("f")).unwrap(), b"new");
        assert_eq!(std::fs::read(s.backup.join("b-3")).unwrap(), b"old");
        let made = (s.unnamed_backup().unwrap(), s.unnamed().unwrap());
        s.overwrite_with("f", b"newer", Some(made)).unwrap();
        assert_eq!(std::fs::read(s.ws.join("f")).unwrap(), b"newer");
        assert_eq!(std::fs::read(s.backup.join("b-4")).unwrap(), b"new");
        let log = std::fs::metadata(root.join("log")).unwrap().len();
        assert_eq!(log, 8 * RECORD.len() as u64);
        let names: Vec<_> = std::fs::read_dir(&s.ws).unwrap().collect();
        assert_eq!(names.len(), 3, "no temporary name left behind");
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
            let backup = shared.shards[i % SHARDS].0.join(format!("o{i}"));
            assert_eq!(std::fs::read(backup).unwrap().len(), 4096);
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
