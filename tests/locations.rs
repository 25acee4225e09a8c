//! Where the audit log and backups are: told at start (stderr) and in `initialize`'s
//! `_meta.fsgate`, and found again by every `audit` and `backup` command from the
//! workspace alone (`--workspace`) or from its state directory.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

use crate::common::{TIMEOUT, bin, canonical_tempdir, wait_output};

/// A workspace served with the default locations: under `XDG_STATE_HOME=<state>`.
struct Defaults {
    _dirs: (tempfile::TempDir, tempfile::TempDir),
    ws: PathBuf,
    state: PathBuf,
}

impl Defaults {
    fn new() -> Defaults {
        let (ws_dir, ws) = canonical_tempdir("fsgate-ws-");
        let (state_dir, state) = canonical_tempdir("fsgate-state-");
        Defaults {
            _dirs: (ws_dir, state_dir),
            ws,
            state,
        }
    }

    /// Runs fsgate with `args` (`{WS}` stands for the workspace) and `input` on stdin.
    fn run(&self, args: &[&str], input: &str) -> Output {
        let ws = self.ws.to_string_lossy();
        let mut child = Command::new(bin())
            .args(args.iter().map(|a| a.replace("{WS}", &ws)))
            .env("XDG_STATE_HOME", &self.state)
            .env("HOME", &self.state)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn fsgate");
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(input.as_bytes()).expect("write stdin");
        }
        wait_output(&mut child, TIMEOUT)
    }

    /// `fsgate serve` on the workspace, answering `requests` (one JSON-RPC line each).
    fn serve(&self, requests: &[Value]) -> (Vec<Value>, String) {
        let input: String = requests.iter().map(|r| format!("{r}\n")).collect();
        let out = self.run(&["serve", "--workspace", "{WS}"], &input);
        assert!(out.status.success(), "{out:?}");
        let answers = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("an answer is JSON"))
            .collect();
        (answers, String::from_utf8_lossy(&out.stderr).into_owned())
    }

    /// The one directory under `<state>/fsgate/`: this workspace's state directory.
    fn state_dir(&self) -> PathBuf {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(self.state.join("fsgate"))
            .expect("fsgate made its state directory")
            .map(|e| e.expect("entry").path())
            .collect();
        assert_eq!(dirs.len(), 1, "{dirs:?}");
        dirs.remove(0)
    }
}

fn write(id: u64, path: &Path, content: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "fs/write_text_file",
           "params": {"sessionId": "s", "path": path, "content": content}})
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn serve_tells_where_its_log_and_backups_are() {
    let d = Defaults::new();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                      "params": {"protocolVersion": 1}});
    let (answers, stderr) = d.serve(&[init]);
    let state = d.state_dir();
    let (log, backups) = (state.join("audit/audit.jsonl"), state.join("backups"));
    assert!(log.is_file() && backups.is_dir(), "{}", state.display());
    let lines: Vec<&str> = stderr.lines().collect();
    let told = |what: &str, p: &Path| format!("fsgate: {what}: {}", p.display());
    assert!(
        lines.contains(&told("audit log", &log).as_str()),
        "{stderr}"
    );
    assert!(
        lines.contains(&told("backups", &backups).as_str()),
        "{stderr}"
    );
    let meta = &answers[0]["result"]["_meta"]["fsgate"];
    assert_eq!(meta["auditLog"], json!(log), "{meta}");
    assert_eq!(meta["backupDir"], json!(backups), "{meta}");
    assert!(
        meta["sandbox"].is_object(),
        "beside the sandbox status: {meta}"
    );
}

#[test]
fn acp_proxy_tells_where_its_log_and_backups_are() {
    let d = Defaults::new();
    // `true` is an agent that ends at once; the proxy has started by then.
    let out = d.run(&["acp", "--workspace", "{WS}", "--", "true"], "");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let state = d.state_dir();
    let log = format!(
        "fsgate: audit log: {}",
        state.join("audit/audit.jsonl").display()
    );
    let backups = format!("fsgate: backups: {}", state.join("backups").display());
    assert!(stderr.lines().any(|l| l == log), "{stderr}");
    assert!(stderr.lines().any(|l| l == backups), "{stderr}");
}

#[test]
fn audit_and_backup_commands_find_a_workspaces_default_log_and_store() {
    let d = Defaults::new();
    let notes = d.ws.join("notes.md");
    d.serve(&[write(1, &notes, "first\n")]);
    d.serve(&[write(2, &notes, "second\n")]);
    let state = d.state_dir();
    let state_arg = state.to_string_lossy().into_owned();
    let ws = ["--workspace", "{WS}"];
    let run = |args: &[&str]| d.run(args, "");

    // verify: by workspace, by state directory, by audit directory.
    let audit_dir = state.join("audit").to_string_lossy().into_owned();
    for args in [
        [&["audit", "verify"][..], &ws].concat(),
        vec!["audit", "verify", &state_arg],
        vec!["audit", "verify", &audit_dir],
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
        assert!(stdout(&out).starts_with("INTACT"), "{args:?}: {out:?}");
    }
    // show: the same records whichever way the log is named.
    let by_ws = run(&[&["audit", "show", "--json"][..], &ws].concat());
    assert_eq!(by_ws.status.code(), Some(0), "{by_ws:?}");
    let writes = stdout(&by_ws)
        .lines()
        .filter(|l| l.contains("notes.md"))
        .count();
    assert!(writes >= 2, "both writes are shown: {}", stdout(&by_ws));
    let by_state = run(&["audit", "show", "--json", &state_arg]);
    assert_eq!(stdout(&by_state), stdout(&by_ws));
    // prune: finds the one log too.
    let out = run(&[
        &["audit", "prune", "--dry-run", "--before", "2000-01-01"][..],
        &ws,
    ]
    .concat());
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(stdout(&out).contains("nothing to prune"), "{out:?}");

    // backup list / restore: the store of the same workspace.
    let out = run(&[&["backup", "list"][..], &ws, &["notes.md"]].concat());
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(stdout(&out).contains("notes.md"), "{out:?}");
    let out = run(&[&["backup", "restore"][..], &ws, &["notes.md"]].concat());
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(std::fs::read_to_string(&notes).expect("read"), "first\n");
    // The restore went into the same chain, which still verifies.
    let out = run(&[&["audit", "verify"][..], &ws].concat());
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = run(&[&["audit", "show", "--json"][..], &ws].concat());
    assert!(stdout(&out).contains("restore"), "{out:?}");
}

#[test]
fn audit_show_of_a_workspace_never_served_names_where_it_looked() {
    let d = Defaults::new();
    let out = d.run(&["audit", "show", "--workspace", "{WS}"], "");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no audit log for the workspace")
            && stderr.contains(&*d.state.join("fsgate").to_string_lossy()),
        "{stderr}"
    );
    let out = d.run(&["audit", "verify"], "");
    assert_eq!(out.status.code(), Some(2), "a log or --workspace is needed");
}

/// A workspace that holds fsgate's state directory (`--workspace ~`) may not reach it:
/// another workspace's log there is refused as the state directory, under its own rule,
/// and a listing of its parent hides it.
#[test]
fn a_workspace_holding_the_state_directory_is_refused_it_by_name() {
    let dirs = crate::mcp_harness::Dirs::new();
    let other_log = dirs.put("st/fsgate/other-1/audit/audit.jsonl", "{}\n");
    assert!(other_log.is_file());
    dirs.put("st/keep.txt", "visible\n");
    let mut cmd = Command::new(bin());
    cmd.args(dirs.serve_args())
        .current_dir(&dirs.state)
        .env("XDG_STATE_HOME", dirs.root.join("st"));
    let mut g = crate::mcp_harness::McpGate::spawn(cmd, dirs);
    g.initialize("2025-06-18");
    let read = json!({"name": "read_text_file",
                      "arguments": {"path": "st/fsgate/other-1/audit/audit.jsonl"}});
    let answer = g.call(2, "tools/call", read);
    let text = answer.to_string();
    assert_eq!(answer["isError"], true, "{text}");
    assert!(text.contains("floor:state-dir"), "{text}");
    assert!(text.contains("state directory"), "{text}");
    let list = json!({"name": "list_directory", "arguments": {"path": "st"}});
    let answer = g.call(3, "tools/call", list);
    let listed = answer.to_string();
    assert_ne!(answer["isError"], true, "{listed}");
    assert!(listed.contains("keep.txt"), "the listing: {listed}");
    assert!(
        !listed.contains("fsgate"),
        "the state directory is listed: {listed}"
    );
    let refused: Vec<Value> = g
        .dirs
        .audit_records()
        .into_iter()
        .filter(|r| r["rule"] == "floor:state-dir")
        .collect();
    assert_eq!(refused.len(), 1, "one refusal recorded under its rule");
}
