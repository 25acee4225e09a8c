//! `[vcs] stage = true`: the real gateway over ACP on a real git repository (made with
//! the `git` command line), the index then read back with `git ls-files -s`.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};

use serde_json::{Value, json};

use crate::common::{REFUSED, TIMEOUT, bin, canonical_tempdir};

/// Allows everything the default policy's secret names do not deny; stages in git.
const STAGE_ALL: &str = r#"version = 1
[vcs]
stage = true
[[rule]]
id = "all"
effect = "allow"
ops = ["read", "write", "delete", "list"]
paths = ["**"]
"#;

/// Runs git in `dir`; panics with its stderr on failure.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "core.quotepath=off"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A repository with one commit (a `.gitignore` ignoring `*.log`).
pub fn repo(dir: &Path) {
    git(dir, &["init", "-q"]);
    std::fs::write(dir.join(".gitignore"), "*.log\nbuild/\n").expect("write .gitignore");
    git(dir, &["add", ".gitignore"]);
    git(
        dir,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "init",
        ],
    );
}

/// Paths in the index, with their blob ids: `git ls-files -s -z`.
pub fn index(dir: &Path) -> Vec<(String, String)> {
    git(dir, &["ls-files", "-s", "-z"])
        .split('\0')
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (meta, path) = l.split_once('\t').expect("tab");
            let blob = meta.split(' ').nth(1).expect("blob id");
            (path.to_string(), blob.to_string())
        })
        .collect()
}

/// The blob id git gives `path`'s content now.
pub fn hash(dir: &Path, path: &str) -> String {
    git(dir, &["hash-object", "--", path]).trim().to_string()
}

/// `git diff --cached --name-only -z`.
pub fn cached(dir: &Path) -> Vec<String> {
    git(dir, &["diff", "--cached", "--name-only", "-z"])
        .split('\0')
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// `fsgate serve` (ACP) on `workspace`, talked to one request at a time.
pub struct Served {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    pub workspace: PathBuf,
    pub audit: PathBuf,
    pub policy: PathBuf,
    next: u64,
    _state: tempfile::TempDir,
}

impl Served {
    pub fn start(workspace: &Path, policy: &str) -> Served {
        Served::start_all(&[workspace], policy)
    }

    /// Serves every one of `workspaces` (the first is [`Served::workspace`]).
    pub fn start_all(workspaces: &[&Path], policy: &str) -> Served {
        let (state_dir, state) = canonical_tempdir("fsgate-vcs-state-");
        std::fs::write(state.join("policy.toml"), policy).expect("write policy");
        let audit = state.join("audit.jsonl");
        let mut cmd = Command::new(bin());
        cmd.arg("serve");
        for w in workspaces {
            cmd.arg("--workspace").arg(w);
        }
        let mut child = cmd
            .arg("--policy")
            .arg(state.join("policy.toml"))
            .arg("--audit-log")
            .arg(&audit)
            .arg("--backup-dir")
            .arg(state.join("backups"))
            // A shell would run a `$(touch ...)` name here: the state dir, checked after.
            .current_dir(&state)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn fsgate");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && tx.send(v).is_err()
                {
                    break;
                }
            }
        });
        Served {
            stdin: child.stdin.take(),
            child,
            lines,
            workspace: workspaces.first().expect("a workspace").to_path_buf(),
            audit,
            policy: state.join("policy.toml"),
            next: 1,
            _state: state_dir,
        }
    }

    /// One request; its `result`, or its `error` as Err.
    pub fn call(&mut self, method: &str, mut params: Value) -> Result<Value, Value> {
        let id = self.next;
        self.next += 1;
        params["sessionId"] = json!("s");
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{msg}").expect("send");
        stdin.flush().expect("flush");
        loop {
            let v = self.lines.recv_timeout(TIMEOUT).expect("an answer in time");
            if v["id"] == json!(id) {
                return match v.get("error") {
                    Some(e) => Err(e.clone()),
                    None => Ok(v["result"].clone()),
                };
            }
        }
    }

    pub fn abs(&self, rel: &str) -> String {
        self.workspace.join(rel).to_string_lossy().into_owned()
    }

    pub fn write(&mut self, rel: &str, content: &str) {
        let p = self.abs(rel);
        self.call("fs/write_text_file", json!({"path": p, "content": content}))
            .unwrap_or_else(|e| panic!("write {rel}: {e}"));
    }

    /// The `vcs-stage` records so far.
    pub fn stage_records(&self) -> Vec<Value> {
        self.records("vcs-stage")
    }

    /// The audit records of `kind` so far.
    pub fn records(&self, kind: &str) -> Vec<Value> {
        std::fs::read_to_string(&self.audit)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["kind"] == kind)
            .collect()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

fn paths(idx: &[(String, String)]) -> Vec<&str> {
    idx.iter().map(|(p, _)| p.as_str()).collect()
}

fn blob_of<'a>(idx: &'a [(String, String)], path: &str) -> Option<&'a str> {
    idx.iter().find(|(p, _)| p == path).map(|(_, b)| b.as_str())
}

#[test]
fn write_edit_rename_and_rm_update_the_index() {
    let (_d, root) = canonical_tempdir("fsgate-vcs-");
    repo(&root);
    let mut g = Served::start(&root, STAGE_ALL);
    g.write("src/a.txt", "one\n");
    assert_eq!(cached(&root), ["src/a.txt"], "a write is staged");
    assert_eq!(
        blob_of(&index(&root), "src/a.txt"),
        Some(hash(&root, "src/a.txt").as_str())
    );

    let p = g.abs("src/a.txt");
    g.call(
        "_fsgate/edit_text_file",
        json!({"path": p, "oldText": "one", "newText": "two"}),
    )
    .expect("edit");
    assert_eq!(
        blob_of(&index(&root), "src/a.txt"),
        Some(hash(&root, "src/a.txt").as_str()),
        "the edited content is staged"
    );

    let (from, to) = (g.abs("src/a.txt"), g.abs("src/b.txt"));
    g.call("_fsgate/rename", json!({"oldPath": from, "newPath": to}))
        .expect("rename");
    let idx = index(&root);
    assert!(
        !paths(&idx).contains(&"src/a.txt"),
        "old path gone: {idx:?}"
    );
    assert_eq!(
        blob_of(&idx, "src/b.txt"),
        Some(hash(&root, "src/b.txt").as_str())
    );

    let p = g.abs("src/b.txt");
    g.call("_fsgate/rm", json!({"path": p})).expect("rm");
    assert_eq!(paths(&index(&root)), [".gitignore"], "rm unstages");
    assert!(cached(&root).is_empty());
    assert_eq!(
        g.stage_records().len(),
        4,
        "one vcs-stage record per change"
    );
}

#[test]
fn rm_of_a_directory_and_rename_of_one_move_every_entry_beneath() {
    let (_d, root) = canonical_tempdir("fsgate-vcs-");
    repo(&root);
    for f in ["d/x.txt", "d/sub/y.txt", "e/z.txt"] {
        let p = root.join(f);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, f).expect("write");
    }
    git(&root, &["add", "d", "e"]);
    let mut g = Served::start(&root, STAGE_ALL);
    let p = g.abs("d");
    g.call("_fsgate/rm", json!({"path": p, "recursive": true}))
        .expect("rm -r");
    let (from, to) = (g.abs("e"), g.abs("f"));
    g.call("_fsgate/rename", json!({"oldPath": from, "newPath": to}))
        .expect("rename dir");
    assert_eq!(paths(&index(&root)), [".gitignore", "f/z.txt"]);
}

#[test]
fn an_ignored_path_is_left_unstaged_and_recorded() {
    let (_d, root) = canonical_tempdir("fsgate-vcs-");
    repo(&root);
    let mut g = Served::start(&root, STAGE_ALL);
    g.write("debug.log", "noise\n");
    g.write("build/out.txt", "noise\n");
    g.write("kept.txt", "kept\n");
    assert_eq!(cached(&root), ["kept.txt"]);
    let ignored: Vec<Value> = g
        .stage_records()
        .iter()
        .flat_map(|r| {
            r["details"]["ignored"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(ignored, [json!("debug.log"), json!("build/out.txt")]);
    // Removing a file the index never held changes nothing there, and says nothing.
    let before = g.stage_records().len();
    let p = g.abs("debug.log");
    g.call("_fsgate/rm", json!({"path": p})).expect("rm");
    assert_eq!(g.stage_records().len(), before);
    assert_eq!(cached(&root), ["kept.txt"]);
}

#[test]
fn a_workspace_below_the_repository_root_stages_repository_paths() {
    let (_d, top) = canonical_tempdir("fsgate-vcs-");
    repo(&top);
    let ws = top.join("pkg/app");
    std::fs::create_dir_all(&ws).expect("mkdir ws");
    // The repository's own ignore file lies above the workspace.
    std::fs::write(top.join("pkg/.gitignore"), "*.tmp\n").expect("write");
    let mut g = Served::start(&ws, STAGE_ALL);
    g.write("main.rs", "fn main() {}\n");
    g.write("scratch.tmp", "x");
    assert_eq!(cached(&top), ["pkg/app/main.rs"]);
    assert_eq!(
        blob_of(&index(&top), "pkg/app/main.rs"),
        Some(hash(&top, "pkg/app/main.rs").as_str())
    );
    let rec = g.stage_records();
    assert!(
        rec.iter().all(|r| r["details"].get("error").is_none()),
        "staged under the gateway's own sandbox: {rec:?}"
    );
}

#[test]
fn check_sandbox_says_the_git_dir_above_the_workspace_is_writable() {
    let (_d, top) = canonical_tempdir("fsgate-vcs-");
    repo(&top);
    let ws = top.join("sub");
    std::fs::create_dir_all(&ws).expect("mkdir ws");
    let (_s, state) = canonical_tempdir("fsgate-vcs-state-");
    let pol = state.join("p.toml");
    std::fs::write(&pol, STAGE_ALL).expect("policy");
    let run = |ws: &Path| {
        let out = Command::new(bin())
            .args(["serve", "--check-sandbox", "--workspace"])
            .arg(ws)
            .arg("--policy")
            .arg(&pol)
            .arg("--audit-log")
            .arg(state.join("a.jsonl"))
            .arg("--backup-dir")
            .arg(state.join("b"))
            .output()
            .expect("run");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let shown = run(&ws);
    let line = format!("git dir {}/.git: read-write", top.display());
    assert!(shown.contains(&line), "{shown}");
    // The workspace holding its own .git needs no rule of its own.
    assert!(!run(&top).contains("git dir"), "{}", run(&top));
}

#[test]
fn hostile_names_are_staged_as_names_and_nothing_runs() {
    let (_d, root) = canonical_tempdir("fsgate-vcs-");
    repo(&root);
    let marker = format!("fsgate-pwned-{}", std::process::id());
    let names = [
        format!("$(touch {marker})"),
        format!("a/$(touch /tmp/{marker})"),
        "-rf --exec=x".to_string(),
        "with space \"dq\" 'sq' `tick` ;|&.txt".to_string(),
        "*?[ab].txt".to_string(),
    ];
    let mut g = Served::start(&root, STAGE_ALL);
    for n in &names {
        g.write(n, "x\n");
    }
    let mut want: Vec<&str> = names.iter().map(String::as_str).collect();
    want.sort();
    let mut got = cached(&root);
    got.sort();
    assert_eq!(got, want);
    for n in &names {
        assert_eq!(blob_of(&index(&root), n), Some(hash(&root, n).as_str()));
    }
    assert!(!Path::new("/tmp").join(&marker).exists(), "a command ran");
    assert!(!root.join(&marker).exists(), "a command ran");
    // A literal pathspec: renaming `*?[ab].txt` touches only that entry.
    g.write("a.txt", "a\n");
    let (from, to) = (g.abs("*?[ab].txt"), g.abs("moved"));
    g.call("_fsgate/rename", json!({"oldPath": from, "newPath": to}))
        .expect("rename");
    let idx = index(&root);
    assert!(paths(&idx).contains(&"a.txt") && paths(&idx).contains(&"moved"));
}

#[test]
fn the_agent_still_cannot_reach_git_internals() {
    let (_d, root) = canonical_tempdir("fsgate-vcs-");
    repo(&root);
    let config = std::fs::read(root.join(".git/config")).expect("config");
    let mut g = Served::start(&root, STAGE_ALL);
    for (method, params) in [
        ("fs/read_text_file", json!({"path": g.abs(".git/config")})),
        (
            "fs/write_text_file",
            json!({"path": g.abs(".git/config"), "content": "[core]\n\tfsmonitor = touch x\n"}),
        ),
        (
            "fs/write_text_file",
            json!({"path": g.abs(".git/hooks/pre-commit"), "content": "#!/bin/sh\n"}),
        ),
        ("_fsgate/ls", json!({"path": g.abs(".git")})),
        ("_fsgate/rm", json!({"path": g.abs(".git/index")})),
    ] {
        let e = g.call(method, params).expect_err(method);
        assert_eq!(e["code"], json!(REFUSED), "{method}: {e}");
    }
    assert_eq!(
        std::fs::read(root.join(".git/config")).expect("config"),
        config
    );
    assert!(!root.join(".git/hooks/pre-commit").exists());
}

#[test]
fn a_policy_opening_git_internals_with_staging_on_does_not_start() {
    let (_d, root) = canonical_tempdir("fsgate-vcs-");
    repo(&root);
    let (_s, state) = canonical_tempdir("fsgate-vcs-state-");
    let pol = state.join("p.toml");
    std::fs::write(&pol, format!("{STAGE_ALL}[secrets]\nbuiltin = false\n")).expect("policy");
    let out = Command::new(bin())
        .args(["serve", "--workspace"])
        .arg(&root)
        .arg("--policy")
        .arg(&pol)
        .arg("--audit-log")
        .arg(state.join("a.jsonl"))
        .arg("--backup-dir")
        .arg(state.join("b"))
        .stdin(Stdio::null())
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("[vcs] stage") && err.contains(".git"), "{err}");
}

#[test]
fn staging_off_or_no_repository_stages_nothing_and_writes_still_work() {
    let (_d, root) = canonical_tempdir("fsgate-vcs-");
    repo(&root);
    let mut off = Served::start(&root, &STAGE_ALL.replace("stage = true", "stage = false"));
    off.write("a.txt", "a\n");
    assert!(cached(&root).is_empty());
    assert!(off.stage_records().is_empty());
    drop(off);

    let (_n, plain) = canonical_tempdir("fsgate-vcs-norepo-");
    let mut g = Served::start(&plain, STAGE_ALL);
    g.write("a.txt", "a\n");
    assert_eq!(std::fs::read(plain.join("a.txt")).expect("written"), b"a\n");
    assert!(g.stage_records().is_empty());
}

#[test]
fn a_staging_failure_is_recorded_and_the_write_still_succeeds() {
    let (_d, root) = canonical_tempdir("fsgate-vcs-");
    repo(&root);
    let mut g = Served::start(&root, STAGE_ALL);
    // Another git holds the index.
    std::fs::write(root.join(".git/index.lock"), "").expect("lock");
    g.write("a.txt", "a\n");
    assert_eq!(std::fs::read(root.join("a.txt")).expect("written"), b"a\n");
    let rec = g.stage_records();
    assert_eq!(rec.len(), 1, "{rec:?}");
    let e = rec[0]["details"]["error"].as_str().expect("error recorded");
    assert!(e.contains("index.lock") || e.contains("lock"), "{e}");
    std::fs::remove_file(root.join(".git/index.lock")).expect("unlock");
    g.write("b.txt", "b\n");
    assert_eq!(
        cached(&root),
        ["b.txt"],
        "a.txt stays unstaged; the next change stages"
    );
}

#[test]
fn a_reload_opening_git_internals_with_staging_on_is_rejected() {
    let (_d, root) = canonical_tempdir("fsgate-vcs-");
    repo(&root);
    let mut g = Served::start(&root, STAGE_ALL);
    g.write("a.txt", "a\n");
    std::fs::write(
        &g.policy,
        format!("{STAGE_ALL}[secrets]\nbuiltin = false\n"),
    )
    .expect("policy");
    let status = Command::new("kill")
        .args(["-HUP", &g.child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let deadline = std::time::Instant::now() + TIMEOUT;
    while g.records("reload-rejected").is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "no reload-rejected record"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let err = g.records("reload-rejected")[0]["details"]["error"].to_string();
    assert!(err.contains("[vcs] stage"), "{err}");
    let e = g
        .call("fs/read_text_file", json!({"path": g.abs(".git/config")}))
        .expect_err("still refused");
    assert_eq!(e["code"], json!(REFUSED));
}

/// Several workspaces: each change is staged in the git repository of the workspace it
/// was made in, as that repository names the path (two workspaces of one repository
/// share its index), with the gateway confined as always.
#[test]
fn several_workspaces_each_stage_in_their_own_repository() {
    let (_a, one) = canonical_tempdir("fsgate-vcs-");
    repo(&one);
    let (_b, two) = canonical_tempdir("fsgate-vcs-");
    repo(&two);
    let pkg = two.join("pkg");
    let (_c, three) = canonical_tempdir("fsgate-vcs-");
    repo(&three);
    let (x, y) = (three.join("x"), three.join("y"));
    for d in [&pkg, &x, &y] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    let mut g = Served::start_all(&[&one, &pkg, &x, &y], STAGE_ALL);
    let write = |g: &mut Served, p: PathBuf| {
        let path = p.to_string_lossy().into_owned();
        g.call(
            "fs/write_text_file",
            json!({"path": path, "content": "x\n"}),
        )
        .unwrap_or_else(|e| panic!("write {path}: {e}"));
    };
    write(&mut g, one.join("a.txt"));
    write(&mut g, pkg.join("b.txt"));
    write(&mut g, pkg.join("b.log"));
    write(&mut g, x.join("c.txt"));
    write(&mut g, y.join("d.txt"));
    assert_eq!(cached(&one), ["a.txt"]);
    assert_eq!(cached(&two), ["pkg/b.txt"]);
    assert_eq!(cached(&three), ["x/c.txt", "y/d.txt"]);
    let rec = g.stage_records();
    assert_eq!(rec.len(), 5, "{rec:?}");
    assert!(
        rec.iter().all(|r| r["details"].get("error").is_none()),
        "staged under the gateway's own sandbox: {rec:?}"
    );
}
