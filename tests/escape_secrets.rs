//! Escape tests for secrets under the default policy (`.hg` stands for the VCS internals it
//! hides; `.git` is readable, its hooks and config never written): odd-case names, secrets reached through
//! rename or edit, refusals that come before existence checks, and names of denied files never
//! leaking through ls, glob or grep (nor grep reading them).

use std::fs::FileTimes;
use std::time::{Duration, SystemTime};

use serde_json::json;

use crate::common::{Gate, REFUSED, assert_refused, entry_names, glob_paths, grep_hits};

const SECRET_NAMES: [&str; 9] = [
    ".env",
    ".ENV",
    "Id_Rsa",
    "x/.env.local",
    "config/.Env.Production",
    "server.PEM",
    "Credentials.json",
    "my_SECRET_notes.txt",
    ".hg/hgrc",
];

#[test]
fn secrets_in_odd_case_are_refused_for_read() {
    let g = Gate::start();
    for name in SECRET_NAMES {
        g.put(name, "TOKEN=hunter2\n");
    }
    for name in SECRET_NAMES {
        for method in ["fs/read_text_file", "_fsgate/read_file"] {
            let e = assert_refused(g.call(method, json!({"path": g.abs(name)})), &g, name);
            assert!(
                !e.message.contains("hunter2"),
                "refusal leaked content: {e:?}"
            );
            assert!(
                !e.message.contains('\n'),
                "the message must be one line: {e:?}"
            );
        }
    }
}

#[test]
fn secrets_in_odd_case_are_refused_for_write_and_not_created() {
    let g = Gate::start();
    for name in [
        ".ENV",
        "deploy/Id_Rsa",
        "x/.env.local",
        "keys/site.Pem",
        ".git/hooks/pre-commit",
        ".SSH/authorized_keys",
    ] {
        assert_refused(
            g.call(
                "fs/write_text_file",
                json!({"path": g.abs(name), "content": "planted"}),
            ),
            &g,
            name,
        );
        assert!(!g.exists(name), "{name} was created");
    }
    assert_refused(
        g.call(
            "_fsgate/mkdir",
            json!({"path": g.abs(".ssh"), "recursive": true}),
        ),
        &g,
        ".ssh",
    );
    assert!(!g.exists(".ssh"));
}

#[test]
fn secret_refusal_comes_before_existence_check() {
    // A -32002 for a missing secret and a -32003 for a present one would be an existence oracle.
    let g = Gate::start();
    for name in [".env.production", "id_ed25519", ".hg/dirstate"] {
        assert_refused(
            g.call("fs/read_text_file", json!({"path": g.abs(name)})),
            &g,
            name,
        );
        assert_refused(
            g.call("_fsgate/stat", json!({"path": g.abs(name)})),
            &g,
            name,
        );
    }
}

#[test]
fn stat_and_ls_of_secrets_are_refused() {
    let g = Gate::start();
    g.put(".env", "A=1\n");
    g.put(".hg/hgrc", "[core]\n");
    assert_refused(
        g.call("_fsgate/stat", json!({"path": g.abs(".env")})),
        &g,
        ".env",
    );
    assert_refused(
        g.call("_fsgate/ls", json!({"path": g.abs(".hg")})),
        &g,
        ".hg",
    );
    assert_refused(
        g.call(
            "_fsgate/grep",
            json!({"pattern": "core", "path": g.abs(".hg")}),
        ),
        &g,
        ".hg",
    );
    assert_refused(
        g.call(
            "_fsgate/grep",
            json!({"pattern": "A", "path": g.abs(".env")}),
        ),
        &g,
        ".env",
    );
}

#[test]
fn rename_secret_to_innocent_name_is_refused() {
    let g = Gate::start();
    g.put(".env", "TOKEN=hunter2\n");
    assert_refused(
        g.call(
            "_fsgate/rename",
            json!({"oldPath": g.abs(".env"), "newPath": g.abs("a.txt")}),
        ),
        &g,
        ".env",
    );
    assert_eq!(g.get(".env").as_deref(), Some(&b"TOKEN=hunter2\n"[..]));
    assert!(
        !g.exists("a.txt"),
        "the secret was exposed under a new name"
    );
}

#[test]
fn rename_innocent_file_onto_secret_name_is_refused() {
    let g = Gate::start();
    g.put("a.txt", "TOKEN=attacker\n");
    g.put(".env", "TOKEN=original\n");
    assert_refused(
        g.call(
            "_fsgate/rename",
            json!({"oldPath": g.abs("a.txt"), "newPath": g.abs(".env")}),
        ),
        &g,
        ".env",
    );
    assert_eq!(
        g.get(".env").as_deref(),
        Some(&b"TOKEN=original\n"[..]),
        "a secret was overwritten by rename"
    );
    assert_eq!(g.get("a.txt").as_deref(), Some(&b"TOKEN=attacker\n"[..]));
    assert_refused(
        g.call(
            "_fsgate/rename",
            json!({"oldPath": g.abs("a.txt"), "newPath": g.abs("sub/.ENV.local")}),
        ),
        &g,
        "sub/.ENV.local",
    );
    assert!(!g.exists("sub/.ENV.local"));
}

#[test]
fn rename_of_vcs_internals_is_refused_both_ways() {
    let g = Gate::start();
    g.put(".git/config", "[remote]\n");
    g.put("hook.sh", "#!/bin/sh\nevil\n");
    assert_refused(
        g.call(
            "_fsgate/rename",
            json!({"oldPath": g.abs(".git"), "newPath": g.abs("gitcopy")}),
        ),
        &g,
        ".git",
    );
    assert!(!g.exists("gitcopy"));
    assert_refused(
        g.call(
            "_fsgate/rename",
            json!({"oldPath": g.abs("hook.sh"), "newPath": g.abs(".git/hooks/post-checkout")}),
        ),
        &g,
        ".git/hooks/post-checkout",
    );
    assert!(!g.exists(".git/hooks/post-checkout"));
    assert!(g.exists("hook.sh"));
}

#[test]
fn edit_of_secret_is_refused_without_an_occurrence_oracle() {
    let g = Gate::start();
    g.put(".env", "TOKEN=hunter2\n");
    let present = assert_refused(
        g.call(
            "_fsgate/edit_text_file",
            json!({"path": g.abs(".env"), "oldText": "hunter2", "newText": "x"}),
        ),
        &g,
        ".env",
    );
    let absent = assert_refused(
        g.call(
            "_fsgate/edit_text_file",
            json!({"path": g.abs(".env"), "oldText": "not-the-token", "newText": "x"}),
        ),
        &g,
        ".env",
    );
    assert_eq!(
        present.message, absent.message,
        "the refusal must not depend on the secret's content"
    );
    assert!(
        !present.message.to_lowercase().contains("occur"),
        "{present:?}"
    );
    assert_eq!(g.get(".env").as_deref(), Some(&b"TOKEN=hunter2\n"[..]));
}

/// A tree with visible controls and denied secrets side by side.
fn leak_tree(g: &Gate) {
    g.put("a.txt", "TOKEN control a\n");
    g.put(".editorconfig", "TOKEN control hidden\n");
    g.put("sub/b.txt", "TOKEN control b\n");
    g.put(".env", "TOKEN=leak-dotenv\n");
    g.put(".ENV.local", "TOKEN=leak-envlocal\n");
    g.put("id_rsa", "TOKEN=leak-idrsa\n");
    g.put("server.pem", "TOKEN=leak-pem\n");
    g.put("credentials.json", "TOKEN=leak-creds\n");
    g.put("sub/.env.local", "TOKEN=leak-sub\n");
    g.put("sub/Id_Rsa", "TOKEN=leak-sub-idrsa\n");
    g.put(".hg/hgrc", "TOKEN=leak-hg\n");
}

const LEAK_NAMES: [&str; 7] = [
    ".env",
    ".ENV.local",
    "id_rsa",
    "server.pem",
    "credentials.json",
    ".hg",
    "Id_Rsa",
];

#[test]
fn ls_never_shows_denied_names() {
    let g = Gate::start();
    leak_tree(&g);
    let root = entry_names(&g.ok("_fsgate/ls", json!({"path": g.abs("")})));
    for control in ["a.txt", ".editorconfig", "sub"] {
        assert!(
            root.contains(&control.to_owned()),
            "control {control} missing from ls: {root:?}"
        );
    }
    for name in LEAK_NAMES {
        assert!(
            !root.contains(&name.to_owned()),
            "ls leaked {name}: {root:?}"
        );
    }
    let sub = entry_names(&g.ok("_fsgate/ls", json!({"path": g.abs("sub")})));
    assert_eq!(sub, vec!["b.txt"], "ls of sub leaked a secret");
}

#[test]
fn glob_never_matches_denied_names() {
    let g = Gate::start();
    leak_tree(&g);
    let all = glob_paths(&g.ok("_fsgate/glob", json!({"pattern": "**/*"})));
    for control in ["a.txt", ".editorconfig", "sub/b.txt"] {
        assert!(
            all.contains(&g.abs(control)),
            "control {control} missing from glob: {all:?}"
        );
    }
    for p in &all {
        let rel = p.strip_prefix(&g.abs("")).unwrap_or(p).to_lowercase();
        assert!(
            !(rel.contains(".env")
                || rel.contains("id_rsa")
                || rel.contains(".pem")
                || rel.contains("credentials")
                || rel.contains(".hg")),
            "glob leaked {p}"
        );
    }
    for pattern in [
        "**/.env*",
        "**/.ENV*",
        ".hg/**",
        "**/id_rsa",
        "**/*.pem",
        "**/credentials*",
        "*",
    ] {
        // A pattern rooted in a denied directory may be refused outright; that reveals nothing.
        let m = match g.call("_fsgate/glob", json!({"pattern": pattern})) {
            Ok(r) => glob_paths(&r),
            Err(e) if e.code == REFUSED => continue,
            Err(e) => panic!("glob {pattern} failed: {e:?}"),
        };
        for leak in LEAK_NAMES {
            assert!(
                !m.iter()
                    .any(|p| p.ends_with(&format!("/{leak}")) || p.contains(&format!("/{leak}/"))),
                "glob {pattern} leaked {leak}: {m:?}"
            );
        }
    }
}

#[test]
fn grep_never_returns_denied_files() {
    let g = Gate::start();
    leak_tree(&g);
    let hits = grep_hits(&g.ok("_fsgate/grep", json!({"pattern": "TOKEN"})));
    let paths: Vec<&str> = hits.iter().map(|h| h.0.as_str()).collect();
    assert_eq!(
        paths,
        vec![g.abs(".editorconfig"), g.abs("a.txt"), g.abs("sub/b.txt")],
        "grep leaked: {hits:?}"
    );
    let hits = grep_hits(&g.ok(
        "_fsgate/grep",
        json!({"pattern": "leak", "ignoreCase": true, "includeGlob": "**/.env*"}),
    ));
    assert_eq!(hits, vec![], "grep leaked through includeGlob");
}

#[test]
fn grep_never_reads_denied_files() {
    // Reading a file updates its atime when atime <= mtime (relatime): set every atime to
    // the year 2001 and check which files grep actually read.
    let g = Gate::start();
    leak_tree(&g);
    let old = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    let files = [
        "a.txt",
        ".env",
        ".ENV.local",
        "id_rsa",
        "sub/.env.local",
        ".hg/hgrc",
    ];
    for f in files {
        let file = std::fs::File::options()
            .write(true)
            .open(g.path(f))
            .expect("open");
        file.set_times(FileTimes::new().set_accessed(old))
            .expect("set atime");
    }
    let atime = |f: &str| {
        std::fs::metadata(g.path(f))
            .and_then(|m| m.accessed())
            .expect("atime")
    };
    let _ = g.ok("_fsgate/grep", json!({"pattern": "TOKEN"}));
    if atime("a.txt") == old {
        eprintln!(
            "grep_never_reads_denied_files: atime not updated on this mount (noatime?); content checks only"
        );
        return;
    }
    for f in &files[1..] {
        assert_eq!(atime(f), old, "grep read the denied file {f}");
    }
}

/// UTF-16 of `text`, little-endian with a byte-order mark (PowerShell's default) or
/// big-endian without one.
fn utf16(text: &str, little_with_mark: bool) -> Vec<u8> {
    match little_with_mark {
        true => [0xFF, 0xFE]
            .into_iter()
            .chain(text.encode_utf16().flat_map(u16::to_le_bytes))
            .collect(),
        false => text.encode_utf16().flat_map(u16::to_be_bytes).collect(),
    }
}

/// grep searches the bytes a read gives and skips what a text read refuses as binary:
/// a file kept as UTF-16 (its secrets decoded) and one not valid UTF-8 show no line,
/// though a plain file beside them does.
#[test]
fn grep_shows_no_line_of_a_file_a_text_read_refuses_as_binary() {
    let g = Gate::start();
    g.put("plain.txt", "marker plain\n");
    // The secrets are put together here: no source file holds one whole.
    let key = ["AKIA", "UJZDEGXDNCF32EPF"].concat();
    let token = ["ghp_", "JBd0aJ3wRbc9sQkL1mNo2pQr3sTu4vWx5yZ6"].concat();
    g.put(
        "deploy.ps1",
        utf16(&format!("marker $env:KEY = \"{key}\"\r\n"), true),
    );
    g.put("be.txt", utf16(&format!("marker tok {token}\n"), false));
    g.put("latin1.txt", b"marker caf\xe9 line\n");
    for name in ["deploy.ps1", "be.txt", "latin1.txt"] {
        let e = g.err("fs/read_text_file", json!({"path": g.abs(name)}));
        let refused = e.message.contains("binary") || e.message.contains("content:");
        assert!(refused, "{name}: {e:?}");
    }
    let hits = grep_hits(&g.ok("_fsgate/grep", json!({"pattern": "."})));
    let paths: Vec<&str> = hits.iter().map(|h| h.0.as_str()).collect();
    assert_eq!(paths, vec![g.abs("plain.txt")], "{hits:?}");
}

/// A secret kept as UTF-16 or UTF-32 anywhere in a file (after 8 KiB of ASCII, which no
/// read calls binary) is found with the file's zero bytes left out: the read is refused.
/// Before, the read gave the key with a NUL between its characters.
#[test]
fn a_secret_in_utf16_or_utf32_late_in_a_file_is_found() {
    let g = Gate::start();
    let key = ["AKIA", "UJZDEGXDNCF32EPF"].concat();
    let line = format!(" key = {key}\n");
    let mut late16 = b"x".repeat(9000);
    late16.extend(line.encode_utf16().flat_map(u16::to_le_bytes));
    let mut late32 = b"x".repeat(9000);
    late32.extend(line.chars().flat_map(|c| u32::from(c).to_le_bytes()));
    g.put("late16.txt", late16);
    g.put("late32.txt", late32);
    for name in ["late16.txt", "late32.txt"] {
        let e = g.err("fs/read_text_file", json!({"path": g.abs(name)}));
        let rule = e.data.as_ref().map(|d| d["rule"].clone());
        assert_eq!(
            rule,
            Some(json!("content:aws-access-key-id")),
            "{name}: {e:?}"
        );
    }
}
