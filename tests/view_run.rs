//! `fsgate run`: real commands through the filesystem view, as root (docs/run.md).
//! Each runs `fsgate run` on a fresh workspace, with its audit log and backups outside.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::view::{
    SYSTEM_PATH, ViewWs, finished, give_to_nobody, session_of, text, view_ws,
};
use crate::common::{DesktopFuse, bin, canonical_tempdir};

view_ws! {
    /// A workspace with `.env` (a secret), `a.txt` and `b.txt`, and a state dir beside it.
    Ws
}

const SECRET: &str = "hunter2-view-secret";

impl Ws {
    fn new() -> Ws {
        let ws = ViewWs::new("fsgate-view-ws", "fsgate-view-state");
        std::fs::write(ws.root.join(".env"), format!("TOKEN={SECRET}\n")).expect("write");
        std::fs::write(ws.root.join("a.txt"), "hello\n").expect("write");
        std::fs::write(ws.root.join("b.txt"), "keep\n").expect("write");
        Ws(ws)
    }

    /// `fsgate run ... -- COMMAND` in the workspace; its output.
    fn run(&self, command: &[&str]) -> Output {
        let mut cmd = self.fsgate_run();
        cmd.arg("--").args(command);
        finished(cmd)
    }

    /// `sh -c SCRIPT` through the view.
    fn sh(&self, script: &str) -> Output {
        self.run(&["sh", "-c", script])
    }

    /// `python3 -c SCRIPT` through the view, under the default policy with 12 MiB files
    /// for processes ([`small_files_policy`](crate::common::view::small_files_policy)).
    fn python_with_small_files(&self, script: &str) -> Output {
        let policy = crate::common::view::small_files_policy(&self.state);
        let mut cmd = self.fsgate_run();
        cmd.arg("--policy")
            .arg(&policy)
            .args(["--", "python3", "-c", script]);
        finished(cmd)
    }
}

#[test]
fn view_a_hidden_secret_does_not_exist_and_an_allowed_file_reads() {
    let ws = Ws::new();
    let out =
        ws.sh("cat .env; echo cat=$?; ls -a; cat a.txt; df -P . | tail -n 1 | grep -c fsgate");
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("cat=1"), "{stdout}");
    assert!(
        stderr.contains(".env: No such file or directory"),
        "{stderr}"
    );
    assert!(!stdout.contains(SECRET) && !stderr.contains(SECRET));
    let names: Vec<&str> = stdout.lines().collect();
    assert!(
        names.contains(&"a.txt") && names.contains(&"b.txt"),
        "{stdout}"
    );
    assert!(!names.contains(&".env"), "ls -a shows the secret: {stdout}");
    assert!(stdout.contains("hello"), "{stdout}");
    // df answers for the view (the workspace's own filesystem's figures).
    assert!(stdout.ends_with("1\n"), "{stdout}");
    // What the command saw and what it did, said on stderr at start and end.
    assert!(stderr.contains("through fsgate's view"), "{stderr}");
    assert!(stderr.contains("1 refused"), "{stderr}");
    let log = std::fs::read_to_string(ws.log()).expect("log");
    assert!(!log.contains(SECRET));
}

#[test]
fn view_a_new_file_is_a_recorded_change_naming_the_process() {
    let ws = Ws::new();
    let out = ws.sh("echo hi > notes.txt");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(ws.root.join("notes.txt")).expect("notes"),
        "hi\n"
    );
    let session = session_of(&out);
    let writes: Vec<Value> = ws
        .records()
        .into_iter()
        .filter(|r| r["op"] == "write_text_file" && r["path"] == "notes.txt")
        .filter(|r| r["session"] == session.as_str())
        .collect();
    assert!(
        writes.iter().any(|r| r["outcome"] == "ok"),
        "no write record: {writes:?}"
    );
    // Recorded ahead (an intent) and naming the process that asked.
    assert!(writes.iter().any(|r| r["kind"] == "intent"), "{writes:?}");
    let peer = writes[0]["peer"].as_str().expect("peer");
    assert!(
        peer.starts_with("pid ") && peer.contains(" ppid "),
        "{peer}"
    );
    assert!(
        peer.contains(r#"comm "sh""#) || peer.contains(r#"exe ""#),
        "{peer}"
    );
    assert!(
        peer.contains(r#"argv ["sh","-c","echo hi > notes.txt"]"#),
        "{peer}"
    );
    assert_eq!(writes[0]["transport"], "view");
}

#[test]
fn view_a_write_of_secret_content_fails_at_close_and_the_file_keeps_its_content() {
    let ws = Ws::new();
    let key = ["AKIA", "UJZDEGXDNCF32EPF"].concat();
    // The key is put together by the script: its argv (recorded) does not hold it.
    let script = "import errno\nf = open('b.txt', 'w')\nf.write('key = ' + 'AKIA' + 'UJZDEGXDNCF32EPF' + '\\n')\ntry:\n    f.close()\n    print('closed')\nexcept OSError as e:\n    print('refused', e.errno == errno.EACCES)\n";
    let out = ws.run(&["python3", "-c", script]);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("refused True"),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(ws.root.join("b.txt")).expect("b"),
        "keep\n"
    );
    let log = std::fs::read_to_string(ws.log()).expect("log");
    assert!(!log.contains(&key), "the refused content reached the log");
    assert!(
        text(&out.stderr).contains("1 refused"),
        "{}",
        text(&out.stderr)
    );
}

/// Secret content kept as UTF-16 (PowerShell's default) is found as in UTF-8: a file
/// holding it is not read, and a write of it fails at close, the file kept as it was.
#[test]
fn view_secret_content_in_utf16_is_refused_on_read_and_on_write() {
    let ws = Ws::new();
    let key = ["AKIA", "UJZDEGXDNCF32EPF"].concat();
    let utf16: Vec<u8> = [0xFF, 0xFE]
        .into_iter()
        .chain(
            format!("$env:KEY = \"{key}\"\r\n")
                .encode_utf16()
                .flat_map(u16::to_le_bytes),
        )
        .collect();
    std::fs::write(ws.root.join("deploy.ps1"), &utf16).expect("seed");
    let script = "import errno\n\
        def tried(f):\n    try:\n        f()\n        return 'done'\n    except OSError as e:\n        return errno.errorcode[e.errno]\n\
        print('read', tried(lambda: open('deploy.ps1', 'rb').read()))\n\
        f = open('b.txt', 'w', encoding='utf-16-be')\n\
        f.write('key = ' + 'AKIA' + 'UJZDEGXDNCF32EPF' + '\\n')\n\
        print('close', tried(f.close))\n";
    let out = ws.run(&["python3", "-c", script]);
    assert_eq!(
        text(&out.stdout),
        "read EACCES\nclose EACCES\n",
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(ws.root.join("b.txt")).expect("b"),
        "keep\n"
    );
    assert_eq!(
        std::fs::read(ws.root.join("deploy.ps1")).expect("ps1"),
        utf16
    );
}

#[test]
fn view_a_write_past_the_write_limit_fails_changes_nothing_and_is_recorded() {
    let ws = Ws::new();
    // Past the process limit (here 12 MiB): by writes through an open file, by a
    // truncation of an open file, and by a truncation of a path (no open file: nothing
    // of its size may be held in memory).
    let script = "import errno, os\n\
        def refused(f):\n    try:\n        f()\n        return 'done'\n    except OSError as e:\n        return 'efbig' if e.errno == errno.EFBIG else str(e)\n\
        f = open('b.txt', 'w')\n\
        print('write', refused(lambda: f.write('A' * 13_000_000) and f.flush()))\n\
        print('close', refused(f.close))\n\
        g = open('a.txt', 'r+')\n\
        print('ftruncate', refused(lambda: os.ftruncate(g.fileno(), 3 << 30)))\n\
        print('close', refused(g.close))\n\
        print('truncate', refused(lambda: os.truncate('a.txt', 3 << 30)))\n";
    let out = ws.python_with_small_files(script);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(
        stdout, "write efbig\nclose efbig\nftruncate efbig\nclose efbig\ntruncate efbig\n",
        "{stderr}"
    );
    // The first 12 MiB written are not applied either.
    let read = |name: &str| std::fs::read_to_string(ws.root.join(name)).expect("read");
    assert_eq!(
        (read("b.txt"), read("a.txt")),
        ("keep\n".into(), "hello\n".into())
    );
    let refusals: Vec<Value> = (ws.records().into_iter())
        .filter(|r| r["decision"] == "deny" && r["rule"] == "limits.max_process_file_bytes")
        .collect();
    let paths: Vec<&str> = refusals.iter().filter_map(|r| r["path"].as_str()).collect();
    assert_eq!(paths, ["b.txt", "a.txt", "a.txt"], "{refusals:?}");
    assert!(stderr.contains("0 changes, 3 refused"), "{stderr}");
    assert!(
        stderr.contains(
            "fsgate: 3 of the 3 refusals were past a size limit of the policy (limits.max_process_file_bytes 12 MiB: 3)"
        ),
        "{stderr}"
    );
}

/// Under the default policy a process writes and reads back a file past the limits that
/// bound what reaches a model (10 MiB), as a recorded change, and the end line names no
/// size limit; replacing a file past the backup's own limit (64 MiB) is refused, and
/// the end line names that limit.
#[test]
fn view_the_default_lets_a_process_write_and_read_a_file_past_the_models_limits() {
    let ws = Ws::new();
    let out = ws.sh_under(
        None,
        "head -c 20000000 /dev/zero | tr '\\0' 'x' > big.txt && wc -c < big.txt",
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stdout.trim(), "20000000", "{stderr}");
    assert_eq!(
        std::fs::metadata(ws.root.join("big.txt"))
            .expect("big.txt")
            .len(),
        20_000_000
    );
    let written = (ws.records().into_iter()).any(|r| {
        r["kind"] == "request"
            && r["path"] == "big.txt"
            && r["op"] == "write_text_file"
            && r["outcome"] == "ok"
            && r["bytes"] == 20_000_000
    });
    assert!(written, "the large write is not recorded");
    assert!(!stderr.contains("size limit"), "{stderr}");
    // Replacing a file past the backup's own limit (64 MiB) is refused, and said so.
    let huge = ws.root.join("huge.bin");
    std::fs::write(&huge, vec![b'h'; 65 << 20]).expect("huge.bin");
    // The shell's `>` meets it at the close, which a shell does not report.
    let out = ws.sh_under(None, "echo small > huge.bin");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("refusals were past a size limit of the policy (backup.max_file_bytes: "),
        "{stderr}"
    );
    assert_eq!(std::fs::metadata(&huge).expect("huge").len(), 65 << 20);
}

/// A file past the process limit (here 12 MiB) cannot be opened (EFBIG), and the end
/// line says which limit refused it; past the model's limits (10 MiB) but within it, a
/// file is read, written and truncated (by path).
#[test]
fn view_a_file_past_the_process_limit_is_refused_and_the_limit_named() {
    let ws = Ws::new();
    std::fs::write(ws.root.join("big.txt"), vec![b'x'; 13 << 20]).expect("big.txt");
    std::fs::write(ws.root.join("mid.txt"), vec![b'x'; 11 << 20]).expect("mid.txt");
    let policy = crate::common::view::small_files_policy(&ws.state);
    let out = ws.sh_under(
        Some(&policy),
        "cat big.txt > /dev/null; echo cat=$?; cat mid.txt > copy.txt; truncate -s 11600000 mid.txt; \
         truncate -s 11700000 copy.txt; wc -c mid.txt copy.txt | head -n 2",
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(
        stdout, "cat=1\n11600000 mid.txt\n11700000 copy.txt\n",
        "{stderr}"
    );
    assert!(stderr.contains("File too large"), "{stderr}");
    assert!(
        stderr.contains("fsgate: 1 of the 1 refusals were past a size limit of the policy (limits.max_process_file_bytes 12 MiB: 1)"),
        "{stderr}"
    );
}

#[test]
fn view_a_name_that_is_not_utf8_is_refused_with_eilseq_and_recorded() {
    use std::os::unix::ffi::OsStrExt;
    let ws = Ws::new();
    let latin1 = std::ffi::OsStr::from_bytes(b"caf\xe9.txt");
    std::fs::write(ws.root.join(latin1), "x").expect("write");
    let script = "import os\n\
        for f in (lambda: open(b'caf\\xe9.txt').read(), lambda: open(b'new\\xfe.txt', 'wb'), lambda: os.mkdir(b'n\\xfe')):\n\
        \x20   try:\n        f()\n        print('done')\n    except OSError as e:\n        print(e.errno)\n\
        print(sorted(os.listdir('.')))\n";
    let out = ws.run(&["python3", "-c", script]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    // EILSEQ, not "no such file": the name exists, fsgate cannot name it.
    assert_eq!(stdout, "84\n84\n84\n['a.txt', 'b.txt']\n", "{stderr}");
    let refusals: Vec<Value> = (ws.records().into_iter())
        .filter(|r| r["rule"] == "workspace-name-encoding")
        .collect();
    assert_eq!(refusals.len(), 3, "{refusals:?}");
    assert!(
        refusals.iter().all(|r| r["decision"] == "deny"),
        "{refusals:?}"
    );
    assert!(stderr.contains("3 refused"), "{stderr}");
    assert!(
        !ws.root
            .join(std::ffi::OsStr::from_bytes(b"new\xfe.txt"))
            .exists()
    );
}

#[test]
fn view_a_removal_is_backed_up_and_undone_by_the_runs_session() {
    let ws = Ws::new();
    let out = ws.sh("rm a.txt && echo removed");
    assert!(
        text(&out.stdout).contains("removed"),
        "{}",
        text(&out.stderr)
    );
    assert!(!ws.root.join("a.txt").exists());
    let session = session_of(&out);
    let mut undo = Command::new(bin());
    undo.arg("undo")
        .args(ws.state_args())
        .args(["--session", &session]);
    let undone = finished(undo);
    assert!(undone.status.success(), "{}", text(&undone.stderr));
    assert_eq!(
        std::fs::read_to_string(ws.root.join("a.txt")).expect("a"),
        "hello\n"
    );
}

#[test]
fn view_undo_of_an_atomic_save_leaves_a_file_edited_by_hand_since() {
    // An editor's save: a new file renamed over a.txt.
    undo_of_a_save_leaves_a_hand_edit("echo agent > a.tmp && mv a.tmp a.txt && echo saved");
}

/// The same with the new file's mode and times set before the rename (`mkstemp`,
/// `chmod`, `os.replace`): the session's own changes of modes and times do not hide
/// what the rename moved.
#[test]
fn view_undo_of_a_save_with_chmod_and_touch_leaves_a_file_edited_by_hand_since() {
    undo_of_a_save_leaves_a_hand_edit(
        "echo agent > a.tmp && chmod 640 a.tmp && touch -d 2020-01-01 a.tmp \
         && mv a.tmp a.txt && echo saved",
    );
}

/// `save` (a `sh` script) replaces a.txt through a.tmp; a.txt is then edited by hand:
/// undoing the session leaves the edit (exit 1), `--force` puts the start back.
fn undo_of_a_save_leaves_a_hand_edit(save: &str) {
    let ws = Ws::new();
    let out = ws.sh(save);
    assert!(text(&out.stdout).contains("saved"), "{}", text(&out.stderr));
    let session = session_of(&out);
    std::fs::write(ws.root.join("a.txt"), "edited by hand\n").expect("write");
    let mut undo = Command::new(bin());
    undo.arg("undo")
        .args(ws.state_args())
        .args(["--session", &session]);
    let undone = finished(undo);
    let report = text(&undone.stdout);
    assert_eq!(
        undone.status.code(),
        Some(1),
        "{report}{}",
        text(&undone.stderr)
    );
    assert!(report.contains("a.txt was changed since"), "{report}");
    assert_eq!(
        std::fs::read_to_string(ws.root.join("a.txt")).expect("a"),
        "edited by hand\n"
    );
    assert!(!ws.root.join("a.tmp").exists(), "{report}");
    // Left alone unless forced: --force puts the session's start back.
    let mut forced = Command::new(bin());
    forced
        .arg("undo")
        .args(ws.state_args())
        .args(["--session", &session, "--force"]);
    let out = finished(forced);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(ws.root.join("a.txt")).expect("a"),
        "hello\n"
    );
}

#[test]
fn view_files_made_again_by_undo_get_back_their_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let ws = Ws::new();
    let mode = |name: &str| {
        std::fs::metadata(ws.root.join(name))
            .expect("stat")
            .permissions()
            .mode()
            & 0o777
    };
    std::fs::create_dir(ws.root.join("d")).expect("mkdir");
    let files = [
        ("private.txt", 0o600),
        ("run.sh", 0o750),
        ("d/f", 0o640),
        ("key.txt", 0o600),
    ];
    for (name, m) in files {
        std::fs::write(ws.root.join(name), name).expect("write");
        std::fs::set_permissions(ws.root.join(name), std::fs::Permissions::from_mode(m))
            .expect("chmod");
    }
    // Removed, and replaced by a rename (an editor's save): each comes back.
    let out = ws.sh("rm private.txt run.sh a.txt && rm -r d && echo new > tmp && mv tmp key.txt && echo removed");
    assert!(
        text(&out.stdout).contains("removed"),
        "{}",
        text(&out.stderr)
    );
    let session = session_of(&out);
    let mut undo = Command::new(bin());
    undo.arg("undo")
        .args(ws.state_args())
        .args(["--session", &session]);
    let undone = finished(undo);
    assert!(undone.status.success(), "{}", text(&undone.stderr));
    // Before, each came back 0644: a 0600 file readable by everyone, a script not
    // runnable.
    let modes: Vec<u32> = ["private.txt", "run.sh", "d/f", "a.txt", "key.txt"]
        .map(mode)
        .to_vec();
    assert_eq!(
        modes,
        [0o600, 0o750, 0o640, 0o644, 0o600],
        "{modes:?} (decimal)"
    );
    assert_eq!(
        std::fs::read_to_string(ws.root.join("key.txt")).expect("key"),
        "key.txt"
    );
    assert!(!ws.root.join("tmp").exists());
    assert_eq!(
        std::fs::read_to_string(ws.root.join("d/f")).expect("f"),
        "d/f"
    );
}

/// `renameat2(RENAME_NOREPLACE)` (as `mv -n` asks for it): an existing destination is
/// kept and the process gets EEXIST; a free name is taken through the gateway's
/// no-replace rename, not refused with EINVAL (which makes `mv` fall back to a check
/// and a rename, racing any other writer).
#[test]
fn view_a_no_replace_rename_keeps_an_existing_destination() {
    let ws = Ws::new();
    let noreplace = "import ctypes; libc = ctypes.CDLL(None, use_errno=True); \
        r = libc.renameat2(-100, b'a.txt', -100, b'b.txt', 1); \
        print('renameat2', r, ctypes.get_errno())";
    let out = ws.run(&["python3", "-c", noreplace]);
    assert_eq!(
        text(&out.stdout).trim(),
        "renameat2 -1 17",
        "{}",
        text(&out.stderr)
    );
    let out = ws.sh("mv -n a.txt c.txt && echo moved");
    assert!(text(&out.stdout).contains("moved"), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(ws.root.join("b.txt")).expect("b"),
        "keep\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.root.join("c.txt")).expect("c"),
        "hello\n"
    );
    let renames: Vec<Value> = ws
        .records()
        .into_iter()
        .filter(|r| r["op"] == "rename" && r["kind"] == "request")
        .collect();
    // The kernel refuses a no-replace rename onto a name it knows before asking the
    // view; the move to a free name reaches the gateway as a no-replace rename.
    let moved = renames
        .iter()
        .any(|r| r["args"]["replace"] == false && r["decision"] == "allow");
    assert!(moved, "rename records: {renames:?}");
}

#[test]
fn view_the_commands_exit_status_is_fsgates_and_it_cannot_unmount_the_view() {
    let ws = Ws::new();
    let out = ws.sh("umount \"$PWD\" 2>/dev/null; echo umount=$?; \
         grep -c fuse.fsgate /proc/self/mountinfo; \
         gw=$(cut -d' ' -f4 /proc/$PPID/stat); \
         echo gateway=$(grep -c fuse.fsgate /proc/$gw/mountinfo); \
         cat .env 2>/dev/null; exit 7");
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(7),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    assert!(!stdout.contains("umount=0"), "{stdout}");
    assert!(!stdout.contains(SECRET), "{stdout}");
    let mut lines = stdout.lines().skip(1);
    assert_eq!(
        lines.next(),
        Some("1"),
        "the view is mounted once: {stdout}"
    );
    assert_eq!(
        lines.next(),
        Some("gateway=0"),
        "the gateway sees no view: {stdout}"
    );
}

#[test]
fn view_python_runs_a_test_that_reads_and_writes() {
    let ws = Ws::new();
    std::fs::write(
        ws.root.join("test_app.py"),
        "import unittest\n\nclass T(unittest.TestCase):\n    def test_reads_and_writes(self):\n        with open('a.txt') as f:\n            self.assertEqual(f.read(), 'hello\\n')\n        with open('result.txt', 'w') as f:\n            f.write('passed\\n')\n        with open('result.txt') as f:\n            self.assertEqual(f.read(), 'passed\\n')\n\nunittest.main()\n",
    )
    .expect("write");
    let out = ws.run(&["python3", "test_app.py"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(ws.root.join("result.txt")).expect("result"),
        "passed\n"
    );
}

#[test]
fn view_git_init_add_and_commit_work_where_the_policy_lets_git_in() {
    let ws = Ws::new();
    // The default policy hides .git; this one names only dotenv files as secrets.
    let default = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/default.toml"),
    )
    .expect("default policy");
    let (start, end) = (
        default.find("\n[secrets]\n").expect("[secrets]"),
        default.find("\n[limits]\n").expect("[limits]"),
    );
    let policy = format!(
        "{}\n[secrets]\nbuiltin = false\npatterns = [{{ id = \"dotenv\", regex = '^\\.env' }}]\n{}",
        &default[..start],
        &default[end..]
    );
    let policy_file = ws.state.join("git.toml");
    std::fs::write(&policy_file, policy).expect("policy");
    let mut cmd = Command::new(bin());
    cmd.arg("run")
        .args(ws.state_args())
        .arg("--policy")
        .arg(&policy_file)
        .args(["--", "sh", "-c"])
        // The wall passes no variable of ours: the identity is set inside.
        .arg(
            "export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@example.com \
             GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@example.com && \
             git init -q . && git add a.txt && git commit -qm first && \
             echo more >> a.txt && git commit -qam second && git status --short && \
             git log --format=%s",
        )
        .current_dir(&ws.root);
    let out = finished(cmd);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    // b.txt untracked; .env never seen, so never listed.
    assert_eq!(stdout, "?? b.txt\nsecond\nfirst\n", "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(ws.root.join("a.txt")).expect("a"),
        "hello\nmore\n"
    );
}

/// Without /dev/fuse (hidden by an empty /dev in a mount namespace of the test's own),
/// fsgate says what is missing and the command is never run.
/// fsgate's own failures exit 125, a program not found 127 and one not runnable 126 (as
/// env(1) and a shell say them), walled in or not; the command's own 2 stays 2.
#[test]
fn view_fsgates_own_failures_are_told_from_the_commands_exit_status() {
    use std::os::unix::fs::PermissionsExt;
    let ws = Ws::new();
    let (_outside, outside) = canonical_tempdir("fsgate-view-notexec");
    let not_runnable = outside.join("tool");
    std::fs::write(&not_runnable, "#!/bin/sh\ntouch ran\n").expect("write");
    let not_runnable = not_runnable.to_string_lossy().into_owned();
    let bad_interpreter = outside.join("script");
    std::fs::write(&bad_interpreter, "#!/nonexistent/interpreter\ntouch ran\n").expect("write");
    std::fs::set_permissions(&bad_interpreter, std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    let bad_interpreter = bad_interpreter.to_string_lossy().into_owned();
    let status = |front: &[&str], back: &[&str]| {
        let mut cmd = Command::new(bin());
        cmd.arg("run")
            .args(front)
            .args(ws.state_args())
            .arg("--")
            .args(back)
            .env("PATH", SYSTEM_PATH)
            .env("XDG_STATE_HOME", ws.xdg_state())
            .current_dir(&ws.root);
        let out = finished(cmd);
        (out.status.code(), text(&out.stderr))
    };
    let cases: [(&[&str], &[&str], i32); 11] = [
        (&[], &["sh", "-c", "exit 2"], 2),
        (&["--policy", "/nonexistent/policy.toml"], &["true"], 125),
        (&["--bogus-option"], &["true"], 125),
        (&[], &["fsgate-no-such-program"], 127),
        (&["--no-confine"], &["fsgate-no-such-program"], 127),
        (&[], &[&not_runnable], 126),
        (&["--no-confine"], &[&not_runnable], 126),
        (&[], &["./fsgate-no-such-file"], 127),
        (&["--no-confine"], &["./fsgate-no-such-file"], 127),
        (&[], &[&bad_interpreter], 127),
        (&["--no-confine"], &[&bad_interpreter], 127),
    ];
    for (front, back, want) in cases {
        let records = || match ws.log().exists() {
            true => ws.records(),
            false => Vec::new(),
        };
        let before = records().len();
        let (code, stderr) = status(front, back);
        assert_eq!(code, Some(want), "{front:?} -- {back:?}: {stderr}");
        let walled = !front.contains(&"--no-confine");
        ends_with_its_stop(&records()[before..], want, walled, &stderr);
    }
    assert!(!ws.root.join("ran").exists(), "the file without x ran");
    let mut cmd = Command::new(bin());
    cmd.args(["run", "--workspace", "/nonexistent/ws", "--", "true"]);
    let out = finished(cmd);
    assert_eq!(out.status.code(), Some(125), "{}", text(&out.stderr));
}

/// Each run that opened the log closed it with a `stop`, so that a reviewer does not
/// read a crash. A program the wall could not resolve was never started: that `stop`
/// says `start failed` and the error. One that `--no-confine` started and that could
/// not run ended as a command does. A failure before the log was opened (125 here)
/// wrote nothing.
fn ends_with_its_stop(written: &[Value], want: i32, walled: bool, stderr: &str) {
    if want == 125 {
        assert!(written.is_empty(), "{written:?}");
        return;
    }
    let kinds: Vec<&str> = written.iter().filter_map(|r| r["kind"].as_str()).collect();
    assert_eq!(kinds.first(), Some(&"start"), "{kinds:?}");
    let Some(stop) = written.last().filter(|r| r["kind"] == "stop") else {
        panic!("no stop last: {kinds:?}\n{stderr}");
    };
    if want == 2 || !walled {
        assert_eq!(stop["details"]["reason"], "command ended", "{stop}");
        assert_eq!(stop["details"]["exitStatus"], want, "{stop}");
        return;
    }
    assert_eq!(stop["details"]["reason"], "start failed", "{stop}");
    let error = stop["details"]["error"].as_str().unwrap_or_default();
    let named = ["fsgate-no-such", "tool", "script"];
    assert!(named.iter().any(|n| error.contains(n)), "{stop}");
}

/// A command that ends at once, run from outside the workspace (so it never waits for
/// the view), is reported as run, with its own status, even with several runs at once
/// keeping the machine busy: it was sometimes taken for a view that could not be
/// mounted (exit 125, "the command was not run", no `stop` record).
#[test]
fn view_a_command_that_ends_at_once_is_never_taken_for_a_view_not_mounted() {
    let (_cwd_dir, cwd) = canonical_tempdir("fsgate-view-elsewhere");
    let workspaces: Vec<Ws> = (0..6).map(|_| Ws::new()).collect();
    let failures: Vec<String> = std::thread::scope(|s| {
        let runs: Vec<_> = (workspaces.iter())
            .map(|ws| {
                let cwd = &cwd;
                s.spawn(move || {
                    (0..12)
                        .filter_map(|_| {
                            let mut cmd = ws.fsgate_run();
                            cmd.current_dir(cwd).args(["--", "sh", "-c", "exit 3"]);
                            let out = finished(cmd);
                            let stderr = text(&out.stderr);
                            (out.status.code() != Some(3) || stderr.contains("not run"))
                                .then(|| format!("{:?}: {stderr}", out.status.code()))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        runs.into_iter()
            .flat_map(|r| r.join().expect("thread"))
            .collect()
    });
    assert!(
        failures.is_empty(),
        "{} of 72 runs: {failures:#?}",
        failures.len()
    );
}

#[test]
fn view_without_dev_fuse_the_command_is_not_run() {
    let ws = Ws::new();
    let marker = ws.root.join("ran");
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(r#"mount -t tmpfs none /dev && exec "$@""#)
        .arg("sh")
        .arg(bin())
        .arg("run")
        .args(ws.state_args())
        .args(["--", "touch"])
        .arg(&marker)
        .current_dir(&ws.root);
    let out = finished(cmd);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(stderr.contains("cannot open /dev/fuse"), "{stderr}");
    assert!(stderr.contains("the command was not run"), "{stderr}");
    assert!(!marker.exists(), "the command ran without the view");
}

/// SIGTERM to fsgate reaches the command, whose exit status is fsgate's.
#[test]
fn view_a_signal_to_fsgate_reaches_the_command() {
    use std::io::BufRead;
    let ws = Ws::new();
    let mut cmd = Command::new(bin());
    cmd.arg("run")
        .args(ws.state_args())
        .args(["--", "sh", "-c"])
        .arg("trap 'echo got; exit 3' TERM; echo ready; while :; do sleep 0.05; done")
        .current_dir(&ws.root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().expect("spawn");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let ready = rx.recv_timeout(Duration::from_secs(30));
    if ready.as_deref() != Ok("ready") {
        let _ = child.kill();
        panic!("the command did not start: {ready:?}");
    }
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("fsgate run did not end after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(3));
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(5)).as_deref(),
        Ok("got")
    );
}

/// The gateway's own view of the filesystem is out of the command's reach: its working
/// directory, its root and its descriptors under /proc lead to the real workspace, and
/// the command holds no right to follow them (it may list the descriptors' numbers).
#[test]
fn view_the_command_cannot_reach_the_real_directory_through_the_gateways_proc() {
    let ws = Ws::new();
    // Unwalled: the wall would refuse the real directory anyway; what is tested is
    // that the gateway's /proc entries lead nowhere by themselves.
    // The command's parent is fsgate's child in the view; the gateway is its parent.
    let out = ws.sh_unwalled(
        None,
        "gw=$(cut -d' ' -f4 /proc/$PPID/stat); \
         cat /proc/$gw/cwd/.env; echo cwd=$?; \
         cat \"/proc/$gw/root$PWD/.env\"; echo root=$?; \
         echo fds=$(ls /proc/$gw/fd | wc -l); n=0; \
         for f in /proc/$gw/fd/*; do \
           ls \"$f/\" >/dev/null 2>&1 && n=$((n+1)); cat \"$f/.env\" 2>/dev/null; \
         done; echo followed=$n",
    );
    let stdout = text(&out.stdout);
    let err = text(&out.stderr);
    assert!(!stdout.contains(SECRET), "{stdout}");
    for probe in ["cwd", "root"] {
        assert!(
            stdout.contains(&format!("{probe}=")) && !stdout.contains(&format!("{probe}=0")),
            "{probe}: {stdout}\n{err}"
        );
    }
    assert!(
        !stdout.contains("fds=0") && stdout.contains("fds="),
        "{stdout}\n{err}"
    );
    assert!(stdout.contains("followed=0"), "{stdout}\n{err}");
}

/// A file open for reading answers `fstat` after it was removed (as on any filesystem).
#[test]
fn view_an_open_file_answers_fstat_after_its_removal() {
    let ws = Ws::new();
    let script = "import os\nf = open('a.txt')\nos.remove('a.txt')\nprint('size', os.fstat(f.fileno()).st_size)\nprint(f.read(), end='')\n";
    let out = ws.run(&["python3", "-c", script]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert_eq!(stdout, "size 6\nhello\n");
}

/// A file that loses its name while a process still writes it (removed, or renamed
/// over by another's atomic save) takes that process's later writes nowhere, as on a
/// disk: the removed file stays removed, an unnamed scratch file (Python's
/// `TemporaryFile`, made and removed at once) leaves nothing, and the save is kept.
#[test]
fn view_writes_to_a_file_that_lost_its_name_go_nowhere() {
    let ws = Ws::new();
    std::fs::write(ws.root.join("b.txt"), "keep\n").expect("write");
    let script = "import os, tempfile\n\
        fd = os.open('c.txt', os.O_CREAT | os.O_WRONLY)\n\
        os.write(fd, b'hello'); os.unlink('c.txt'); os.write(fd, b' world'); os.close(fd)\n\
        f = tempfile.TemporaryFile(dir='.'); f.write(b'scratch'); f.seek(0)\n\
        print(f.read().decode()); f.close()\n\
        fd = os.open('b.txt', os.O_WRONLY | os.O_APPEND); os.write(fd, b'late\\n')\n\
        open('n.tmp', 'w').write('saved\\n'); os.rename('n.tmp', 'b.txt')\n\
        os.fchmod(fd, 0o600); os.utime(fd, (7, 7)); os.ftruncate(fd, 2)\n\
        print(os.fstat(fd).st_size, os.fstat(fd).st_nlink); os.close(fd)\n\
        print(sorted(n for n in os.listdir('.') if not n.startswith('.')), open('b.txt').read(), end='')\n";
    let out = ws.run(&["python3", "-c", script]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert_eq!(stdout, "scratch\n2 0\n['a.txt', 'b.txt'] saved\n");
    let mut left: Vec<String> = std::fs::read_dir(&ws.root)
        .expect("ls")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| !n.starts_with('.'))
        .collect();
    left.sort();
    assert_eq!(left, ["a.txt", "b.txt"]);
    assert_eq!(
        std::fs::read_to_string(ws.root.join("b.txt")).expect("b"),
        "saved\n"
    );
    // Nor did the old file's chmod and utime reach the file saved over it.
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let saved = std::fs::metadata(ws.root.join("b.txt")).expect("b");
    assert_ne!(saved.permissions().mode() & 0o777, 0o600);
    assert_ne!(saved.mtime(), 7);
}

/// A process the command left running ends with it: the run ends, and the view with it.
#[test]
fn view_the_commands_tree_ends_with_it() {
    let ws = Ws::new();
    let marker = ws.state.join("left-behind");
    let script = format!(
        "(sleep 3; touch {}) & echo started",
        marker.to_string_lossy()
    );
    let started = Instant::now();
    let out = ws.sh(&script);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the run waited for the orphan"
    );
    std::thread::sleep(Duration::from_secs(4));
    assert!(
        !marker.exists(),
        "a process of the tree outlived the command"
    );
}

/// A version of a file found clean is not scanned again: opened twice, the second
/// open's record says it was remembered; changed, it is scanned again.
#[test]
fn view_a_clean_version_is_scanned_once() {
    let ws = Ws::new();
    let out = ws.sh("cat a.txt a.txt >/dev/null; echo changed > a.txt; cat a.txt");
    assert!(out.status.success(), "{}", text(&out.stderr));
    // Each `cat`'s opens for reading, from its coalesced `reads` record:
    // `[path, count, bytes, sha256, remembered]`.
    let opens: Vec<Value> = ws
        .records()
        .into_iter()
        .filter(|r| r["op"] == "reads")
        .flat_map(|r| {
            r["details"]["reads"]["open"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|e| e[0] == "a.txt")
        .collect();
    // The first cat opened it twice and scanned it once; `>` truncates (the write
    // reads nothing); the changed file is scanned again.
    assert_eq!(opens.len(), 2, "{opens:?}");
    assert_eq!(
        (&opens[0][1], &opens[0][4]),
        (&2.into(), &1.into()),
        "{opens:?}"
    );
    assert_eq!(
        (&opens[1][1], &opens[1][4]),
        (&1.into(), &0.into()),
        "{opens:?}"
    );
    assert!(opens.iter().all(|e| e[3].is_string()), "{opens:?}");
    assert_ne!(opens[1][3], opens[0][3], "{opens:?}");
    assert_eq!(opens[1][2], 8, "{opens:?}");
}

/// fsgate's own files outside the workspace are covered in the command's namespace: the
/// audit log, the backups, the policy and the base it extends read as nothing there,
/// and a write to the base reaches only its cover (a command that rewrote it would
/// loosen the next run's policy).
#[test]
fn view_the_command_cannot_read_the_audit_log_backups_or_policy() {
    let ws = Ws::new();
    let (_policy_dir, elsewhere) = canonical_tempdir("fsgate-view-policy");
    let (_base_dir, base_dir) = canonical_tempdir("fsgate-view-base");
    let policy = elsewhere.join("policy.toml");
    let base = base_dir.join("base.toml");
    let default = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/default.toml");
    std::fs::copy(default, &base).expect("base");
    let child = format!("version = 1\nextends = {:?}\n", base.display().to_string());
    std::fs::write(&policy, child).expect("policy");
    let base_before = std::fs::read(&base).expect("base");
    // A first run leaves a record and a backup (b.txt replaced).
    let first = ws.sh("echo new > b.txt");
    assert!(first.status.success(), "{}", text(&first.stderr));
    let (log, backups) = (ws.log(), ws.state.join("backups"));
    assert!(std::fs::read_dir(&backups).expect("backups").count() > 0);
    // Unwalled: the wall would refuse these paths anyway; what is tested is that they
    // are covered in the command's mount namespace.
    let mut cmd = Command::new(bin());
    cmd.arg("run")
        .args(ws.state_args())
        .arg("--no-confine")
        .arg("--policy")
        .arg(&policy)
        .args(["--", "sh", "-c"])
        .arg(format!(
            "cat {log}; echo log=$?; ls -A {backups} | wc -l; wc -c < {policy}; wc -c < {base}; echo 'builtin = false' >> {base} 2>/dev/null",
            log = log.display(),
            backups = backups.display(),
            policy = policy.display(),
            base = base.display()
        ))
        .current_dir(&ws.root);
    let out = finished(cmd);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert_eq!(stdout, "log=1\n0\n0\n0\n", "{}", text(&out.stderr));
    assert_eq!(std::fs::read(&base).expect("base"), base_before);
}

/// A truncation is in the file when the descriptor is closed: the next reader sees it.
#[test]
fn view_a_truncation_is_seen_once_closed() {
    let ws = Ws::new();
    let out = ws.sh(": > b.txt; echo size=$(wc -c < b.txt)");
    assert_eq!(text(&out.stdout), "size=0\n", "{}", text(&out.stderr));
    assert_eq!(std::fs::read(ws.root.join("b.txt")).expect("b").len(), 0);
}

/// With the audit log in the directory that holds the workspace, that directory is not
/// covered (the view could not be mounted in it): the log file itself is.
#[test]
fn view_an_audit_log_beside_the_workspace_is_covered_alone() {
    let (_dir, parent) = canonical_tempdir("fsgate-view-parent");
    let root = parent.join("ws");
    std::fs::create_dir(&root).expect("mkdir");
    std::fs::write(root.join("a.txt"), "hello\n").expect("write");
    let log = parent.join("audit.jsonl");
    let mut cmd = Command::new(bin());
    cmd.arg("run")
        .arg("--workspace")
        .arg(&root)
        .arg("--audit-log")
        .arg(&log)
        .arg("--backup-dir")
        .arg(parent.join("backups"))
        .args(["--", "sh", "-c"])
        .arg(format!("cat a.txt; wc -c < {}", log.display()))
        .current_dir(&root);
    let out = finished(cmd);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "hello\n0\n", "{}", text(&out.stderr));
}

/// Under a read-only policy, opening a file for writing fails at once (EACCES), and the
/// file is not changed.
#[test]
fn view_a_write_the_policy_refuses_fails_at_open() {
    let ws = Ws::new();
    let policy = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/readonly.toml");
    let script = "import errno\ntry:\n    open('b.txt', 'w')\n    print('opened')\nexcept OSError as e:\n    print('refused', e.errno == errno.EACCES)\n";
    let mut cmd = Command::new(bin());
    cmd.arg("run")
        .args(ws.state_args())
        .arg("--policy")
        .arg(&policy)
        .args(["--", "python3", "-c", script])
        .env("PATH", SYSTEM_PATH)
        .current_dir(&ws.root);
    let out = finished(cmd);
    assert_eq!(text(&out.stdout), "refused True\n", "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(ws.root.join("b.txt")).expect("b"),
        "keep\n"
    );
}

/// A user who is not root gets the same view, in a user namespace of the child's: the
/// secret hidden, changes made and recorded, the view not unmountable.
#[test]
fn view_a_user_who_is_not_root_gets_the_view_in_a_user_namespace() {
    let ws = Ws::new();
    give_to_nobody(&ws.root);
    give_to_nobody(&ws.state);
    let _fuse = DesktopFuse::ensure();
    let mut cmd = Command::new("setpriv");
    cmd.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        bin(),
        "run",
    ])
    .args(ws.state_args())
    .args(["--", "sh", "-c"])
    .arg(
        "cat .env; echo cat=$?; echo hi > n.txt; rm a.txt; \
             umount \"$PWD\" 2>/dev/null; echo um=$?; id -u",
    )
    .env("HOME", &ws.state)
    .current_dir(&ws.root);
    let out = finished(cmd);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.starts_with("cat=1\n"), "{stdout}");
    assert!(
        stdout.contains("um=") && !stdout.contains("um=0"),
        "{stdout}"
    );
    assert!(stdout.ends_with("65534\n"), "{stdout}");
    assert!(!stdout.contains(SECRET));
    assert_eq!(
        std::fs::read_to_string(ws.root.join("n.txt")).expect("n"),
        "hi\n"
    );
    assert!(!ws.root.join("a.txt").exists());
    let changes = ws
        .records()
        .into_iter()
        .filter(|r| r["kind"] == "request" && r["transport"] == "view")
        .filter(|r| r["op"] == "rm" && r["outcome"] == "ok")
        .count();
    assert_eq!(changes, 1);
}

/// `kill -9` of fsgate ends the command and every process it started.
#[test]
fn view_killing_fsgate_ends_the_commands_tree() {
    let ws = Ws::new();
    // Written through the view: the wall lets the command write nowhere else we can see.
    let pids = ws.root.join("pids");
    let mut cmd = Command::new(bin());
    cmd.arg("run")
        .args(ws.state_args())
        .args(["--", "sh", "-c"])
        .arg("sleep 60 & echo $$ $! > pids.tmp && mv pids.tmp pids; wait")
        .current_dir(&ws.root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut fsgate = cmd.spawn().expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(30);
    let tree: Vec<String> = loop {
        if let Ok(text) = std::fs::read_to_string(&pids) {
            break text.split_whitespace().map(str::to_owned).collect();
        }
        assert!(Instant::now() < deadline, "the command did not start");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(tree.len(), 2, "{tree:?}");
    fsgate.kill().expect("kill -9");
    let _ = fsgate.wait();
    let deadline = Instant::now() + Duration::from_secs(10);
    while tree
        .iter()
        .any(|p| Path::new(&format!("/proc/{p}")).exists())
    {
        assert!(
            Instant::now() < deadline,
            "the command's tree outlived fsgate: {tree:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Eight processes reading and writing at once through the view (the view serves on
/// several threads): every file is written whole and recorded.
#[test]
fn view_parallel_processes_read_and_write_at_once() {
    let ws = Ws::new();
    let out = ws.sh("for i in 1 2 3 4 5 6 7 8; do \
           (for j in 1 2 3 4 5 6 7 8 9 10; do \
              echo $i-$j > f$i-$j.txt && cat f$i-$j.txt >/dev/null && cat a.txt >/dev/null; \
            done) & \
         done; wait; cat f*.txt | sort | wc -l");
    assert_eq!(text(&out.stdout), "80\n", "{}", text(&out.stderr));
    for i in 1..=8 {
        for j in 1..=10 {
            let got = std::fs::read_to_string(ws.root.join(format!("f{i}-{j}.txt"))).expect("f");
            assert_eq!(got, format!("{i}-{j}\n"));
        }
    }
    let written = ws
        .records()
        .into_iter()
        .filter(|r| r["kind"] == "request" && r["op"] == "write_text_file")
        .filter(|r| r["outcome"] == "ok" && r["bytes"].as_u64().is_some_and(|b| b > 0))
        .count();
    assert_eq!(written, 80);
}

/// What a process writes is not seen by another that has the file open until it is
/// applied at close, nor ever if it is refused (the private copy bypasses the page cache
/// the file's readers share).
#[test]
fn view_a_reader_never_sees_a_write_before_it_is_applied() {
    let ws = Ws::new();
    std::fs::write(ws.root.join("c.txt"), "k".repeat(8192)).expect("write");
    let script = "import os\n\
        r = os.open('c.txt', os.O_RDONLY)\n\
        w = os.open('c.txt', os.O_RDWR)\n\
        os.pwrite(w, (b'key = AKIA' + b'UJZDEGXDNCF32EPF\\n').ljust(4096, b'x'), 0)\n\
        print('while', os.pread(r, 4, 0))\n\
        try:\n    os.close(w)\nexcept OSError as e:\n    print('close', e.errno)\n\
        print('after', os.pread(r, 4, 0))\n";
    let out = ws.run(&["python3", "-c", script]);
    assert_eq!(
        text(&out.stdout),
        "while b'kkkk'\nclose 13\nafter b'kkkk'\n",
        "{}",
        text(&out.stderr)
    );
}

/// Ctrl-C at the terminal reaches the command once: the terminal signals the whole
/// process group (fsgate, its child, the command), and fsgate passes on only what a
/// process sent it.
#[test]
fn view_ctrl_c_at_a_terminal_reaches_the_command_once() {
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    use std::io::{BufRead, Write};
    let ws = Ws::new();
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).expect("openpt");
    grantpt(&master).expect("grantpt");
    unlockpt(&master).expect("unlockpt");
    let name = ptsname(&master, Vec::new()).expect("ptsname");
    let slave = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(name.to_str().expect("utf-8"))
        .expect("open the terminal");
    let script = "import signal, time\n\
        n = [0]\n\
        signal.signal(signal.SIGINT, lambda *a: n.__setitem__(0, n[0] + 1))\n\
        print('ready', flush=True)\n\
        end = time.time() + 20\n\
        while n[0] == 0 and time.time() < end:\n    time.sleep(0.01)\n\
        time.sleep(0.5)\n\
        print('got', n[0], flush=True)\n";
    let mut child = Command::new("setsid")
        .args(["--ctty", bin(), "run"])
        .args(ws.state_args())
        .args(["--", "python3", "-c", script])
        .env("PATH", SYSTEM_PATH)
        .current_dir(&ws.root)
        .stdin(Stdio::from(slave))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let ready = lines.next().map(|l| l.unwrap_or_default());
    if ready.as_deref() != Some("ready") {
        let _ = child.kill();
        panic!("the command did not start: {ready:?}");
    }
    let mut terminal = std::fs::File::from(master);
    terminal.write_all(b"\x03").expect("^C");
    let got = lines.next().map(|l| l.unwrap_or_default());
    let _ = child.wait();
    assert_eq!(got.as_deref(), Some("got 1"));
}

/// The command starts with no signal blocked (fsgate and its child hold SIGINT, SIGTERM
/// and SIGHUP to read them; a program that inherited that mask could not be stopped).
#[test]
fn view_the_command_starts_with_no_signal_blocked() {
    let ws = Ws::new();
    let out = ws.run(&["grep", "SigBlk", "/proc/self/status"]);
    assert_eq!(
        text(&out.stdout),
        "SigBlk:\t0000000000000000\n",
        "{}",
        text(&out.stderr)
    );
}

/// A process that asked through the view and then became another program by `exec`
/// (same pid) is named as what it became: a shell's own lookup, then `exec cat .env`
/// at once. The name remembered for the pid named the shell for 250 ms.
#[test]
fn view_a_process_that_execs_is_named_as_what_it_became() {
    let ws = Ws::new();
    let out = ws.sh("test -e a.txt && exec cat .env");
    assert!(!out.status.success(), "{}", text(&out.stderr));
    let refused: Vec<Value> = ws
        .records()
        .into_iter()
        .filter(|r| r["op"] == "stat" && r["path"] == ".env" && r["decision"] == "deny")
        .collect();
    assert!(!refused.is_empty(), "no refusal of .env");
    for r in &refused {
        let peer = r["peer"].as_str().unwrap_or_default();
        assert!(peer.contains(r#"argv ["cat",".env"]"#), "{peer}");
    }
}

/// What the kernel caches (names, attributes, pages kept across opens, reads passed
/// through to the file itself) never shows an old version: a file rewritten through
/// the view is read anew, size and content, by the next process at once; a large file
/// (read by the kernel directly where it can) likewise, and its opens are decided and
/// recorded all the same.
#[test]
fn view_a_rewritten_file_is_read_anew_at_once_small_or_large() {
    let ws = Ws::new();
    let big = |b: u8| vec![b; 3 << 20];
    std::fs::write(ws.root.join("big.bin"), big(b'a')).expect("big");
    let script = "cat a.txt >/dev/null; stat -c %s a.txt; \
        python3 -c \"open('a.txt','w').write('a longer line\\n')\"; \
        stat -c %s a.txt; cat a.txt; \
        head -c 2 big.bin; echo; \
        python3 -c \"open('big.bin','wb').write(b'b' * (3 << 20))\"; \
        head -c 2 big.bin; echo; wc -c < big.bin; tail -c 2 big.bin; echo";
    let out = ws.sh(script);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert_eq!(stdout, "6\n14\na longer line\naa\nbb\n3145728\nbb\n");
    let big_opens: u64 = ws
        .records()
        .into_iter()
        .map(|r| opens_of(&r, "big.bin"))
        .sum();
    // head, the write's open, head, wc, tail.
    assert_eq!(big_opens, 5, "{}", text(&out.stderr));
}

/// A large file held open for reading (passed through to the kernel where it can) can
/// still be opened for writing by another process, and the reader keeps its version.
#[test]
fn view_a_large_file_open_for_reading_can_be_opened_for_writing() {
    let ws = Ws::new();
    std::fs::write(ws.root.join("big.bin"), vec![b'a'; 3 << 20]).expect("big");
    let script = "f = open('big.bin', 'rb')\nprint(f.read(2))\n\
        g = open('big.bin', 'r+b')\ng.write(b'zz')\ng.close()\n\
        print(f.read(2))\nprint(open('big.bin', 'rb').read(4))\n";
    let out = ws.run(&["python3", "-c", script]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert_eq!(stdout, "b'aa'\nb'aa'\nb'zzaa'\n");
}

/// How many opens of `path` a record stands for: one for an `open` record of it, its
/// count in a coalesced `reads` record (`[path, count, bytes, sha256, remembered]`).
fn opens_of(r: &Value, path: &str) -> u64 {
    if r["op"] == "open" && r["path"] == path {
        return 1;
    }
    if r["op"] != "reads" {
        return 0;
    }
    r["details"]["reads"]["open"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e[0] == path)
        .map(|e| e[1].as_u64().unwrap_or(0))
        .sum()
}

/// A file a thread opens is recorded naming the process (its thread group's id), not
/// the thread.
#[test]
fn view_a_threads_request_is_recorded_naming_its_process() {
    let ws = Ws::new();
    let script = "import os, threading\n\
                  t = threading.Thread(target=lambda: open('threaded.txt', 'w').write('x'))\n\
                  t.start(); t.join()\n\
                  print('PID', os.getpid())\n";
    let out = ws.run(&["python3", "-c", script]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    let pid = stdout
        .trim()
        .strip_prefix("PID ")
        .unwrap_or_else(|| panic!("{stdout}"));
    let records = ws.records();
    let written: Vec<&Value> = records
        .iter()
        .filter(|r| r["path"] == "threaded.txt" && !r["peer"].is_null())
        .collect();
    assert!(!written.is_empty(), "{records:#?}");
    for r in written {
        let peer = r["peer"].as_str().expect("peer");
        assert!(peer.starts_with(&format!("pid {pid} ")), "{peer}");
    }
}

/// The whole of fsgate's state directory is covered in the command's namespace: the
/// audit log of another workspace kept there is not readable.
#[test]
fn view_the_command_cannot_read_another_workspaces_state() {
    let ws = Ws::new();
    let (_xdg_dir, xdg) = canonical_tempdir("fsgate-view-xdg");
    let other = xdg.join("fsgate/other-0123456789abcdef");
    std::fs::create_dir_all(&other).expect("mkdir");
    let log = other.join("audit.jsonl");
    std::fs::write(&log, "OTHER-WORKSPACES-LOG\n").expect("write");
    // Unwalled, as above: the cover is what is tested, not the wall.
    let mut cmd = Command::new(bin());
    cmd.arg("run")
        .args(ws.state_args())
        .arg("--no-confine")
        .args(["--", "sh", "-c"])
        .arg(format!("cat {}; echo log=$?", log.display()))
        .env("XDG_STATE_HOME", &xdg)
        .current_dir(&ws.root);
    let out = finished(cmd);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(!stdout.contains("OTHER-WORKSPACES-LOG"), "{stdout}");
    assert!(stdout.contains("log=1"), "{stdout}");
}

/// A process that execs another program with the very same arguments (bash becoming
/// dash, `exec -a`) is named as the program it became, not as the one remembered for
/// its pid a moment before.
#[test]
fn view_an_exec_of_another_program_with_the_same_arguments_is_named_anew() {
    let ws = Ws::new();
    let script = "if [ -n \"$X\" ]; then test -e .env; exit 0; fi; test -e a.txt; \
                  X=1 exec -a bash /bin/sh -c \"$BASH_EXECUTION_STRING\"";
    let out = ws.run(&["bash", "-c", script]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let refused: Vec<Value> = ws
        .records()
        .into_iter()
        .filter(|r| r["op"] == "stat" && r["path"] == ".env" && r["decision"] == "deny")
        .collect();
    assert!(!refused.is_empty(), "no refusal of .env");
    for r in &refused {
        let peer = r["peer"].as_str().unwrap_or_default();
        assert!(peer.contains(r#"argv ["bash","-c""#), "{peer}");
        assert!(
            !peer.contains(r#"comm "bash""#) && !peer.contains(r#"/bash""#),
            "{peer}"
        );
    }
}

#[test]
fn view_the_undo_line_works_pasted_in_another_directory_with_relative_paths_and_spaces() {
    let (_dir, top) = canonical_tempdir("fsgate-undo-line");
    let (ws, state) = (top.join("my ws"), top.join("state dir"));
    std::fs::create_dir_all(&ws).expect("mkdir");
    std::fs::create_dir_all(&state).expect("mkdir");
    std::fs::write(ws.join("a.txt"), "before\n").expect("write");
    let policy = state.join("policy.toml");
    std::fs::write(&policy, fsgate_policy::DEFAULT_POLICY_TOML).expect("write");
    let mut run = Command::new(bin());
    run.current_dir(&top)
        .args([
            "run",
            "--workspace",
            "my ws",
            "--audit-log",
            "state dir/../state dir/log",
        ])
        .args([
            "--backup-dir",
            "state dir/backups",
            "--policy",
            "state dir/policy.toml",
        ])
        .args(["--", "sh", "-c", "echo after > 'my ws/a.txt'"])
        .env("PATH", SYSTEM_PATH)
        .env("XDG_STATE_HOME", state.join("xdg"));
    let out = finished(run);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(ws.join("a.txt")).expect("read"),
        "after\n"
    );
    let line = stderr
        .lines()
        .find_map(|l| l.split_once("undo its changes with: ").map(|(_, c)| c))
        .unwrap_or_else(|| panic!("no undo line: {stderr}"));
    let words = shlex::split(line).unwrap_or_else(|| panic!("not a shell line: {line}"));
    assert_eq!(words[..2], ["fsgate", "undo"], "{line}");
    assert!(!line.contains(".."), "{line}");
    let mut undo = Command::new(bin());
    undo.current_dir("/").args(&words[1..]);
    let undone = finished(undo);
    assert!(
        undone.status.success(),
        "{line}\n{}{}",
        text(&undone.stdout),
        text(&undone.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("a.txt")).expect("read"),
        "before\n"
    );
}

#[test]
fn view_a_workspace_holding_the_state_dir_cannot_reach_another_workspaces_log_or_backups() {
    let (_dir, home) = canonical_tempdir("fsgate-state-home");
    let proj = home.join("proj");
    std::fs::create_dir_all(&proj).expect("mkdir");
    std::fs::write(proj.join("f.txt"), "v1\n").expect("write");
    // Default locations: the state dir is $HOME/.local/state/fsgate, inside `home`.
    let run_in = |ws: &Path, script: &str| {
        let mut cmd = Command::new(bin());
        cmd.current_dir(ws)
            .args(["run", "--workspace"])
            .arg(ws)
            .args(["--", "sh", "-c", script])
            .env("PATH", SYSTEM_PATH)
            .env("HOME", &home)
            .env_remove("XDG_STATE_HOME");
        finished(cmd)
    };
    let first = run_in(&proj, "echo v2 > f.txt");
    assert!(first.status.success(), "{}", text(&first.stderr));
    let state = home.join(".local/state/fsgate");
    let log = std::fs::read_dir(&state)
        .expect("state dir")
        .map(|e| e.expect("entry").path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("proj-"))
        })
        .expect("proj's state")
        .join("audit/audit.jsonl");
    let before = std::fs::read(&log).expect("log");
    let attack = format!(
        "ls -a .local/state; cat {log} && echo read; echo '{{}}' >> {log} && echo appended; \
         rm -rf .local/state/fsgate; mv .local moved && echo moved; ls -a .local/state",
        log = log.strip_prefix(&home).expect("inside").display()
    );
    let out = run_in(&home, &attack);
    let stdout = text(&out.stdout);
    assert!(
        !stdout.contains("read") && !stdout.contains("appended"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("moved") && !stdout.contains("fsgate"),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read(&log).expect("log"),
        before,
        "proj's log changed"
    );
    assert!(
        log.parent()
            .and_then(Path::parent)
            .is_some_and(|d| d.join("backups").is_dir())
    );
    let mut verify = Command::new(bin());
    verify
        .args(["audit", "verify", "--workspace"])
        .arg(&proj)
        .env("HOME", &home)
        .env_remove("XDG_STATE_HOME");
    let verified = finished(verify);
    assert!(verified.status.success(), "{}", text(&verified.stdout));
}

/// The private copies of files open for writing are memory: together they hold at most
/// four times `max_process_file_bytes` (here 4 x 12 MiB). Past it a write fails with
/// ENOSPC, as on a full disk; what the other files hold is applied at their close, and
/// once they are closed there is room again.
#[test]
fn view_the_copies_of_files_open_for_writing_are_bounded_together() {
    let ws = Ws::new();
    let script = "import errno, os\n\
        chunk = b'x' * 11_000_000\n\
        files = [open(f'f{i}.bin', 'wb', buffering=0) for i in range(5)]\n\
        for i, f in enumerate(files):\n    try:\n        n = f.write(chunk)\n        n < len(chunk) and f.write(chunk[n:])\n        print(i, 'written')\n    except OSError as e:\n        print(i, 'enospc' if e.errno == errno.ENOSPC else e)\n\
        for f in files:\n    try:\n        f.close()\n    except OSError as e:\n        print('close', e.errno)\n\
        with open('again.bin', 'wb') as f:\n    f.write(chunk)\n\
        print('again', os.path.getsize('again.bin'))\n";
    let out = ws.python_with_small_files(script);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(
        stdout, "0 written\n1 written\n2 written\n3 written\n4 enospc\nagain 11000000\n",
        "{stderr}"
    );
    for i in 0..4 {
        let len = std::fs::metadata(ws.root.join(format!("f{i}.bin"))).map(|m| m.len());
        assert_eq!(len.ok(), Some(11_000_000), "f{i}.bin");
    }
}

/// A directory moved while another process moves a directory into it: the entries are
/// checked before the move, and the move is refused (the directory put back) if,
/// where it went, it holds anything that was not checked. Before, `x -> deploy2` with
/// `w/production` moved into `x` during the check planted `deploy2/production/evil.yml`,
/// where the policy refuses every write. Each try moves in at another moment of the
/// check; a try that lands inside it is refused.
#[test]
fn view_a_directory_moved_while_it_is_checked_lands_only_as_checked() {
    let ws = Ws::new();
    let policy = ws.state.join("protect.toml");
    let base = ws.state.join("default.toml");
    std::fs::write(&base, include_str!("../policies/default.toml")).expect("base");
    let rule = "version = 1\nextends = \"default.toml\"\n[[rule]]\nid = \"protect-prod\"\n\
        effect = \"deny\"\nops = [\"write\", \"delete\"]\npaths = [\"deploy2/production\"]\n\
        reason = \"production is protected\"\n";
    std::fs::write(&policy, rule).expect("policy");
    std::fs::create_dir(ws.root.join("x")).expect("mkdir");
    for i in 0..5000 {
        std::fs::write(ws.root.join(format!("x/f{i:05}")), "x").expect("seed");
    }
    std::fs::create_dir_all(ws.root.join("w/production")).expect("mkdir");
    std::fs::write(ws.root.join("w/production/evil.yml"), "planted\n").expect("seed");
    let script = r#"
import os, time
t = time.time(); os.rename('x', 'y'); os.rename('y', 'x'); took = (time.time() - t) / 2
hits = planted = 0
for i in range(24):
    pid = os.fork()
    if pid == 0:
        time.sleep(took * (0.05 + 0.9 * (i % 12) / 12))
        try:
            os.rename('w/production', 'x/production')
            os._exit(0)
        except OSError:
            os._exit(1)
    try:
        os.rename('x', 'deploy2'); a = True
    except OSError:
        a = False
    b = os.waitpid(pid, 0)[1] == 0
    if os.path.exists('deploy2/production/evil.yml'):
        planted += 1
        break
    hits += (b and not a)
    if a:
        os.rename('deploy2', 'x')
    if os.path.exists('x/production'):
        os.rename('x/production', 'w/production')
print('planted', planted)
print('refused while checked', hits > 0)
"#;
    let mut cmd = ws.fsgate_run();
    cmd.arg("--policy")
        .arg(&policy)
        .args(["--", "python3", "-c", script]);
    let out = finished(cmd);
    assert_eq!(
        text(&out.stdout),
        "planted 0\nrefused while checked True\n",
        "{}",
        text(&out.stderr)
    );
    assert!(!ws.root.join("deploy2/production").exists());
    // The refusals counted above include moves the policy refused outright (the
    // directory moved in before the check saw it); these are the moves sent back.
    let sent_back = (ws.records().iter())
        .filter(|r| r["op"] == "rename" && r["rule"] == "workspace-uninspected")
        .count();
    assert!(sent_back > 0, "no try landed inside a check");
}

/// A write through a shared mapping that the content rules refuse at `msync` leaves
/// nothing of it for the next reader: the kernel's pages, which held the refused bytes,
/// are taken back (again once the writer closed it: its mapping still shows it what it
/// wrote, as a disk's would), and a process reading it then reads the file as it is on
/// disk.
#[test]
fn view_bytes_refused_at_msync_are_not_served_to_the_next_reader() {
    let ws = Ws::new();
    std::fs::write(ws.root.join("f.txt"), "x".repeat(4096)).expect("seed");
    let script = "import errno, mmap, os, subprocess\n\
        fd = os.open('f.txt', os.O_RDWR)\n\
        m = mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)\n\
        key = b'key = AKIA' + b'UJZDEGXDNCF32EPF\\n'\n\
        m[:len(key)] = key\n\
        try:\n    m.flush(); print('synced')\n\
        except OSError as e:\n    print('msync', errno.errorcode[e.errno])\n\
        print('writer', m[:10].decode())\n\
        m.close(); os.close(fd)\n\
        r = subprocess.run(['head', '-c', '10', 'f.txt'], capture_output=True)\n\
        print('reader', r.stdout.decode())\n";
    let out = ws.run(&["python3", "-c", script]);
    assert_eq!(
        text(&out.stdout),
        "msync EACCES\nwriter key = AKIA\nreader xxxxxxxxxx\n",
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(ws.root.join("f.txt")).expect("f"),
        "x".repeat(4096)
    );
}
