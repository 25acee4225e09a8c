//! `fsgate run` when things go wrong (docs/run.md): the gateway killed with `kill -9`
//! while the command reads and writes through the view; a machine that cannot give the
//! view (no user namespaces, no Landlock).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::view::{ViewWs, give_to_nobody, text, view_ws};
use crate::common::{bin, canonical_tempdir};

/// The size of each version the command writes: large enough that a write is in
/// flight for a while (its intent open), small enough to be quick.
const BIG: usize = 2 << 20;

view_ws! {
    Ws
}

impl Ws {
    fn new() -> Ws {
        let ws = ViewWs::new("fsgate-faults-ws", "fsgate-faults-state");
        std::fs::write(ws.root.join(".env"), "TOKEN=faults-secret\n").expect("write");
        std::fs::write(ws.root.join("a.txt"), "hello\n").expect("write");
        std::fs::write(ws.root.join("big.txt"), "0".repeat(BIG)).expect("write");
        Ws(ws)
    }

    fn fsgate(&self, sub: &str) -> Command {
        let mut cmd = Command::new(bin());
        cmd.arg(sub)
            .args(self.state_args())
            .env("XDG_STATE_HOME", self.state.join("xdg"))
            .current_dir(&self.root);
        cmd
    }

    fn records(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.log()).unwrap_or_default();
        // A line cut by the kill is not a record.
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

/// Polls `f` every 10 ms until it gives something (`what` after `secs` s: a failure).
fn until<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(t) = f() {
            return t;
        }
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The parent of `pid`, from `/proc`.
fn parent_of(pid: &str) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let at = stat.rfind(')')?;
    stat[at + 1..].split_whitespace().nth(1).map(str::to_owned)
}

/// A process outside the command's tree that entered the view's mount namespace: it
/// lists the view at once, then tries it again on each line it is sent.
const PROBE: &str = r#"
import os, sys, json
root = sys.argv[1]
n = 0
def tries():
    global n
    n += 1
    out = {}
    for name, f in [("stat", lambda: os.stat(root + "/a.txt").st_size),
                    ("lookup", lambda: os.stat(root + "/never-%d.txt" % n).st_size),
                    ("list", lambda: sorted(os.listdir(root))),
                    ("read", lambda: open(root + "/a.txt").read()),
                    ("write", lambda: open(root + "/new.txt", "w").close())]:
        try:
            out[name] = ["ok", f()]
        except OSError as e:
            out[name] = ["errno", e.errno]
    return out
print(json.dumps(tries()), flush=True)
for _ in sys.stdin:
    print(json.dumps(tries()), flush=True)
"#;

fn probe(pid: &str, root: &Path) -> Child {
    Command::new("nsenter")
        .arg(format!("--mount=/proc/{pid}/ns/mnt"))
        .args(["--", "/usr/bin/python3", "-c", PROBE])
        .arg(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("nsenter")
}

/// The next line of `lines` as JSON, within 20 s (a hang fails the test).
fn next_json(rx: &std::sync::mpsc::Receiver<String>) -> Value {
    let line = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the probe answered (no hang)");
    serde_json::from_str(&line).expect("json")
}

/// The probe's lines, read on a thread of their own.
fn lines_of(child: &mut Child) -> std::sync::mpsc::Receiver<String> {
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// `kill -9` of fsgate while the command loops reading and writing through the view:
/// every later access fails with ENOTCONN (never a hang, never the real directory),
/// the command's tree ends, no mount of the view is left anywhere once its namespace is
/// gone, and the next start settles the write-ahead intents: the file is one whole
/// version, and a change cut off is recorded as not done (or as done, as the disk says).
#[test]
fn view_kill_9_of_the_gateway_fails_the_view_ends_the_tree_and_the_next_start_settles() {
    let ws = Ws::new();
    let (_d, out_dir) = canonical_tempdir("fsgate-faults-pid");
    let pidfile = out_dir.join("pid");
    let writer = format!(
        "import os\nopen('{p}.tmp','w').write(str(os.getpid()))\nos.rename('{p}.tmp','{p}')\n\
         n = 0\nwhile True:\n    n += 1\n    open('a.txt').read()\n    \
         with open('big.txt', 'w') as f:\n        f.write(str(n % 10) * {BIG})\n",
        p = pidfile.display()
    );
    // Unwalled: the command tells its pid through a file outside the workspace.
    let mut fsgate = ws
        .fsgate("run")
        .args(["--no-confine", "--", "/usr/bin/python3", "-c", &writer])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let command = until(30, "the command did not start", || {
        std::fs::read_to_string(&pidfile).ok()
    });
    let child = parent_of(&command).expect("the command's parent");
    let mut probe = probe(&command, &ws.root);
    let rx = lines_of(&mut probe);
    let before = next_json(&rx);
    assert_eq!(before["list"][0], "ok", "{before}");
    let listed = before["list"][1].as_array().expect("names");
    assert!(
        !listed.iter().any(|n| n == ".env"),
        "not the view: {before}"
    );
    // Killed while a write of big.txt is in flight if one is seen in time (an intent
    // without its outcome yet), else at once: what follows holds either way.
    let seen = |recs: &[Value]| {
        recs.last()
            .is_some_and(|r| r["kind"] == "intent" && r["path"] == "big.txt")
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !seen(&ws.records()) && Instant::now() < deadline {}
    fsgate.kill().expect("kill -9");
    let _ = fsgate.wait();
    probe
        .stdin
        .as_mut()
        .expect("stdin")
        .write_all(b"\n")
        .expect("probe");
    let after = next_json(&rx);
    // The kernel may answer a `stat` of a name looked up before the kill from what it
    // keeps (docs/run.md, "What the kernel keeps"): the same size, nothing new.
    if after["stat"][0] == "ok" {
        assert_eq!(after["stat"], before["stat"], "{after}");
    }
    let asked = ["lookup", "list", "read", "write"];
    let stat = (after["stat"][0] == "errno").then_some("stat");
    for name in asked.into_iter().chain(stat) {
        assert_eq!(after[name][0], "errno", "{name} after the kill: {after}");
        let errno = after[name][1].as_i64();
        assert!(
            errno == Some(libc::ENOTCONN as i64) || errno == Some(libc::EIO as i64),
            "{name}: {after}"
        );
    }
    // The command and the process that ran it end.
    until(10, "the command's tree outlived fsgate", || {
        [&command, &child]
            .iter()
            .all(|p| !Path::new(&format!("/proc/{p}")).exists())
            .then_some(())
    });
    drop(probe.stdin.take());
    let _ = probe.wait();
    assert_no_view_left(&ws.root);
    // The killed run's socket for `fsgate asks` is left; the next `fsgate asks` finds
    // nobody listening there and removes it.
    let asks_dir = std::fs::read_dir(ws.state.join("xdg/fsgate"))
        .expect("the state dir")
        .flatten()
        .map(|e| e.path().join("asks"))
        .next()
        .expect("the workspace's state dir");
    assert_eq!(std::fs::read_dir(&asks_dir).expect("asks").count(), 1);
    let asks = Command::new(bin())
        .args(["asks", "--json", "--workspace"])
        .arg(&ws.root)
        .env("XDG_STATE_HOME", ws.state.join("xdg"))
        .output()
        .expect("fsgate asks");
    assert_eq!(String::from_utf8_lossy(&asks.stdout), "[]\n");
    assert_eq!(std::fs::read_dir(asks_dir).expect("asks").count(), 0);
    settled_by_the_next_start(&ws);
}

/// No process's mounts hold a view of `root` (the namespace that held it is gone).
fn assert_no_view_left(root: &Path) {
    let root = root.to_string_lossy().into_owned();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(text) = std::fs::read_to_string(entry.path().join("mountinfo")) else {
            continue;
        };
        let left = text
            .lines()
            .any(|l| l.contains("fuse.fsgate") && l.split(' ').nth(4) == Some(root.as_str()));
        assert!(!left, "a view of {root} is left: {:?}", entry.path());
    }
}

/// The next `fsgate run` settles every intent the kill left open (the log verifies
/// with none open) and big.txt is one whole version, the one the records say.
fn settled_by_the_next_start(ws: &Ws) {
    let out = ws
        .fsgate("run")
        .args(["--", "cat", "a.txt"])
        .stdin(Stdio::null())
        .output()
        .expect("fsgate run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let verify = Command::new(bin())
        .args(["audit", "verify"])
        .arg(ws.log())
        .output()
        .expect("verify");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
    assert!(verify.status.success(), "{report}");
    assert!(
        !report.contains("intent seq"),
        "an intent is left open: {report}"
    );
    let big = std::fs::read(ws.root.join("big.txt")).expect("big.txt");
    assert_eq!(big.len(), BIG, "big.txt is torn");
    assert!(big.iter().all(|&b| b == big[0]), "big.txt is torn");
    let records = ws.records();
    let cut: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "reconciled")
        .collect();
    eprintln!("intents the kill cut off, settled at the next start: {cut:?}");
    let last_done = records
        .iter()
        .rev()
        .find(|r| {
            r["path"] == "big.txt"
                && r["op"] == "write_text_file"
                && ((r["kind"] == "request" && r["outcome"] == "ok")
                    || (r["kind"] == "reconciled" && r["details"]["found"] == "applied"))
        })
        .and_then(|r| {
            r["sha256"]
                .as_str()
                .or(r["details"]["onDisk"]["path"]["sha256"].as_str())
        });
    match last_done {
        Some(sha) => {
            use sha2::Digest;
            let digest = hex::encode(sha2::Sha256::digest(&big));
            assert_eq!(
                sha, digest,
                "big.txt is not the last version recorded as done"
            );
        }
        None => assert_eq!(
            big[0], b'0',
            "big.txt changed with no write recorded as done"
        ),
    }
}

/// Runs `argv` as `nobody` in a user namespace of its own (root and nobody mapped)
/// where no further user namespace may be made (`user.max_user_namespaces` 0 there).
const NO_USER_NAMESPACES: &str = r#"
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
r, w = os.pipe()
r2, w2 = os.pipe()
pid = os.fork()
if pid == 0:
    if libc.unshare(0x10000000) != 0:
        os._exit(90)
    os.write(w2, b"u")
    os.read(r, 1)
    with open("/proc/sys/user/max_user_namespaces", "w") as f:
        f.write("0")
    os.setgroups([])
    os.setresgid(65534, 65534, 65534)
    os.setresuid(65534, 65534, 65534)
    os.execv(sys.argv[1], sys.argv[1:])
os.read(r2, 1)
for name in ("uid_map", "gid_map"):
    with open(f"/proc/{pid}/{name}", "w") as f:
        f.write("0 0 1\n65534 65534 1\n")
os.write(w, b"g")
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"#;

/// Runs `argv` with `landlock_create_ruleset` answering ENOSYS (a seccomp filter), as
/// on a kernel without Landlock.
pub(crate) const NO_LANDLOCK: &str = r#"
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
code = [
    (0x20, 0, 0, 0),                  # load the syscall's number
    (0x15, 0, 1, 444),                # landlock_create_ruleset?
    (0x06, 0, 0, 0x00050000 | 38),    # ERRNO(ENOSYS)
    (0x06, 0, 0, 0x7FFF0000),         # allow
]
prog = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *i) for i in code))
class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
fprog = Fprog(len(code), ctypes.addressof(prog))
assert libc.prctl(38, 1, 0, 0, 0) == 0
assert libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) == 0
os.execv(sys.argv[1], sys.argv[1:])
"#;

/// `fsgate run -- touch MARKER` through the python launcher `launcher`: it must end
/// with 125, saying `missing`, and the command must not have run.
fn refused_without(ws: &Ws, launcher: &str, missing: &str) {
    let marker = ws.state.join("ran");
    let out = Command::new("/usr/bin/python3")
        .args(["-c", launcher, bin(), "run", "--workspace"])
        .arg(&ws.root)
        .arg("--audit-log")
        .arg(ws.log())
        .arg("--backup-dir")
        .arg(ws.state.join("backups"))
        .args(["--", "touch"])
        .arg(&marker)
        .env("HOME", &ws.state)
        .env_remove("XDG_STATE_HOME")
        .current_dir(&ws.root)
        .stdin(Stdio::null())
        .output()
        .expect("fsgate run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(stderr.contains(missing), "{stderr}");
    assert!(stderr.contains("the command was not run"), "{stderr}");
    assert!(!marker.exists(), "the command ran without the view");
}

/// A user who is not root where user namespaces cannot be made: fsgate says which
/// limit is in the way and exits 125 without running the command.
#[test]
fn view_without_user_namespaces_a_user_is_told_what_is_missing() {
    let ws = Ws::new();
    give_to_nobody(&ws.root);
    give_to_nobody(&ws.state);
    refused_without(&ws, NO_USER_NAMESPACES, "user.max_user_namespaces");
}

/// A kernel without Landlock: fsgate says so and exits 125 without running the command.
#[test]
fn view_without_landlock_the_command_is_not_run() {
    let ws = Ws::new();
    refused_without(
        &ws,
        NO_LANDLOCK,
        "Landlock is missing (this kernel has no Landlock",
    );
}

/// Processes writing files through shared mappings while as many others open, write
/// and close the same files: each close applies its write and takes the old pages
/// back, which waits for the mappings' writeback, served by the view's own threads.
const MAPPED_AND_CLOSED: &str = r#"
import os, mmap, sys, time
st = os.stat(".")
open(sys.argv[1], "w").write("%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev)))
n = int(sys.argv[2])
for i in range(n):
    open("m%d.bin" % i, "wb").write(b"\0" * (1 << 20))
kids = []
for i in range(n):
    pid = os.fork()
    if pid == 0:
        fd = os.open("m%d.bin" % i, os.O_RDWR)
        m = mmap.mmap(fd, 1 << 20, mmap.MAP_SHARED)
        t, k = time.time(), 0
        while time.time() - t < 4:
            for off in range(0, 1 << 20, 4096):
                m[off] = k & 255
            k += 1
        os._exit(0)
    kids.append(pid)
time.sleep(0.5)
for i in range(n):
    pid = os.fork()
    if pid == 0:
        for _ in range(20):
            fd = os.open("m%d.bin" % i, os.O_RDWR)
            os.pwrite(fd, b"z", 5000)
            os.close(fd)
        os._exit(0)
    kids.append(pid)
bad = [p for p in kids if os.waitpid(p, 0)[1] != 0]
print("done" if not bad else "failed: %d" % len(bad))
"#;

/// More closes at once than the view has threads, each of a file other processes write
/// through shared mappings: every close ends, and so does the run. Before, each close
/// waited in the kernel for a writeback that only the view's threads could serve, all
/// of them waiting alike: the command and the gateway hung for good, `kill -9` too.
#[test]
fn view_closes_of_files_written_through_shared_mappings_never_stall_the_view() {
    let ws = Ws::new();
    let (stdout, stderr) = runs_to_its_end(&ws, MAPPED_AND_CLOSED, "12");
    assert_eq!(stdout.trim(), "done", "{stderr}");
    let applied = (ws.records().iter())
        .filter(|r| r["op"] == "write_text_file" && r["outcome"] == "ok")
        .count();
    assert!(applied >= 12, "{applied} writes applied\n{stderr}");
}

/// One process appends to `f` and syncs it, over and over, while another renames a
/// new file over `f` (or removes `f`): both go on to their end.
const SYNCED_AND_REPLACED: &str = r#"
import os, sys, time
st = os.stat(".")
open(sys.argv[1], "w").write("%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev)))
end = time.time() + 6
if os.fork() == 0:
    while time.time() < end:
        try:
            fd = os.open("f", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        except FileNotFoundError:
            continue  # removed between its lookup and its open (docs/run.md)
        os.write(fd, b"x\n")
        try:
            os.fsync(fd)
        except PermissionError:
            pass  # replaced after its backup was taken: refused (docs/run.md)
        os.close(fd)
    os._exit(0)
n = 0
while time.time() < end:
    try:
        if sys.argv[2] == "rename":
            open("t", "w").write("r%d\n" % n)
            os.rename("t", "f")
        else:
            os.unlink("f")
        n += 1
    except OSError:
        pass
print("done" if os.wait()[1] == 0 and n > 0 else "failed")
"#;

/// An `fsync` of a file applies its write and takes the old version's name back while
/// the kernel holds the file's lock; a rename or removal in its directory holds the
/// directory's lock and waits for the file's. The name is taken back on a thread of
/// its own: before, the two waited for each other, and the view, the command and the
/// gateway (`kill -9` too) hung for good.
#[test]
fn view_an_fsync_racing_a_rename_or_removal_of_its_file_never_stalls_the_view() {
    for how in ["rename", "unlink"] {
        let ws = Ws::new();
        let (stdout, stderr) = runs_to_its_end(&ws, SYNCED_AND_REPLACED, how);
        assert_eq!(stdout.trim(), "done", "{how}: {stderr}");
        // The one refusal the race may meet: a write whose file was replaced after its
        // backup was taken.
        let refused: Vec<Value> = (ws.records().into_iter())
            .filter(|r| r["decision"] == "deny")
            .filter(|r| r["rule"] != "workspace-uninspected")
            .collect();
        assert!(refused.is_empty(), "{how}: {refused:?}");
    }
}

/// Runs `python3 SCRIPT CONN ARG` through the view (`--no-confine`: the script writes
/// its view's device number to CONN, outside): its stdout and stderr once it ended,
/// successfully. A view that stalls is ended through fusectl, and the test fails.
fn runs_to_its_end(ws: &Ws, script: &str, arg: &str) -> (String, String) {
    std::fs::write(ws.root.join("script.py"), script).expect("write");
    let (_out, outside) = canonical_tempdir("fsgate-faults-conn");
    let conn = outside.join("conn.txt");
    let mut cmd = ws.fsgate("run");
    cmd.args(["--no-confine", "--", "python3", "script.py"])
        .arg(&conn)
        .arg(arg)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn fsgate run");
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            abort_connection(&std::fs::read_to_string(&conn).unwrap_or_default());
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!("the view stalled: {}", String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    (stdout, stderr)
}

/// Ends a stalled view's FUSE connection `dev` (`MAJOR:MINOR` of its mount) through
/// fusectl, so that a failing test leaves no process no signal can end.
fn abort_connection(dev: &str) {
    let Some(minor) = dev.split(':').nth(1) else {
        return;
    };
    let (_dir, ctl) = canonical_tempdir("fsgate-fusectl");
    let mounted = Command::new("mount")
        .args(["-t", "fusectl", "none"])
        .arg(&ctl)
        .status()
        .is_ok_and(|s| s.success());
    if mounted {
        let _ = std::fs::write(ctl.join(minor).join("abort"), "1");
        let _ = Command::new("umount").arg(&ctl).status();
    }
}

/// A process opens files until it can open no more, holds them, and the view goes on:
/// opens are refused (ENFILE) once its handles hold half the gateway's descriptors,
/// and every change, a write applied at its close included, still works. Before, the
/// gateway ran out of descriptors for its own work, and every process's close, rename
/// and removal failed with EIO (the write lost).
const OPENS_UNTIL_FULL: &str = r#"
import os, errno, sys
for i in range(200):
    open("f%d.txt" % i, "w").write("x")
w = os.open("w.txt", os.O_WRONLY | os.O_CREAT)
fds = []
try:
    while True:
        fds.append(os.open("f%d.txt" % (len(fds) % 200), os.O_RDONLY))
except OSError as e:
    print("held", len(fds) > 1000, errno.errorcode[e.errno])
os.write(w, b"written while full\n")
os.close(w)
os.rename("f1.txt", "g1.txt"); os.unlink("f2.txt"); os.mkdir("d"); os.chmod("f3.txt", 0o600)
print("changes ok")
"#;

#[test]
fn view_a_process_holding_every_file_it_can_open_leaves_the_view_working() {
    let ws = Ws::new();
    std::fs::write(ws.root.join("full.py"), OPENS_UNTIL_FULL).expect("write");
    let mut cmd = Command::new("prlimit");
    cmd.arg("--nofile=4096").arg(bin()).arg("run");
    cmd.args(ws.state_args())
        .env("XDG_STATE_HOME", ws.state.join("xdg"))
        .current_dir(&ws.root)
        .args(["--no-confine", "--", "python3", "full.py"]);
    let out = crate::common::view::finished(cmd);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stdout, "held True ENFILE\nchanges ok\n", "{stderr}");
    let written = std::fs::read_to_string(ws.root.join("w.txt")).expect("w.txt");
    assert_eq!(written, "written while full\n");
    let internal = (ws.records().iter())
        .filter(|r| r["outcome"] == "internal")
        .count();
    assert_eq!(internal, 0, "{stderr}");
}

/// A tmpfs mounted at `dir` for the life of the guard (unmounted, lazily, at its drop).
struct Mounted(std::path::PathBuf);

impl Mounted {
    fn tmpfs(dir: &Path, size: &str) -> Mounted {
        std::fs::create_dir_all(dir).expect("mkdir");
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "mounting a tmpfs needs root, as these tests run");
        Mounted(dir.to_path_buf())
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// A change the filesystem under the workspace cannot take reaches the process as the
/// errno a disk gives, not EIO: a rename onto another filesystem inside the workspace
/// is EXDEV (so `mv` copies and removes instead), a write that finds no space is ENOSPC
/// at its close.
#[test]
fn view_a_change_the_filesystem_cannot_take_gets_its_own_errno() {
    let ws = Ws::new();
    let _small = Mounted::tmpfs(&ws.root.join("small"), "64k");
    let script = "import errno, os\n\
        def tried(f):\n    try:\n        f()\n        return 'done'\n    except OSError as e:\n        return errno.errorcode[e.errno]\n\
        print('rename', tried(lambda: os.rename('a.txt', 'small/a.txt')))\n\
        def fill():\n    f = open('small/big', 'wb')\n    f.write(b'x' * 300_000)\n    f.close()\n\
        print('fill', tried(fill))\n";
    let mut cmd = ws.fsgate("run");
    cmd.args(["--", "sh", "-c"])
        .arg("python3 -c \"$0\"; mv a.txt small/a.txt && echo mv-ok")
        .arg(script);
    let out = crate::common::view::finished(cmd);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(stdout, "rename EXDEV\nfill ENOSPC\nmv-ok\n", "{stderr}");
    assert_eq!(
        std::fs::read_to_string(ws.root.join("small/a.txt"))
            .ok()
            .as_deref(),
        Some("hello\n")
    );
    assert!(!ws.root.join("a.txt").exists());
    // `big` was created empty (a change of its own), as `open` makes it on a disk; its
    // content found no room, and no partial copy of it is left.
    let mut left: Vec<_> = std::fs::read_dir(ws.root.join("small"))
        .expect("small")
        .filter_map(|e| e.ok().map(|e| e.file_name()))
        .collect();
    left.sort();
    assert_eq!(left, ["a.txt", "big"], "{stderr}");
    assert_eq!(std::fs::read(ws.root.join("small/big")).ok(), Some(vec![]));
}

/// Under `--no-confine` the command may kill the process that runs it (its parent, the
/// subreaper of its tree): what it left running still ends with the run, as it came back
/// to the gateway. Before, a `setsid` process outlived the run for good.
#[test]
fn view_no_process_of_the_tree_outlives_the_run_when_its_parent_is_killed() {
    let ws = Ws::new();
    // A duration no other process here sleeps: its process is found by it.
    let tag = format!(
        "{}.{}",
        900 + std::process::id() % 97,
        std::process::id() % 1000
    );
    let script = format!(
        "setsid sh -c 'exec sleep {tag}' </dev/null >/dev/null 2>&1 & sleep 0.3; kill -9 $PPID; sleep 1"
    );
    let mut cmd = ws.fsgate("run");
    cmd.args(["--no-confine", "--", "sh", "-c", &script]);
    let out = crate::common::view::finished(cmd);
    assert_eq!(out.status.code(), Some(137), "{}", text(&out.stderr));
    let left = Command::new("pgrep")
        .args(["-f", &format!("sleep {tag}")])
        .output()
        .expect("pgrep");
    let pids = String::from_utf8_lossy(&left.stdout).into_owned();
    for pid in pids.split_whitespace() {
        let _ = Command::new("kill").args(["-9", pid]).status();
    }
    assert_eq!(pids, "", "processes of the tree outlived the run");
}
