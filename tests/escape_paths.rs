//! Escape tests by path text: absolute paths outside the root, sibling-prefix paths, `..`,
//! `/proc/self/root` and NUL bytes. Every one must be refused before anything is touched.

use std::path::PathBuf;

use serde_json::json;

use crate::common::{Gate, INVALID_PARAMS, REFUSED, assert_refused_any};

/// Every operation aimed at `target` (an absolute path string naming an existing file
/// outside the workspace, whose directory is `dir`) must be refused with -32003 and leave
/// the outside untouched.
pub(crate) fn assert_every_op_refused(g: &Gate, target: &str, dir: &str, secret: &[u8]) {
    let leaked = |e: &crate::common::RpcError| {
        e.message.contains("OUTSIDE")
            || e.data
                .as_ref()
                .is_some_and(|d| d.to_string().contains("OUTSIDE"))
    };
    for (method, params) in [
        ("fs/read_text_file", json!({"path": target})),
        ("_fsgate/read_file", json!({"path": target})),
        ("_fsgate/stat", json!({"path": target})),
        ("_fsgate/ls", json!({"path": dir})),
        ("_fsgate/grep", json!({"pattern": "OUTSIDE", "path": dir})),
        (
            "fs/write_text_file",
            json!({"path": target, "content": "pwned"}),
        ),
        (
            "_fsgate/edit_text_file",
            json!({"path": target, "oldText": "OUTSIDE", "newText": "pwned"}),
        ),
        ("_fsgate/rm", json!({"path": target})),
        ("_fsgate/mkdir", json!({"path": format!("{dir}/newdir")})),
        (
            "fs/write_text_file",
            json!({"path": format!("{dir}/created.txt"), "content": "pwned"}),
        ),
        (
            "_fsgate/rename",
            json!({"oldPath": target, "newPath": g.abs("stolen.txt")}),
        ),
        (
            "_fsgate/rename",
            json!({"oldPath": g.abs("inside.txt"), "newPath": format!("{dir}/planted.txt")}),
        ),
    ] {
        let e = assert_refused_any(g.call(method, params.clone()));
        assert!(
            !leaked(&e),
            "{method} {params} leaked outside content in its error: {e:?}"
        );
    }
    assert_eq!(
        std::fs::read(target).ok().as_deref(),
        Some(secret),
        "the outside file was modified"
    );
    for name in ["newdir", "created.txt", "planted.txt"] {
        assert!(
            !PathBuf::from(dir).join(name).exists(),
            "{name} was created outside the workspace"
        );
    }
    assert!(
        !g.exists("stolen.txt"),
        "an outside file was renamed into the workspace"
    );
    assert_eq!(
        g.get("inside.txt").as_deref(),
        Some(&b"inside"[..]),
        "inside file moved out"
    );
}

#[test]
fn absolute_path_outside_root_is_refused_for_every_op() {
    let g = Gate::start();
    g.put("inside.txt", "inside");
    let secret = g.put_outside("secret.txt", "OUTSIDE secret\n");
    let dir = g.outside.to_string_lossy().into_owned();
    assert_every_op_refused(&g, &secret.to_string_lossy(), &dir, b"OUTSIDE secret\n");
}

/// Removes the sibling directory it names on drop (it is not inside any tempdir).
struct SiblingDir(PathBuf);
impl Drop for SiblingDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn sibling_directory_sharing_the_root_prefix_is_refused() {
    // The classic string-prefix bug: `/tmp/ws` is a prefix of `/tmp/ws_evil/secret.txt`.
    let g = Gate::start();
    g.put("inside.txt", "inside");
    let sibling = SiblingDir(PathBuf::from(format!("{}_evil", g.abs(""))));
    std::fs::create_dir(&sibling.0).expect("create sibling dir");
    let secret = sibling.0.join("secret.txt");
    std::fs::write(&secret, "OUTSIDE sibling\n").expect("write sibling secret");
    assert_every_op_refused(
        &g,
        &secret.to_string_lossy(),
        &sibling.0.to_string_lossy(),
        b"OUTSIDE sibling\n",
    );
}

#[test]
fn dot_dot_escape_is_refused_for_every_op() {
    let g = Gate::start();
    g.put("inside.txt", "inside");
    g.put("sub/x.txt", "x");
    let secret = g.put_outside("secret.txt", "OUTSIDE dotdot\n");
    let outside_name = g
        .outside
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    let dir = format!("{}/sub/../../{outside_name}", g.abs(""));
    let target = format!("{dir}/secret.txt");
    assert_every_op_refused(&g, &target, &dir, b"OUTSIDE dotdot\n");
    let direct = format!("{}/../{outside_name}/secret.txt", g.abs(""));
    assert_refused_any(g.call("fs/read_text_file", json!({"path": direct})));
    assert_eq!(
        std::fs::read(&secret).ok().as_deref(),
        Some(&b"OUTSIDE dotdot\n"[..])
    );
}

#[test]
fn dot_dot_to_root_parent_is_refused() {
    let g = Gate::start();
    assert_refused_any(g.call("_fsgate/ls", json!({"path": format!("{}/..", g.abs(""))})));
    assert_refused_any(g.call(
        "_fsgate/stat",
        json!({"path": format!("{}/a/../..", g.abs(""))}),
    ));
}

#[test]
fn proc_self_root_is_refused() {
    let g = Gate::start();
    g.put("inside.txt", "inside");
    let secret = g.put_outside("secret.txt", "OUTSIDE proc\n");
    // The workspace seen through /proc/self/root is still outside the root as a path.
    let via_proc_ws = format!("/proc/self/root{}", g.abs("inside.txt"));
    assert_refused_any(g.call("fs/read_text_file", json!({"path": via_proc_ws})));
    let via_proc_out = format!("/proc/self/root{}", secret.to_string_lossy());
    let e = assert_refused_any(g.call("fs/read_text_file", json!({"path": via_proc_out})));
    assert!(!e.message.contains("OUTSIDE"), "{e:?}");
    // The same through a symlink inside the workspace.
    g.symlink("/proc/self/root", "procroot");
    let via_link = format!("{}{}", g.abs("procroot"), secret.to_string_lossy());
    assert_refused_any(g.call("fs/read_text_file", json!({"path": via_link})));
    assert_refused_any(g.call("_fsgate/ls", json!({"path": g.abs("procroot")})));
    g.symlink("/proc/self/cwd", "proccwd");
    assert_refused_any(g.call("_fsgate/ls", json!({"path": g.abs("proccwd")})));
}

#[test]
fn nul_byte_in_path_is_refused() {
    let g = Gate::start();
    g.put("a.txt", "plain a");
    g.put(".env", "SECRET=1");
    for (method, params) in [
        (
            "fs/read_text_file",
            json!({"path": format!("{}\u{0}.env", g.abs("a.txt"))}),
        ),
        (
            "fs/read_text_file",
            json!({"path": format!("{}\u{0}", g.abs("a.txt"))}),
        ),
        (
            "fs/write_text_file",
            json!({"path": format!("{}\u{0}x", g.abs("a.txt")), "content": "pwned"}),
        ),
        (
            "_fsgate/ls",
            json!({"path": format!("{}\u{0}/..", g.abs(""))}),
        ),
    ] {
        match g.call(method, params.clone()) {
            Ok(v) => panic!("{method} with a NUL byte in the path succeeded: {v}"),
            Err(e) => assert!(
                e.code == INVALID_PARAMS || e.code == REFUSED,
                "{method} {params}: a NUL byte must be refused as invalid params or by policy, got {e:?}"
            ),
        }
    }
    assert_eq!(g.get("a.txt").as_deref(), Some(&b"plain a"[..]));
}

#[test]
fn glob_patterns_outside_the_root_never_match_outside() {
    let g = Gate::start();
    g.put("inside.txt", "inside");
    g.put_outside("secret.txt", "OUTSIDE glob\n");
    let outside_name = g
        .outside
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    for pattern in [
        format!("{}/*.txt", g.outside.to_string_lossy()),
        format!("../{outside_name}/*.txt"),
        format!("{}/../{outside_name}/*.txt", g.abs("")),
        "/etc/*".to_owned(),
    ] {
        match g.call("_fsgate/glob", json!({"pattern": pattern})) {
            Ok(r) => {
                let m = crate::common::glob_paths(&r);
                assert!(
                    m.is_empty(),
                    "glob {pattern} matched outside the root: {m:?}"
                );
            }
            Err(e) => assert!(
                e.code == REFUSED || e.code == INVALID_PARAMS,
                "glob {pattern}: {e:?}"
            ),
        }
    }
}

#[test]
fn a_workspace_named_through_a_symlink_accepts_that_name_and_no_escape_through_it() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let real = tempfile::tempdir().unwrap();
    let links = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    std::fs::write(real.path().join("a.txt"), "via alias\n").unwrap();
    std::fs::write(links.path().join("ws_evil.txt"), "OUTSIDE\n").unwrap();
    let alias = links.path().join("ws");
    std::os::unix::fs::symlink(real.path(), &alias).unwrap();
    let a = alias.display().to_string();
    let mut child = Command::new(crate::common::bin())
        .args(["serve", "--workspace", &a, "--audit-log"])
        .arg(state.path().join("audit.jsonl"))
        .arg("--backup-dir")
        .arg(state.path().join("b"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let reqs = [
        json!({"jsonrpc":"2.0","id":1,"method":"fs/read_text_file","params":{"sessionId":"s","path": format!("{a}/a.txt")}}),
        json!({"jsonrpc":"2.0","id":2,"method":"fs/read_text_file","params":{"sessionId":"s","path": format!("{a}/../ws_evil.txt")}}),
        json!({"jsonrpc":"2.0","id":3,"method":"fs/read_text_file","params":{"sessionId":"s","path": format!("{a}_evil.txt")}}),
        json!({"jsonrpc":"2.0","id":4,"method":"_fsgate/glob","params":{"sessionId":"s","pattern": format!("{a}/*.txt")}}),
    ];
    {
        let mut stdin = child.stdin.take().unwrap();
        for r in &reqs {
            writeln!(stdin, "{r}").unwrap();
        }
    }
    let out = crate::common::wait_output(&mut child, crate::common::TIMEOUT);
    let by_id: std::collections::HashMap<i64, serde_json::Value> =
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .map(|v| (v["id"].as_i64().unwrap(), v))
            .collect();
    assert_eq!(
        by_id[&1]["result"]["content"], "via alias\n",
        "{:?}",
        by_id[&1]
    );
    for id in [2, 3] {
        assert_eq!(by_id[&id]["error"]["code"], REFUSED, "{:?}", by_id[&id]);
        assert!(!by_id[&id].to_string().contains("OUTSIDE"));
    }
    assert_eq!(
        by_id[&4]["result"]["matches"].as_array().map(Vec::len),
        Some(1),
        "{:?}",
        by_id[&4]
    );
}

/// A deny rule typed with a composed accent (`données`, NFC, as a policy is typed)
/// refuses the same name spelled decomposed (`donne\u{301}es`, NFD, as macOS writes
/// names), for a read, a listing and grep; `policy explain` says so. Before, the
/// decomposed spelling was read as allowed.
#[test]
fn a_deny_rule_refuses_a_name_in_either_unicode_spelling() {
    let policy = "version = 1\n\
        [[rule]]\nid = \"payroll\"\neffect = \"deny\"\nops = [\"*\"]\npaths = [\"donn\u{e9}es/**\"]\n\
        [[rule]]\nid = \"all\"\neffect = \"allow\"\nops = [\"*\"]\npaths = [\"**\"]\n";
    let decomposed = "donne\u{301}es";
    let g = Gate::with_policy(policy);
    g.put(
        &format!("{decomposed}/paie.txt"),
        "SALAIRES confidentiels\n",
    );
    g.put("public.txt", "public\n");
    let read = g.call(
        "fs/read_text_file",
        json!({"path": g.abs(&format!("{decomposed}/paie.txt"))}),
    );
    let e = assert_refused_any(read);
    assert_eq!(
        e.data.as_ref().map(|d| d["rule"].clone()),
        Some(json!("payroll"))
    );
    let hits = crate::common::grep_hits(&g.ok("_fsgate/grep", json!({"pattern": "SALAIRES"})));
    assert_eq!(hits, vec![], "grep showed the refused file");
    let dir = std::env::temp_dir().join("fsgate-nfd-policy.toml");
    std::fs::write(&dir, policy).expect("policy");
    let out = std::process::Command::new(crate::common::bin())
        .args(["policy", "explain"])
        .arg(&dir)
        .args(["--op", "read", &format!("{decomposed}/paie.txt")])
        .output()
        .expect("explain");
    let _ = std::fs::remove_file(&dir);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("DENY by payroll"), "{text}");
    // A deny folds case beyond ASCII too: accented capitals are the same name.
    for variant in ["DONN\u{c9}ES", "donn\u{c9}es", "DONNE\u{301}ES"] {
        g.put(&format!("{variant}/paie.txt"), "SALAIRES\n");
        let read = g.call(
            "fs/read_text_file",
            json!({"path": g.abs(&format!("{variant}/paie.txt"))}),
        );
        let e = assert_refused_any(read);
        assert_eq!(
            e.data.as_ref().map(|d| d["rule"].clone()),
            Some(json!("payroll")),
            "{variant}"
        );
    }
}

/// An allow or a secret-name pattern typed decomposed (NFD, pasted from macOS) means
/// the name the author typed, in either spelling: the allow lets both be read, and the
/// secret pattern hides both; an allow never reaches another name by folding case.
#[test]
fn a_pattern_typed_decomposed_means_its_name_in_either_spelling() {
    let policy = "version = 1\n\
        [secrets]\nbuiltin = true\n\
        [[secrets.patterns]]\nid = \"key-file\"\nregex = \"^cle\u{301}\\\\.txt$\"\n\
        [[rule]]\nid = \"cafe\"\neffect = \"allow\"\nops = [\"*\"]\npaths = [\"cafe\u{301}/**\"]\n";
    let g = Gate::with_policy(policy);
    for dir in ["caf\u{e9}", "cafe\u{301}"] {
        g.put(&format!("{dir}/x.txt"), "menu\n");
        let text = g.ok(
            "fs/read_text_file",
            json!({"path": g.abs(&format!("{dir}/x.txt"))}),
        );
        assert!(text.to_string().contains("menu"), "{dir}: {text}");
    }
    g.put("CAF\u{c9}/x.txt", "menu\n");
    assert_refused_any(g.call(
        "fs/read_text_file",
        json!({"path": g.abs("CAF\u{c9}/x.txt")}),
    ));
    for name in ["cl\u{e9}.txt", "cle\u{301}.txt"] {
        g.put(&format!("caf\u{e9}/{name}"), "secret\n");
        let e = assert_refused_any(g.call(
            "fs/read_text_file",
            json!({"path": g.abs(&format!("caf\u{e9}/{name}"))}),
        ));
        assert_eq!(
            e.data.as_ref().map(|d| d["rule"].clone()),
            Some(json!("secrets:key-file")),
            "{name}"
        );
    }
}
