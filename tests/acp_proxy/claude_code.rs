//! A real agent as people install it: Zed's Claude Code adapter
//! (`@zed-industries/claude-code-acp`, npm, installed by `./scripts/install-peers.sh` into
//! `.peers/claude-acp`), started confined through its `node_modules/.bin` link. No model
//! is reached (the key is a dummy): the test shows that the agent starts under
//! `--confine-agent` with nothing but discovery, answers `initialize` and opens a session
//! (which starts the Claude Code engine inside the wall), and that the record names what
//! it was granted.

use std::ffi::OsString;
use std::time::Duration;

use serde_json::json;

use super::editor::{Editor, Options, repo};

/// `session/new` starts the Claude Code engine, a second Node process: about 5 CPU-seconds
/// for the two steps together (measured: 2-4 s on an idle 2-core machine, up to 8 s with
/// three busy loops beside it). The limit is there to catch a hang, not to time the start.
const ENGINE_START: Duration = Duration::from_secs(60);

#[test]
fn claude_code_adapter_starts_confined_and_opens_a_session() {
    let test = "claude_code_adapter_starts_confined_and_opens_a_session";
    let bin = repo().join(".peers/claude-acp/node_modules/.bin/claude-code-acp");
    if !bin.exists() {
        crate::common::skip_or_fail(
            test,
            &format!(
                "{} is missing: run ./scripts/install-peers.sh",
                bin.display()
            ),
        );
        return;
    }
    let home = tempfile::tempdir().expect("tempdir");
    let opts = Options {
        confine: true,
        env: vec![
            ("HOME".into(), OsString::from(home.path())),
            (
                "ANTHROPIC_API_KEY".into(),
                "sk-fsgate-test-not-a-key".into(),
            ),
        ],
        ..Default::default()
    };
    let mut ed = Editor::launch(&[bin.into_os_string()], opts);
    let id = ed.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": false}}),
    );
    let init = ed.response_within(&id, ENGINE_START)["result"].clone();
    assert_eq!(
        init["agentInfo"]["name"],
        "@zed-industries/claude-code-acp",
        "{init}\nstderr:\n{}",
        ed.stderr()
    );
    let root = ed.root.clone();
    let id = ed.request("session/new", json!({"cwd": root, "mcpServers": []}));
    let session = ed.response_within(&id, ENGINE_START);
    let sid = session["result"]["sessionId"].as_str().unwrap_or_default();
    assert!(!sid.is_empty(), "{session}\nstderr:\n{}", ed.stderr());
    assert!(
        ed.stderr().contains("agent confined: landlock"),
        "{}",
        ed.stderr()
    );
    let start = ed
        .audit_records()
        .into_iter()
        .find(|r| r["kind"] == "agent-start")
        .expect("agent-start record");
    let grants = start["details"]["agentPlan"]["grants"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let claude_acp = repo()
        .join(".peers/claude-acp")
        .canonicalize()
        .expect("canonical");
    assert!(
        grants.iter().any(|g| g["path"]
            .as_str()
            .is_some_and(|p| p.starts_with(&*claude_acp.to_string_lossy()))
            && g["source"]
                .as_str()
                .is_some_and(|s| !s.starts_with("[agent]"))),
        "the adapter's installation must be granted by discovery: {grants:#?}"
    );
    let names = start["details"]["agentPlan"]["envNames"].to_string();
    assert!(names.contains("ANTHROPIC_API_KEY"), "{names}");
}
