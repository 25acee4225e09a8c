//! Integration tests for `_fsgate/ls`, `_fsgate/stat`, `_fsgate/glob` and `_fsgate/grep`.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::common::{
    Gate, INVALID_PARAMS, NOT_FOUND, assert_code, entry_names, glob_paths, grep_hits,
};

fn is_dir_type(t: &Value) -> bool {
    t == "dir" || t == "directory"
}

#[test]
fn ls_lists_names_absolute_paths_and_types() {
    let g = Gate::start();
    g.put("a.txt", "12345");
    g.put("sub/b.txt", "b");
    std::fs::create_dir(g.path("empty")).expect("mkdir");
    let r = g.ok("_fsgate/ls", json!({"path": g.abs("")}));
    let mut names = entry_names(&r);
    names.sort();
    assert_eq!(names, vec!["a.txt", "empty", "sub"]);
    for e in r["entries"].as_array().expect("entries") {
        let name = e["name"].as_str().expect("name");
        assert_eq!(
            e["path"],
            json!(g.abs(name)),
            "entry path must be absolute: {e}"
        );
        match name {
            "a.txt" => {
                assert_eq!(e["type"], json!("file"), "{e}");
                if let Some(size) = e.get("size") {
                    assert_eq!(size, &json!(5), "{e}");
                }
            }
            _ => assert!(is_dir_type(&e["type"]), "directory type expected: {e}"),
        }
    }
    let sub = g.ok("_fsgate/ls", json!({"path": g.abs("sub")}));
    assert_eq!(entry_names(&sub), vec!["b.txt"]);
    assert_eq!(sub["entries"][0]["path"], json!(g.abs("sub/b.txt")));
}

/// `ls` carries each entry's size and modification time exactly as `lstat` gives them
/// (the metadata a listing reads for itself), and only those keys.
#[test]
fn ls_entries_carry_exactly_what_lstat_says() {
    let g = Gate::start();
    g.put("d/a.txt", "12345");
    g.put("d/b.bin", vec![7u8; 3000]);
    std::fs::create_dir(g.path("d/sub")).expect("mkdir");
    let old = SystemTime::UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789);
    std::fs::File::options()
        .write(true)
        .open(g.path("d/a.txt"))
        .and_then(|f| f.set_modified(old))
        .expect("set mtime");
    let r = g.ok("_fsgate/ls", json!({"path": g.abs("d")}));
    let entries = r["entries"].as_array().expect("entries");
    assert_eq!(entry_names(&r), vec!["a.txt", "b.bin", "sub"]);
    for e in entries {
        let name = e["name"].as_str().expect("name");
        let m = std::fs::symlink_metadata(g.path(&format!("d/{name}"))).expect("lstat");
        let mtime = OffsetDateTime::from(m.modified().expect("mtime"))
            .format(&Rfc3339)
            .expect("format");
        let kind = if m.is_dir() {
            assert!(is_dir_type(&e["type"]), "{e}");
            e["type"].clone()
        } else {
            json!("file")
        };
        let want = json!({
            "name": name,
            "path": g.abs(&format!("d/{name}")),
            "type": kind,
            "size": m.len(),
            "modified": mtime,
        });
        assert_eq!(e, &want, "{name}");
    }
    assert_eq!(
        entries[0]["modified"],
        json!("2023-11-14T22:13:20.123456789Z")
    );
}

#[test]
fn ls_missing_directory_is_not_found() {
    let g = Gate::start();
    assert_code(
        g.call("_fsgate/ls", json!({"path": g.abs("missing")})),
        NOT_FOUND,
    );
}

#[test]
fn stat_file_reports_type_size_rfc3339_mtime_and_permissions() {
    let g = Gate::start();
    let p = g.put("s.txt", "hello world");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    let mtime = std::fs::metadata(&p)
        .and_then(|m| m.modified())
        .expect("mtime");
    let r = g.ok("_fsgate/stat", json!({"path": g.abs("s.txt")}));
    let st = &r["stat"];
    assert_eq!(st["path"], json!(g.abs("s.txt")), "{r}");
    assert_eq!(st["type"], json!("file"), "{r}");
    assert_eq!(st["size"], json!(11), "{r}");
    assert_eq!(st["permissions"], json!("rw-r-----"), "{r}");
    let modified = st["modified"]
        .as_str()
        .unwrap_or_else(|| panic!("modified must be a string: {r}"));
    let parsed = OffsetDateTime::parse(modified, &Rfc3339)
        .unwrap_or_else(|e| panic!("modified {modified:?} is not RFC 3339: {e}"));
    let parsed: SystemTime = parsed.into();
    let diff = parsed
        .duration_since(mtime)
        .or_else(|e| Ok::<_, ()>(e.duration()))
        .unwrap_or_default();
    assert!(
        diff < Duration::from_secs(2),
        "modified {modified} is {diff:?} away from the file's mtime"
    );
}

#[test]
fn stat_directory_and_missing() {
    let g = Gate::start();
    std::fs::create_dir(g.path("d")).expect("mkdir");
    std::fs::set_permissions(g.path("d"), std::fs::Permissions::from_mode(0o750)).expect("chmod");
    let r = g.ok("_fsgate/stat", json!({"path": g.abs("d")}));
    assert!(is_dir_type(&r["stat"]["type"]), "{r}");
    assert_eq!(r["stat"]["permissions"], json!("rwxr-x---"), "{r}");
    assert_code(
        g.call("_fsgate/stat", json!({"path": g.abs("nothing")})),
        NOT_FOUND,
    );
}

fn glob_tree(g: &Gate) {
    g.put("src/a.rs", "a");
    g.put("src/deep/b.rs", "b");
    g.put("src/d.txt", "d");
    g.put("c.txt", "c");
    g.put("README.md", "r");
}

#[test]
fn glob_relative_pattern_returns_absolute_paths() {
    let g = Gate::start();
    glob_tree(&g);
    let r = g.ok("_fsgate/glob", json!({"pattern": "**/*.rs"}));
    assert_eq!(
        glob_paths(&r),
        vec![g.abs("src/a.rs"), g.abs("src/deep/b.rs")]
    );
}

#[test]
fn glob_single_star_does_not_cross_directories() {
    let g = Gate::start();
    glob_tree(&g);
    let r = g.ok("_fsgate/glob", json!({"pattern": "*.txt"}));
    assert_eq!(glob_paths(&r), vec![g.abs("c.txt")]);
    let r = g.ok("_fsgate/glob", json!({"pattern": "src/*.rs"}));
    assert_eq!(glob_paths(&r), vec![g.abs("src/a.rs")]);
}

#[test]
fn glob_absolute_pattern_under_root() {
    let g = Gate::start();
    glob_tree(&g);
    let r = g.ok(
        "_fsgate/glob",
        json!({"pattern": format!("{}/src/**/*.rs", g.abs(""))}),
    );
    assert_eq!(
        glob_paths(&r),
        vec![g.abs("src/a.rs"), g.abs("src/deep/b.rs")]
    );
}

#[test]
fn glob_without_matches_is_empty() {
    let g = Gate::start();
    glob_tree(&g);
    let r = g.ok("_fsgate/glob", json!({"pattern": "**/*.zig"}));
    assert_eq!(glob_paths(&r), Vec::<String>::new());
}

fn grep_tree(g: &Gate) {
    g.put("src/a.rs", "fn alpha() {}\nlet x = 1;\nfn beta() {}\n");
    g.put("src/b.txt", "fn gamma\n");
    g.put("docs/c.md", "FN upper\nnothing\n");
}

#[test]
fn grep_regex_reports_path_line_number_and_line() {
    let g = Gate::start();
    grep_tree(&g);
    let r = g.ok("_fsgate/grep", json!({"pattern": r"fn \w+"}));
    assert_eq!(
        grep_hits(&r),
        vec![
            (g.abs("src/a.rs"), 1, "fn alpha() {}".to_owned()),
            (g.abs("src/a.rs"), 3, "fn beta() {}".to_owned()),
            (g.abs("src/b.txt"), 1, "fn gamma".to_owned()),
        ]
    );
}

#[test]
fn grep_ignore_case() {
    let g = Gate::start();
    grep_tree(&g);
    let r = g.ok(
        "_fsgate/grep",
        json!({"pattern": r"^fn \w+$", "ignoreCase": true}),
    );
    assert_eq!(
        grep_hits(&r),
        vec![
            (g.abs("docs/c.md"), 1, "FN upper".to_owned()),
            (g.abs("src/b.txt"), 1, "fn gamma".to_owned())
        ]
    );
}

#[test]
fn grep_path_restricts_to_directory_or_file() {
    let g = Gate::start();
    grep_tree(&g);
    let r = g.ok(
        "_fsgate/grep",
        json!({"pattern": "(?i)fn", "path": g.abs("docs")}),
    );
    assert_eq!(
        grep_hits(&r),
        vec![(g.abs("docs/c.md"), 1, "FN upper".to_owned())]
    );
    let r = g.ok(
        "_fsgate/grep",
        json!({"pattern": "fn", "path": g.abs("src/b.txt")}),
    );
    assert_eq!(
        grep_hits(&r),
        vec![(g.abs("src/b.txt"), 1, "fn gamma".to_owned())]
    );
}

#[test]
fn grep_include_glob_filters_files() {
    let g = Gate::start();
    grep_tree(&g);
    let r = g.ok(
        "_fsgate/grep",
        json!({"pattern": "fn", "includeGlob": "**/*.rs"}),
    );
    let hits = grep_hits(&r);
    assert_eq!(hits.len(), 2, "{hits:?}");
    assert!(hits.iter().all(|h| h.0 == g.abs("src/a.rs")), "{hits:?}");
}

#[test]
fn grep_max_results_caps_matches() {
    let g = Gate::start();
    g.put("many.txt", "hit\n".repeat(20));
    let r = g.ok("_fsgate/grep", json!({"pattern": "hit", "maxResults": 3}));
    assert_eq!(grep_hits(&r).len(), 3, "{r}");
    let r = g.ok("_fsgate/grep", json!({"pattern": "hit"}));
    assert_eq!(grep_hits(&r).len(), 20, "{r}");
}

#[test]
fn grep_bad_regex_is_invalid_params() {
    let g = Gate::start();
    grep_tree(&g);
    assert_code(
        g.call("_fsgate/grep", json!({"pattern": "(unclosed"})),
        INVALID_PARAMS,
    );
    assert_code(g.call("_fsgate/grep", json!({})), INVALID_PARAMS);
}
