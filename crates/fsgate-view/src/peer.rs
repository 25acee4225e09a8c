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
/// Processes remembered at most (each holds one or two descriptors: see [`Held`]).
const MAX_CACHED: usize = 64;

/// A remembered name.
#[derive(Debug)]
struct Named {
    /// When it was made.
    at: Instant,
    /// The executable and arguments it was made from, read through `held` (see
    /// [`identity`]): none where they could not be read, which nothing matches.
    key: Option<Identity>,
    name: String,
    /// What the name is checked against, held open (see [`Held`]).
    held: Held,
}

/// A process's `/proc/PID/cmdline`, and its `comm` where its executable's link cannot
/// be read, held open: checking a name then reads each with one call, not three (their
/// opening was most of a request's naming). They read what the process has become by
/// `exec`, and nothing once it is gone: a pid used again is then named anew, its own
/// files opened before its identity is read through them.
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
        // can have its id while it lives; an id reused within `FRESH` by a thread of a
        // process with the same executable and arguments would be named with the old
        // name; any other is named anew below, its process asked again).
        let leads = (self.cache.lock()).is_ok_and(|c| {
            c.get(&tid)
                .is_some_and(|e| now.duration_since(e.at) < FRESH)
        });
        let pid = if leads { tid } else { process_of(tid) };
        // Checked as it was made: by the link where it could be read (a process the
        // gateway may not trace is checked by its command name, without trying).
        let cached = (self.cache.lock()).ok().and_then(|c| {
            let e = c.get(&pid)?;
            let by_link = e.key.as_ref().is_none_or(|k| k.1);
            Some((by_link, e.held.clone()))
        });
        if let Some((by_link, held)) = cached
            && let Some(key) = identity(pid, by_link, &held)
            && let Ok(cache) = self.cache.lock()
            && let Some(e) = cache.get(&pid)
            && now.duration_since(e.at) < FRESH
            && e.key.as_ref() == Some(&key)
        {
            return e.name.clone();
        }
        // Named anew: its files opened first and its identity read through them, then
        // described (an exec in between is seen by the next request as a change).
        let pid = if leads { process_of(tid) } else { pid };
        let by_link = readable_link(pid);
        let held = Held::open(pid, by_link);
        // Without its arguments held (no descriptor left), no identity is kept: the
        // next request names it anew rather than match by path.
        let key = held
            .cmdline
            .as_ref()
            .and_then(|_| identity(pid, by_link, &held));
        let name = describe(pid);
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
/// one. With it, whether the link was read. None where the command name or the
/// arguments read empty (the process is gone, or cleared its arguments): such an
/// identity matches none, and its process is named anew at each request.
fn identity(pid: u32, by_link: bool, held: &Held) -> Option<Identity> {
    use std::os::unix::ffi::OsStrExt;
    let exe = by_link
        .then(|| std::fs::read_link(format!("/proc/{pid}/exe")).ok())
        .flatten()
        .map(|exe| exe.as_os_str().as_bytes().to_vec());
    let read = exe.is_some();
    let file = |f: &Option<Arc<File>>, name: &str, max: usize| {
        let bytes = match f {
            Some(f) => read_at_start(f, max),
            None => read_once(&format!("/proc/{pid}/{name}"), max),
        };
        (!bytes.is_empty()).then_some(bytes)
    };
    let mut out = match exe {
        Some(exe) => exe,
        None => file(&held.comm, "comm", 64)?,
    };
    out.push(0);
    out.extend(file(&held.cmdline, "cmdline", KEY_BYTES)?);
    Some((out, read))
}

/// Whether `pid`'s executable's link can be read (the gateway may lack the rights to
/// trace it; its command name then stands for it).
fn readable_link(pid: u32) -> bool {
    std::fs::read_link(format!("/proc/{pid}/exe")).is_ok()
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
    File::open(path).map_or_else(|_| Vec::new(), |f| read_at_start(&f, max))
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
        let (id, by_link) =
            identity(std::process::id(), true, &Held::default()).expect("its identity");
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
    /// holds); once it is gone, that descriptor reads nothing, and a name whose
    /// identity cannot be read is matched by none.
    #[test]
    fn a_held_name_follows_an_exec_and_ends_with_its_process() {
        use std::io::Write;
        struct Reaped(std::process::Child);
        impl Drop for Reaped {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
        // What it execs is not in its first arguments (`$NEXT`), so that each is told
        // by its own text.
        let script = "read x; exec /bin/sh -c \"$NEXT\"";
        let child = std::process::Command::new("/bin/sh")
            .args(["-c", script])
            .env("NEXT", "read y; echo became-$y")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("sh");
        let mut child = Reaped(child);
        let pid = child.0.id();
        let args = || {
            String::from_utf8_lossy(&read_once(&format!("/proc/{pid}/cmdline"), KEY_BYTES))
                .into_owned()
        };
        let until = |done: &dyn Fn(&str) -> bool| {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !done(&args()) {
                assert!(Instant::now() < deadline, "never became so: {}", args());
                std::thread::sleep(Duration::from_millis(10));
            }
        };
        // Until it has become the shell, it is a copy of this test.
        until(&|a| a.contains("read x"));
        let peers = Peers::default();
        let before = peers.name(pid);
        assert!(before.contains("read x"), "{before}");
        let held = (peers.cache.lock().expect("cache").get(&pid))
            .and_then(|e| e.held.cmdline.clone())
            .expect("its cmdline held open");
        let stdin = child.0.stdin.as_mut().expect("stdin");
        writeln!(stdin, "go").expect("write");
        until(&|a| a.contains("read y"));
        let seen = String::from_utf8_lossy(&read_at_start(&held, KEY_BYTES)).into_owned();
        assert!(
            seen.contains("read y"),
            "read through the held descriptor: {seen}"
        );
        // Still fresh, so that the identity alone decides.
        if let Some(e) = peers.cache.lock().expect("cache").get_mut(&pid) {
            e.at = Instant::now();
        }
        let after = peers.name(pid);
        assert_ne!(after, before, "within FRESH, named anew");
        assert!(after.contains("read y"), "{after}");
        writeln!(stdin, "done").expect("write");
        let _ = child.0.wait();
        assert!(
            read_at_start(&held, KEY_BYTES).is_empty(),
            "a gone process reads nothing"
        );
        let gone = Held {
            cmdline: Some(held),
            comm: None,
        };
        assert_eq!(identity(pid, true, &gone), None, "matched by none");
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
