//! Modes and links through `fsgate run`'s view (docs/run.md): chmod is the gateway's
//! `chmod` (recorded, undone, never set-ID), a file created with a mode keeps its
//! executable bits, and a hard link is refused with EPERM, which callers copy after.

use std::os::unix::fs::PermissionsExt;
use std::process::Output;

use crate::common::view::{ViewWs, git_policy, host_git, requests_of, session_of, text, view_ws};

view_ws! {
    /// A workspace and its state dir beside it.
    Ws
}

impl Ws {
    fn new() -> Ws {
        Ws(ViewWs::new("fsgate-view-modes", "fsgate-view-modes-state"))
    }

    /// `sh -c SCRIPT` through the view, with umask 022, under the policy that lets git
    /// in (policies/examples/git-through-the-view.toml: the default's rules otherwise).
    fn sh(&self, script: &str) -> Output {
        self.sh_under(Some(&git_policy()), &format!("umask 022\n{script}"))
    }

    /// As [`sh`](Self::sh), `--no-confine`: as root, with the capabilities the wall takes
    /// (its seccomp filter refuses chown and set-id bits before the view sees them).
    fn sh_root(&self, script: &str) -> Output {
        self.sh_unwalled(Some(&git_policy()), &format!("umask 022\n{script}"))
    }

    fn mode(&self, name: &str) -> u32 {
        let meta = std::fs::metadata(self.root.join(name)).expect("stat");
        meta.permissions().mode() & 0o7777
    }

    fn set_mode(&self, name: &str, mode: u32) {
        let perms = std::fs::Permissions::from_mode(mode);
        std::fs::set_permissions(self.root.join(name), perms).expect("chmod");
    }
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
        requests_of(&records, "chmod")
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
    let out = ws.sh_root(
        "chmod +x tool.sh && ./tool.sh
         python3 -c \"
import os
for mode in (0o4755, 0o2755, 0o1755):
    try:
        os.chmod('tool.sh', mode)
        print('set', oct(mode))
    except OSError as e:
        print('errno', e.errno)
\"",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "tool\nerrno 1\nerrno 1\nerrno 1\n",
        "{}",
        text(&out.stderr)
    );
    assert_eq!(ws.mode("tool.sh"), 0o755);
    let records = ws.records();
    let chmods = requests_of(&records, "chmod");
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
    // Python's and node's link, each falling back to a copy on EPERM as npm does;
    // `cp -a` as root keeps the owner (a chown, refused by the wall).
    let out = ws.sh_root(
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
