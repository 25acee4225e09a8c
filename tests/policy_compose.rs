//! `extends` and `disabled_patterns` in the running gateway: over MCP, a base policy's
//! deny holds under a project that extends it, the project's own deny adds to it, and a
//! waived secret-name pattern lets its path through with the waiver in the audit record.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::mcp_harness::McpGate;

const BASE: &str = r#"version = 1
[secrets]
disabled_patterns = ["secret"]

[sets]
infra = ["infra/**"]

[[rule]]
id = "no-infra"
effect = "deny"
ops = ["write", "delete"]
paths = ["@infra"]

[[rule]]
id = "work"
effect = "allow"
ops = ["*"]
paths = ["**"]
"#;

fn project(base: &std::path::Path) -> String {
    format!(
        "version = 1\nextends = {:?}\n\n[[rule]]\nid = \"no-docs-writes\"\neffect = \"deny\"\nops = [\"write\"]\npaths = [\"docs\"]\n",
        base.display().to_string()
    )
}

fn tool(g: &mut McpGate, id: u64, name: &str, args: Value) -> Value {
    g.call(id, "tools/call", json!({"name": name, "arguments": args}))
}

/// The request record of the call on `path` with `op`.
fn record(g: &McpGate, op: &str, path: &str) -> Value {
    g.dirs
        .audit_records()
        .into_iter()
        .find(|r| r["kind"] == "request" && r["op"] == op && r["path"] == path)
        .unwrap_or_else(|| panic!("no {op} record of {path}: {:#?}", g.dirs.audit_records()))
}

#[test]
fn a_base_deny_holds_a_project_deny_adds_and_a_waiver_is_recorded() {
    let base_dir = tempfile::tempdir().expect("tempdir");
    let base = base_dir.path().join("org-baseline.toml");
    std::fs::write(&base, BASE).expect("base");
    let text = project(&base);
    let mut g = McpGate::start(Some(&text));
    g.dirs
        .put("docs/secret-rotation.md", "rotate every 90 days\n");
    g.dirs.put("docs/.env", "TOKEN=x\n");
    g.initialize("2025-06-18");

    let infra = tool(
        &mut g,
        1,
        "write_file",
        json!({"path": "infra/main.tf", "content": "x"}),
    );
    assert_eq!(infra["isError"], json!(true), "{infra}");
    assert!(!g.dirs.root.join("infra/main.tf").exists());
    let docs = tool(
        &mut g,
        2,
        "write_file",
        json!({"path": "docs/new.md", "content": "x"}),
    );
    assert_eq!(docs["isError"], json!(true), "{docs}");
    assert!(!g.dirs.root.join("docs/new.md").exists());
    let src = tool(
        &mut g,
        3,
        "write_file",
        json!({"path": "src/a.rs", "content": "fn a() {}\n"}),
    );
    assert_ne!(src["isError"], json!(true), "{src}");
    assert!(g.dirs.root.join("src/a.rs").exists());

    let waived = tool(
        &mut g,
        4,
        "read_text_file",
        json!({"path": "docs/secret-rotation.md"}),
    );
    assert_ne!(waived["isError"], json!(true), "{waived}");
    assert!(
        waived.to_string().contains("rotate every 90 days"),
        "{waived}"
    );
    let env = tool(&mut g, 5, "read_text_file", json!({"path": "docs/.env"}));
    assert_eq!(env["isError"], json!(true), "{env}");

    assert_eq!(
        record(&g, "write_text_file", "infra/main.tf")["rule"],
        json!("no-infra")
    );
    assert_eq!(
        record(&g, "write_text_file", "docs/new.md")["rule"],
        json!("no-docs-writes")
    );
    let r = record(&g, "read_text_file", "docs/secret-rotation.md");
    assert_eq!(r["decision"], json!("allow"), "{r}");
    assert_eq!(r["details"]["waived"], json!(["secrets:secret"]), "{r}");
    let r = record(&g, "read_text_file", "docs/.env");
    assert_eq!(r["rule"], json!("secrets:dotenv"), "{r}");
    assert!(r.get("details").is_none(), "{r}");
    // The policy hash covers the base's text as well as the project's.
    let mut h = Sha256::new();
    for t in [BASE, text.as_str()] {
        h.update(t.as_bytes());
        h.update([0u8]);
    }
    let want = hex::encode(h.finalize());
    let start = g
        .dirs
        .audit_records()
        .into_iter()
        .find(|r| r["policy_sha256"].is_string())
        .expect("a record naming the policy");
    assert_eq!(start["policy_sha256"], json!(want), "{start}");
}
