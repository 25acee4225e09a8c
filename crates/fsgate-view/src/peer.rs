//! Who asked: the process a FUSE request came from, named from `/proc` by its pid (the
//! thread group of the request header's thread id), its parent, executable and
//! arguments. Each is the process's own
//! choice, so each is bounded here and written as a JSON string (escaped); the audit
//! log and every person-facing output escape them again as any agent-chosen text.

use std::collections::HashMap;
use std::fs::File;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Arguments named at most, and bytes kept of each.
const MAX_ARGS: usize = 16;
const MAX_ARG_BYTES: usize = 256;
/// How long a name is reused for the same pid, executable and arguments.
const FRESH: Duration = Duration::from_millis(250);
/// Bytes of its arguments that tell a process from the one it became by `exec`.
const KEY_BYTES: usize = 4096;
/// Processes remembered at most (each holds a descriptor: see [`Named`]).
const MAX_CACHED: usize = 128;

/// A remembered name.
#[derive(Debug)]
struct Named {
    /// When it was made.
    at: Instant,
    /// The executable and arguments it was made from (see [`identity`]).
    key: Identity,
    name: String,
    /// What the name is checked against, held open (see [`Held`]).
    held: Held,
}

/// A process's `/proc/PID/cmdline`, and its `comm` where its executable's link cannot
/// be read, held open: checking a name then reads each with one call, not three (their
/// opening was most of a request's naming). They read what the process has become by
/// `exec`, and nothing once it is gone (a pid used again is read through new ones).
#[derive(Debug, Clone, Default)]
struct Held {
    cmdline: Option<Arc<File>>,
    comm: Option<Arc<File>>,
}

impl Held {
    /// `pid`'s files, opened now (`comm` only where the link is not read).
    fn open(pid: u32, by_link: bool) -> Held {
        let open = |f: &str| File::open(format!("/proc/{pid}/{f}")).ok().map(Arc::new);
        Held {
            cmdline: open("cmdline"),
            comm: if by_link { None } else { open("comm") },
        }
    }
}

/// The executable's link, or its command name where the link could not be read (`true`
/// for the link), a NUL, then the first bytes of the arguments.
type Identity = (Vec<u8>, bool);

/// Names processes, remembering the last few.
#[derive(Debug, Default)]
pub(crate) struct Peers {
    cache: Mutex<HashMap<u32, Named>>,
}

impl Peers {
    /// The name of the process of thread `tid` (FUSE gives the thread's id). A name is
    /// reused only while the process's executable and arguments are the ones it was
    /// made from: a shell that runs `exec cat .env` a moment after its own lookups
    /// keeps its pid, and is named `cat` from then on (and a program that execs
    /// another with the same arguments is named anew).
    pub(crate) fn name(&self, tid: u32) -> String {
        let now = Instant::now();
        // A thread named a moment ago as its process leads its group (no other thread
        // can have its id while it lives; an id reused within `FRESH`, by a thread of
        // a process with the same executable and arguments, would be named with the
        // old pid).
        let leads = (self.cache.lock()).is_ok_and(|c| {
            c.get(&tid)
                .is_some_and(|e| now.duration_since(e.at) < FRESH)
        });
        let pid = if leads { tid } else { process_of(tid) };
        // Checked as it was made: by the link where it could be read (a process the
        // gateway may not trace is checked by its command name, without trying).
        let (by_link, held) = (self.cache.lock()).map_or((true, Held::default()), |c| {
            c.get(&pid)
                .map_or((true, Held::default()), |e| (e.key.1, e.held.clone()))
        });
        let key = identity(pid, by_link, &held);
        if let Ok(cache) = self.cache.lock()
            && let Some(e) = cache.get(&pid)
            && now.duration_since(e.at) < FRESH
            && e.key == key
        {
            return e.name.clone();
        }
        let name = describe(pid);
        let held = Held::open(pid, key.1);
        if let Ok(mut cache) = self.cache.lock() {
            if cache.len() >= MAX_CACHED {
                cache.clear();
            }
            let named = Named {
                at: now,
                key,
                name: name.clone(),
                held,
            };
            cache.insert(pid, named);
        }
        name
    }
}

/// The process (thread group) of thread `tid`: `tid` itself for a thread that leads
/// its group (most requests: a single-threaded `cat`, `grep`, `git`), else from
/// `/proc/TID/status`; `tid` itself if that cannot be read.
pub(crate) fn process_of(tid: u32) -> u32 {
    if leads_its_group(tid) {
        return tid;
    }
    std::fs::read_to_string(format!("/proc/{tid}/status"))
        .ok()
        .and_then(|s| tgid_of(&s))
        .unwrap_or(tid)
}

/// Whether thread `tid` leads its thread group: a pidfd opens for a leader only, a
/// check far cheaper than reading `/proc/TID/status` (which the kernel formats whole).
fn leads_its_group(tid: u32) -> bool {
    use rustix::process::{Pid, PidfdFlags, pidfd_open};
    i32::try_from(tid)
        .ok()
        .and_then(Pid::from_raw)
        .is_some_and(|pid| pidfd_open(pid, PidfdFlags::empty()).is_ok())
}

/// The `Tgid:` line's value.
fn tgid_of(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))?
        .trim()
        .parse()
        .ok()
}

/// What tells a process from the one it became by `exec`: its executable (the link's
/// target; its command name where the link cannot be read), then the first bytes of
/// `/proc/PID/cmdline` (empty where nothing can be read).
///
/// It is read for every request (a cached name is checked against it), so it makes
/// few calls: the link is tried only when `by_link` (it was readable when the name was
/// made), each file is read once, through the descriptor a name holds where it holds
/// one. With it, whether the link was read.
fn identity(pid: u32, by_link: bool, held: &Held) -> Identity {
    use std::os::unix::ffi::OsStrExt;
    let exe = by_link
        .then(|| std::fs::read_link(format!("/proc/{pid}/exe")).ok())
        .flatten()
        .map(|exe| exe.as_os_str().as_bytes().to_vec());
    let read = exe.is_some();
    let file = |f: &Option<Arc<File>>, name: &str, max: usize| match f {
        Some(f) => read_at_start(f, max),
        None => read_once(&format!("/proc/{pid}/{name}"), max),
    };
    let mut out = exe.unwrap_or_else(|| file(&held.comm, "comm", 64));
    out.push(0);
    out.extend(file(&held.cmdline, "cmdline", KEY_BYTES));
    (out, read)
}

/// Up to `max` bytes from the start of the open `/proc` file `f`, in one call; nothing
/// where it cannot be read (its process is gone).
fn read_at_start(f: &File, max: usize) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; max];
    let n = f.read_at(&mut buf, 0);
    buf.truncate(n.unwrap_or(0));
    buf
}

/// Up to `max` bytes of `path` in one read (a `/proc` file answers a read whole up to
/// the buffer's size); nothing where it cannot be read.
fn read_once(path: &str, max: usize) -> Vec<u8> {
    use std::io::Read;
    let mut buf = vec![0u8; max];
    let n = std::fs::File::open(path).and_then(|mut f| f.read(&mut buf));
    buf.truncate(n.unwrap_or(0));
    buf
}

/// `pid 12 ppid 3 exe "/usr/bin/cat" argv ["cat",".env"]` (`comm "cat"` where the
/// executable cannot be read), or as much as `/proc` tells.
pub(crate) fn describe(pid: u32) -> String {
    let dir = format!("/proc/{pid}");
    let mut out = format!("pid {pid}");
    if let Some(ppid) = std::fs::read_to_string(format!("{dir}/stat"))
        .ok()
        .and_then(|s| parent_of(&s))
    {
        out.push_str(&format!(" ppid {ppid}"));
    }
    // The executable's link needs ptrace rights over the process, which the confined
    // gateway may not have; its command name (`comm`) needs none.
    if let Ok(exe) = std::fs::read_link(format!("{dir}/exe")) {
        out.push_str(" exe ");
        out.push_str(&quoted(&exe.to_string_lossy()));
    } else if let Ok(comm) = std::fs::read_to_string(format!("{dir}/comm")) {
        out.push_str(" comm ");
        out.push_str(&quoted(comm.trim_end_matches('\n')));
    }
    if let Ok(raw) = std::fs::read(format!("{dir}/cmdline")) {
        out.push_str(" argv ");
        out.push_str(&argv(&raw));
    }
    out
}

/// The parent's pid from `/proc/PID/stat` (after the command name, which may hold
/// spaces and parentheses: the last `)` ends it).
fn parent_of(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// `cmdline`'s NUL-separated arguments as a JSON list, bounded.
fn argv(raw: &[u8]) -> String {
    let all: Vec<&[u8]> = raw.split(|b| *b == 0).filter(|a| !a.is_empty()).collect();
    let mut list: Vec<String> = all
        .iter()
        .take(MAX_ARGS)
        .map(|a| fsgate_base::text::head(&String::from_utf8_lossy(a), MAX_ARG_BYTES).to_string())
        .collect();
    if all.len() > MAX_ARGS {
        list.push(format!("... {} more", all.len() - MAX_ARGS));
    }
    serde_json::to_string(&list).unwrap_or_default()
}

fn quoted(s: &str) -> String {
    serde_json::to_string(fsgate_base::text::head(s, MAX_ARG_BYTES)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_named_bounded_and_escaped() {
        assert_eq!(parent_of("12 (a) b) S 7 12 12"), Some(7));
        assert_eq!(tgid_of("Name:\tx\nTgid:\t42\nPid:\t43\n"), Some(42));
        let raw = b"cat\0.env\0\x1b[31m\0";
        assert_eq!(argv(raw), r#"["cat",".env","\u001b[31m"]"#);
        let many: Vec<u8> = (0..40).flat_map(|_| b"x\0".to_vec()).collect();
        assert!(argv(&many).ends_with(r#""... 24 more"]"#));
        let me = describe(std::process::id());
        assert!(
            me.starts_with(&format!("pid {}", std::process::id())),
            "{me}"
        );
        assert!(me.contains(" exe "), "{me}");
        // The identity a cached name is checked against: the executable (or the command
        // name), then the arguments, as /proc tells them.
        let (id, by_link) = identity(std::process::id(), true, &Held::default());
        assert!(by_link, "the test's own executable link is readable");
        let cmdline = std::fs::read("/proc/self/cmdline").expect("cmdline");
        let at = id
            .iter()
            .position(|b| *b == 0)
            .expect("a NUL after the executable");
        assert!(at > 0, "no executable or command name");
        assert_eq!(&id[at + 1..], &cmdline[..cmdline.len().min(KEY_BYTES)]);
        // A second name of the same process within FRESH is the cached one.
        let peers = Peers::default();
        assert_eq!(
            peers.name(std::process::id()),
            peers.name(std::process::id())
        );
    }

    /// A process named a moment ago that execs the same executable with other
    /// arguments is named anew (its arguments read through the descriptor its name
    /// holds), and that descriptor reads nothing once the process is gone.
    #[test]
    fn a_held_name_follows_an_exec_and_ends_with_its_process() {
        use std::io::Write;
        let script = "read x; exec /bin/sh -c 'sleep 30; echo after-exec'";
        let mut child = std::process::Command::new("/bin/sh")
            .args(["-c", script])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("sh");
        let pid = child.id();
        let started = |what: &str| {
            let deadline = Instant::now() + Duration::from_secs(10);
            let cmdline = format!("/proc/{pid}/cmdline");
            while !String::from_utf8_lossy(&read_once(&cmdline, KEY_BYTES)).contains(what) {
                assert!(Instant::now() < deadline, "{what} never ran");
                std::thread::sleep(Duration::from_millis(10));
            }
        };
        // Until it has become the shell, it is a copy of this test.
        started("read x");
        let peers = Peers::default();
        let before = peers.name(pid);
        assert!(before.contains("read x"), "{before}");
        let held = (peers.cache.lock().expect("cache").get(&pid))
            .and_then(|e| e.held.cmdline.clone())
            .expect("its cmdline held open");
        writeln!(child.stdin.as_mut().expect("stdin"), "go").expect("write");
        started("after-exec");
        let seen = read_at_start(&held, KEY_BYTES);
        assert!(
            String::from_utf8_lossy(&seen).contains("after-exec"),
            "read through it"
        );
        let after = peers.name(pid);
        assert!(
            after.contains("after-exec"),
            "within FRESH, named anew: {after}"
        );
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            read_at_start(&held, KEY_BYTES).is_empty(),
            "a gone process reads nothing"
        );
    }

    #[test]
    fn a_thread_is_named_as_its_process() {
        let me = std::process::id();
        assert!(leads_its_group(me));
        assert_eq!(process_of(me), me);
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            let _ = tx.send(rustix::thread::gettid().as_raw_nonzero().get());
            let _ = done_rx.recv();
        });
        let tid = u32::try_from(rx.recv().expect("tid")).expect("tid");
        assert_ne!(tid, me);
        assert!(!leads_its_group(tid));
        assert_eq!(process_of(tid), me);
        // Named through the cache too: the thread as its process, before and after the
        // process itself was named (its id is not taken for a leader's).
        let peers = Peers::default();
        let by_thread = peers.name(tid);
        assert!(by_thread.starts_with(&format!("pid {me} ")), "{by_thread}");
        assert_eq!(peers.name(me), by_thread);
        assert_eq!(peers.name(tid), by_thread);
        let _ = done_tx.send(());
        t.join().expect("thread");
    }
}
