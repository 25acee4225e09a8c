//! The agent's own shell tool under `fsgate acp --confine-agent` (issue 58): its
//! processes see the workspace through fsgate's view. The scripted model asks the
//! shell for `cat .env` (refused: the secret never reaches the model), `python3
//! test_app.py` (a test reading workspace files and writing result.txt: it passes),
//! `echo hi > notes2.txt` and `rm a.txt` (each recorded naming its process, with the
//! previous content backed up, under the agent's ACP session), and `fsgate undo
//! --session` of that session brings a.txt back.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use super::scenario::{Agent, launch_with, open_session, prompt_step};

const SECRET: &str = "fsgate-shell-dotenv-secret-7781";

const TEST_APP: &str = "import pathlib\n\
    a = pathlib.Path('a.txt').read_text()\n\
    assert a == 'alpha\\nbeta\\n', a\n\
    pathlib.Path('result.txt').write_text('passed\\n')\n\
    print('TEST-APP-PASSED')\n";

/// The shell commands, in order. The system's python3: the one first on this
/// machine's PATH may be a shim in the home directory, which a confined agent does not
/// reach.
const COMMANDS: [&str; 4] = [
    "cat .env",
    "/usr/bin/python3 test_app.py",
    "echo hi > notes2.txt",
    "rm a.txt",
];

/// Runs the four commands through `agent`'s shell tool `tool` (its arguments made by
/// `args` from the command line), confined, with the default policy, and checks what
/// must hold.
/// `mode`: the session mode to set first, if any (Claude Code's own default, "auto",
/// asks a classifier, which the scripted model cannot answer, before each command that
/// changes files; "default" asks the editor, which allows).
pub fn shell_through_the_view(
    agent: &Agent,
    (tool, mode): (&str, Option<&str>),
    args: fn(&str) -> Value,
) {
    let (mut ed, fake, _stub) = launch_with(agent, true, None);
    let root = ed.root.clone();
    seed(&root);
    let sid = open_session(&mut ed, agent);
    if let Some(mode) = mode {
        let id = ed.request(
            "session/set_mode",
            json!({"sessionId": sid, "modeId": mode}),
        );
        let resp = ed.response_within(&id, Duration::from_secs(30));
        assert!(resp["error"].is_null(), "{}: set_mode: {resp}", agent.name);
    }
    for command in COMMANDS {
        let want = json!([{"tool": tool, "args": args(command)}]);
        prompt_step(&mut ed, agent, &sid, command, want);
    }
    let name = agent.name;
    let context = || format!("\nfsgate stderr:\n{}", ed.stderr());
    // What the model was sent: the test's output, never the secret.
    let bodies: Vec<String> = fake
        .requests()
        .iter()
        .map(|r| r["body"].as_str().unwrap_or_default().to_owned())
        .collect();
    let leaked: Vec<&str> = bodies
        .iter()
        .filter_map(|b| {
            b.find(SECRET)
                .map(|at| &b[at.saturating_sub(600)..(at + 100).min(b.len())])
        })
        .collect();
    assert!(
        leaked.is_empty(),
        "{name}: the model was sent the secret: {leaked:#?}{}",
        context()
    );
    let results = received_texts(&fake.main_requests());
    assert!(
        results.iter().any(|t| t.contains("TEST-APP-PASSED")),
        "{name}: the test did not pass: {results:#?}{}",
        context()
    );
    assert_eq!(read(&root, "result.txt"), Some("passed\n".into()), "{name}");
    assert_eq!(read(&root, "notes2.txt"), Some("hi\n".into()), "{name}");
    assert!(!root.join("a.txt").exists(), "{name}: a.txt is still there");
    // The agent holds one ACP session, prompted while its shell runs: the view's
    // records carry that session (docs/run.md), not the view's own.
    let session = sid.clone();
    assert_ne!(session, view_session(&ed.audit_records(), name), "{name}");
    let records = ed.audit_records();
    let shell_change = |op: &str, path: &str| {
        records
            .iter()
            .find(|r| {
                r["kind"] == "request" && r["op"] == op && r["path"] == path && r["outcome"] == "ok"
            })
            .unwrap_or_else(|| panic!("{name}: no {op} {path} record{}", context()))
            .clone()
    };
    let rm = shell_change("rm", "a.txt");
    assert_eq!(rm["session"], session.as_str(), "{name}: {rm}");
    assert!(rm["peer"].to_string().contains("rm"), "{name}: {rm}");
    assert!(
        rm["backup"].is_string(),
        "{name}: a.txt not backed up: {rm}"
    );
    let note = shell_change("write_text_file", "notes2.txt");
    assert_eq!(note["session"], session.as_str(), "{name}: {note}");
    assert!(!note["peer"].is_null(), "{name}: {note}");
    let env_refused = records
        .iter()
        .any(|r| r["kind"] == "request" && r["path"] == ".env" && r["decision"] == "deny");
    assert!(
        env_refused,
        "{name}: no refusal of .env recorded{}",
        context()
    );
    ed.close_stdin();
    ed.wait_exit(Duration::from_secs(30));
    undo(&ed.root, &ed.state, &session);
    assert_eq!(
        read(&root, "a.txt"),
        Some("alpha\nbeta\n".into()),
        "{name}: undo"
    );
}

fn seed(root: &Path) {
    std::fs::write(root.join("a.txt"), "alpha\nbeta\n").expect("seed");
    std::fs::write(root.join(".env"), format!("TOKEN={SECRET}\n")).expect("seed");
    std::fs::write(root.join("test_app.py"), TEST_APP).expect("seed");
}

fn read(root: &Path, rel: &str) -> Option<String> {
    std::fs::read_to_string(root.join(rel)).ok()
}

/// Every tool result text the model was sent.
fn received_texts(requests: &[Value]) -> Vec<String> {
    requests
        .iter()
        .flat_map(|r| r["received"].as_array().cloned().unwrap_or_default())
        .filter_map(|r| r["text"].as_str().map(str::to_owned))
        .collect()
}

/// The view's session, named by the `agent-start` record.
fn view_session(records: &[Value], name: &str) -> String {
    let start = records
        .iter()
        .find(|r| r["kind"] == "agent-start")
        .unwrap_or_else(|| panic!("{name}: no agent-start record"));
    start["details"]["view"]["session"]
        .as_str()
        .unwrap_or_else(|| panic!("{name}: no view in {start}"))
        .to_owned()
}

/// `fsgate undo --session SESSION` of the workspace.
fn undo(root: &Path, state: &Path, session: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_fsgate"))
        .arg("undo")
        .arg("--workspace")
        .arg(root)
        .arg("--audit-log")
        .arg(state.join("audit.jsonl"))
        .arg("--backup-dir")
        .arg(state.join("backups"))
        .args(["--session", session])
        .output()
        .expect("fsgate undo");
    assert!(
        out.status.success(),
        "undo: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `git add` and `commit` through `agent`'s shell tool, confined, under the shipped
/// policies/examples/git-through-the-view.toml (which lets git write `.git` but never
/// its hooks or config, so the repository is made outside the agent first): the commit
/// is in the real repository, its writes recorded under the view's session.
pub fn git_commit_through_the_view(
    agent: &Agent,
    (tool, mode): (&str, Option<&str>),
    args: fn(&str) -> Value,
) {
    let policy = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/examples/git-through-the-view.toml"),
    )
    .expect("the git policy");
    let (mut ed, _fake, _stub) = launch_with(agent, true, Some(&policy));
    let root = ed.root.clone();
    seed(&root);
    let init = Command::new("git")
        .args(["init", "-q", "."])
        .current_dir(&root)
        .status()
        .expect("git init");
    assert!(init.success(), "git init outside the agent");
    let sid = open_session(&mut ed, agent);
    if let Some(mode) = mode {
        let id = ed.request(
            "session/set_mode",
            json!({"sessionId": sid, "modeId": mode}),
        );
        let resp = ed.response_within(&id, Duration::from_secs(30));
        assert!(resp["error"].is_null(), "{}: set_mode: {resp}", agent.name);
    }
    let command = "git add test_app.py && git -c user.name=a -c user.email=a@example.com commit -qm fsgate-first";
    let want = json!([{"tool": tool, "args": args(command)}]);
    prompt_step(&mut ed, agent, &sid, "git commit", want);
    let log = Command::new("git")
        .args(["log", "--format=%s"])
        .current_dir(&root)
        .output()
        .expect("git log");
    assert_eq!(
        String::from_utf8_lossy(&log.stdout),
        "fsgate-first\n",
        "{}: {}\nfsgate stderr:\n{}",
        agent.name,
        String::from_utf8_lossy(&log.stderr),
        ed.stderr()
    );
    let session = view_session(&ed.audit_records(), agent.name);
    let git_writes = ed.audit_records().into_iter().any(|r| {
        r["kind"] == "request"
            && r["session"] == session.as_str()
            && r["path"].as_str().is_some_and(|p| p.starts_with(".git/"))
            && r["outcome"] == "ok"
    });
    assert!(git_writes, "{}: no .git change recorded", agent.name);
}
