//! `ask` rules under `fsgate run`: the command owns the terminal, so a question waits
//! here until a person answers it from another one (`fsgate asks`), over a unix socket
//! only the same user reaches (mode 0600 in a directory of mode 0700 under the
//! workspace's state directory, which the command's namespace covers). Each line on the
//! socket is one JSON request and its one JSON answer ([`Request`]); the socket's peer
//! is checked by its credentials (the same uid as the gateway), and the answer is
//! recorded naming who gave it.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use fsgate_gateway::Gateway;
use fsgate_gateway::ask::{Answer, Asker, Question};
use serde_json::{Map, Value, json};

/// Questions waiting at once at most; past it, a question is refused unasked.
pub const MAX_PENDING: usize = 64;
/// The longest request line read from the socket.
pub const MAX_LINE: u64 = 16 * 1024;
/// How often a question waiting looks whether the process that asked still runs.
const LOOK_AGAIN: Duration = Duration::from_secs(1);

/// Whether process (or thread) `pid` still runs and is not being killed: a process
/// killed while its request waits here stays until the request is answered (the kernel
/// waits for the answer of a request the view has read), with SIGKILL pending.
fn alive(pid: u32) -> bool {
    if pid == 0 {
        return true;
    }
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    const SIGKILL_BIT: u64 = 1 << (9 - 1);
    let killed = status.lines().any(|l| {
        let mask = l
            .strip_prefix("SigPnd:")
            .or_else(|| l.strip_prefix("ShdPnd:"));
        mask.and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
            .is_some_and(|m| m & SIGKILL_BIT != 0)
    });
    let zombie = status
        .lines()
        .any(|l| l.starts_with("State:") && l.contains('Z'));
    !(killed || zombie)
}

/// How long one connection may take to send its request.
const CONN_TIMEOUT: Duration = Duration::from_secs(5);

/// The directory of `workspace`'s sockets: `<state dir>/asks`.
pub fn dir(workspace: &Path) -> Option<PathBuf> {
    fsgate_base::state::workspace_state_dir(workspace)
        .ok()
        .map(|d| d.join("asks"))
}

/// One question waiting for its answer.
#[derive(Debug)]
struct Waiting {
    id: u64,
    shown: Value,
    answer: Option<(Answer, String)>,
}

/// The run's questions, shared by the view's threads and the socket's.
pub struct Asks {
    session: String,
    next: Mutex<u64>,
    waiting: Mutex<VecDeque<Waiting>>,
    answered: Condvar,
    gw: Arc<Gateway>,
}

impl std::fmt::Debug for Asks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Asks")
            .field("session", &self.session)
            .finish()
    }
}

impl Asks {
    /// The questions of the run `session` of `gw`.
    pub fn new(gw: Arc<Gateway>, session: String) -> Arc<Asks> {
        Arc::new(Asks {
            session,
            next: Mutex::new(0),
            waiting: Mutex::new(VecDeque::new()),
            answered: Condvar::new(),
            gw,
        })
    }

    /// The asker of a request from `peer`, process `pid` (the process that asked, for
    /// the person).
    pub fn asker(self: &Arc<Self>, peer: String, pid: u32) -> Arc<dyn Asker> {
        Arc::new(RunAsker {
            asks: Arc::clone(self),
            peer,
            pid,
        })
    }

    fn put(&self, q: &Question, (peer, pid): (&str, u32), timeout: Duration) -> Answer {
        let Ok(mut waiting) = self.waiting.lock() else {
            return Answer::Unanswered("the run's questions are unavailable".into());
        };
        if waiting.len() >= MAX_PENDING {
            return Answer::Unanswered(format!("{MAX_PENDING} questions wait already"));
        }
        let id = self.next.lock().map_or(0, |mut n| {
            *n += 1;
            *n
        });
        let deadline = Instant::now() + timeout;
        waiting.push_back(Waiting {
            id,
            shown: shown(q, peer, id, &self.session, timeout),
            answer: None,
        });
        // Not held while stderr is written: a paused terminal or a full pipe there must
        // not keep `fsgate asks` from listing or answering.
        drop(waiting);
        // One line on the command's stderr, which the person watches: escaped once, as
        // a whole (the path as it is, cut, not `q.title()`, which is escaped already).
        fsgate_base::text::eprint_line(&format!(
            "fsgate: run {}: {} {} waits for a person ({} s): answer it from another terminal with `fsgate asks` in the workspace",
            self.session,
            q.op.name(),
            fsgate_base::text::tail(&q.path, MAX_SHOWN_PATH),
            timeout.as_secs()
        ));
        let Ok(mut waiting) = self.waiting.lock() else {
            return Answer::Unanswered("the run's questions are unavailable".into());
        };
        loop {
            let at = waiting.iter().position(|w| w.id == id);
            let done = at.and_then(|i| waiting[i].answer.is_some().then_some(i));
            if let Some(i) = done {
                let w = waiting.remove(i);
                return w.and_then(|w| w.answer).map_or(Answer::Timeout, |a| a.0);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || at.is_none() {
                waiting.retain(|w| w.id != id);
                return Answer::Timeout;
            }
            // A process killed while it waits takes its question with it: no answer
            // given after that is applied, or recorded as if the process got it.
            if !alive(pid) {
                waiting.retain(|w| w.id != id);
                return Answer::Unanswered("the process that asked ended".into());
            }
            let left = left.min(LOOK_AGAIN);
            waiting = match self.answered.wait_timeout(waiting, left) {
                Ok((w, _)) => w,
                Err(_) => return Answer::Timeout,
            };
        }
    }

    /// What waits, as `fsgate asks --json` lists it.
    fn list(&self) -> Value {
        let questions: Vec<Value> = self
            .waiting
            .lock()
            .map(|w| {
                w.iter()
                    .filter(|q| q.answer.is_none())
                    .map(|q| q.shown.clone())
                    .collect()
            })
            .unwrap_or_default();
        json!({ "session": self.session, "pid": std::process::id(), "questions": questions })
    }

    /// Answers question `id` with `answer`, given by `by`; recorded first.
    fn answer(&self, id: u64, answer: Answer, by: &str) -> Result<(), String> {
        let mut waiting = self.waiting.lock().map_err(|_| "unavailable".to_string())?;
        let Some(w) = waiting
            .iter_mut()
            .find(|w| w.id == id && w.answer.is_none())
        else {
            return Err(format!("no question {}:{id} waits", self.session));
        };
        let mut details = Map::new();
        details.insert("session".into(), self.session.clone().into());
        details.insert("question".into(), w.shown.clone());
        details.insert("answer".into(), answer.as_str().into());
        details.insert("by".into(), by.into());
        self.gw.record("ask_answer", details);
        w.answer = Some((answer, by.to_owned()));
        self.answered.notify_all();
        Ok(())
    }
}

/// A question as listed (the path and the reason as the agent's request made them:
/// `fsgate asks` escapes them for a person).
fn shown(q: &Question, peer: &str, id: u64, session: &str, timeout: Duration) -> Value {
    json!({
        "id": format!("{session}:{id}"),
        "op": q.op.name(),
        "class": q.class,
        "path": q.path,
        "rule": q.rule,
        "reason": q.reason,
        "process": peer,
        "askedAt": now_secs(),
        "timeoutSecs": timeout.as_secs(),
    })
}

/// Seconds since the epoch, for the listing.
fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Where the view's `ask` questions go: `fsgate asks` ([`Asks`]) under `fsgate run`,
/// the editor under `fsgate acp --confine-agent`.
pub trait Askers: Send + Sync + std::fmt::Debug {
    /// The asker of one request from `peer` (the process that asked, for the person),
    /// process `pid`.
    fn for_peer(self: Arc<Self>, peer: String, pid: u32) -> Arc<dyn Asker>;
}

impl Askers for Asks {
    fn for_peer(self: Arc<Self>, peer: String, pid: u32) -> Arc<dyn Asker> {
        self.asker(peer, pid)
    }
}

/// The asker of one request.
#[derive(Debug)]
struct RunAsker {
    asks: Arc<Asks>,
    peer: String,
    pid: u32,
}

impl Asker for RunAsker {
    fn ask(&self, q: &Question, timeout: Duration) -> Answer {
        self.asks.put(q, (&self.peer, self.pid), timeout)
    }
}

/// The socket `fsgate asks` reaches: bound at `path` (its directory made 0700, the
/// socket 0600) before the gateway confines itself.
///
/// Bound and listening under a name `fsgate asks` does not list, then renamed to
/// `path`: a socket at `path` always listens. (`fsgate asks` removes a socket that
/// refuses a connection, as one left by a run that ended; bound at `path` itself, it
/// could meet the socket between `bind` and `listen`, and remove a live run's.)
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    let mut binding = path.as_os_str().to_owned();
    binding.push(format!(".binding-{}", std::process::id()));
    let binding = PathBuf::from(binding);
    let _ = std::fs::remove_file(&binding);
    let (_dir, at) = short(&binding)?;
    let listener = UnixListener::bind(at)?;
    let named = std::fs::set_permissions(&binding, std::fs::Permissions::from_mode(0o600))
        .and_then(|()| std::fs::rename(&binding, path));
    if let Err(e) = named {
        let _ = std::fs::remove_file(&binding);
        return Err(e);
    }
    Ok(listener)
}

/// `path` as a socket's address can hold it: a state directory's path may be longer
/// than a socket address's 108 bytes, so the socket is named through a descriptor of
/// its directory (`/proc/self/fd/N/NAME`), kept open while the address is used.
pub fn short(path: &Path) -> std::io::Result<(std::fs::File, PathBuf)> {
    use std::os::fd::AsRawFd;
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(std::io::Error::other("no directory"));
    };
    let dir = std::fs::File::open(dir)?;
    let at = Path::new("/proc/self/fd")
        .join(dir.as_raw_fd().to_string())
        .join(name);
    Ok((dir, at))
}

/// Connections served at once at most; one more is closed unserved.
const MAX_CONNS: usize = 32;

/// Answers `fsgate asks` on `listener`, each connection on a thread of its own (at
/// most `MAX_CONNS` (32) at once: idle connections of the same user's must not hold a
/// person's answer back), for ever (the threads end with the process).
pub fn serve(asks: Arc<Asks>, listener: UnixListener) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("fsgate-asks".into())
        .spawn(move || {
            let open = Arc::new(AtomicUsize::new(0));
            for conn in listener.incoming() {
                match conn {
                    Ok(c) => serve_one(&asks, &open, c),
                    Err(e) => tracing::debug!("fsgate asks: accept: {e}"),
                }
            }
        })
        .map(drop)
}

/// [`one`] on a thread of its own, if fewer than [`MAX_CONNS`] are served; else the
/// connection is closed unanswered (its `fsgate asks` says the run did not answer).
fn serve_one(asks: &Arc<Asks>, open: &Arc<AtomicUsize>, conn: UnixStream) {
    if open.fetch_add(1, Ordering::AcqRel) >= MAX_CONNS {
        open.fetch_sub(1, Ordering::AcqRel);
        tracing::debug!("fsgate asks: {MAX_CONNS} connections are served already");
        return;
    }
    let (asks, done) = (Arc::clone(asks), Arc::clone(open));
    let spawned = std::thread::Builder::new()
        .name("fsgate-asks-conn".into())
        .spawn(move || {
            if let Err(e) = one(&asks, conn) {
                tracing::debug!("fsgate asks: {e}");
            }
            done.fetch_sub(1, Ordering::AcqRel);
        });
    if let Err(e) = spawned {
        open.fetch_sub(1, Ordering::AcqRel);
        tracing::debug!("fsgate asks: no thread for a connection: {e}");
    }
}

/// One connection: its peer checked, one request read, one answer written.
fn one(asks: &Asks, mut conn: UnixStream) -> std::io::Result<()> {
    conn.set_read_timeout(Some(CONN_TIMEOUT))?;
    conn.set_write_timeout(Some(CONN_TIMEOUT))?;
    let cred = rustix::net::sockopt::socket_peercred(&conn)?;
    if cred.uid != rustix::process::geteuid() {
        return Err(std::io::Error::other("a peer of another user"));
    }
    let line = request_line(&conn)?;
    let pid = cred.pid.as_raw_nonzero().get().unsigned_abs();
    let by = format!("uid {} {}", cred.uid.as_raw(), crate::peer::describe(pid));
    let reply = match serde_json::from_str::<Request>(&line) {
        Ok(Request::List) => asks.list(),
        Ok(Request::Answer { id, answer }) => match Answer::from_kind(&answer) {
            Some(a) => match asks.answer(id, a, &by) {
                Ok(()) => json!({ "ok": true }),
                Err(e) => json!({ "error": e }),
            },
            None => json!({ "error": "unknown answer" }),
        },
        Err(_) => json!({ "error": "not a request" }),
    };
    let mut text = reply.to_string();
    text.push('\n');
    conn.write_all(text.as_bytes())
}

/// The first line a peer sends, read within [`CONN_TIMEOUT`] in all (a peer dripping a
/// byte at a time does not hold its place longer), at most [`MAX_LINE`] bytes.
fn request_line(mut conn: &UnixStream) -> std::io::Result<String> {
    let deadline = Instant::now() + CONN_TIMEOUT;
    let (mut line, mut buf) = (Vec::new(), [0u8; 1024]);
    while !line.contains(&b'\n') && (line.len() as u64) < MAX_LINE {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no whole request in time",
            ));
        }
        conn.set_read_timeout(Some(left))?;
        match conn.read(&mut buf)? {
            0 => break,
            n => line.extend_from_slice(&buf[..n]),
        }
    }
    let end = line.iter().position(|&b| b == b'\n').unwrap_or(line.len());
    line.truncate(end.min(usize::try_from(MAX_LINE).unwrap_or(usize::MAX)));
    Ok(String::from_utf8_lossy(&line).into_owned())
}

/// The most of a path the waiting line shows (its end: the file's name stays in view).
const MAX_SHOWN_PATH: usize = 240;

/// What `fsgate asks` sends: one line of JSON.
#[derive(Debug, serde::Deserialize, serde::Serialize)]
#[serde(tag = "request", rename_all = "lowercase")]
pub enum Request {
    /// The questions waiting.
    List,
    /// Answers question `id` (the number after the session) with `answer`
    /// (`allow_once`, `allow_always`, `reject_once`).
    Answer {
        /// The question's number in its run.
        id: u64,
        /// The answer's kind.
        answer: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// A new directory of this test's own (removed by the test).
    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("fsgate-asks-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch");
        dir
    }

    /// A bound socket listens at its name, 0600, in a 0700 directory, and no other name
    /// is left beside it.
    #[test]
    fn a_bound_socket_listens_at_its_name_and_leaves_no_other() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = scratch("bound");
        let path = tmp.join("asks").join("run-a.sock");
        let _listener = bind(&path).expect("bind");
        let (_dir, at) = short(&path).expect("short");
        UnixStream::connect(at).expect("it listens");
        let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().expect("dir")), 0o700);
        let names: Vec<_> = std::fs::read_dir(path.parent().expect("dir"))
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, ["run-a.sock"]);
        std::fs::remove_dir_all(&tmp).expect("clean up");
    }

    /// While runs bind their sockets, a client that finds one at the name is never
    /// refused (`fsgate asks` removes a socket that refuses, as a dead run's). Bound
    /// at the name itself, a client could meet it between `bind` and `listen`.
    #[test]
    fn a_socket_at_its_name_never_refuses_while_it_is_bound() {
        let tmp = scratch("never-refused");
        let path = tmp.join("run-b.sock");
        let stop = Arc::new(AtomicBool::new(false));
        let (refused, tries) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let poller = {
            let (path, stop) = (path.clone(), Arc::clone(&stop));
            let (refused, tries) = (Arc::clone(&refused), Arc::clone(&tries));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let Ok((_dir, at)) = short(&path) else {
                        continue;
                    };
                    tries.fetch_add(1, Ordering::Relaxed);
                    if let Err(e) = UnixStream::connect(at)
                        && e.kind() == std::io::ErrorKind::ConnectionRefused
                    {
                        refused.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        };
        for _ in 0..500 {
            let listener = bind(&path).expect("bind");
            // Gone from its name before it stops listening, as a run's at its end.
            std::fs::remove_file(&path).expect("remove");
            drop(listener);
        }
        stop.store(true, Ordering::Relaxed);
        poller.join().expect("poller");
        assert!(tries.load(Ordering::Relaxed) > 0);
        assert_eq!(refused.load(Ordering::Relaxed), 0, "a client was refused");
        std::fs::remove_dir_all(&tmp).expect("clean up");
    }
}
