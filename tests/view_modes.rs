//! Modes and links through `fsgate run`'s view (docs/run.md): chmod is the gateway's
//! `chmod` (recorded, undone, never set-ID), a file created with a mode keeps its
//! executable bits, and a hard link is refused with EPERM, which callers copy after.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

use crate::common::{bin, canonical_tempdir};

/// A workspace and its state dir beside it.
struct Ws {
    root: PathBuf,
    state: PathBuf,
    _dirs: (TempDir, TempDir),
}

const IDENTITY: [(&str, &str); 5] = [
    ("GIT_AUTHOR_NAME", "a"),
    ("GIT_AUTHOR_EMAIL", "a@example.com"),
    ("GIT_COMMITTER_NAME", "a"),
    ("GIT_COMMITTER_EMAIL", "a@example.com"),
    ("GIT_CONFIG_GLOBAL", "/dev/null"),
];

impl Ws {
    fn new() -> Ws {
        let (d1, root) = canonical_tempdir("fsgate-view-modes");
        let (d2, state) = canonical_tempdir("fsgate-view-modes-state");
        Ws {
            root,
            state,
            _dirs: (d1, d2),
        }
    }

    fn log(&self) -> PathBuf {
        self.state.join("audit.jsonl")
    }

    fn state_args(&self) -> Vec<String> {
        let s = |p: &Path| p.to_string_lossy().into_owned();
        vec![
            "--workspace".into(),
            s(&self.root),
            "--audit-log".into(),
            s(&self.log()),
            "--backup-dir".into(),
            s(&self.state.join("backups")),
        ]
    }

    /// `sh -c SCRIPT` through the view, with umask 022, under the policy that lets git
    /// in (policies/examples/git-through-the-view.toml: the default's rules otherwise).
    fn sh(&self, script: &str) -> Output {
        let policy = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("policies/examples/git-through-the-view.toml");
        let mut cmd = Command::new(bin());
        cmd.arg("run")
            .arg("--policy")
            .arg(policy)
            .args(self.state_args())
            .args(["--", "sh", "-c", &format!("umask 022\n{script}")])
            .current_dir(&self.root)
            .envs(IDENTITY);
        finished(cmd)
    }

    fn records(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.log()).expect("audit log");
        text.lines()
            .map(|l| serde_json::from_str(l).expect("a record"))
            .collect()
    }

    fn mode(&self, name: &str) -> u32 {
        let meta = std::fs::metadata(self.root.join(name)).expect("stat");
        meta.permissions().mode() & 0o7777
    }

    fn set_mode(&self, name: &str, mode: u32) {
        let perms = std::fs::Permissions::from_mode(mode);
        std::fs::set_permissions(self.root.join(name), perms).expect("chmod");
    }

    /// `fsgate undo --session SESSION`, which must succeed.
    fn undo(&self, session: &str) {
        let mut undo = Command::new(bin());
        undo.arg("undo")
            .args(self.state_args())
            .args(["--session", session]);
        let undone = finished(undo);
        assert!(
            undone.status.success(),
            "{}{}",
            text(&undone.stdout),
            text(&undone.stderr)
        );
    }
}

/// git on the host, in `dir`; its stdout (panics on failure).
fn host_git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .envs(IDENTITY)
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

/// Runs `cmd` to its end (killed after 120 s: no test hangs).
fn finished(mut cmd: Command) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn fsgate");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!("fsgate run did not end; stderr: {}", text(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The run's session id, from its last line on stderr.
fn session_of(out: &Output) -> String {
    let err = text(&out.stderr);
    let at = err
        .rfind("--session ")
        .expect("the undo line names the session");
    err[at + "--session ".len()..]
        .split_whitespace()
        .next()
        .expect("a session id")
        .to_string()
}

/// The `request` records of `op`.
fn requests<'a>(records: &'a [Value], op: &str) -> Vec<&'a Value> {
    records
        .iter()
        .filter(|r| r["kind"] == "request" && r["op"] == op)
        .collect()
}

#[test]
fn view_git_checkout_of_an_executable_script_keeps_it_executable_and_status_clean() {
    let ws = Ws::new();
    std::fs::write(ws.root.join("a.txt"), "hello\n").expect("write");
    host_git(&ws.root, &["init", "-q", "-b", "main", "."]);
    host_git(&ws.root, &["add", "a.txt"]);
    host_git(&ws.root, &["commit", "-qm", "first"]);
    host_git(&ws.root, &["switch", "-q", "-c", "tool"]);
    std::fs::write(ws.root.join("run.sh"), "#!/bin/sh\necho ran\n").expect("write");
    ws.set_mode("run.sh", 0o755);
    host_git(&ws.root, &["add", "run.sh"]);
    host_git(&ws.root, &["commit", "-qm", "tool"]);
    host_git(&ws.root, &["switch", "-q", "main"]);
    assert!(!ws.root.join("run.sh").exists());
    let out = ws.sh("set -e
         git checkout -q tool
         test -x run.sh
         ./run.sh
         git status --porcelain");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "ran\n", "{}", text(&out.stderr));
    assert_eq!(ws.mode("run.sh"), 0o755);
    assert_eq!(host_git(&ws.root, &["status", "--porcelain"]), "");
    // The file was created (a write) and given its mode (a chmod), both recorded.
    let records = ws.records();
    assert!(
        requests(&records, "chmod")
            .iter()
            .any(|r| r["path"] == "run.sh"
                && r["decision"] == "allow"
                && r["args"]["mode"] == "0755"),
        "no chmod of run.sh recorded"
    );
}

#[test]
fn view_chmod_is_recorded_and_undone_and_a_set_id_bit_is_refused_with_eperm() {
    let ws = Ws::new();
    std::fs::write(ws.root.join("tool.sh"), "#!/bin/sh\necho tool\n").expect("write");
    ws.set_mode("tool.sh", 0o644);
    let out = ws.sh("chmod +x tool.sh && ./tool.sh
         python3 -c \"
import os
for mode in (0o4755, 0o2755, 0o1755):
    try:
        os.chmod('tool.sh', mode)
        print('set', oct(mode))
    except OSError as e:
        print('errno', e.errno)
\"");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "tool\nerrno 1\nerrno 1\nerrno 1\n",
        "{}",
        text(&out.stderr)
    );
    assert_eq!(ws.mode("tool.sh"), 0o755);
    let records = ws.records();
    let chmods = requests(&records, "chmod");
    assert!(
        chmods.iter().any(|r| r["path"] == "tool.sh"
            && r["decision"] == "allow"
            && r["outcome"] == "ok"
            && r["args"]["mode"] == "0755"
            && r["args"]["oldMode"] == "0644"),
        "no chmod +x recorded: {chmods:?}"
    );
    let refused: Vec<_> = chmods
        .iter()
        .filter(|r| r["decision"] == "deny" && r["rule"] == "workspace-set-id")
        .collect();
    assert_eq!(refused.len(), 3, "{chmods:?}");
    assert_eq!(refused[0]["args"]["mode"], "4755");
    // The change had its intent first, as every change.
    assert!(
        records
            .iter()
            .any(|r| r["kind"] == "intent" && r["op"] == "chmod" && r["path"] == "tool.sh"),
        "no intent of the chmod"
    );
    ws.undo(&session_of(&out));
    assert_eq!(ws.mode("tool.sh"), 0o644);
}

#[test]
fn view_a_hard_link_is_refused_with_eperm_and_callers_copy_instead() {
    let ws = Ws::new();
    std::fs::write(ws.root.join("a.txt"), "hello\n").expect("write");
    std::fs::create_dir(ws.root.join("pkg")).expect("mkdir");
    std::fs::write(ws.root.join("pkg/index.js"), "module.exports = 1;\n").expect("write");
    // Python's and node's link, each falling back to a copy on EPERM as npm does.
    let out = ws.sh(
        "python3 -c \"
import errno, os, shutil
try:
    os.link('a.txt', 'b.txt')
    print('linked')
except OSError as e:
    assert e.errno == errno.EPERM, e
    shutil.copy2('a.txt', 'b.txt')
    print('copied')
\"
         node -e \"
const fs = require('fs');
try { fs.linkSync('pkg/index.js', 'pkg/linked.js'); console.log('linked'); }
catch (e) { if (e.code !== 'EPERM') throw e; fs.copyFileSync('pkg/index.js', 'pkg/linked.js'); console.log('copied'); }
\"
         if cp -al pkg pkg2 2>/dev/null; then echo cp-linked; else rm -rf pkg2 && cp -a pkg pkg2 && echo cp-copied; fi",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "copied\ncopied\ncp-copied\n",
        "{}",
        text(&out.stderr)
    );
    let read = |p: &str| std::fs::read_to_string(ws.root.join(p)).expect("read");
    assert_eq!(read("b.txt"), "hello\n");
    assert_eq!(read("pkg/linked.js"), "module.exports = 1;\n");
    assert_eq!(read("pkg2/index.js"), "module.exports = 1;\n");
    use std::os::unix::fs::MetadataExt;
    let nlink = std::fs::metadata(ws.root.join("a.txt"))
        .expect("stat")
        .nlink();
    assert_eq!(nlink, 1, "a.txt was linked");
}
