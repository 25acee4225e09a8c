//! `fsgate undo` and `fsgate backup restore` never reach beyond what they put back
//! (issue 57): a path that now leads through a symbolic link is left alone, even under
//! `--force`; an undo never writes where the gateway's policy refuses every agent; a
//! session an agent names `undo:<id>` does not pass for an undo; a change it cannot
//! read is said on stderr, with exit 1; several workspaces are undone and restored.
//!
//! Included from tests/all.rs as `mod undo_safety;` (uses `crate::common`).

use std::os::unix::fs::symlink;
use std::path::Path;

use serde_json::{Value, json};

use crate::common::{Gate, canonical_tempdir, run_cli};
use crate::undo::{rows, session, stop, text, undo};

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// `rm -r docs` undone after `docs/` came back holding links (a checkout, a build): to
/// `.git/hooks`, to `.git/config`, and to a plain directory of the workspace. Even
/// forced, nothing is written through any of them.
#[test]
fn a_forced_undo_writes_nothing_through_links_in_a_directory_made_again() {
    let mut g = Gate::start();
    g.put("docs/hooks/pre-commit", "#!/bin/sh\necho docs hook\n");
    g.put("docs/readme.md", "read me\n");
    g.put("docs/tools/run.sh", "run\n");
    g.ok(
        "_fsgate/rm",
        session("s", json!({"path": g.abs("docs"), "recursive": true})),
    );
    stop(&mut g);
    std::fs::create_dir_all(g.path(".git/hooks")).expect("mkdir");
    g.put(".git/config", "[core]\n");
    std::fs::create_dir_all(g.path("scripts")).expect("mkdir");
    std::fs::create_dir(g.path("docs")).expect("mkdir");
    symlink("../.git/hooks", g.path("docs/hooks")).expect("link");
    symlink("../.git/config", g.path("docs/readme.md")).expect("link");
    symlink("../scripts", g.path("docs/tools")).expect("link");

    let out = undo(&g, &["--session", "s", "--force", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(!g.path(".git/hooks/pre-commit").exists(), "{}", text(&out));
    assert_eq!(read(&g.path(".git/config")), "[core]\n", "{}", text(&out));
    assert!(!g.path("scripts/run.sh").exists(), "{}", text(&out));
    for l in ["docs/hooks", "docs/readme.md", "docs/tools"] {
        let m = std::fs::symlink_metadata(g.path(l)).expect("lstat");
        assert!(m.file_type().is_symlink(), "{l} left as it is");
    }
    let row = &rows(&out).0[0];
    assert_eq!(row["status"], "failed", "{}", text(&out));
    assert!(
        row["note"]
            .as_str()
            .unwrap_or_default()
            .contains("symbolic link"),
        "{}",
        text(&out)
    );
}

/// A change the gateway's policy allowed then, undone under a policy that now refuses
/// every agent that path (`.git`): the undo leaves it too, forced or not, and says so.
#[test]
fn an_undo_never_writes_where_the_policy_refuses_every_agent() {
    let open = "version = 1\n[secrets]\nbuiltin = false\n\
        [[rule]]\nid = \"all\"\neffect = \"allow\"\nops = [\"*\"]\npaths = [\"**\"]\n";
    let mut g = Gate::with_policy(open);
    g.put(".git/config", "[core]\n");
    g.ok(
        "fs/write_text_file",
        session(
            "s",
            json!({"path": g.abs(".git/config"), "content": "[core]\nagent\n"}),
        ),
    );
    stop(&mut g);
    let strict = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/default.toml");
    let strict = strict.to_string_lossy().into_owned();
    let out = undo(
        &g,
        &["--session", "s", "--force", "--policy", &strict, "--json"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(read(&g.path(".git/config")), "[core]\nagent\n");
    assert_eq!(rows(&out).0[0]["status"], "failed", "{}", text(&out));
}

/// A session the agent names `undo:s1` changed s1's file since: that is someone else's
/// change (skipped, exit 1), not an earlier undo ("undone already", exit 0).
#[test]
fn a_session_named_like_an_undo_does_not_pass_for_one() {
    let mut g = Gate::start();
    g.put("f.txt", "v0\n");
    let w = |s: &str, c: &str| {
        g.ok(
            "fs/write_text_file",
            session(s, json!({"path": g.abs("f.txt"), "content": c})),
        );
    };
    w("s1", "v1 by s1\n");
    w("undo:s1", "payload\n");
    stop(&mut g);
    let out = undo(&g, &["--session", "s1", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let row = &rows(&out).0[0];
    assert_eq!(row["status"], "skipped", "{}", text(&out));
    assert_eq!(row["changedBy"]["session"], "undo:s1");
    assert_eq!(read(&g.path("f.txt")), "payload\n");
}

/// `app` and `lib=DIR` served together: a session's changes in both are put back, each
/// in its own workspace from its own store (`--backup-dir DIR` holds `DIR/<name>`), when
/// the undo is given every `--workspace`; given one, it changes nothing, says on stderr
/// which changes it could not read, and exits 1.
#[test]
fn undo_puts_back_every_workspace_of_a_gateway_serving_several() {
    let (dir, parent) = canonical_tempdir("fsgate-undo-several-");
    let at = |n: &str| parent.join(n);
    for d in ["app", "lib/d", "other", "state"] {
        std::fs::create_dir_all(at(d)).expect("mkdir");
    }
    for (f, c) in [
        ("app/a.txt", "a0\n"),
        ("lib/b.txt", "b0\n"),
        ("lib/d/c.txt", "c0\n"),
    ] {
        std::fs::write(at(f), c).expect("seed");
    }
    let lib = format!("lib={}", at("lib").display());
    let mut g = Gate::with_workspaces(
        at("app"),
        &[lib.clone().into()],
        None,
        (at("other"), at("state")),
        vec![dir],
    );
    let abs = |p: &str| at(p).to_string_lossy().into_owned();
    let calls = [
        (
            "fs/write_text_file",
            json!({"path": abs("app/a.txt"), "content": "a1\n"}),
        ),
        (
            "fs/write_text_file",
            json!({"path": abs("app/new.txt"), "content": "n\n"}),
        ),
        (
            "fs/write_text_file",
            json!({"path": abs("lib/b.txt"), "content": "b1\n"}),
        ),
        (
            "_fsgate/rm",
            json!({"path": abs("lib/d"), "recursive": true}),
        ),
    ];
    for (m, params) in calls {
        g.ok(m, session("s", params));
    }
    stop(&mut g);
    let log = g.audit_log.to_string_lossy();
    let run = |store: &str, extra: &[&str]| {
        let mut args = vec!["undo", "--audit-log", &log, "--backup-dir", store];
        args.extend_from_slice(extra);
        run_cli(&args)
    };
    let (app, stores) = (abs("app"), abs("state/backups"));

    // One workspace given, with the store its name keeps: the changes name workspaces.
    let one = run(
        &abs("state/backups/app"),
        &["--workspace", &app, "--session", "s"],
    );
    assert_eq!(one.status.code(), Some(1), "{}", text(&one));
    let said = String::from_utf8_lossy(&one.stderr);
    assert!(said.contains("workspace `lib`"), "{}", text(&one));
    assert_eq!(read(&at("lib/b.txt")), "b1\n", "nothing changed");

    let all = ["--workspace", &app, "--workspace", &lib, "--session", "s"];
    let dry = run(&stores, &[&all[..], &["--dry-run", "--json"]].concat());
    assert_eq!(dry.status.code(), Some(0), "{}", text(&dry));
    assert_eq!(rows(&dry).0.len(), 4, "{}", text(&dry));
    assert_eq!(read(&at("lib/b.txt")), "b1\n", "a dry run changes nothing");
    let out = run(&stores, &[&all[..], &["--json"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(read(&at("app/a.txt")), "a0\n");
    assert!(!at("app/new.txt").exists());
    assert_eq!(read(&at("lib/b.txt")), "b0\n");
    assert_eq!(read(&at("lib/d/c.txt")), "c0\n");
    let named: Vec<Value> = rows(&out)
        .0
        .iter()
        .map(|r| r["workspace"].clone())
        .collect();
    assert!(
        named.contains(&json!("lib")) && named.contains(&json!("app")),
        "{named:?}"
    );
    let again = run(&stores, &all);
    assert_eq!(
        again.status.code(),
        Some(0),
        "undone already: {}",
        text(&again)
    );
    let verified = run_cli(&["audit", "verify", &log]);
    assert_eq!(verified.status.code(), Some(0), "{}", text(&verified));
}

/// `fsgate backup restore` of `docs/hooks/pre-commit` after `docs/hooks` became a link
/// to `.git/hooks`: refused, nothing written through it.
#[test]
fn a_restore_writes_nothing_through_a_link_on_its_path() {
    let mut g = Gate::start();
    g.put("docs/hooks/pre-commit", "#!/bin/sh\necho docs hook\n");
    g.ok(
        "fs/write_text_file",
        session(
            "s",
            json!({"path": g.abs("docs/hooks/pre-commit"), "content": "agent\n"}),
        ),
    );
    stop(&mut g);
    std::fs::remove_dir_all(g.path("docs/hooks")).expect("rm");
    std::fs::create_dir_all(g.path(".git/hooks")).expect("mkdir");
    symlink("../.git/hooks", g.path("docs/hooks")).expect("link");
    let out = run_cli(&[
        "backup",
        "restore",
        "--workspace",
        &g.root.to_string_lossy(),
        "--backup-dir",
        &g.state.join("backups").to_string_lossy(),
        "--audit-log",
        &g.audit_log.to_string_lossy(),
        "docs/hooks/pre-commit",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(!g.path(".git/hooks/pre-commit").exists(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("symbolic link"));
}

/// `fsgate backup restore --workspace-name lib` of a gateway serving `app` and `lib`:
/// the store is `lib/` in --backup-dir, and the restore's records name `lib`.
#[test]
fn a_restore_takes_one_workspace_of_several_by_its_name() {
    let (dir, parent) = canonical_tempdir("fsgate-restore-several-");
    let at = |n: &str| parent.join(n);
    for d in ["app", "lib", "other", "state"] {
        std::fs::create_dir_all(at(d)).expect("mkdir");
    }
    std::fs::write(at("lib/b.txt"), "b0\n").expect("seed");
    let lib = format!("lib={}", at("lib").display());
    let mut g = Gate::with_workspaces(
        at("app"),
        &[lib.into()],
        None,
        (at("other"), at("state")),
        vec![dir],
    );
    let b = at("lib/b.txt").to_string_lossy().into_owned();
    g.ok(
        "fs/write_text_file",
        session("s", json!({"path": b, "content": "b1\n"})),
    );
    stop(&mut g);
    let log = g.audit_log.to_string_lossy().into_owned();
    let out = run_cli(&[
        "backup",
        "restore",
        "--workspace",
        &at("lib").to_string_lossy(),
        "--workspace-name",
        "lib",
        "--backup-dir",
        &at("state/backups").to_string_lossy(),
        "--audit-log",
        &log,
        "b.txt",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(read(&at("lib/b.txt")), "b0\n");
    let records: Vec<Value> = read(&g.audit_log)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|r: &Value| r["op"] == "restore")
        .collect();
    assert_eq!(records.len(), 2, "intent and outcome");
    assert!(records.iter().all(|r| r["args"]["workspace"] == "lib"));
    let verified = run_cli(&["audit", "verify", &log]);
    assert_eq!(verified.status.code(), Some(0), "{}", text(&verified));
}

/// `backup list` and `backup restore` take the same workspace names `serve` does: a
/// name with a space, a slash or a leading dot is refused (exit 2), not joined to the
/// store's path.
#[test]
fn backup_commands_refuse_what_is_no_workspace_name() {
    let (_d, dir) = canonical_tempdir("fsgate-names");
    let (ws, store) = (dir.join("ws"), dir.join("store"));
    std::fs::create_dir_all(&ws).expect("mkdir");
    let (ws, store) = (ws.to_string_lossy(), store.to_string_lossy());
    for name in ["a b", "x/y", ".hidden"] {
        for cmd in [&["list"][..], &["restore", "a.txt"][..]] {
            let mut args = vec!["backup", cmd[0], "--workspace", &ws, "--backup-dir", &store];
            args.extend_from_slice(&["--workspace-name", name]);
            args.extend_from_slice(&cmd[1..]);
            let out = run_cli(&args);
            assert_eq!(
                out.status.code(),
                Some(2),
                "{name:?} {cmd:?}: {}",
                text(&out)
            );
            assert!(
                text(&out).contains("not a workspace name"),
                "{}",
                text(&out)
            );
        }
    }
}
