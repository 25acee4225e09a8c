//! `fsgate run` and `fsgate acp --confine-agent` with several `--workspace`s: each
//! workspace a view of its own at its own path, all served by one gateway, each request
//! routed to its workspace and recorded with its name; a rename or link from one view to
//! another is EXDEV; `fsgate undo --session` puts both back (docs/run.md).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;
use tempfile::TempDir;

use crate::common::view::{SYSTEM_PATH, finished, give_to_nobody, read_records, text};
use crate::common::{bin, canonical_tempdir};

const SECRET_APP: &str = "hunter2-several-app";
const SECRET_LIB: &str = "hunter2-several-lib";

/// Two workspaces, `app` and `lib`, each with a secret `.env` and `a.txt`, and a state
/// directory outside both.
struct Two {
    app: PathBuf,
    lib: PathBuf,
    state: PathBuf,
    _dirs: (TempDir, TempDir, TempDir),
}

impl Two {
    fn new() -> Two {
        let (d1, app) = canonical_tempdir("fsgate-several-app");
        let (d2, lib) = canonical_tempdir("fsgate-several-lib");
        let (d3, state) = canonical_tempdir("fsgate-several-state");
        for (root, secret, text) in [(&app, SECRET_APP, "app a\n"), (&lib, SECRET_LIB, "lib a\n")] {
            std::fs::write(root.join(".env"), format!("TOKEN={secret}\n")).expect("seed");
            std::fs::write(root.join("a.txt"), text).expect("seed");
        }
        Two {
            app,
            lib,
            state,
            _dirs: (d1, d2, d3),
        }
    }

    fn log(&self) -> PathBuf {
        self.state.join("audit.jsonl")
    }

    /// `--workspace app=... --workspace lib=...` and the state outside both.
    fn args(&self) -> Vec<OsString> {
        let named = |name: &str, p: &Path| OsString::from(format!("{name}={}", p.display()));
        vec![
            "--workspace".into(),
            named("app", &self.app),
            "--workspace".into(),
            named("lib", &self.lib),
            "--audit-log".into(),
            self.log().into(),
            "--backup-dir".into(),
            self.state.join("backups").into(),
        ]
    }

    /// `fsgate run ... -- sh -c SCRIPT` started in `app`, with `$LIB` the other root.
    fn sh(&self, script: &str) -> Output {
        self.run(&["sh", "-c", &self.with_lib(script)])
    }

    /// `SCRIPT` with `$LIB` set first: the wall passes the command no variable of ours.
    fn with_lib(&self, script: &str) -> String {
        format!("LIB='{}'; export LIB; {script}", self.lib.display())
    }

    /// `fsgate run ... -- COMMAND` started in `app`, with the system's `PATH`.
    fn run(&self, command: &[&str]) -> Output {
        let mut cmd = Command::new(bin());
        cmd.arg("run")
            .args(self.args())
            .arg("--")
            .args(command)
            .env("PATH", SYSTEM_PATH)
            .current_dir(&self.app);
        finished(cmd)
    }

    fn records(&self) -> Vec<Value> {
        read_records(&self.log())
    }

    /// The view's changes made: (op, workspace, path) of each allowed change record.
    fn changes(&self) -> Vec<(String, String, String)> {
        self.records()
            .into_iter()
            .filter(|r| r["kind"] == "request" && r["transport"] == "view")
            .filter(|r| {
                r["outcome"] == "ok"
                    && ["write_text_file", "rm", "mkdir", "rename"]
                        .contains(&r["op"].as_str().unwrap_or(""))
            })
            .map(|r| {
                let s = |v: &Value| v.as_str().unwrap_or("").to_owned();
                (s(&r["op"]), s(&r["args"]["workspace"]), s(&r["path"]))
            })
            .collect()
    }
}

/// The undo command the run's last line gives, as arguments after `fsgate`.
fn undo_words(stderr: &str) -> Vec<String> {
    let at = stderr
        .rfind("undo its changes with: fsgate ")
        .unwrap_or_else(|| panic!("no undo line: {stderr}"));
    let line = stderr[at..].lines().next().unwrap_or("");
    let words = &line["undo its changes with: fsgate ".len()..];
    shlex::split(words).unwrap_or_else(|| panic!("not a shell line: {line}"))
}

#[test]
fn view_several_each_workspace_is_a_view_read_written_recorded_and_undone() {
    let two = Two::new();
    let out = two.sh(
        "cat .env; echo app-env=$?; cat \"$LIB/.env\"; echo lib-env=$?; \
         ls -a; ls -a \"$LIB\"; cat a.txt \"$LIB/a.txt\"; \
         df -P . \"$LIB\" | grep -c fsgate; \
         echo mine > new.txt && echo theirs > \"$LIB/new.txt\" && \
         cat \"$LIB/a.txt\" > copied.txt && echo changed > \"$LIB/a.txt\" && rm a.txt && echo done",
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("app-env=1") && stdout.contains("lib-env=1"),
        "{stdout}"
    );
    assert!(
        !stdout.contains(SECRET_APP) && !stdout.contains(SECRET_LIB),
        "{stdout}"
    );
    assert!(!stderr.contains(SECRET_APP) && !stderr.contains(SECRET_LIB));
    assert!(
        !stdout.lines().any(|l| l == ".env"),
        "ls -a shows a secret: {stdout}"
    );
    assert!(stdout.contains("app a\nlib a\n"), "{stdout}");
    // Both directories are views (df names the mount's source, fsgate).
    assert!(stdout.contains("\n2\n"), "{stdout}");
    assert!(stdout.ends_with("done\n"), "{stdout}\n{stderr}");
    assert_eq!(
        std::fs::read_to_string(two.app.join("new.txt")).expect("new"),
        "mine\n"
    );
    assert_eq!(
        std::fs::read_to_string(two.lib.join("new.txt")).expect("new"),
        "theirs\n"
    );
    assert_eq!(
        std::fs::read_to_string(two.app.join("copied.txt")).expect("c"),
        "lib a\n"
    );
    assert_eq!(
        std::fs::read_to_string(two.lib.join("a.txt")).expect("a"),
        "changed\n"
    );
    assert!(!two.app.join("a.txt").exists());
    // Each change recorded in its own workspace, by name, its path that workspace's.
    let changes = two.changes();
    for (op, ws, path) in [
        ("write_text_file", "app", "new.txt"),
        ("write_text_file", "lib", "new.txt"),
        ("write_text_file", "app", "copied.txt"),
        ("write_text_file", "lib", "a.txt"),
        ("rm", "app", "a.txt"),
    ] {
        let want = (op.to_owned(), ws.to_owned(), path.to_owned());
        assert!(changes.contains(&want), "{want:?} not in {changes:?}");
    }
    // The refused secrets, one in each workspace, named so.
    let hidden: Vec<String> = two
        .records()
        .into_iter()
        .filter(|r| r["transport"] == "view" && r["decision"] == "deny" && r["path"] == ".env")
        .map(|r| r["args"]["workspace"].as_str().unwrap_or("").to_owned())
        .collect();
    assert!(
        hidden.iter().any(|w| w == "app") && hidden.iter().any(|w| w == "lib"),
        "{hidden:?}"
    );
    // The end line counts both workspaces' changes (5 at least) and gives the undo.
    let words = undo_words(&stderr);
    assert!(words.iter().any(|w| w.starts_with("app=")), "{words:?}");
    assert!(words.iter().any(|w| w.starts_with("lib=")), "{words:?}");
    let undone = finished({
        let mut c = Command::new(bin());
        c.args(&words);
        c
    });
    assert!(undone.status.success(), "{}", text(&undone.stderr));
    assert!(!two.app.join("new.txt").exists() && !two.lib.join("new.txt").exists());
    assert!(!two.app.join("copied.txt").exists());
    assert_eq!(
        std::fs::read_to_string(two.app.join("a.txt")).expect("a"),
        "app a\n"
    );
    assert_eq!(
        std::fs::read_to_string(two.lib.join("a.txt")).expect("a"),
        "lib a\n"
    );
}

/// rename(2) and link(2) from one workspace's view into another's are EXDEV (two
/// mounts): nothing changes, and the gateway never sees a request across.
#[test]
fn view_several_a_rename_or_link_across_workspaces_is_exdev_and_changes_nothing() {
    let two = Two::new();
    let lib = format!("LIB = '{}'", two.lib.display());
    let py = [
        "import os, errno",
        &lib,
        "for f in (os.rename, os.link):",
        "    try:",
        "        f('a.txt', LIB + '/moved.txt'); print(f.__name__, 'ok')",
        "    except OSError as e:",
        "        print(f.__name__, errno.errorcode[e.errno])",
    ]
    .join("\n");
    let out = two.run(&["python3", "-c", &py]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(
        stdout.contains("rename EXDEV\nlink EXDEV\n"),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(two.app.join("a.txt")).expect("a"),
        "app a\n"
    );
    assert!(!two.lib.join("moved.txt").exists());
    let across: Vec<Value> = two
        .records()
        .into_iter()
        .filter(|r| r["op"] == "rename" || r.to_string().contains("workspace-cross"))
        .collect();
    assert!(across.is_empty(), "the gateway got a rename: {across:?}");
    assert!(two.changes().is_empty(), "{:?}", two.changes());
}

/// `fsgate acp --confine-agent` with two workspaces: the agent's shell sees both
/// through their views (each secret hidden, changes recorded with their workspace),
/// instead of reaching neither.
#[test]
fn view_several_a_confined_agent_sees_every_workspace_through_its_view() {
    use crate::acp_proxy::editor::{Editor, Options};
    let (_lib_dir, lib) = canonical_tempdir("fsgate-several-acp-lib");
    let (_cwd_dir, cwd) = canonical_tempdir("fsgate-several-acp-cwd");
    std::fs::write(lib.join(".env"), format!("TOKEN={SECRET_LIB}\n")).expect("seed");
    std::fs::write(lib.join("a.txt"), "lib a\n").expect("seed");
    let script = format!(
        "exec 1>&2; read root; cd \"$root\" || exit 9; \
         cat {lib}/.env; echo lib-env=$?; cat {lib}/a.txt; \
         echo hi > here.txt && echo there > {lib}/there.txt && echo wrote=$?",
        lib = lib.display()
    );
    let agent: Vec<OsString> = vec!["sh".into(), "-c".into(), script.into()];
    let opts = Options {
        confine: true,
        cwd: Some(cwd),
        workspaces: vec![OsString::from(format!("lib={}", lib.display()))],
        ..Default::default()
    };
    let mut ed = Editor::launch(&agent, opts);
    let root = ed.root.clone();
    ed.send_raw(&root.to_string_lossy());
    let status = ed.wait_exit(Duration::from_secs(60));
    let stderr = ed.stderr();
    assert!(status.is_some(), "the agent did not end\n{stderr}");
    assert!(stderr.contains("lib-env=1"), "{stderr}");
    assert!(!stderr.contains(SECRET_LIB), "the secret reached the agent");
    assert!(
        stderr.contains("lib a") && stderr.contains("wrote=0"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("here.txt")).expect("here"),
        "hi\n"
    );
    assert_eq!(
        std::fs::read_to_string(lib.join("there.txt")).expect("there"),
        "there\n"
    );
    let written: Vec<String> = ed
        .audit_records()
        .into_iter()
        .filter(|r| r["kind"] == "request" && !r["peer"].is_null())
        .filter(|r| r["op"] == "write_text_file" && r["outcome"] == "ok")
        .map(|r| {
            format!(
                "{}:{}",
                r["args"]["workspace"].as_str().unwrap_or(""),
                r["path"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert!(written.iter().any(|w| w == "lib:there.txt"), "{written:?}");
    assert!(
        written
            .iter()
            .any(|w| w.ends_with(":here.txt") && !w.starts_with("lib:")),
        "{written:?}"
    );
}

/// As a user who is not root, the child opens a device per workspace in its user
/// namespace and hands each over: both views are there.
#[test]
fn view_several_a_user_who_is_not_root_gets_a_view_of_each() {
    let two = Two::new();
    for dir in [&two.app, &two.lib, &two.state] {
        give_to_nobody(dir);
    }
    let _fuse = crate::common::DesktopFuse::ensure();
    let mut cmd = Command::new("setpriv");
    cmd.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        bin(),
        "run",
    ])
    .args(two.args())
    .args(["--", "sh", "-c"])
    .arg(two.with_lib(
        "cat \"$LIB/.env\"; echo lib-env=$?; cat \"$LIB/a.txt\"; echo hi > \"$LIB/n.txt\"; id -u",
    ))
    .env("HOME", &two.state)
    .current_dir(&two.app);
    let out = finished(cmd);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert_eq!(stdout, "lib-env=1\nlib a\n65534\n");
    assert_eq!(
        std::fs::read_to_string(two.lib.join("n.txt")).expect("n"),
        "hi\n"
    );
    // The shell's `>`: the file made, then its content written, both in `lib`.
    let changes = two.changes();
    let want = (
        "write_text_file".to_owned(),
        "lib".to_owned(),
        "n.txt".to_owned(),
    );
    assert!(
        !changes.is_empty() && changes.iter().all(|c| *c == want),
        "{changes:?}"
    );
}

/// `fsgate run --help` says what several `--workspace`s are.
#[test]
fn view_several_run_help_says_each_workspace_is_a_view() {
    let out = Command::new(bin())
        .args(["run", "--help"])
        .output()
        .expect("fsgate run --help");
    let help = text(&out.stdout);
    assert!(out.status.success(), "{help}");
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(help.contains("each is a view of its own"), "{help}");
    assert!(help.contains("EXDEV"), "{help}");
}

/// A run's allowed reads in two workspaces are coalesced per process and workspace:
/// each `reads` record names its workspace, together they name every file read, no
/// lookup or open of those files is a record of its own, and the log verifies.
#[test]
fn view_several_reads_in_each_workspace_are_coalesced_naming_it() {
    let two = Two::new();
    let mut files = Vec::new();
    for (ws, root) in [("app", &two.app), ("lib", &two.lib)] {
        std::fs::create_dir(root.join("d")).expect("mkdir");
        for i in 0..200 {
            let name = format!("d/f{i:03}.txt");
            std::fs::write(root.join(&name), format!("{ws} {i}\n")).expect("write");
            files.push((ws.to_owned(), name));
        }
    }
    let out = two.sh("cat d/*.txt | wc -l; cat \"$LIB\"/d/*.txt | wc -l");
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert_eq!(stdout, "200\n200\n", "{}", text(&out.stderr));
    let records = two.records();
    let mut named = std::collections::HashSet::new();
    for r in records.iter().filter(|r| r["op"] == "reads") {
        let ws = r["args"]["workspace"].as_str().unwrap_or("");
        assert!(
            ws == "app" || ws == "lib",
            "a reads record names no workspace: {r}"
        );
        for op in ["stat", "open"] {
            for e in r["details"]["reads"][op].as_array().into_iter().flatten() {
                let path = e[0].as_str().unwrap_or("");
                named.insert((op, ws.to_owned(), path.to_owned()));
            }
        }
    }
    for (ws, f) in &files {
        for op in ["stat", "open"] {
            let want = (op, ws.clone(), f.clone());
            assert!(named.contains(&want), "{want:?} was never named");
        }
    }
    let alone = records
        .iter()
        .filter(|r| r["op"] == "stat" || r["op"] == "open")
        .filter(|r| {
            r["decision"] == "allow" && r["path"].as_str().is_some_and(|p| p.starts_with("d/"))
        })
        .count();
    assert_eq!(alone, 0, "reads recorded one by one");
    let verify = Command::new(bin())
        .args(["audit", "verify"])
        .arg(two.log())
        .output()
        .expect("fsgate audit verify");
    assert!(
        verify.status.success(),
        "{}{}",
        text(&verify.stdout),
        text(&verify.stderr)
    );
}
