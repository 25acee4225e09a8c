//! `fsgate run`: what common tools ask of a filesystem, through the view (docs/run.md):
//! SQLite with its locks, mmap, `O_TMPFILE`, an editor's atomic save, `fstat` while
//! writing, and a watcher seeing a change made through the view.

use std::process::Output;

use crate::common::view::{ViewWs, finished, text, view_ws};

view_ws! {
    /// A workspace holding `a.txt`, and a state dir beside it.
    Ws
}

impl Ws {
    fn new() -> Ws {
        let ws = ViewWs::new("fsgate-view-tools", "fsgate-view-tools-state");
        std::fs::write(ws.root.join("a.txt"), "hello\n").expect("write");
        Ws(ws)
    }

    /// `python3 -c SCRIPT` through the view, with the default policy or `policy`.
    fn python(&self, policy: Option<&std::path::Path>, script: &str) -> Output {
        let mut cmd = self.fsgate_run();
        if let Some(p) = policy {
            cmd.arg("--policy").arg(p);
        }
        cmd.args(["--", "python3", "-c", script]);
        finished(cmd)
    }
}

/// Runs `script` through the view; asserts it succeeded and printed `want`.
fn expect(script: &str, want: &str) -> Ws {
    expect_with(false, script, want)
}

/// As [`expect`]; with `small_files`, under the default policy with 12 MiB files.
fn expect_with(small_files: bool, script: &str, want: &str) -> Ws {
    let ws = Ws::new();
    let policy = small_files.then(|| crate::common::view::small_files_policy(&ws.state));
    let out = ws.python(policy.as_deref(), script);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{}\n{stderr}", text(&out.stdout));
    assert_eq!(text(&out.stdout), want, "{stderr}");
    assert!(
        !stderr.contains("Not Implemented"),
        "a request the view does not answer: {stderr}"
    );
    ws
}

/// A Python prelude: `start_other(expr)` starts process B, which prints `expr` each
/// time the returned function asks it, and answers that function with the line. B is
/// started before the script opens anything, so it never holds the script's
/// descriptors (closing an inherited copy, as an exec does, is a flush: it would apply
/// the write).
const OTHER_PROCESS: &str = r#"
import subprocess, sys
def start_other(expr):
    b = subprocess.Popen([sys.executable, "-c", "import os, sys\nfor _ in sys.stdin: print(" + expr + ", flush=True)"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    def other():
        b.stdin.write("\n"); b.stdin.flush()
        return b.stdout.readline().strip()
    return other
"#;

fn with_other(script: &str) -> String {
    format!("{OTHER_PROCESS}{script}")
}

#[test]
fn view_sqlite_writes_a_database_and_its_lock_holds_another_process_off() {
    let script = r#"
import sqlite3, subprocess, sys
db = sqlite3.connect("t.db", isolation_level=None)
db.execute("create table t(x)")
db.execute("insert into t values (1)")
db.execute("begin exclusive")
db.execute("insert into t values (2)")
other = "import sqlite3\ntry:\n  sqlite3.connect('t.db', timeout=0).execute('insert into t values (3)')\n  print('written')\nexcept sqlite3.OperationalError as e:\n  print(e)"
print(subprocess.run([sys.executable, "-c", other], capture_output=True, text=True).stdout.strip())
db.execute("commit")
db.close()
print(sqlite3.connect("t.db").execute("select x from t order by x").fetchall())
"#;
    let ws = expect(script, "database is locked\n[(1,), (2,)]\n");
    let db = std::fs::read(ws.root.join("t.db")).expect("t.db");
    assert!(db.starts_with(b"SQLite format 3\0"));
    assert!(!ws.root.join("t.db-journal").exists());
}

/// Two processes writing one file at once keep each other's writes, as on a disk: two
/// appenders (a shared log), two SQLite connections committing in turn.
#[test]
fn view_two_writers_of_one_file_keep_each_others_writes() {
    let script = r#"
import sqlite3, subprocess, sys
appender = "import sys, time\nfor i in range(5):\n  f = open('log.txt', 'a'); f.write(sys.argv[1] + str(i) + '\\n'); f.flush(); time.sleep(0.05)\n  f.close()"
holder = "import sys, time\nf = open('held.txt', 'a')\nfor i in range(5):\n  f.write(sys.argv[1] + str(i) + '\\n'); f.flush(); time.sleep(0.05)\nf.close()"
committer = "import sqlite3, sys, time\ndb = sqlite3.connect('t.db', timeout=30)\nfor i in range(5):\n  db.execute('insert into t values (?)', (sys.argv[1] + str(i),)); db.commit(); time.sleep(0.05)"
sqlite3.connect("t.db").execute("create table t(x)")
runs = [subprocess.Popen([sys.executable, "-c", code, who]) for code in (appender, holder, committer) for who in "pq"]
print([r.wait() for r in runs])
print(len(open("log.txt").read().splitlines()), len(open("held.txt").read().splitlines()))
print(sqlite3.connect("t.db").execute("select count(*) from t").fetchone()[0])
"#;
    expect(script, "[0, 0, 0, 0, 0, 0]\n10 10\n10\n");
}

/// A write past the write limit refuses that copy, not the next writer's: another
/// process's `>` while the refused file is still open is applied.
#[test]
fn view_a_refused_oversized_write_does_not_refuse_the_next_writer_of_the_file() {
    let script = r#"
import errno, os, subprocess
fd = os.open("big.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
try:
    for _ in range(13):
        os.write(fd, b"x" * (1024 * 1024))
    print("written")
except OSError as e:
    print("efbig", e.errno == errno.EFBIG)
print("sh", subprocess.run(["sh", "-c", "echo hi > big.txt"]).returncode)
print(open("big.txt").read().strip())
os.close(fd)
print(open("big.txt").read().strip())
"#;
    expect_with(true, script, "efbig True\nsh 0\nhi\nhi\n");
}

/// A process writing a file through a shared mapping (as SQLite's WAL index is) while
/// others open, write and close it: no hang, and the file keeps both. After a close,
/// the kernel's taking back of the file's old pages waits for the mapping's writeback,
/// which the view serves meanwhile; it once waited for a lock the close held.
#[test]
fn view_a_shared_mapping_written_while_others_close_the_file_does_not_hang() {
    let script = r#"
import mmap, os
pid = os.fork()
if pid == 0:
    fd = os.open("f.bin", os.O_RDWR)
    m = mmap.mmap(fd, 65536, mmap.MAP_SHARED)
    for i in range(3000):
        m[(i * 4096) % 65536] = i % 250 + 1
        if i % 50 == 0:
            m.flush()
    m.flush()
    m.close()
    os._exit(0)
for k in range(200):
    fd = os.open("f.bin", os.O_WRONLY)
    os.pwrite(fd, b"x", 65535)
    os.close(fd)
_, status = os.waitpid(pid, 0)
data = open("f.bin", "rb").read()
print(status, len(data), data[65535:], all(data[i] for i in range(0, 65536, 4096)))
"#;
    let ws = Ws::new();
    std::fs::write(ws.root.join("f.bin"), vec![0u8; 65536]).expect("write");
    let mut cmd = ws.fsgate_run();
    cmd.args(["--", "python3", "-c", script]);
    let out = unhung(cmd, std::time::Duration::from_secs(60));
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{}\n{stderr}", text(&out.stdout));
    assert_eq!(text(&out.stdout), "0 65536 b'x' True\n", "{stderr}");
}

/// `cmd`'s output; past `limit`, its view's FUSE connection is aborted (a deadlock in
/// the kernel would keep even a killed gateway from ending) and the test fails.
fn unhung(mut cmd: std::process::Command, limit: std::time::Duration) -> Output {
    use std::process::Stdio;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn fsgate");
    let deadline = std::time::Instant::now() + limit;
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let aborted = abort_views_of(child.id());
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "hung for {limit:?} (FUSE connections aborted: {aborted:?}); stderr: {}",
                text(&out.stderr)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

/// Aborts the FUSE connection of each view the children of `gateway` mounted; their ids.
fn abort_views_of(gateway: u32) -> Vec<String> {
    let children = std::fs::read_to_string(format!("/proc/{gateway}/task/{gateway}/children"))
        .unwrap_or_default();
    let connections = std::path::Path::new("/sys/fs/fuse/connections");
    // Mounted for this alone if it was not; unmounted again below.
    let mounted = std::fs::read_dir(connections).is_ok_and(|mut d| d.next().is_none())
        && std::process::Command::new("mount")
            .args(["-t", "fusectl", "fusectl"])
            .arg(connections)
            .status()
            .is_ok_and(|s| s.success());
    let mut aborted = Vec::new();
    for pid in children.split_whitespace() {
        let mounts = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap_or_default();
        for line in mounts.lines().filter(|l| l.contains(" fuse.fsgate ")) {
            let Some(minor) = line.split(' ').nth(2).and_then(|d| d.split(':').nth(1)) else {
                continue;
            };
            if std::fs::write(connections.join(minor).join("abort"), "1").is_ok() {
                aborted.push(minor.to_owned());
            }
        }
    }
    if mounted {
        let _ = std::process::Command::new("umount")
            .arg(connections)
            .status();
    }
    aborted
}

#[test]
fn view_mmap_reads_a_workspace_file() {
    let script = "import mmap\nwith open('a.txt', 'rb') as f:\n    m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)\n    print(m[:].decode().strip(), len(m))\n";
    expect(script, "hello 6\n");
}

/// `copy_file_range` (coreutils' `cp`), `posix_fallocate` and `SEEK_DATA` get the
/// kernel's own fallbacks, quietly: the copy and the zeros are writes like any, and no
/// "Not Implemented" warning reaches the command's terminal (`expect` checks); `mkfifo`
/// is EPERM.
#[test]
fn view_copy_file_range_fallocate_and_seek_data_fall_back_quietly_and_mkfifo_is_eperm() {
    let script = "import os
src = os.open('a.txt', os.O_RDONLY)
dst = os.open('copy.txt', os.O_WRONLY | os.O_CREAT, 0o644)
print('copied', os.copy_file_range(src, dst, 100))
os.posix_fallocate(dst, 0, 4096)
os.close(dst)
print('data at', os.lseek(src, 0, os.SEEK_DATA))
print(os.stat('copy.txt').st_size)
try:
    os.mkfifo('p')
except OSError as e:
    print('mkfifo errno', e.errno)
";
    let ws = expect(script, "copied 6\ndata at 0\n4096\nmkfifo errno 1\n");
    assert!(!ws.root.join("p").exists(), "a FIFO was made");
    let copy = std::fs::read(ws.root.join("copy.txt")).expect("copy.txt");
    assert_eq!(&copy[..6], b"hello\n");
    assert!(
        copy[6..].iter().all(|b| *b == 0),
        "not zeros after the copy"
    );
}

#[test]
fn view_o_tmpfile_is_refused_with_eopnotsupp_so_callers_fall_back() {
    let script = "import errno, os\ntry:\n    os.open('.', os.O_TMPFILE | os.O_WRONLY, 0o600)\n    print('opened')\nexcept OSError as e:\n    print(e.errno == errno.EOPNOTSUPP)\n";
    expect(script, "True\n");
}

#[test]
fn view_an_atomic_save_replaces_the_file_and_a_writer_sees_its_own_size() {
    // An editor's save: a new file written, its size asked, renamed over the old one.
    let script = r#"
import os
fd = os.open("a.txt.swp", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd, b"saved text\n")
print(os.fstat(fd).st_size)
os.fsync(fd)
os.close(fd)
os.replace("a.txt.swp", "a.txt")
print(os.stat("a.txt").st_size, open("a.txt").read().strip())
"#;
    let ws = expect(script, "11\n11 saved text\n");
    assert_eq!(
        std::fs::read_to_string(ws.root.join("a.txt")).expect("a"),
        "saved text\n"
    );
    assert!(!ws.root.join("a.txt.swp").exists());
}

#[test]
fn view_a_file_being_written_shows_its_content_to_its_writer_alone() {
    // A appends 100 bytes and does not close; B, another process, reads what the
    // workspace has (the write is not decided yet), though its size is A's (the kernel
    // keeps one size per file, and a smaller one would cut off pages A has mapped); A
    // sees its own size, by fd and by name, and its next append lands at its own end.
    let script = r#"
import os, subprocess, sys
other = start_other("os.stat('a.txt').st_size, len(open('a.txt', 'rb').read())")
fd = os.open("a.txt", os.O_WRONLY | os.O_APPEND)
os.write(fd, b"x" * 100)
print(os.fstat(fd).st_size, os.stat("a.txt").st_size)
print(other())
print(os.fstat(fd).st_size)
os.write(fd, b"y" * 10)
print(os.fstat(fd).st_size)
os.close(fd)
print(other())
"#;
    let ws = expect(&with_other(script), "106 106\n106 6\n106\n116\n116 116\n");
    let want = format!("hello\n{}{}", "x".repeat(100), "y".repeat(10));
    assert_eq!(
        std::fs::read_to_string(ws.root.join("a.txt")).expect("a"),
        want
    );
}

/// A extends `idx` past what the workspace holds (32 KiB applied, 64 KiB in its copy),
/// maps it shared and writes at 40,000; B, which does not write it, evaluates `expr`
/// (and should print `seen`); A then writes at 60,000, a page it had not touched, and
/// closes. Nothing of A's may be lost, and A must not die of SIGBUS.
fn a_grown_mapping_beside(expr: &str, seen: &str) {
    let script = format!(
        r#"
import mmap, os
other = start_other("{expr}")
fd = os.open("idx", os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd, b"\0", 32767)
os.fsync(fd)
os.pwrite(fd, b"\0", 65535)
m = mmap.mmap(fd, 65536, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
m[40000:40004] = b"MARK"
print(other(), bytes(m[40000:40004]).decode())
m[60000:60004] = b"MORE"
m.flush(); m.close(); os.close(fd)
data = open("idx", "rb").read()
print(len(data), data[40000:40004].decode(), data[60000:60004].decode())
"#
    );
    let want = format!("{seen} MARK\n65536 MARK MORE\n");
    let ws = expect(&with_other(&script), &want);
    let idx = std::fs::read(ws.root.join("idx")).expect("idx");
    assert_eq!(idx.len(), 65536);
    assert_eq!(
        (&idx[40000..40004], &idx[60000..60004]),
        (&b"MARK"[..], &b"MORE"[..])
    );
}

#[test]
fn view_a_grown_shared_mapping_outlives_another_processs_stat() {
    // As SQLite grows its shared index (`-shm`); B asks its size (as `ls -l` or another
    // connection's start does). Before, B was told the workspace's size, which cut off
    // A's pages past it.
    a_grown_mapping_beside("os.stat('idx').st_size", "65536");
}

#[test]
fn view_a_grown_shared_mapping_outlives_another_processs_read() {
    // B reads the file instead (as `cat` or `grep -r` beside a database would): it
    // reads what the workspace holds, which stops short of A's end, and that short read
    // must not shorten the size the kernel keeps under A's mapping.
    a_grown_mapping_beside("len(open('idx', 'rb').read())", "32768");
}

#[test]
fn view_an_inotify_watcher_sees_a_change_made_through_the_view() {
    // inotify through ctypes (no module to install); the change made by another process.
    let script = r#"
import ctypes, os, select, struct, subprocess
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(os.O_NONBLOCK)
assert fd >= 0
assert libc.inotify_add_watch(fd, b".", 0x2 | 0x100 | 0x8) >= 0  # MODIFY, CREATE, CLOSE_WRITE
subprocess.run(["sh", "-c", "echo new > made.txt"], check=True)
names = set()
while select.select([fd], [], [], 10)[0]:
    buf = os.read(fd, 4096)
    i = 0
    while i < len(buf):
        wd, mask, cookie, n = struct.unpack_from("iIII", buf, i)
        names.add(buf[i + 16:i + 16 + n].rstrip(b"\0").decode())
        i += 16 + n
    if "made.txt" in names:
        break
print(sorted(names))
"#;
    expect(script, "['made.txt']\n");
}
