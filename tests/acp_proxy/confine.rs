//! `fsgate acp --confine-agent`: the agent's own Landlock ruleset leaves it no direct
//! way into the home directory; the workspace it sees is fsgate's view (a secret there
//! does not exist, an allowed file opens, recorded); fs/read_text_file still works.
//! A missing agent peer goes through `crate::common::skip_or_fail` (a failure under CI).

use std::ffi::OsString;
use std::path::PathBuf;

use serde_json::Value;

use super::editor::{Editor, Options, Peer, ok, repo, sdk_dir};

const EACCES: i64 = 13;
const ENOENT: i64 = 2;

/// The default policy, plus the environment the test agents need (`[agent] env`):
/// FSGATE_ACP_SDK names the TypeScript SDK, PYTHONUNBUFFERED keeps reports flowing.
/// The agents' own code is found by discovery; the TypeScript SDK is not beside the
/// script (FSGATE_ACP_SDK points elsewhere), so it needs `[agent] read`, as any data an
/// agent is told about would.
fn policy_text() -> String {
    let text = std::fs::read_to_string(repo().join("policies/default.toml"))
        .expect("policies/default.toml");
    let mut doc: toml::Table = text.parse().expect("default.toml parses");
    let agent = doc
        .entry("agent")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()))
        .as_table_mut()
        .expect("[agent] is a table");
    let env = agent
        .entry("env")
        .or_insert_with(|| toml::Value::Array(Vec::new()))
        .as_array_mut()
        .expect("[agent] env is an array");
    for name in ["FSGATE_ACP_SDK", "PYTHONUNBUFFERED"] {
        env.push(name.into());
    }
    if let Ok(sdk) = sdk_dir().canonicalize()
        && let Some(modules) = sdk.ancestors().find(|a| a.ends_with("node_modules"))
    {
        let read = vec![toml::Value::from(modules.display().to_string())];
        agent.insert("read".into(), toml::Value::Array(read));
    }
    toml::to_string(&doc).expect("serialise policy")
}

fn denied(report: &Value) -> bool {
    refused(report, EACCES, "EACCES")
}

fn refused(report: &Value, errno: i64, code: &str) -> bool {
    let r = ok(report);
    r["opened"] == false && (r["errno"] == errno || r["code"] == code)
}

fn confined_agent_uses_only_the_gateway(peer: Peer, test: &str) {
    let Some(cmd) = peer.command_or_skip(test) else {
        return;
    };
    // A home directory of our own, with a file the agent must not be able to open.
    let home = tempfile::tempdir().expect("tempdir");
    let home_file = home
        .path()
        .canonicalize()
        .expect("canonical home")
        .join("home-secret.txt");
    std::fs::write(&home_file, "HOME-SECRET\n").expect("seed home");
    let opts = Options {
        policy_text: Some(policy_text()),
        confine: true,
        env: vec![("HOME".into(), OsString::from(home.path()))],
        ..Default::default()
    };
    let mut ed = Editor::launch(&cmd, opts);
    std::fs::write(ed.root.join("a.txt"), "inside\n").expect("seed");
    std::fs::write(ed.root.join(".env"), "TOKEN=x\n").expect("seed");
    let sid = ed.open_session();
    let a = ed.root.join("a.txt").display().to_string();
    let env = ed.root.join(".env").display().to_string();
    // The workspace through the view: the file opens, the secret does not exist.
    let through_view = ed.prompt(&sid, &format!("open {a}\nopen {env}"));
    assert_eq!(ok(&through_view[0])["opened"], true, "{through_view:?}");
    assert!(
        refused(&through_view[1], ENOENT, "ENOENT"),
        "{through_view:?}"
    );
    // An allowed read on the view is written within a second, alone or in its
    // process's coalesced `reads` record.
    let names_a = |r: &serde_json::Value| {
        r["kind"] == "request"
            && !r["peer"].is_null()
            && (r["path"] == "a.txt"
                || (r["op"] == "reads" && r["details"].to_string().contains("\"a.txt\"")))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !ed.audit_records().iter().any(names_a) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        ed.audit_records().iter().any(names_a),
        "the agent's own open of a.txt was not recorded"
    );
    // /etc/shadow: the agent gets only the parts of /etc a program needs.
    let mut text = vec![
        format!("open {}", home_file.display()),
        "open /etc/shadow".to_string(),
    ];
    // The real home too, if it has a file to try (never written, only opened).
    let real_home_file = std::env::var_os("HOME")
        .map(PathBuf::from)
        .and_then(|h| std::fs::read_dir(h).ok())
        .and_then(|mut d| {
            d.find_map(|e| {
                e.ok()
                    .map(|e| e.path())
                    .filter(|p| p.is_file() && std::fs::File::open(p).is_ok())
            })
        });
    if let Some(f) = &real_home_file {
        text.push(format!("open {}", f.display()));
    }
    text.push(format!("read {a}"));
    let reports = ed.prompt(&sid, &text.join("\n"));
    assert_eq!(
        reports.len(),
        text.len(),
        "{reports:?}\nstderr:\n{}",
        ed.stderr()
    );
    for rep in &reports[..text.len() - 1] {
        assert!(denied(rep), "direct open must fail with EACCES: {rep}");
    }
    assert_eq!(
        ok(&reports[text.len() - 1])["content"],
        "inside\n",
        "{reports:?}"
    );
}

#[test]
fn python_confined_agent_uses_only_the_gateway() {
    confined_agent_uses_only_the_gateway(
        Peer::Python,
        "python_confined_agent_uses_only_the_gateway",
    );
}

#[test]
fn typescript_confined_agent_uses_only_the_gateway() {
    confined_agent_uses_only_the_gateway(
        Peer::TypeScript,
        "typescript_confined_agent_uses_only_the_gateway",
    );
}
