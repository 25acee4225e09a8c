//! Integration tests with custom policy files: read-only, default-deny, deny over allow,
//! extensions, custom secret patterns, binary handling and size limits.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::common::{
    Gate, LIMIT, assert_code, assert_refused, assert_refused_any, entry_names, glob_paths,
    grep_hits, policy_with,
};

const READONLY: &str = r#"version = 1

[secrets]
builtin = true
patterns = []

[limits]
max_read_bytes = 10485760
max_write_bytes = 10485760
binary = "deny"

[[rule]]
id = "ro-read"
effect = "allow"
ops = ["read", "list"]
paths = ["**"]
reason = "the workspace is readable"

[[rule]]
id = "ro-deny-write"
effect = "deny"
ops = ["write", "delete"]
paths = ["**"]
reason = "this workspace is read-only"
"#;

#[test]
fn readonly_policy_advertises_no_write_capability() {
    let g = Gate::with_policy(READONLY);
    let r = g.ok(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    assert_eq!(r["protocolVersion"], json!(1));
    assert_eq!(
        r["clientCapabilities"]["fs"]["readTextFile"],
        json!(true),
        "{r}"
    );
    assert_eq!(
        r["clientCapabilities"]["fs"]["writeTextFile"],
        json!(false),
        "{r}"
    );
}

#[test]
fn readonly_policy_refuses_every_mutation_with_rule_and_reason() {
    let g = Gate::with_policy(READONLY);
    g.put("a.txt", "a\n");
    g.put("d/x.txt", "x");
    assert_eq!(
        g.ok("fs/read_text_file", json!({"path": g.abs("a.txt")}))["content"],
        json!("a\n")
    );
    let cases = [
        (
            "fs/write_text_file",
            json!({"path": g.abs("a.txt"), "content": "changed"}),
            "a.txt",
        ),
        (
            "fs/write_text_file",
            json!({"path": g.abs("new.txt"), "content": "new"}),
            "new.txt",
        ),
        (
            "_fsgate/edit_text_file",
            json!({"path": g.abs("a.txt"), "oldText": "a", "newText": "b"}),
            "a.txt",
        ),
        ("_fsgate/mkdir", json!({"path": g.abs("nd")}), "nd"),
        ("_fsgate/rm", json!({"path": g.abs("a.txt")}), "a.txt"),
        (
            "_fsgate/rm",
            json!({"path": g.abs("d"), "recursive": true}),
            "d",
        ),
        // Both ends are denied here, so either may be named.
        (
            "_fsgate/rename",
            json!({"oldPath": g.abs("a.txt"), "newPath": g.abs("b.txt")}),
            "",
        ),
    ];
    for (method, params, rel) in cases {
        let res = g.call(method, params);
        let e = if rel.is_empty() {
            assert_refused_any(res)
        } else {
            assert_refused(res, &g, rel)
        };
        let data = e.data.clone().unwrap_or(Value::Null);
        assert_eq!(data["rule"], json!("ro-deny-write"), "{method}: {e:?}");
        let reason = data["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains("this workspace is read-only"),
            "error.data.reason must carry the rule's reason: {e:?}"
        );
        assert!(
            e.message.contains("ro-deny-write"),
            "the message must name the rule: {e:?}"
        );
        assert!(
            e.message.contains("read-only"),
            "the message must name the reason: {e:?}"
        );
        assert!(!e.message.contains('\n'), "one line: {e:?}");
    }
    assert_eq!(g.get("a.txt").as_deref(), Some(&b"a\n"[..]));
    assert!(!g.exists("new.txt") && !g.exists("nd") && !g.exists("b.txt"));
    assert_eq!(g.get("d/x.txt").as_deref(), Some(&b"x"[..]));
}

#[test]
fn nothing_matched_is_default_deny() {
    let policy = r#"version = 1
[secrets]
builtin = true
patterns = []
[limits]
max_read_bytes = 1000
max_write_bytes = 1000
binary = "deny"
[[rule]]
id = "only-read"
effect = "allow"
ops = ["read", "list"]
paths = ["**"]
reason = "read only"
"#;
    let g = Gate::with_policy(policy);
    let e = assert_refused(
        g.call(
            "fs/write_text_file",
            json!({"path": g.abs("w.txt"), "content": "x"}),
        ),
        &g,
        "w.txt",
    );
    assert_eq!(e.data.unwrap_or(Value::Null)["rule"], json!("default-deny"));
    let r = g.ok("initialize", json!({"protocolVersion": 1}));
    assert_eq!(
        r["clientCapabilities"]["fs"]["writeTextFile"],
        json!(false),
        "{r}"
    );
}

#[test]
fn deny_rule_overrides_allow() {
    let extra = r#"
[[rule]]
id = "private-docs"
effect = "deny"
ops = ["*"]
paths = ["docs/private/**"]
reason = "private documents"
"#;
    let g = Gate::with_policy(&policy_with(10485760, 10485760, "deny", extra));
    g.ok(
        "fs/write_text_file",
        json!({"path": g.abs("docs/a.md"), "content": "ok"}),
    );
    let e = assert_refused(
        g.call(
            "fs/write_text_file",
            json!({"path": g.abs("docs/private/x.md"), "content": "no"}),
        ),
        &g,
        "docs/private/x.md",
    );
    assert_eq!(e.data.unwrap_or(Value::Null)["rule"], json!("private-docs"));
    assert!(!g.exists("docs/private/x.md"));
}

#[test]
fn rename_checks_both_ends_against_custom_rules() {
    let extra = r#"
[[rule]]
id = "private-docs"
effect = "deny"
ops = ["*"]
paths = ["docs/private/**"]
reason = "private documents"
"#;
    let g = Gate::with_policy(&policy_with(10485760, 10485760, "deny", extra));
    g.put("docs/a.md", "public");
    g.put("docs/private/x.md", "private");
    let e = assert_refused(
        g.call(
            "_fsgate/rename",
            json!({"oldPath": g.abs("docs/a.md"), "newPath": g.abs("docs/private/a.md")}),
        ),
        &g,
        "docs/private/a.md",
    );
    assert_eq!(e.data.unwrap_or(Value::Null)["rule"], json!("private-docs"));
    let e = assert_refused(
        g.call(
            "_fsgate/rename",
            json!({"oldPath": g.abs("docs/private/x.md"), "newPath": g.abs("docs/x.md")}),
        ),
        &g,
        "docs/private/x.md",
    );
    assert_eq!(e.data.unwrap_or(Value::Null)["rule"], json!("private-docs"));
    assert_eq!(g.get("docs/a.md").as_deref(), Some(&b"public"[..]));
    assert_eq!(g.get("docs/private/x.md").as_deref(), Some(&b"private"[..]));
    assert!(!g.exists("docs/private/a.md") && !g.exists("docs/x.md"));
    g.ok(
        "_fsgate/rename",
        json!({"oldPath": g.abs("docs/a.md"), "newPath": g.abs("docs/b.md")}),
    );
    assert_eq!(g.get("docs/b.md").as_deref(), Some(&b"public"[..]));
}

/// Names and metadata need `list`, content `read`: a file denied for read only is still
/// listed (ls, glob, stat) but grep shows none of its lines; denying `list` as well
/// hides the name.
#[test]
fn file_denied_for_read_is_listed_but_never_searched() {
    let extra = r#"
[[rule]]
id = "hide-private"
effect = "deny"
ops = ["read"]
paths = ["notes/private.txt"]
reason = "private notes"

[[rule]]
id = "hide-secret-name"
effect = "deny"
ops = ["read", "list"]
paths = ["notes/unlisted.txt"]
"#;
    let g = Gate::with_policy(&policy_with(10485760, 10485760, "deny", extra));
    g.put("notes/public.txt", "MARK public\n");
    g.put("notes/private.txt", "MARK private\n");
    g.put("notes/unlisted.txt", "MARK unlisted\n");
    let e = assert_refused(
        g.call(
            "fs/read_text_file",
            json!({"path": g.abs("notes/private.txt")}),
        ),
        &g,
        "notes/private.txt",
    );
    assert_eq!(e.data.unwrap_or(Value::Null)["rule"], json!("hide-private"));
    assert_eq!(
        entry_names(&g.ok("_fsgate/ls", json!({"path": g.abs("notes")}))),
        vec!["private.txt", "public.txt"]
    );
    g.ok("_fsgate/stat", json!({"path": g.abs("notes/private.txt")}));
    let e = assert_refused(
        g.call("_fsgate/stat", json!({"path": g.abs("notes/unlisted.txt")})),
        &g,
        "notes/unlisted.txt",
    );
    assert_eq!(
        e.data.unwrap_or(Value::Null)["rule"],
        json!("hide-secret-name")
    );
    assert_eq!(
        glob_paths(&g.ok("_fsgate/glob", json!({"pattern": "**/*.txt"}))),
        vec![g.abs("notes/private.txt"), g.abs("notes/public.txt")]
    );
    assert_eq!(
        grep_hits(&g.ok("_fsgate/grep", json!({"pattern": "MARK"}))),
        vec![(g.abs("notes/public.txt"), 1, "MARK public".to_owned())]
    );
    let e = assert_refused(
        g.call(
            "_fsgate/grep",
            json!({"pattern": "MARK", "path": g.abs("notes/private.txt")}),
        ),
        &g,
        "notes/private.txt",
    );
    assert_eq!(e.data.unwrap_or(Value::Null)["rule"], json!("hide-private"));
}

#[test]
fn extension_deny_rule_applies() {
    let extra = r#"
[[rule]]
id = "no-logs"
effect = "deny"
ops = ["read", "write"]
paths = ["**"]
extensions = ["log"]
reason = "logs may hold customer data"
"#;
    let g = Gate::with_policy(&policy_with(10485760, 10485760, "deny", extra));
    g.put("app.log", "LINE log\n");
    g.put("app.txt", "LINE txt\n");
    let e = assert_refused(
        g.call("fs/read_text_file", json!({"path": g.abs("app.log")})),
        &g,
        "app.log",
    );
    assert_eq!(e.data.unwrap_or(Value::Null)["rule"], json!("no-logs"));
    assert_refused(
        g.call(
            "fs/write_text_file",
            json!({"path": g.abs("new.log"), "content": "x"}),
        ),
        &g,
        "new.log",
    );
    assert_eq!(
        g.ok("fs/read_text_file", json!({"path": g.abs("app.txt")}))["content"],
        json!("LINE txt\n")
    );
    assert_eq!(
        grep_hits(&g.ok("_fsgate/grep", json!({"pattern": "LINE"}))),
        vec![(g.abs("app.txt"), 1, "LINE txt".to_owned())]
    );
}

#[test]
fn custom_secret_pattern_matches_case_insensitively_and_names_its_id() {
    let policy = policy_with(10485760, 10485760, "deny", "").replace(
        "patterns = []",
        r#"patterns = [{ id = "vault-token", regex = '^\.vault-token$' }]"#,
    );
    let g = Gate::with_policy(&policy);
    g.put(".VAULT-TOKEN", "s.abcdef\n");
    g.put("visible.txt", "v\n");
    let e = assert_refused(
        g.call("fs/read_text_file", json!({"path": g.abs(".VAULT-TOKEN")})),
        &g,
        ".VAULT-TOKEN",
    );
    // The rule names the pattern's id (a namespace prefix such as `secrets:` is fine).
    let rule = e.data.unwrap_or(Value::Null)["rule"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        rule == "vault-token" || rule.ends_with(":vault-token"),
        "rule must name the pattern id: {rule:?}"
    );
    assert_eq!(
        entry_names(&g.ok("_fsgate/ls", json!({"path": g.abs("")}))),
        vec!["visible.txt"]
    );
}

#[test]
fn policy_with_test_tables_is_accepted() {
    let extra = r#"
[[test]]
op = "read"
path = "src/main.rs"
expect = "allow"
rule = "workspace-read"

[[test]]
op = "read"
path = ".env"
expect = "deny"
"#;
    let g = Gate::with_policy(&policy_with(10485760, 10485760, "deny", extra));
    g.put("src/main.rs", "fn main() {}\n");
    assert_eq!(
        g.ok("fs/read_text_file", json!({"path": g.abs("src/main.rs")}))["content"],
        json!("fn main() {}\n")
    );
}

const BINARY: &[u8] = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe";

#[test]
fn binary_reads_under_default_policy_are_media_files_only() {
    let g = Gate::start();
    g.put("img.png", BINARY);
    g.put("latin1.txt", b"caf\xe9 au lait\n");
    g.put("fake.png", b"\x7fELF\x02\x01\x01\0");
    g.put("png.bin", BINARY);
    // Text reads refuse every binary file; binary reads refuse all but real media.
    for rel in ["img.png", "latin1.txt", "fake.png", "png.bin"] {
        assert_code(
            g.call("fs/read_text_file", json!({"path": g.abs(rel)})),
            LIMIT,
        );
    }
    for rel in ["latin1.txt", "fake.png", "png.bin"] {
        assert_code(
            g.call("_fsgate/read_file", json!({"path": g.abs(rel)})),
            LIMIT,
        );
    }
    let r = g.ok("_fsgate/read_file", json!({"path": g.abs("img.png")}));
    assert_eq!(r["encoding"], json!("base64"), "{r}");
    let decoded = STANDARD
        .decode(r["content"].as_str().unwrap_or_default())
        .expect("valid base64");
    assert_eq!(decoded, BINARY);
}

#[test]
fn nul_byte_late_in_first_8k_counts_as_binary() {
    let g = Gate::start();
    let mut content = "text\n".repeat(1500).into_bytes();
    content.push(0);
    content.extend_from_slice(b"more text\n");
    g.put("sneaky.txt", &content);
    assert_code(
        g.call("fs/read_text_file", json!({"path": g.abs("sneaky.txt")})),
        LIMIT,
    );
}

#[test]
fn binary_base64_policy_returns_base64_from_read_file() {
    let g = Gate::with_policy(&policy_with(10485760, 10485760, "base64", ""));
    g.put("img.png", BINARY);
    g.put("t.txt", "plain\n");
    let r = g.ok("_fsgate/read_file", json!({"path": g.abs("img.png")}));
    assert_eq!(r["encoding"], json!("base64"), "{r}");
    let decoded = STANDARD
        .decode(r["content"].as_str().unwrap_or_default())
        .expect("valid base64");
    assert_eq!(decoded, BINARY);
    assert_eq!(
        g.ok("_fsgate/read_file", json!({"path": g.abs("t.txt")})),
        json!({"content": "plain\n", "encoding": "utf-8"})
    );
    assert_code(
        g.call("fs/read_text_file", json!({"path": g.abs("img.png")})),
        LIMIT,
    );
}

#[test]
fn max_read_bytes_is_enforced() {
    let g = Gate::with_policy(&policy_with(100, 10485760, "deny", ""));
    g.put("fits.txt", "x".repeat(100));
    g.put("over.txt", "x".repeat(101));
    assert_eq!(
        g.ok("fs/read_text_file", json!({"path": g.abs("fits.txt")}))["content"],
        json!("x".repeat(100))
    );
    assert_code(
        g.call("fs/read_text_file", json!({"path": g.abs("over.txt")})),
        LIMIT,
    );
    assert_code(
        g.call("_fsgate/read_file", json!({"path": g.abs("over.txt")})),
        LIMIT,
    );
}

#[test]
fn max_write_bytes_is_enforced() {
    let g = Gate::with_policy(&policy_with(10485760, 100, "deny", ""));
    g.put("existing.txt", "keep");
    g.ok(
        "fs/write_text_file",
        json!({"path": g.abs("fits.txt"), "content": "y".repeat(100)}),
    );
    assert_eq!(g.get("fits.txt").map(|v| v.len()), Some(100));
    assert_code(
        g.call(
            "fs/write_text_file",
            json!({"path": g.abs("over.txt"), "content": "y".repeat(101)}),
        ),
        LIMIT,
    );
    assert!(!g.exists("over.txt"));
    assert_code(
        g.call(
            "fs/write_text_file",
            json!({"path": g.abs("existing.txt"), "content": "y".repeat(101)}),
        ),
        LIMIT,
    );
    assert_eq!(g.get("existing.txt").as_deref(), Some(&b"keep"[..]));
}
