//! The policy at run time, beyond path rules: secret content refused on read, write, edit
//! and grep; the fixed floor around fsgate's own files; SIGHUP reload and its audit records.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Gate, NOT_FOUND, REFUSED, assert_code, grep_hits};

/// A policy allowing everything (secret names and content rules aside), after `extra`.
fn allow_all(extra: &str) -> String {
    format!(
        "version = 1\n{extra}\n[[rule]]\nid = \"all\"\neffect = \"allow\"\nops = [\"*\"]\npaths = [\"**\"]\n"
    )
}

/// A gitleaks config with one rule, `acme`.
const ACME_GITLEAKS: &str =
    "[[rules]]\nid = \"acme\"\nregex = '''acme_[a-z0-9]{16}'''\nkeywords = [\"acme_\"]\n";

/// A private key block, assembled at run time so this source file holds none.
fn private_key() -> String {
    let armour = ["-----BEGIN OPENSSH ", "PRIVATE KEY-----"].concat();
    format!(
        "{armour}\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n-----END OPENSSH {}\n",
        "PRIVATE KEY-----"
    )
}

/// An AWS access key id, assembled at run time.
fn aws_key() -> String {
    ["AKIA", "UJZDEGXDNCF32EPF"].concat()
}

fn rule_of(e: &crate::common::RpcError) -> String {
    e.data
        .as_ref()
        .and_then(|d| d.get("rule"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn audit_records(g: &Gate) -> Vec<Value> {
    std::fs::read_to_string(g.state.join("audit").join("audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn a_private_key_inside_an_ordinary_file_is_never_read() {
    let g = Gate::start();
    g.put("notes.txt", format!("meeting notes\n{}", private_key()));
    let e = assert_code(
        g.call(
            "fs/read_text_file",
            json!({"path": g.abs("notes.txt"), "line": 1, "limit": 1}),
        ),
        REFUSED,
    );
    assert_eq!(rule_of(&e), "content:private-key");
    assert!(
        !e.message.contains("b3BlbnNz"),
        "content leaked: {}",
        e.message
    );
    let e = assert_code(
        g.call("_fsgate/read_file", json!({"path": g.abs("notes.txt")})),
        REFUSED,
    );
    assert_eq!(rule_of(&e), "content:private-key");
    // The refusal is an audit record naming the rule.
    let recs = audit_records(&g);
    assert!(recs.iter().any(|r| r["op"] == "read_text_file"
        && r["decision"] == "deny"
        && r["rule"] == "content:private-key"));
}

#[test]
fn the_agent_cannot_plant_a_secret_by_write_or_edit() {
    let g = Gate::start();
    let e = assert_code(
        g.call(
            "fs/write_text_file",
            json!({"path": g.abs("config.txt"), "content": format!("key = {}\n", aws_key())}),
        ),
        REFUSED,
    );
    assert_eq!(rule_of(&e), "content:aws-access-key-id");
    assert!(!g.exists("config.txt"), "a refused write created the file");

    g.put("app.txt", "key = PLACEHOLDER\n");
    let e = assert_code(
        g.call(
            "_fsgate/edit_text_file",
            json!({"path": g.abs("app.txt"), "oldText": "PLACEHOLDER", "newText": aws_key()}),
        ),
        REFUSED,
    );
    assert_eq!(rule_of(&e), "content:aws-access-key-id");
    assert_eq!(g.get("app.txt").unwrap(), b"key = PLACEHOLDER\n");
}

#[test]
fn grep_never_shows_lines_of_a_file_holding_a_secret() {
    let g = Gate::start();
    g.put("notes.txt", format!("PRIVATE thoughts\n{}", private_key()));
    g.put("plain.txt", "nothing PRIVATE here\n");
    let res = g.ok("_fsgate/grep", json!({"pattern": "PRIVATE"}));
    let hits = grep_hits(&res);
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert!(hits[0].0.ends_with("/plain.txt"), "{hits:?}");
    // Named on its own, the file is refused as a read would be.
    let e = assert_code(
        g.call(
            "_fsgate/grep",
            json!({"pattern": "PRIVATE", "path": g.abs("notes.txt")}),
        ),
        REFUSED,
    );
    assert_eq!(rule_of(&e), "content:private-key");
}

#[test]
fn a_policy_without_content_rules_reads_the_same_file() {
    let g = Gate::with_policy(&allow_all("[content]\nbuiltin = false"));
    let text = format!("notes\n{}", private_key());
    g.put("notes.txt", &text);
    let res = g.ok("fs/read_text_file", json!({"path": g.abs("notes.txt")}));
    assert_eq!(res["content"], json!(text));
}

#[test]
fn an_audit_log_inside_the_workspace_is_walled_off_but_its_neighbours_are_not() {
    let g = Gate::with_audit_in_workspace(None, "audit.jsonl");
    g.put("src/a.txt", "hello\n");
    // The rest of the workspace stays the policy's to decide.
    let res = g.ok("fs/read_text_file", json!({"path": g.abs("src/a.txt")}));
    assert_eq!(res["content"], "hello\n");
    g.ok(
        "fs/write_text_file",
        json!({"path": g.abs("b.txt"), "content": "x"}),
    );
    // The log and its sidecars are not.
    for rel in ["audit.jsonl", "audit.jsonl.checkpoint"] {
        let e = assert_code(
            g.call("fs/read_text_file", json!({"path": g.abs(rel)})),
            REFUSED,
        );
        assert_eq!(rule_of(&e), "floor:audit-log", "{rel}");
    }
    // The shipping cursor too: moved ahead, it would keep records from the collectors.
    for rel in ["audit.jsonl", ".audit.jsonl.ship"] {
        let e = assert_code(
            g.call(
                "fs/write_text_file",
                json!({"path": g.abs(rel), "content": "forged\n"}),
            ),
            REFUSED,
        );
        assert_eq!(rule_of(&e), "floor:audit-log", "{rel}");
    }
    let e = assert_code(
        g.call("_fsgate/rm", json!({"path": g.abs("audit.jsonl")})),
        REFUSED,
    );
    assert_eq!(rule_of(&e), "floor:audit-log");
    let ls = g.ok("_fsgate/ls", json!({"path": g.abs("")}));
    let names = crate::common::entry_names(&ls);
    assert!(
        names.iter().all(|n| !n.starts_with("audit.jsonl")),
        "{names:?}"
    );
    assert!(names.contains(&"b.txt".to_string()), "{names:?}");
}

#[test]
fn a_gitleaks_config_the_policy_names_is_out_of_the_agents_reach() {
    let g = Gate::with_policy_and_files(
        &allow_all("[content]\ngitleaks_config = \"{ROOT}/security/gitleaks.toml\""),
        &[("security/gitleaks.toml", ACME_GITLEAKS)],
    );
    // Its rules apply ...
    let e = assert_code(
        g.call(
            "fs/write_text_file",
            json!({"path": g.abs("t.txt"), "content": "tok acme_0123456789abcdef"}),
        ),
        REFUSED,
    );
    assert_eq!(rule_of(&e), "content:acme");
    // ... and the agent can neither read nor rewrite them.
    for (method, params) in [
        (
            "fs/read_text_file",
            json!({"path": g.abs("security/gitleaks.toml")}),
        ),
        (
            "fs/write_text_file",
            json!({"path": g.abs("security/gitleaks.toml"), "content": "title = \"pwned\"\n"}),
        ),
    ] {
        let e = assert_code(g.call(method, params), REFUSED);
        assert_eq!(rule_of(&e), "floor:policy-file", "{method}");
    }
    assert_eq!(
        g.get("security/gitleaks.toml").unwrap(),
        ACME_GITLEAKS.as_bytes()
    );
}

const READ_ONLY_SRC: &str = r#"
version = 1
[[rule]]
id = "read-src"
effect = "allow"
ops = ["read", "list"]
paths = ["src/**"]
"#;

const READ_ALL: &str = r#"
version = 1
[[rule]]
id = "read-all"
effect = "allow"
ops = ["read", "list"]
paths = ["**"]
"#;

/// Sends SIGHUP and waits until the audit log holds a record of `kind`.
fn hup_and_wait(g: &Gate, kind: &str) -> Value {
    let before = audit_records(g)
        .iter()
        .filter(|r| r["kind"] == kind)
        .count();
    let status = std::process::Command::new("kill")
        .args(["-HUP", &g.pid().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let recs: Vec<Value> = audit_records(g)
            .into_iter()
            .filter(|r| r["kind"] == kind)
            .collect();
        if recs.len() > before {
            return recs[recs.len() - 1].clone();
        }
        assert!(Instant::now() < deadline, "no `{kind}` record after SIGHUP");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn sighup_reloads_a_valid_policy_and_records_both_hashes() {
    let g = Gate::with_policy(READ_ONLY_SRC);
    g.put("src/a.txt", "a\n");
    g.put("doc.txt", "d\n");
    let old_sha =
        g.ok("initialize", json!({"protocolVersion": 1}))["_meta"]["fsgate"]["policy"]["sha256"]
            .as_str()
            .unwrap()
            .to_string();
    assert_code(
        g.call("fs/read_text_file", json!({"path": g.abs("doc.txt")})),
        REFUSED,
    );
    std::fs::write(g.policy_file(), READ_ALL).unwrap();
    let rec = hup_and_wait(&g, "reload");
    let new_sha = rec["details"]["new_sha256"].as_str().unwrap().to_string();
    assert_eq!(rec["details"]["old_sha256"], json!(old_sha));
    assert_ne!(old_sha, new_sha);
    // The new policy decides, and the records say so.
    let res = g.ok("fs/read_text_file", json!({"path": g.abs("doc.txt")}));
    assert_eq!(res["content"], "d\n");
    let last = audit_records(&g)
        .into_iter()
        .rfind(|r| r["op"] == "read_text_file")
        .unwrap();
    assert_eq!(last["rule"], "read-all");
    assert_eq!(last["policy_sha256"], json!(new_sha));
}

#[test]
fn sighup_with_an_invalid_policy_keeps_the_old_one_and_records_the_rejection() {
    let g = Gate::with_policy(READ_ONLY_SRC);
    g.put("src/a.txt", "a\n");
    g.put("doc.txt", "d\n");
    // Answered: the server is up and listening for SIGHUP.
    g.ok("initialize", json!({"protocolVersion": 1}));
    std::fs::write(
        g.policy_file(),
        READ_ALL.replace("paths = [\"**\"]", "pathz = [\"**\"]"),
    )
    .unwrap();
    let rec = hup_and_wait(&g, "reload-rejected");
    let err = rec["details"]["error"].as_str().unwrap();
    assert!(err.contains("pathz"), "{err}");
    assert_code(
        g.call("fs/read_text_file", json!({"path": g.abs("doc.txt")})),
        REFUSED,
    );
    let res = g.ok("fs/read_text_file", json!({"path": g.abs("src/a.txt")}));
    assert_eq!(res["content"], "a\n");
}

#[test]
fn a_rename_cannot_carry_content_out_of_a_path_scoped_rule() {
    let g = Gate::with_policy(&allow_all(
        r#"[content]
builtin = false
[[content.rules]]
id = "config-token"
regex = '''token=[a-z0-9]{8,}'''
path = '''^config/'''
keywords = ["token="]"#,
    ));
    g.put("config/app.txt", "token=abcdefgh12\n");
    g.put("notes/todo.txt", "token=abcdefgh12\n");
    // Unreadable where it is ...
    let e = assert_code(
        g.call(
            "fs/read_text_file",
            json!({"path": g.abs("config/app.txt")}),
        ),
        REFUSED,
    );
    assert_eq!(rule_of(&e), "content:config-token");
    // ... so it cannot be moved to where it would be readable,
    let e = assert_code(
        g.call(
            "_fsgate/rename",
            json!({"oldPath": g.abs("config/app.txt"), "newPath": g.abs("notes/app.txt")}),
        ),
        REFUSED,
    );
    assert_eq!(rule_of(&e), "content:config-token");
    assert!(g.exists("config/app.txt") && !g.exists("notes/app.txt"));
    // nor can such content be moved into the rule's reach.
    let e = assert_code(
        g.call(
            "_fsgate/rename",
            json!({"oldPath": g.abs("notes/todo.txt"), "newPath": g.abs("config/todo.txt")}),
        ),
        REFUSED,
    );
    assert_eq!(rule_of(&e), "content:config-token");
    // A file past the read limit (10 MiB) is scanned too: a process may open it through
    // `fsgate run`'s view (up to `max_process_file_bytes`), where it lands.
    let big = format!("{}token=abcdefgh12\n", "x".repeat(11 << 20));
    g.put("config/big.txt", &big);
    let e = assert_code(
        g.call(
            "_fsgate/rename",
            json!({"oldPath": g.abs("config/big.txt"), "newPath": g.abs("notes/big.txt")}),
        ),
        REFUSED,
    );
    assert_eq!(rule_of(&e), "content:config-token");
    // Ordinary files still move.
    g.put("notes/plain.txt", "nothing here\n");
    g.ok(
        "_fsgate/rename",
        json!({"oldPath": g.abs("notes/plain.txt"), "newPath": g.abs("config/plain.txt")}),
    );
    assert!(g.exists("config/plain.txt"));
}

/// `_fsgate/rename` of `from` to `to` in `g`.
fn rename(g: &Gate, from: &str, to: &str) -> Result<Value, crate::common::RpcError> {
    g.call(
        "_fsgate/rename",
        json!({"oldPath": g.abs(from), "newPath": g.abs(to)}),
    )
}

/// A file the policy keeps from being read by its path cannot be read after a move of
/// the directory it is in, whichever rule keeps it (a path rule, or a content rule
/// scoped to a path): the move is refused as the file's own move is.
#[test]
fn moving_a_directory_cannot_make_a_file_in_it_readable() {
    let deny = r#"[[rule]]
id = "no-db-config"
effect = "deny"
ops = ["read"]
paths = ["vault/db.yml", "vault/deep/**"]
"#;
    let g = Gate::with_policy(&allow_all(&format!("{TOKEN_RULE}\n{deny}")));
    g.put("vault/db.yml", "password: prod-db-pass-8841\n");
    g.put("vault/notes.txt", "plain\n");
    g.put("vault/deep/x/key.txt", "k\n");
    g.put("config/app.txt", "token=abcdefgh12\n");
    g.put("notes/todo.txt", "token=abcdefgh12\n");
    g.put("docs/a.txt", "a\n");
    let refused = |from: &str, to: &str, rule: &str| {
        let e = assert_code(rename(&g, from, to), REFUSED);
        assert_eq!(rule_of(&e), rule, "{from} -> {to}: {e:?}");
        assert!(g.exists(from) && !g.exists(to), "{from} -> {to} moved");
    };
    // Denied by path: neither the file nor its directory (nor one above) moves.
    refused("vault/db.yml", "db.txt", "no-db-config");
    refused("vault", "cfg", "no-db-config");
    refused("vault/deep", "shallow", "no-db-config");
    assert_code(
        g.call("fs/read_text_file", json!({"path": g.abs("cfg/db.yml")})),
        NOT_FOUND,
    );
    // A content rule scoped to `config/`: its secret neither leaves nor enters by a
    // directory's move.
    refused("config", "public", "content:config-token");
    refused("notes", "config/notes", "content:config-token");
    // Directories of readable files still move.
    rename(&g, "docs", "docs2").expect("docs moves");
    assert_eq!(g.get("docs2/a.txt").as_deref(), Some(&b"a\n"[..]));
}

/// A directory's files are each checked in turn with room for one at a time: files
/// larger than the room for content checks (twice `max_message_bytes`) do not hold it
/// while the next waits for it (the move hung for good).
#[test]
fn moving_a_directory_of_large_files_under_path_scoped_content_rules_ends() {
    let limits = "[limits]\nmax_message_bytes = 1048576\n";
    let g = Gate::with_policy(&allow_all(&format!("{limits}{TOKEN_RULE}")));
    let big = "x".repeat(3 << 20);
    g.put("build/a.txt", &big);
    g.put("build/b.txt", &big);
    g.put("build/c.txt", "small\n");
    rename(&g, "build", "build.old").expect("moved");
    assert!(g.exists("build.old/c.txt") && !g.exists("build"));
}

#[test]
fn a_gitleaks_config_first_named_by_a_reloaded_policy_is_walled_off_too() {
    let g =
        Gate::with_policy_and_files(&allow_all(""), &[("security/gitleaks.toml", ACME_GITLEAKS)]);
    g.ok("initialize", json!({"protocolVersion": 1}));
    g.ok(
        "fs/read_text_file",
        json!({"path": g.abs("security/gitleaks.toml")}),
    );
    let with_rules = allow_all(&format!(
        "[content]\ngitleaks_config = \"{}\"",
        g.path("security/gitleaks.toml").display()
    ));
    std::fs::write(g.policy_file(), with_rules).unwrap();
    hup_and_wait(&g, "reload");
    let e = assert_code(
        g.call(
            "fs/write_text_file",
            json!({"path": g.abs("security/gitleaks.toml"), "content": "title = \"pwned\"\n"}),
        ),
        REFUSED,
    );
    assert_eq!(rule_of(&e), "floor:policy-file");
    assert_eq!(
        g.get("security/gitleaks.toml").unwrap(),
        ACME_GITLEAKS.as_bytes()
    );
}

/// The content rules' path condition, with the same token in reach of a second rule
/// only after a reload.
const TOKEN_RULE: &str = r#"[content]
builtin = false
[[content.rules]]
id = "config-token"
regex = '''token=[a-z0-9]{8,}'''
path = '''^config/'''
keywords = ["token="]"#;

/// A file read clean is not scanned again while its bytes stay the same: that must
/// never let through the same bytes at another path, other bytes at the same path, or
/// the same bytes under a reloaded policy.
#[test]
fn content_read_clean_before_is_still_judged_by_path_bytes_and_policy() {
    let g = Gate::with_policy(&allow_all(TOKEN_RULE));
    let token = "token=abcdefgh12\n";
    g.put("notes/a.txt", token);
    g.put("config/a.txt", token);
    for _ in 0..2 {
        let res = g.ok("fs/read_text_file", json!({"path": g.abs("notes/a.txt")}));
        assert_eq!(res["content"], token);
    }
    // The same bytes where the rule looks.
    let e = assert_code(
        g.call("fs/read_text_file", json!({"path": g.abs("config/a.txt")})),
        REFUSED,
    );
    assert_eq!(rule_of(&e), "content:config-token");
    // Other bytes at a path read clean before.
    g.put("config/b.txt", "plain\n");
    let res = g.ok("fs/read_text_file", json!({"path": g.abs("config/b.txt")}));
    assert_eq!(res["content"], "plain\n");
    g.put("config/b.txt", token);
    let e = assert_code(
        g.call("fs/read_text_file", json!({"path": g.abs("config/b.txt")})),
        REFUSED,
    );
    assert_eq!(rule_of(&e), "content:config-token");
    // The same bytes at the same path under a policy whose rule now covers `notes/`.
    let wider = TOKEN_RULE.replace("'''^config/'''", "'''^(config|notes)/'''");
    std::fs::write(g.policy_file(), allow_all(&wider)).unwrap();
    hup_and_wait(&g, "reload");
    let e = assert_code(
        g.call("fs/read_text_file", json!({"path": g.abs("notes/a.txt")})),
        REFUSED,
    );
    assert_eq!(rule_of(&e), "content:config-token");
}
