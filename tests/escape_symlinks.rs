//! Escape tests through symlinks: file and directory links leaving the root, links to devices,
//! and links inside the root that lead to a denied path (the policy applies to where a link
//! really leads). Walkers (glob, grep) must not follow links out either.

use serde_json::json;

use crate::common::{Gate, REFUSED, assert_refused_any, glob_paths, grep_hits};

#[test]
fn file_symlink_to_outside_is_refused() {
    let g = Gate::start();
    let secret = g.put_outside("secret.txt", "OUTSIDE file link\n");
    g.symlink(&secret, "abs_link.txt");
    let outside_name = g
        .outside
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    g.symlink(format!("../{outside_name}/secret.txt"), "rel_link.txt");
    for link in ["abs_link.txt", "rel_link.txt"] {
        for method in ["fs/read_text_file", "_fsgate/read_file"] {
            let e = assert_refused_any(g.call(method, json!({"path": g.abs(link)})));
            assert!(!e.message.contains("OUTSIDE"), "{e:?}");
        }
        let _ = g.call(
            "_fsgate/edit_text_file",
            json!({"path": g.abs(link), "oldText": "OUTSIDE", "newText": "pwned"}),
        );
        let _ = g.call(
            "fs/write_text_file",
            json!({"path": g.abs(link), "content": "pwned"}),
        );
    }
    assert_eq!(
        std::fs::read(&secret).ok().as_deref(),
        Some(&b"OUTSIDE file link\n"[..]),
        "write or edit followed a symlink out"
    );
}

#[test]
fn edit_through_outside_symlink_is_refused() {
    let g = Gate::start();
    let secret = g.put_outside("secret.txt", "OUTSIDE edit\n");
    g.symlink(&secret, "link.txt");
    assert_refused_any(g.call(
        "_fsgate/edit_text_file",
        json!({"path": g.abs("link.txt"), "oldText": "OUTSIDE", "newText": "pwned"}),
    ));
    assert_eq!(
        std::fs::read(&secret).ok().as_deref(),
        Some(&b"OUTSIDE edit\n"[..])
    );
}

#[test]
fn directory_symlink_to_outside_is_refused() {
    let g = Gate::start();
    let secret = g.put_outside("d/secret.txt", "OUTSIDE dir link\n");
    g.symlink(g.outside.join("d"), "ext");
    assert_refused_any(g.call(
        "fs/read_text_file",
        json!({"path": g.abs("ext/secret.txt")}),
    ));
    assert_refused_any(g.call("_fsgate/ls", json!({"path": g.abs("ext")})));
    assert_refused_any(g.call("_fsgate/stat", json!({"path": g.abs("ext/secret.txt")})));
    assert_refused_any(g.call(
        "fs/write_text_file",
        json!({"path": g.abs("ext/planted.txt"), "content": "pwned"}),
    ));
    assert_refused_any(g.call("_fsgate/mkdir", json!({"path": g.abs("ext/newdir")})));
    assert_refused_any(g.call("_fsgate/rm", json!({"path": g.abs("ext/secret.txt")})));
    assert_refused_any(g.call(
        "_fsgate/rename",
        json!({"oldPath": g.abs("ext/secret.txt"), "newPath": g.abs("stolen.txt")}),
    ));
    assert_refused_any(g.call(
        "_fsgate/grep",
        json!({"pattern": "OUTSIDE", "path": g.abs("ext")}),
    ));
    assert_eq!(
        std::fs::read(&secret).ok().as_deref(),
        Some(&b"OUTSIDE dir link\n"[..])
    );
    assert!(!g.outside.join("d/planted.txt").exists());
    assert!(!g.outside.join("d/newdir").exists());
    assert!(!g.exists("stolen.txt"));
}

#[test]
fn recursive_rm_does_not_follow_directory_symlink_out() {
    let g = Gate::start();
    let secret = g.put_outside("d/keep.txt", "OUTSIDE keep\n");
    g.put("tree/own.txt", "own");
    g.symlink(g.outside.join("d"), "tree/ext");
    // Removing the tree (which contains the link) may succeed; it must not empty the outside dir.
    let _ = g.call(
        "_fsgate/rm",
        json!({"path": g.abs("tree"), "recursive": true}),
    );
    let _ = g.call(
        "_fsgate/rm",
        json!({"path": g.abs("tree/ext"), "recursive": true}),
    );
    assert_eq!(
        std::fs::read(&secret).ok().as_deref(),
        Some(&b"OUTSIDE keep\n"[..]),
        "rm followed a symlink out of the root"
    );
}

#[test]
fn glob_and_grep_do_not_follow_symlinks_out() {
    let g = Gate::start();
    g.put_outside("d/outside.txt", "MARKER outside\n");
    g.put_outside("d/deeper/more.txt", "MARKER deeper\n");
    g.put("inside.txt", "MARKER inside\n");
    g.symlink(g.outside.join("d"), "ext");
    g.symlink(g.outside.join("d/outside.txt"), "file_link.txt");
    let r = g.ok("_fsgate/glob", json!({"pattern": "**/*.txt"}));
    let paths = glob_paths(&r);
    assert!(
        paths.contains(&g.abs("inside.txt")),
        "control file missing from glob: {paths:?}"
    );
    assert!(
        paths
            .iter()
            .all(|p| !p.contains("outside.txt") && !p.contains("more.txt")),
        "glob followed a symlink out: {paths:?}"
    );
    let r = g.ok("_fsgate/grep", json!({"pattern": "MARKER"}));
    let hits = grep_hits(&r);
    assert_eq!(
        hits,
        vec![(g.abs("inside.txt"), 1, "MARKER inside".to_owned())],
        "grep followed a symlink out"
    );
}

#[test]
fn symlink_to_device_is_refused() {
    let g = Gate::start();
    g.symlink("/dev/null", "null");
    g.symlink("/dev/zero", "zero");
    g.symlink("/dev/urandom", "random.txt");
    for link in ["null", "zero", "random.txt"] {
        assert_refused_any(g.call("fs/read_text_file", json!({"path": g.abs(link)})));
        assert_refused_any(g.call("_fsgate/read_file", json!({"path": g.abs(link)})));
    }
    g.put("inside.txt", "x\n");
    let r = g.ok("_fsgate/grep", json!({"pattern": "x"}));
    assert_eq!(
        grep_hits(&r),
        vec![(g.abs("inside.txt"), 1, "x".to_owned())],
        "grep must skip device links and finish"
    );
}

#[test]
fn symlink_inside_to_dotenv_is_refused_by_policy() {
    let g = Gate::start();
    g.put(".env", "API_KEY=sk-live-VERYSECRET\n");
    g.put("control.txt", "API_KEY=placeholder\n");
    g.symlink(".env", "notes.txt");
    g.symlink("../.env", "sub/config.txt");
    for link in ["notes.txt", "sub/config.txt"] {
        // error.data.path may name the link or the `.env` it leads to.
        let e = assert_refused_any(g.call("fs/read_text_file", json!({"path": g.abs(link)})));
        assert!(!e.message.contains("VERYSECRET"), "{e:?}");
        let e = assert_refused_any(g.call("_fsgate/read_file", json!({"path": g.abs(link)})));
        assert!(!e.message.contains("VERYSECRET"), "{e:?}");
    }
    let r = g.ok("_fsgate/grep", json!({"pattern": "API_KEY"}));
    let hits = grep_hits(&r);
    assert_eq!(
        hits,
        vec![(g.abs("control.txt"), 1, "API_KEY=placeholder".to_owned())],
        "grep read .env through a symlink"
    );
}

#[test]
fn write_through_symlink_to_dotenv_never_changes_it() {
    let g = Gate::start();
    g.put(".env", "API_KEY=original\n");
    g.symlink(".env", "notes.txt");
    let _ = g.call(
        "fs/write_text_file",
        json!({"path": g.abs("notes.txt"), "content": "API_KEY=attacker\n"}),
    );
    let _ = g.call(
        "_fsgate/edit_text_file",
        json!({"path": g.abs("notes.txt"), "oldText": "original", "newText": "attacker"}),
    );
    assert_eq!(
        g.get(".env").as_deref(),
        Some(&b"API_KEY=original\n"[..]),
        "a secret was modified through a symlink"
    );
}

#[test]
fn symlink_inside_to_vcs_internals_is_refused_by_policy() {
    let g = Gate::start();
    // `.hg` is hidden by the default policy; `.git` readable, its hooks never written.
    g.put(
        ".hg/hgrc",
        "[paths]\ndefault = https://token@example.com/x\n",
    );
    g.put(".git/hooks/README", "hooks\n");
    g.symlink(".hg", "h");
    g.symlink(".git", "g");
    assert_refused_any(g.call("fs/read_text_file", json!({"path": g.abs("h/hgrc")})));
    assert_refused_any(g.call("_fsgate/ls", json!({"path": g.abs("h")})));
    assert_refused_any(g.call(
        "fs/write_text_file",
        json!({"path": g.abs("g/hooks/pre-commit"), "content": "#!/bin/sh\nevil\n"}),
    ));
    assert!(
        !g.exists(".git/hooks/pre-commit"),
        "a git hook was planted through a symlink"
    );
    // Refusing the pattern or matching nothing are both fine; listing .hg's files is not.
    match g.call("_fsgate/glob", json!({"pattern": "h/**"})) {
        Ok(r) => assert_eq!(
            glob_paths(&r),
            Vec::<String>::new(),
            "glob revealed .hg internals through a symlink"
        ),
        Err(e) => assert_eq!(e.code, REFUSED, "{e:?}"),
    }
    let r = g.ok("_fsgate/grep", json!({"pattern": "token@"}));
    assert_eq!(
        grep_hits(&r),
        vec![],
        "grep read .hg/hgrc through a symlink"
    );
}

#[test]
fn symlink_staying_inside_the_root_is_followed() {
    // Control for the refusals above: a link whose target stays inside and is allowed works.
    let g = Gate::start();
    g.put("real/target.txt", "inside target\n");
    g.symlink("real/target.txt", "link.txt");
    g.symlink("../real", "sub/dirlink");
    let r = g.ok("fs/read_text_file", json!({"path": g.abs("link.txt")}));
    assert_eq!(r["content"], json!("inside target\n"));
    let r = g.ok(
        "fs/read_text_file",
        json!({"path": g.abs("sub/dirlink/target.txt")}),
    );
    assert_eq!(r["content"], json!("inside target\n"));
}
