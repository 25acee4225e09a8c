//! Drop-in parity with the reference MCP filesystem server (issue 14, points 2, 3, 6,
//! 7): read_text_file head/tail, edit_file diffs, search_files patterns, media files.
//! Each test makes the same call on fsgate and on the reference and compares what a
//! client sees; where fsgate differs on purpose (docs/mcp-differences.md) the test
//! asserts both sides.

use serde_json::Value;

use crate::mcp_harness::text_of;

use crate::mcp_reference::{Twins, rooted_text};

/// Both texts of one call, each server's root written `{root}`.
fn texts(t: &mut Twins, tool: &str, args: &str) -> (String, String) {
    let (f, r) = t.both(tool, args);
    assert_ne!(f["isError"], Value::Bool(true), "fsgate {tool} {args}: {f}");
    assert_ne!(
        r["isError"],
        Value::Bool(true),
        "reference {tool} {args}: {r}"
    );
    (rooted_text(&f, &t.fsgate), rooted_text(&r, &t.reference))
}

/// The same text on both servers, returned.
fn same(t: &mut Twins, tool: &str, args: &str) -> String {
    let (f, r) = texts(t, tool, args);
    assert_eq!(f, r, "{tool} {args}: fsgate vs reference");
    f
}

#[test]
fn head_and_tail_match_the_reference_where_it_is_not_a_trap() {
    let seed: &[(&str, &[u8])] = &[
        ("nl.txt", b"alpha\nbeta\ngamma\n"),
        ("bare.txt", b"alpha\nbeta\ngamma"),
        ("crlf.txt", b"alpha\r\nbeta\r\ngamma\r\n"),
        ("empty.txt", b""),
    ];
    let Some(mut t) = Twins::start("head_and_tail_match_the_reference", None, seed) else {
        return;
    };
    let read = |file: &str, arg: &str| format!(r#"{{"path": "{{root}}/{file}", {arg}}}"#);
    for file in ["nl.txt", "bare.txt", "crlf.txt", "empty.txt"] {
        for arg in [
            r#""head": 2"#,
            r#""head": 1"#,
            r#""head": 10"#,
            r#""head": 0"#,
            r#""tail": 0"#,
        ] {
            same(&mut t, "read_text_file", &read(file, arg));
        }
        same(
            &mut t,
            "read_text_file",
            &read(file, r#""head": 0, "tail": 0"#),
        );
        same(&mut t, "read_file", &read(file, r#""head": 2"#));
    }
    assert_eq!(
        same(&mut t, "read_text_file", &read("nl.txt", r#""head": 2"#)),
        "alpha\nbeta"
    );
    assert_eq!(
        same(&mut t, "read_text_file", &read("nl.txt", r#""head": 0"#)),
        "alpha\nbeta\ngamma\n"
    );
    // head=0 counts as not given, so it combines with tail as on the reference.
    assert_eq!(
        same(
            &mut t,
            "read_text_file",
            &read("bare.txt", r#""head": 0, "tail": 2"#)
        ),
        "beta\ngamma"
    );
    for n in [1, 2, 3, 10] {
        same(
            &mut t,
            "read_text_file",
            &read("bare.txt", &format!(r#""tail": {n}"#)),
        );
    }
    // Kept on purpose: tail=N of a file ending in a newline is its last N lines; the
    // reference counts the empty string after the final newline as a line (tail=1 is
    // "") and turns CRLF into LF.
    let (f, r) = texts(&mut t, "read_text_file", &read("nl.txt", r#""tail": 2"#));
    assert_eq!((f.as_str(), r.as_str()), ("beta\ngamma\n", "gamma\n"));
    let (f, r) = texts(&mut t, "read_text_file", &read("nl.txt", r#""tail": 1"#));
    assert_eq!((f.as_str(), r.as_str()), ("gamma\n", ""));
    let (f, r) = texts(&mut t, "read_text_file", &read("crlf.txt", r#""tail": 2"#));
    assert_eq!((f.as_str(), r.as_str()), ("beta\r\ngamma\r\n", "gamma\n"));
    // Both refuse head and tail together.
    let (f, r) = t.both("read_text_file", &read("nl.txt", r#""head": 1, "tail": 1"#));
    assert_eq!(
        (f["isError"].clone(), r["isError"].clone()),
        (Value::Bool(true), Value::Bool(true)),
        "{f} {r}"
    );
}

/// Twenty numbered lines, `\n`-terminated unless `bare`.
fn numbered(bare: bool) -> Vec<u8> {
    let mut s: String = (1..=20).map(|i| format!("line {i}\n")).collect();
    if bare {
        s.pop();
    }
    s.into_bytes()
}

/// An `edit_file` call's arguments on `file`.
fn edit_args(file: &str, edits: &[(&str, &str)], dry: bool) -> String {
    let edits: Vec<Value> = edits
        .iter()
        .map(|(o, n)| serde_json::json!({"oldText": o, "newText": n}))
        .collect();
    serde_json::json!({"path": format!("{{root}}/{file}"), "edits": edits, "dryRun": dry})
        .to_string()
}

#[test]
fn edit_diffs_are_the_reference_diffs_byte_for_byte() {
    let nl = numbered(false);
    let bare = numbered(true);
    let seed: &[(&str, &[u8])] = &[
        ("nl.txt", &nl),
        ("bare.txt", &bare),
        ("one.txt", b"only"),
        ("e.txt", b""),
    ];
    let Some(mut t) = Twins::start("edit_diffs_are_the_reference_diffs", None, seed) else {
        return;
    };
    let cases: &[(&str, &[(&str, &str)])] = &[
        ("nl.txt", &[("line 1\n", "first\n")]),
        ("nl.txt", &[("line 10\n", "ten\nTEN\n")]),
        ("nl.txt", &[("line 20\n", "")]),
        ("nl.txt", &[("line 2\n", "two\n"), ("line 17\n", "")]),
        ("nl.txt", &[("line 5\n", "five\n"), ("line 12", "twelve")]),
        ("nl.txt", &[("line 5\n", "five\n"), ("line 14", "fourteen")]),
        ("nl.txt", &[("line 3", "line 3")]),
        ("bare.txt", &[("line 20", "last")]),
        ("bare.txt", &[("line 20", "line 20\n")]),
        ("bare.txt", &[("line 19\n", "")]),
        ("nl.txt", &[("line 20\n", "line 20")]),
        ("nl.txt", &[("line 7", "```")]),
        ("one.txt", &[("only", "just\nthis\n")]),
        ("one.txt", &[("only", "")]),
        ("nl.txt", &[("line 1\nline 2\nline 3\nline 4\n", "")]),
        ("nl.txt", &[("line 9\n", "nine\n"), ("line 11\n", "a\nb\n")]),
    ];
    // 4 lines of context, as on the reference.
    let d = same(
        &mut t,
        "edit_file",
        &edit_args("nl.txt", &[("line 12\n", "12\n")], true),
    );
    assert!(d.contains("@@ -8,9 +8,9 @@\n line 8\n"), "{d}");
    for (file, edits) in cases {
        for (rel, content) in seed {
            t.fsgate.dirs.put(rel, content);
            t.reference.dirs.put(rel, content);
        }
        let dry = same(&mut t, "edit_file", &edit_args(file, edits, true));
        assert!(
            dry.starts_with("```diff\nIndex: {root}/") || dry.starts_with("````diff\n"),
            "{dry}"
        );
        let wet = same(&mut t, "edit_file", &edit_args(file, edits, false));
        assert_eq!(
            dry, wet,
            "{file} {edits:?}: dry run and edit show the same diff"
        );
        let (f, r) = (
            t.fsgate.dirs.root.join(file),
            t.reference.dirs.root.join(file),
        );
        let (f, r) = (std::fs::read(f).unwrap(), std::fs::read(r).unwrap());
        assert_eq!(f, r, "{file} {edits:?}: the files agree after the edit");
    }
}

#[test]
fn crlf_files_stay_crlf_with_the_reference_diff() {
    let seed: &[(&str, &[u8])] = &[("w.txt", b"one\r\ntwo\r\nthree\r\n")];
    let Some(mut t) = Twins::start("crlf_files_stay_crlf", None, seed) else {
        return;
    };
    let args = edit_args("w.txt", &[("two\n", "2\n")], false);
    let d = same(&mut t, "edit_file", &args);
    assert!(d.contains("-two\n+2\n"), "{d}");
    let f = std::fs::read(t.fsgate.dirs.root.join("w.txt")).unwrap();
    let r = std::fs::read(t.reference.dirs.root.join("w.txt")).unwrap();
    assert_eq!(f, b"one\r\n2\r\nthree\r\n", "fsgate keeps CRLF");
    assert_eq!(r, b"one\n2\nthree\n", "the reference writes LF");
}

/// A search's result lines, sorted (the reference lists in directory order).
fn found(text: &str) -> Vec<String> {
    let mut v: Vec<String> = text.lines().map(str::to_string).collect();
    v.sort();
    v
}

#[test]
fn search_files_matches_paths_relative_to_the_search_root() {
    let seed: &[(&str, &[u8])] = &[
        ("a.py", b"1"),
        ("util.py", b"1"),
        (".hidden.py", b"1"),
        ("src/util.py", b"1"),
        ("src/b.py", b"1"),
        ("src/deep/c.py", b"1"),
        ("src/deep/util.py", b"1"),
        ("docs/readme.md", b"1"),
        ("node_modules/x.py", b"1"),
        ("src/node_modules/y.py", b"1"),
    ];
    let Some(mut t) = Twins::start("search_files_matches_paths_relative", None, seed) else {
        return;
    };
    let patterns = [
        "*.py",
        "util.py",
        "**/*.py",
        "src/*.py",
        "src/**",
        "**/util.py",
        "*",
        "**",
        "src",
        "{a,util}.py",
        "?.py",
        "[ab].py",
        "./util.py",
        "**/deep",
        "src/**/*.py",
        "*.PY",
    ];
    let excludes = [
        "[]",
        r#"["node_modules"]"#,
        r#"["**/node_modules"]"#,
        r#"["src"]"#,
        r#"["*.py"]"#,
        r#"["src/deep/**"]"#,
        r#"["src/deep", "docs"]"#,
    ];
    for under in ["{root}", "{root}/src"] {
        for p in patterns {
            for x in excludes {
                let args =
                    format!(r#"{{"path": "{under}", "pattern": "{p}", "excludePatterns": {x}}}"#);
                let (f, r) = texts(&mut t, "search_files", &args);
                assert_eq!(found(&f), found(&r), "{args}");
            }
        }
    }
    let (f, _) = texts(
        &mut t,
        "search_files",
        r#"{"path": "{root}", "pattern": "*.py"}"#,
    );
    assert_eq!(
        found(&f),
        ["{root}/.hidden.py", "{root}/a.py", "{root}/util.py"]
    );
    let (f, _) = texts(
        &mut t,
        "search_files",
        r#"{"path": "{root}", "pattern": "util.py"}"#,
    );
    assert_eq!(f, "{root}/util.py");
    let (f, _) = texts(
        &mut t,
        "search_files",
        r#"{"path": "{root}/src", "pattern": "util.py"}"#,
    );
    assert_eq!(f, "{root}/src/util.py");
}

#[test]
fn search_files_never_lists_refused_paths() {
    let seed: &[(&str, &[u8])] = &[("a.py", b"1"), (".env", b"K=v"), ("cfg/.env.local", b"K=v")];
    let Some(mut t) = Twins::start("search_files_never_lists_refused_paths", None, seed) else {
        return;
    };
    let (f, r) = texts(
        &mut t,
        "search_files",
        r#"{"path": "{root}", "pattern": "**"}"#,
    );
    assert_eq!(
        found(&f),
        ["{root}/a.py", "{root}/cfg"],
        "fsgate hides secrets"
    );
    assert!(
        r.contains("{root}/.env") && r.contains("{root}/cfg/.env.local"),
        "{r}"
    );
    let (f, r) = texts(
        &mut t,
        "search_files",
        r#"{"path": "{root}", "pattern": ".env"}"#,
    );
    assert_eq!(
        (f.as_str(), r.as_str()),
        ("No matches found", "{root}/.env")
    );
}

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0";
const JPEG: &[u8] = b"\xff\xd8\xff\xe0\0\x10JFIF\0\x01\x01\0\0\x01";
const WAV: &[u8] = b"RIFF\x24\0\0\0WAVEfmt \x10\0\0\0\x01\0\x01\0";
const MP3: &[u8] = b"ID3\x04\0\0\0\0\0\x00\xff\xfb\x90\x64\0";

/// A tool result's content blocks (without any structured copy).
fn blocks(v: &Value) -> Value {
    v["content"].clone()
}

#[test]
fn media_files_read_as_on_the_reference_under_the_default_policy() {
    let seed: &[(&str, &[u8])] = &[
        ("img/a.png", PNG),
        ("img/b.JPG", JPEG),
        ("snd/c.wav", WAV),
        ("snd/d.mp3", MP3),
        (
            "img/e.svg",
            b"<svg xmlns=\"http://www.w3.org/2000/svg\"/>\n",
        ),
        ("notes.txt", b"plain text\n"),
        ("img/fake.png", b"\x7fELF\x02\x01\x01\0\0\0"),
        ("blob.bin", PNG),
    ];
    let Some(mut t) = Twins::start("media_files_read_as_on_the_reference", None, seed) else {
        return;
    };
    let (ft, rt) = t.tools();
    let named = |tools: &[Value]| tools.iter().any(|x| x["name"] == "read_media_file");
    assert!(
        named(&ft) && named(&rt),
        "read_media_file is listed on both"
    );
    for file in [
        "img/a.png",
        "img/b.JPG",
        "snd/c.wav",
        "snd/d.mp3",
        "img/e.svg",
    ] {
        let (f, r) = t.both(
            "read_media_file",
            &format!(r#"{{"path": "{{root}}/{file}"}}"#),
        );
        assert_eq!(blocks(&f), blocks(&r), "{file}: {f} vs {r}");
        assert!(
            matches!(f["content"][0]["type"].as_str(), Some("image" | "audio")),
            "{f}"
        );
    }
    // A text file of another type: an embedded resource on both, URIs alike.
    let (f, r) = t.both("read_media_file", r#"{"path": "{root}/notes.txt"}"#);
    let uri = |v: &Value, g: &crate::mcp_harness::McpGate| {
        v["content"][0]["resource"]["uri"]
            .as_str()
            .unwrap_or_default()
            .replace(&g.dirs.root.display().to_string(), "{root}")
    };
    assert_eq!(uri(&f, &t.fsgate), uri(&r, &t.reference), "{f} {r}");
    assert_eq!(
        f["content"][0]["resource"]["blob"],
        r["content"][0]["resource"]["blob"]
    );
    // Kept on purpose: binary content that is not the media its name says, and binary
    // files that are not media, are refused (the reference returns any file).
    for file in ["img/fake.png", "blob.bin"] {
        let (f, r) = t.both(
            "read_media_file",
            &format!(r#"{{"path": "{{root}}/{file}"}}"#),
        );
        assert_eq!(f["isError"], Value::Bool(true), "{file}: {f}");
        assert!(text_of(&f).contains("limits.binary"), "{file}: {f}");
        assert_ne!(r["isError"], Value::Bool(true), "{file}: {r}");
    }
    // Text reads still refuse media files.
    let (f, _) = t.both("read_text_file", r#"{"path": "{root}/img/a.png"}"#);
    assert!(text_of(&f).contains("limits.binary"), "{f}");
}

#[test]
fn media_reads_keep_the_size_limit_and_content_rules() {
    let content = "\n[content]\nbuiltin = true\nops = [\"read\", \"write\"]\n";
    let policy = crate::common::policy_with(4096, 4096, "media", content);
    let mut big = PNG.to_vec();
    big.resize(5000, 0);
    let mut keyed = PNG.to_vec();
    keyed.extend_from_slice(b"\0AKIAUJZDEGXDNCF32EPF\0");
    let seed: &[(&str, &[u8])] = &[("big.png", &big), ("keyed.png", &keyed), ("ok.png", PNG)];
    let Some(mut t) = Twins::start("media_reads_keep_limits", Some(&policy), seed) else {
        return;
    };
    let (f, _) = t.both("read_media_file", r#"{"path": "{root}/ok.png"}"#);
    assert_eq!(f["content"][0]["mimeType"], "image/png", "{f}");
    let (f, _) = t.both("read_media_file", r#"{"path": "{root}/big.png"}"#);
    assert!(text_of(&f).contains("limits.max_read_bytes"), "{f}");
    let (f, _) = t.both("read_media_file", r#"{"path": "{root}/keyed.png"}"#);
    assert!(text_of(&f).contains("content:aws-access-key-id"), "{f}");
}

#[test]
fn read_media_file_is_not_listed_when_binary_reads_are_denied() {
    let policy = crate::common::policy_with(4096, 4096, "deny", "");
    let Some(mut t) = Twins::start("read_media_file_is_not_listed", Some(&policy), &[]) else {
        return;
    };
    let (ft, rt) = t.tools();
    let named = |tools: &[Value]| tools.iter().any(|x| x["name"] == "read_media_file");
    assert!(!named(&ft) && named(&rt));
    assert!(ft.iter().any(|x| x["name"] == "read_text_file"));
}
