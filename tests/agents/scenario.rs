//! One real agent behind `fsgate acp` with the default policy, one workspace, nine steps
//! the scripted model asks for (read, write a new file, edit, overwrite, list, grep, read
//! `.env`, `.env.local` and a file outside the workspace), and what must hold after:
//! every step decided by fsgate, every change recorded with its backup, nothing changed
//! without a record, no secret sent to the model, no built-in file tool offered to it.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::fake::{Fake, offered};
use crate::acp_proxy::editor::{Editor, Options, repo};

/// How long one prompt (one step: a tool call and the final text) may take.
const STEP_LIMIT: Duration = Duration::from_secs(90);
/// How long `session/new` may take (the agent starts its engine and MCP servers).
const SESSION_LIMIT: Duration = Duration::from_secs(90);

/// Text only the secret files hold: the model must never be sent it.
const SECRETS: [&str; 3] = [
    "fsgate-dotenv-secret-4417",
    "fsgate-dotenv-local-secret-9921",
    "fsgate-outside-secret-3308",
];

/// A real agent and how to start it against the fake.
pub struct Agent {
    /// For messages.
    pub name: &'static str,
    /// The agent's command line.
    pub command: Vec<OsString>,
    /// Its environment (besides what the harness sets): base URL, key, ...
    pub env: Vec<(String, OsString)>,
    /// Its built-in tools that reach files: none may be offered to the model.
    pub builtins: &'static [&'static str],
}

/// The binaries an agent needs on PATH: Node 22 first.
pub fn path_with_node22() -> OsString {
    let node = repo().join(".peers/node22/node_modules/.bin");
    let mut parts = vec![node];
    parts.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(parts).unwrap_or_default()
}

/// The installed agent binary `rel` under `.peers/`, or None (skipped, or failed under CI).
pub fn installed(test: &str, rel: &str) -> Option<PathBuf> {
    let bin = repo().join(".peers").join(rel);
    let node = repo().join(".peers/node22/node_modules/.bin/node");
    for needed in [&bin, &node] {
        if !needed.exists() {
            crate::common::skip_or_fail(
                test,
                &format!(
                    "{} is missing: run ./scripts/install-peers.sh",
                    needed.display()
                ),
            );
            return None;
        }
    }
    Some(bin)
}

/// One step: what the model asks for and what fsgate must have decided.
struct Step {
    label: &'static str,
    tool: &'static str,
    args: Value,
    /// The audit op and workspace-relative path of its record.
    op: &'static str,
    path: String,
    /// The decision fsgate must record.
    decision: &'static str,
}

fn steps(root: &Path, outside: &Path) -> Vec<Step> {
    let p = |rel: &str| root.join(rel).to_string_lossy().into_owned();
    let out = outside.join("secret.txt").to_string_lossy().into_owned();
    let step = |label, tool, args, op, path: &str, decision| Step {
        label,
        tool,
        args,
        op,
        path: path.to_owned(),
        decision,
    };
    vec![
        step(
            "read",
            "read_text_file",
            json!({"path": p("a.txt")}),
            "read_text_file",
            "a.txt",
            "allow",
        ),
        step(
            "write a new file",
            "write_text_file",
            json!({"path": p("new.txt"), "content": "fresh\n"}),
            "write_text_file",
            "new.txt",
            "allow",
        ),
        step(
            "edit",
            "edit_file",
            json!({"path": p("b.txt"), "edits": [{"oldText": "one", "newText": "uno"}]}),
            "edit_text_file",
            "b.txt",
            "allow",
        ),
        step(
            "overwrite",
            "write_text_file",
            json!({"path": p("a.txt"), "content": "rewritten\n"}),
            "write_text_file",
            "a.txt",
            "allow",
        ),
        step("list", "ls", json!({"path": p("")}), "ls", "", "allow"),
        step(
            "grep",
            "grep",
            json!({"pattern": "two"}),
            "grep",
            "",
            "allow",
        ),
        step(
            "read .env",
            "read_text_file",
            json!({"path": p(".env")}),
            "read_text_file",
            ".env",
            "deny",
        ),
        step(
            "read .env.local",
            "read_text_file",
            json!({"path": p(".env.local")}),
            "read_text_file",
            ".env.local",
            "deny",
        ),
        step(
            "read outside",
            "read_text_file",
            json!({"path": out}),
            "read_text_file",
            &out,
            "deny",
        ),
    ]
}

/// What a run left behind, for the checks.
pub struct Outcome {
    pub ed: Editor,
    pub fake: Fake,
    /// The audit log the file tools' records are in.
    pub log: PathBuf,
    pub backups: PathBuf,
    before: BTreeMap<String, Vec<u8>>,
    steps: Vec<Step>,
    _stub_dir: tempfile::TempDir,
}

/// Starts `agent` under `fsgate acp` (confined or not) with the default policy and its
/// model fake; the temporary directory is the agent's home and working directory.
pub fn launch(agent: &Agent, confine: bool) -> (Editor, Fake, tempfile::TempDir) {
    launch_with(agent, confine, None)
}

/// [`launch`] with a policy of the test's (the default if None).
pub fn launch_with(
    agent: &Agent,
    confine: bool,
    policy: Option<&str>,
) -> (Editor, Fake, tempfile::TempDir) {
    let stub_dir = tempfile::tempdir().expect("tempdir");
    let fake = Fake::start(&stub_dir.path().join("model.jsonl"));
    let mut env = agent.env.clone();
    env.push(("PATH".into(), path_with_node22()));
    env.push(("HOME".into(), stub_dir.path().into()));
    // `{STUB}` in a value or an argument is the fake's base URL.
    let mut command = agent.command.clone();
    for v in env.iter_mut().map(|(_, v)| v).chain(command.iter_mut()) {
        if let Some(s) = v.to_str().filter(|s| s.contains("{STUB}")) {
            *v = s.replace("{STUB}", &fake.url()).into();
        }
    }
    let opts = Options {
        confine,
        env,
        policy_text: policy.map(str::to_owned),
        cwd: Some(stub_dir.path().to_path_buf()),
        ..Default::default()
    };
    (Editor::launch(&command, opts), fake, stub_dir)
}

/// `initialize` and `session/new` in the workspace (the editor lists no MCP server:
/// fsgate adds its own); the session's id.
pub fn open_session(ed: &mut Editor, agent: &Agent) -> String {
    let init = json!({
        "protocolVersion": 1,
        "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": false},
        "clientInfo": {"name": "fsgate-agents-test", "version": "0"},
    });
    let id = ed.request("initialize", init);
    ed.response_within(&id, SESSION_LIMIT);
    let root = ed.root.clone();
    let id = ed.request("session/new", json!({"cwd": root, "mcpServers": []}));
    let resp = ed.response_within(&id, SESSION_LIMIT);
    resp["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| {
            panic!(
                "{}: session/new failed: {resp}\nstderr:\n{}",
                agent.name,
                ed.stderr()
            )
        })
        .to_owned()
}

/// One prompt asking the model for the first tool of `want` it is offered; waits for
/// the end of the turn.
pub fn prompt_step(ed: &mut Editor, agent: &Agent, sid: &str, label: &str, want: Value) {
    let want = json!({"want": want});
    let id = ed.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": format!("FSGATE-STEP {want}")}]}),
    );
    let resp = ed.response_within(&id, STEP_LIMIT);
    assert_eq!(
        resp["result"]["stopReason"],
        "end_turn",
        "{}: step {label}: {resp}\nstderr:\n{}",
        agent.name,
        ed.stderr()
    );
}

/// Starts `agent` under `fsgate acp` (confined or not) with the default policy, opens a
/// session, and has the model take the nine steps through fsgate's tools.
pub fn run(agent: &Agent, confine: bool) -> Outcome {
    let (mut ed, fake, stub_dir) = launch(agent, confine);
    let root = ed.root.clone();
    let outside = ed.outside.clone();
    seed(&root, &outside);
    let before = snapshot(&root);
    let sid = open_session(&mut ed, agent);
    let steps = steps(&root, &outside);
    for s in &steps {
        let want = json!([{"mcp": s.tool, "args": s.args}]);
        prompt_step(&mut ed, agent, &sid, s.label, want);
    }
    let (log, backups) = (ed.state.join("audit.jsonl"), ed.state.join("backups"));
    Outcome {
        ed,
        fake,
        log,
        backups,
        before,
        steps,
        _stub_dir: stub_dir,
    }
}

fn seed(root: &Path, outside: &Path) {
    let files = [
        ("a.txt", "alpha\nbeta\n".to_owned()),
        ("b.txt", "one\ntwo\n".to_owned()),
        (".env", format!("TOKEN={}\n", SECRETS[0])),
        (".env.local", format!("TOKEN={}\n", SECRETS[1])),
    ];
    for (name, text) in files {
        std::fs::write(root.join(name), text).expect("seed workspace");
    }
    std::fs::write(outside.join("secret.txt"), SECRETS[2]).expect("seed outside");
}

/// Every regular file under `root`, by relative path, with its content.
fn snapshot(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read_dir").flatten() {
            let path = entry.path();
            let rel = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .to_string_lossy()
                .into_owned();
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(path),
                Ok(t) if t.is_file() => {
                    out.insert(rel, std::fs::read(&path).unwrap_or_default());
                }
                _ => {}
            }
        }
    }
    out
}

impl Outcome {
    fn records(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    fn context(&self) -> String {
        format!("\nfsgate stderr:\n{}", self.ed.stderr())
    }

    /// Every step reached an fsgate tool, and its result came back to the model.
    pub fn every_step_used_fsgate(&self, agent: &str) {
        let reqs = self.fake.main_requests();
        for s in &self.steps {
            let mine: Vec<&Value> = reqs
                .iter()
                .filter(|r| r["answer"]["step"][0]["args"] == s.args)
                .collect();
            let called = mine.iter().any(|r| {
                r["answer"]["tool"].as_str().is_some_and(|t| {
                    t.contains("fsgate") && t.ends_with(s.tool) && t.starts_with("mcp_")
                })
            });
            let done = mine.iter().any(|r| r["answer"]["text"] == "FSGATE-DONE");
            assert!(
                called && done,
                "{agent}: step {:?} did not go through fsgate's {} (answers: {:?}){}",
                s.label,
                s.tool,
                mine.iter()
                    .map(|r| r["answer"].to_string())
                    .collect::<Vec<_>>(),
                self.context()
            );
        }
    }

    /// Each step has its record with the decision fsgate made.
    pub fn every_step_recorded(&self, agent: &str) {
        let records = self.records();
        for s in &self.steps {
            let found = records.iter().any(|r| {
                r["kind"] == "request"
                    && r["op"] == s.op
                    && r["decision"] == s.decision
                    && (s.path.is_empty() || r["path"] == s.path.as_str() || denied_outside(r, s))
            });
            let seen: Vec<String> = records
                .iter()
                .filter(|r| r["kind"] == "request")
                .map(|r| {
                    format!(
                        "{} {} {} {}",
                        r["op"], r["path"], r["decision"], r["outcome"]
                    )
                })
                .collect();
            assert!(
                found,
                "{agent}: no {} record of {} {:?} in {}: {seen:#?}{}",
                s.decision,
                s.op,
                s.path,
                self.log.display(),
                self.context()
            );
        }
    }

    /// The workspace changed exactly where a recorded write was, each change with its
    /// backup (edit and overwrite) in the same log.
    pub fn changes_recorded_with_backups(&self, agent: &str) {
        let after = snapshot(&self.ed.root);
        let mut changed: Vec<&String> = after
            .iter()
            .filter(|(k, v)| self.before.get(*k) != Some(*v))
            .map(|(k, _)| k)
            .collect();
        changed.extend(self.before.keys().filter(|k| !after.contains_key(*k)));
        assert_eq!(
            changed,
            ["a.txt", "b.txt", "new.txt"],
            "{agent}: changed files{}",
            self.context()
        );
        assert_eq!(after["a.txt"], b"rewritten\n");
        assert_eq!(after["b.txt"], b"uno\ntwo\n");
        assert_eq!(after["new.txt"], b"fresh\n");
        let records = self.records();
        let listed = backup_list(&self.backups);
        for (op, path) in [("edit_text_file", "b.txt"), ("write_text_file", "a.txt")] {
            let rec = records
                .iter()
                .rfind(|r| {
                    r["kind"] == "request"
                        && r["op"] == op
                        && r["path"] == path
                        && r["outcome"] == "ok"
                })
                .unwrap_or_else(|| {
                    panic!("{agent}: no ok record of {op} {path}{}", self.context())
                });
            let id = rec["backup"]
                .as_str()
                .unwrap_or_else(|| panic!("{agent}: {op} {path} names no backup: {rec}"));
            assert!(
                listed.contains(id),
                "{agent}: backup {id} not in the store: {listed}"
            );
        }
    }

    /// No request the model was sent holds a secret's text.
    pub fn no_secret_reached_the_model(&self, agent: &str) {
        for r in self.fake.requests() {
            let body = r["body"].as_str().unwrap_or_default();
            for s in SECRETS {
                assert!(
                    !body.contains(s),
                    "{agent}: the model was sent {s} ({})",
                    r["path"]
                );
            }
        }
    }

    /// The editor was asked nothing: the default policy has no `ask` rule, so a
    /// `session/request_permission` here is the agent's own prompt for fsgate's tools,
    /// which its profile allows (issue 57).
    pub fn editor_never_asked(&self, agent: &str) {
        let asked: Vec<String> = self
            .ed
            .lines()
            .into_iter()
            .filter(|v| v["method"] == "session/request_permission")
            .map(|v| v["params"]["toolCall"]["title"].to_string())
            .collect();
        assert!(
            asked.is_empty(),
            "{agent}: the editor was asked {} time(s) about: {asked:?}{}",
            asked.len(),
            self.context()
        );
    }

    /// No tool-loop request offered one of the agent's built-in file tools.
    pub fn no_builtin_file_tool_offered(&self, agent: &str, builtins: &[&str]) {
        let reqs = self.fake.main_requests();
        assert!(
            !reqs.is_empty(),
            "{agent}: the model was never asked{}",
            self.context()
        );
        for r in reqs {
            let tools = offered(&r);
            for b in builtins {
                assert!(
                    !tools.iter().any(|t| t == b),
                    "{agent}: built-in {b} offered: {tools:?}"
                );
            }
        }
    }

    /// The start record names the profile and what it turned off.
    pub fn profile_recorded(&self, agent: &str, name: &str) {
        let start = self
            .ed
            .audit_records()
            .into_iter()
            .find(|r| r["kind"] == "agent-start")
            .unwrap_or_else(|| panic!("{agent}: no agent-start record"));
        let profile = &start["details"]["agentProfile"];
        assert_eq!(profile["name"], name, "{profile}");
        assert!(
            profile["off"].as_array().is_some_and(|a| !a.is_empty()),
            "{profile}"
        );
        assert!(
            profile["leftOn"].as_array().is_some_and(|a| !a.is_empty()),
            "{profile}"
        );
        let stderr = self.ed.stderr();
        assert!(
            stderr.contains(&format!("fsgate: agent profile {name}")),
            "{stderr}"
        );
    }
}

/// A refusal of a path outside the workspace records no workspace path.
fn denied_outside(r: &Value, s: &Step) -> bool {
    s.path.starts_with('/') && r["path"].is_null()
}

/// `fsgate backup list --json` of `dir`, as text.
pub fn backup_list(dir: &Path) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fsgate"))
        .args(["backup", "list", "--json", "--backup-dir"])
        .arg(dir)
        .output()
        .expect("run fsgate backup list");
    String::from_utf8_lossy(&out.stdout).into_owned()
}
