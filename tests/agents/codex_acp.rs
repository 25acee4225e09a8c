//! Codex through Zed's ACP adapter (`codex-acp`) behind `fsgate acp --confine-agent`, its
//! model replaced by the fake (a model provider of Codex's configuration at the fake; the
//! editor authenticates with `openai-api-key` before `session/new`). Confined, the agent
//! and its shell work on the workspace through fsgate's view: the steps of
//! `under_run.rs`, each a prompt, governed the same way.

use std::time::Duration;

use serde_json::{Value, json};

use super::scenario::{Agent, installed, launch, prompt_step};
use super::under_run::{PATCH, SECRET, TEST_APP};
use crate::acp_proxy::editor::Editor;

const LIMIT: Duration = Duration::from_secs(90);

fn agent(test: &str) -> Option<Agent> {
    let bin = installed(test, "codex-acp/node_modules/.bin/codex-acp")?;
    // The key's variable is one the default `[agent]` section passes to a confined agent.
    let provider = "model_providers.fsgate-stub={name=\"fsgate-stub\",base_url=\"{STUB}/v1\",env_key=\"OPENAI_API_KEY\",wire_api=\"responses\"}";
    let args = [
        "-c",
        "model_provider=\"fsgate-stub\"",
        "-c",
        provider,
        "-c",
        "model=\"gpt-5.5\"",
        "-c",
        "sandbox_mode=\"danger-full-access\"",
        "-c",
        "approval_policy=\"never\"",
    ];
    let mut command = vec![bin.into_os_string()];
    command.extend(args.iter().map(Into::into));
    Some(Agent {
        name: "codex-acp",
        command,
        env: vec![("OPENAI_API_KEY".into(), "sk-fsgate-test-not-a-key".into())],
        builtins: &[],
    })
}

/// `initialize`, `authenticate` (`openai-api-key`) and `session/new` in the workspace.
fn session(ed: &mut Editor) -> String {
    let init = json!({
        "protocolVersion": 1,
        "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false},
        "clientInfo": {"name": "fsgate-agents-test", "version": "0"},
    });
    let steps = [
        ("initialize", init),
        ("authenticate", json!({"methodId": "openai-api-key"})),
        (
            "session/new",
            json!({"cwd": ed.root.clone(), "mcpServers": []}),
        ),
    ];
    let mut last = Value::Null;
    for (method, params) in steps {
        let id = ed.request(method, params);
        last = ed.response_within(&id, LIMIT);
        assert!(
            last.get("result").is_some(),
            "{method}: {last}\n{}",
            ed.stderr()
        );
    }
    last["result"]["sessionId"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Confined, Codex's shell and `apply_patch` work on the workspace through the view:
/// `cat .env` is refused (the model is never sent the secret), the test passes, each
/// change is recorded naming the process, with its backup, and `fsgate undo` of the
/// session brings `a.txt` and `b.txt` back.
#[test]
fn codex_acp_confined_shell_and_apply_patch_are_governed() {
    let test = "codex_acp_confined_shell_and_apply_patch_are_governed";
    let Some(agent) = agent(test) else { return };
    let (mut ed, fake, _stub) = launch(&agent, true);
    let files = [
        (".env", format!("TOKEN={SECRET}\n")),
        ("a.txt", "hello\n".to_owned()),
        ("b.txt", "one\ntwo\n".to_owned()),
        ("test_app.py", TEST_APP.to_owned()),
    ];
    for (name, text) in files {
        std::fs::write(ed.root.join(name), text).expect("seed");
    }
    let sid = session(&mut ed);
    let shell = |c: &str| json!([{ "shell": c }]);
    let steps = [
        ("cat .env", shell("cat .env")),
        ("test", shell("python3 test_app.py")),
        ("echo", shell("echo hi > notes2.txt")),
        ("rm", shell("rm a.txt")),
        ("apply_patch", json!([{ "patch": PATCH }])),
    ];
    for (label, want) in steps {
        prompt_step(&mut ed, &agent, &sid, label, want);
    }
    let ctx = format!("stderr:\n{}", ed.stderr());
    for r in fake.requests() {
        let body = r["body"].as_str().unwrap_or_default();
        assert!(
            !body.contains(SECRET),
            "the model was sent the secret\n{ctx}"
        );
    }
    let root = ed.root.clone();
    let read = |rel: &str| std::fs::read_to_string(root.join(rel)).ok();
    assert_eq!(read("result.txt").as_deref(), Some("passed\n"), "{ctx}");
    assert_eq!(read("notes2.txt").as_deref(), Some("hi\n"), "{ctx}");
    assert_eq!(read("a.txt"), None, "{ctx}");
    assert_eq!(read("b.txt").as_deref(), Some("uno\ntwo\n"), "{ctx}");
    let records = ed.audit_records();
    let find = |op: &str, path: &str, decision: &str, by: &str| -> Value {
        records
            .iter()
            .find(|r| {
                r["kind"] == "request"
                    && r["op"] == op
                    && r["path"] == path
                    && r["decision"] == decision
                    && r["peer"].as_str().is_some_and(|p| p.contains(by))
            })
            .cloned()
            .unwrap_or_else(|| panic!("no {decision} record of {op} {path} by {by}\n{ctx}"))
    };
    find("stat", ".env", "deny", r#""cat",".env""#);
    find("write_text_file", "result.txt", "allow", r#"test_app.py"]"#);
    find("write_text_file", "notes2.txt", "allow", r#"bash""#);
    let removed = find("rm", "a.txt", "allow", r#"["rm","a.txt"]"#);
    let patched = find("write_text_file", "b.txt", "allow", "codex");
    for rec in [&removed, &patched] {
        assert!(rec["backup"].is_string(), "{rec}");
    }
    let session = removed["session"].as_str().expect("the record's session");
    // An undo waits for the gateway that holds the log to end: the editor closes.
    ed.close_stdin();
    assert!(
        ed.wait_exit(LIMIT).is_some(),
        "fsgate acp did not end\n{ctx}"
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fsgate"))
        .args(["undo", "--workspace"])
        .arg(&ed.root)
        .arg("--audit-log")
        .arg(ed.state.join("audit.jsonl"))
        .arg("--backup-dir")
        .arg(ed.state.join("backups"))
        .args(["--session", session])
        .output()
        .expect("fsgate undo");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(read("a.txt").as_deref(), Some("hello\n"));
    assert_eq!(read("b.txt").as_deref(), Some("one\ntwo\n"));
}
