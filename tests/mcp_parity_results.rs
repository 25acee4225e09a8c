//! Drop-in parity with the reference MCP filesystem server, in results: output schemas
//! and structured content, get_file_info, write_file and list_directory_with_sizes
//! texts, refusals that name the door's own tools, and schemas every client can map
//! (the MCP Inspector's `--strict` portability rules).

use std::fs::{File, FileTimes};
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::mcp_harness::{McpGate, text_of};
use crate::mcp_reference::{Twins, rooted_text};

/// The reference server's 14 tools.
const REFERENCE_TOOLS: [&str; 14] = [
    "read_file",
    "read_text_file",
    "read_media_file",
    "read_multiple_files",
    "write_file",
    "edit_file",
    "create_directory",
    "list_directory",
    "list_directory_with_sizes",
    "directory_tree",
    "move_file",
    "search_files",
    "get_file_info",
    "list_allowed_directories",
];

/// The default policy with base64 reads of binary files allowed.
fn base64_policy() -> String {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/default.toml"),
    )
    .expect("default policy");
    assert!(text.contains("binary = \"media\""));
    text.replace("binary = \"media\"", "binary = \"base64\"")
}

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x01";

fn by_name(tools: &[Value]) -> std::collections::HashMap<String, Value> {
    tools
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap_or_default().to_string(),
                t.clone(),
            )
        })
        .collect()
}

/// Checks `result` against the output schema `schema` (JSON Schema validation).
fn assert_valid(tool: &str, schema: &Value, result: &Value) {
    let structured = &result["structuredContent"];
    assert!(
        !structured.is_null(),
        "{tool}: no structuredContent: {result}"
    );
    let v = jsonschema::validator_for(schema).expect("a valid schema");
    let errors: Vec<String> = v.iter_errors(structured).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{tool}: {errors:?}\n{structured}");
}

/// Each call, on both servers: (tool, arguments with `{root}`). Changes come last and
/// do not disturb the reads before them.
const CALLS: [(&str, &str); 14] = [
    ("read_text_file", r#"{"path": "{root}/a.txt"}"#),
    ("read_file", r#"{"path": "{root}/a.txt"}"#),
    ("read_media_file", r#"{"path": "{root}/pic.png"}"#),
    (
        "read_multiple_files",
        r#"{"paths": ["{root}/a.txt", "{root}/d/b.txt"]}"#,
    ),
    ("list_directory", r#"{"path": "{root}"}"#),
    ("list_directory_with_sizes", r#"{"path": "{root}"}"#),
    ("directory_tree", r#"{"path": "{root}/d"}"#),
    ("search_files", r#"{"path": "{root}", "pattern": "a.txt"}"#),
    ("get_file_info", r#"{"path": "{root}/a.txt"}"#),
    ("list_allowed_directories", "{}"),
    (
        "write_file",
        r#"{"path": "{root}/new.txt", "content": "hi\n"}"#,
    ),
    (
        "edit_file",
        r#"{"path": "{root}/a.txt", "edits": [{"oldText": "beta", "newText": "gamma"}]}"#,
    ),
    ("create_directory", r#"{"path": "{root}/made"}"#),
    (
        "move_file",
        r#"{"source": "{root}/new.txt", "destination": "{root}/made/new.txt"}"#,
    ),
];

const SEED: &[(&str, &[u8])] = &[
    ("a.txt", b"alpha\nbeta\n"),
    ("d/b.txt", b"bee\n"),
    ("pic.png", PNG),
];

/// Point 1: the reference's output schemas, exactly, on its 14 tools; every result
/// carries the structured content its schema promises, as the reference's does.
#[test]
fn output_schemas_and_structured_content_as_the_reference() {
    let policy = base64_policy();
    let Some(mut t) = Twins::start(
        "output_schemas_and_structured_content_as_the_reference",
        Some(&policy),
        SEED,
    ) else {
        return;
    };
    let (ft, rt) = t.tools();
    let (ours, theirs) = (by_name(&ft), by_name(&rt));
    for name in REFERENCE_TOOLS {
        assert_eq!(
            ours[name]["outputSchema"], theirs[name]["outputSchema"],
            "{name}"
        );
    }
    for (tool, args) in CALLS {
        let (f, r) = t.both(tool, args);
        assert_ne!(f["isError"], json!(true), "{tool}: {f}");
        assert_ne!(r["isError"], json!(true), "{tool}: {r}");
        let schema = &ours[tool]["outputSchema"];
        assert_valid(tool, schema, &f);
        assert_valid(tool, &theirs[tool]["outputSchema"], &r);
        if tool == "read_media_file" {
            // The content blocks again, as structured content.
            assert_eq!(f["structuredContent"]["content"], f["content"], "{f}");
            assert_eq!(f["structuredContent"], r["structuredContent"], "{tool}");
        } else {
            assert_eq!(f["structuredContent"]["content"], json!(text_of(&f)));
            assert_eq!(r["structuredContent"]["content"], json!(text_of(&r)));
        }
    }
}

/// Point 1 on the SDK's path (a call with `_meta` is not taken by the direct path), and
/// fsgate's own tools: each declares an output schema and its results match it.
#[test]
fn every_tool_returns_what_its_output_schema_declares_on_both_paths() {
    let mut g = McpGate::start(Some(&base64_policy()));
    for (rel, content) in SEED {
        g.dirs.put(rel, content);
    }
    g.initialize("2025-06-18");
    let tools = g.call(1, "tools/list", json!({}))["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let tools = by_name(&tools);
    assert_eq!(tools.len(), 22);
    for (name, tool) in &tools {
        assert!(tool["outputSchema"].is_object(), "{name}: no outputSchema");
    }
    let root = g.dirs.root.display().to_string();
    let own: [(&str, Value); 8] = [
        ("ls", json!({"path": root})),
        ("stat", json!({"path": "a.txt"})),
        ("glob", json!({"pattern": "**/*.txt"})),
        ("grep", json!({"pattern": "alpha"})),
        ("write_text_file", json!({"path": "w.txt", "content": "x"})),
        ("mkdir", json!({"path": "m"})),
        ("rename", json!({"oldPath": "w.txt", "newPath": "m/w.txt"})),
        ("rm", json!({"path": "m/w.txt"})),
    ];
    let reference = CALLS.iter().map(|(tool, args)| {
        (
            *tool,
            serde_json::from_str(&args.replace("{root}", &root)).unwrap(),
        )
    });
    let mut id = 10;
    for (tool, args) in own.into_iter().chain(reference) {
        for meta in [None, Some(json!({}))] {
            id += 1;
            let mut params = json!({"name": tool, "arguments": args});
            if let Some(m) = &meta {
                params["_meta"] = m.clone();
            }
            let r = g.call(id, "tools/call", params);
            // A change done once answers differently the second time (an existing
            // directory, a moved file): the schema still binds every success.
            if r["isError"] == json!(true) {
                assert!(meta.is_some(), "{tool}: {r}");
                assert!(r.get("structuredContent").is_none(), "{tool}: {r}");
                continue;
            }
            assert_valid(tool, &tools[tool]["outputSchema"], &r);
        }
    }
}

/// Sets a file's access and modification times.
fn set_times(path: &Path, secs: u64) {
    let t = UNIX_EPOCH + Duration::from_secs(secs);
    let f = File::open(path).expect("open");
    f.set_times(FileTimes::new().set_accessed(t).set_modified(t))
        .expect("set times");
}

/// Point 4: get_file_info's lines, in the reference's order and formats. The two
/// workspaces get the same access and modification times; birth times differ (each
/// file was made when it was), so `created` is compared by form.
#[test]
fn get_file_info_as_the_reference() {
    let Some(mut t) = Twins::start(
        "get_file_info_as_the_reference",
        None,
        &[("a.txt", b"alpha\nbeta\n"), ("d/b.txt", b"b")],
    ) else {
        return;
    };
    for gate in [&t.fsgate, &t.reference] {
        set_times(&gate.dirs.root.join("a.txt"), 1_795_393_464);
        set_times(&gate.dirs.root.join("d"), 1_700_000_000);
    }
    for (path, modified) in [
        ("a.txt", "Mon Nov 23 2026 00:24:24"),
        ("d", "Tue Nov 14 2023 22:13:20"),
    ] {
        let (f, r) = t.both(
            "get_file_info",
            &format!(r#"{{"path": "{{root}}/{path}"}}"#),
        );
        let (f, r) = (text_of(&f), text_of(&r));
        let keys = |s: &str| -> Vec<String> {
            s.lines()
                .map(|l| l.split_once(": ").map_or(l, |(k, _)| k).to_string())
                .collect()
        };
        assert_eq!(keys(&f), keys(&r), "{f}\n--\n{r}");
        for (fl, rl) in f.lines().zip(r.lines()) {
            if let Some(when) = fl.strip_prefix("created: ") {
                assert!(
                    when == "unknown" || when.ends_with(" GMT+0000 (Coordinated Universal Time)"),
                    "{fl}"
                );
            } else {
                assert_eq!(fl, rl);
            }
        }
        assert!(
            f.contains(&format!(
                "modified: {modified} GMT+0000 (Coordinated Universal Time)\n"
            )),
            "{f}"
        );
    }
}

/// Point 5: write_file's confirmation, and list_directory_with_sizes with its padding
/// (the blanks after a `[DIR]` name stay).
#[test]
fn write_file_and_sized_listing_texts_as_the_reference() {
    let Some(mut t) = Twins::start(
        "write_file_and_sized_listing_texts_as_the_reference",
        None,
        &[
            ("alpha.txt", b"0123456789"),
            ("big.bin.txt", &[b'x'; 5000]),
            ("sub/x.txt", b"x"),
        ],
    ) else {
        return;
    };
    let (f, r) = t.both(
        "write_file",
        r#"{"path": "{root}/new.txt", "content": "hello, world!\n"}"#,
    );
    assert_eq!(
        rooted_text(&f, &t.fsgate),
        "Successfully wrote to {root}/new.txt"
    );
    assert_eq!(rooted_text(&f, &t.fsgate), rooted_text(&r, &t.reference));
    for args in [
        r#"{"path": "{root}"}"#,
        r#"{"path": "{root}", "sortBy": "size"}"#,
    ] {
        let (f, r) = t.both("list_directory_with_sizes", args);
        let (f, r) = (text_of(&f), text_of(&r));
        assert_eq!(f, r, "{args}");
        let dir = f
            .lines()
            .find(|l| l.starts_with("[DIR]"))
            .unwrap_or_default();
        assert_eq!(dir, format!("[DIR] sub{} ", " ".repeat(27)), "{f}");
    }
}

/// write_file into a directory that does not exist: fsgate creates it, the reference
/// fails with ENOENT; docs/mcp-differences.md lists the difference.
#[test]
fn write_file_into_a_missing_directory_creates_it_unlike_the_reference() {
    let Some(mut t) = Twins::start(
        "write_file_into_a_missing_directory_creates_it_unlike_the_reference",
        None,
        &[],
    ) else {
        return;
    };
    let args = r#"{"path": "{root}/new/deeper/a.txt", "content": "hello\n"}"#;
    let (f, r) = t.both("write_file", args);
    assert_ne!(f["isError"], true, "{f}");
    let written = std::fs::read_to_string(t.fsgate.dirs.root.join("new/deeper/a.txt"));
    assert_eq!(written.ok().as_deref(), Some("hello\n"));
    assert_eq!(r["isError"], true, "{r}");
    assert!(text_of(&r).contains("ENOENT"), "{r}");
    assert!(!t.reference.dirs.root.join("new").exists());
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/mcp-differences.md"),
    )
    .expect("docs/mcp-differences.md");
    let section = doc
        .split("\n## ")
        .find(|s| s.starts_with("write_file"))
        .unwrap_or_else(|| panic!("docs/mcp-differences.md has no write_file section"));
    assert!(
        section.contains("does not exist") && section.contains("ENOENT"),
        "{section}"
    );
}

/// Point 8: a binary file read as text. The reference decodes it (replacement
/// characters); fsgate refuses, and on MCP names the MCP tool that reads it.
#[test]
fn binary_refusal_names_the_mcp_tool() {
    let policy = base64_policy();
    let Some(mut t) = Twins::start(
        "binary_refusal_names_the_mcp_tool",
        Some(&policy),
        &[("pic.png", PNG)],
    ) else {
        return;
    };
    for tool in ["read_text_file", "read_file"] {
        let (f, r) = t.both(tool, r#"{"path": "{root}/pic.png"}"#);
        assert_eq!(f["isError"], json!(true), "{f}");
        let msg = text_of(&f);
        assert!(msg.contains("use read_media_file"), "{msg}");
        assert!(!msg.contains("_fsgate/"), "{msg}");
        assert_ne!(r["isError"], json!(true), "{r}");
        assert!(text_of(&r).contains('\u{fffd}'), "{r}");
    }
    // The same read on ACP names the ACP method.
    let g = crate::common::Gate::with_policy(&policy);
    g.put("pic.png", PNG);
    let e = g.err("fs/read_text_file", json!({"path": g.abs("pic.png")}));
    assert!(format!("{e:?}").contains("use _fsgate/read_file"), "{e:?}");
}

/// One finding of the MCP Inspector's schema portability lint (`--strict`).
fn lint(schema: &Value, path: &str, keyword: Option<&str>, out: &mut Vec<String>) {
    const BOOLEAN_OK: &[&str] = &[
        "additionalProperties",
        "unevaluatedProperties",
        "additionalItems",
        "unevaluatedItems",
    ];
    const CONSTRAINING: &[&str] = &[
        "type",
        "enum",
        "const",
        "multipleOf",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "maxLength",
        "minLength",
        "pattern",
        "format",
        "contentMediaType",
        "contentEncoding",
        "contentSchema",
        "maxItems",
        "minItems",
        "uniqueItems",
        "maxContains",
        "minContains",
        "maxProperties",
        "minProperties",
        "required",
        "dependentRequired",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "items",
        "prefixItems",
        "contains",
        "additionalItems",
        "unevaluatedItems",
        "properties",
        "patternProperties",
        "additionalProperties",
        "unevaluatedProperties",
        "propertyNames",
        "dependentSchemas",
        "dependencies",
        "$ref",
        "$dynamicRef",
        "$recursiveRef",
    ];
    let node = match schema {
        Value::Bool(_) => {
            if !keyword.is_some_and(|k| BOOLEAN_OK.contains(&k)) {
                out.push(format!("{path}: bare boolean schema"));
            }
            return;
        }
        Value::Object(o) => o,
        _ => return,
    };
    if node.get("type").is_some_and(Value::is_array) {
        out.push(format!("{path}: type is an array"));
    }
    if node
        .get("$ref")
        .and_then(Value::as_str)
        .is_some_and(|r| !r.is_empty() && !r.starts_with('#'))
    {
        out.push(format!("{path}: remote $ref"));
    }
    let constrains = node.keys().any(|k| CONSTRAINING.contains(&k.as_str()))
        || (node.contains_key("if") && (node.contains_key("then") || node.contains_key("else")));
    if !constrains && keyword != Some("not") {
        out.push(format!("{path}: untyped schema"));
    }
    for key in [
        "properties",
        "patternProperties",
        "dependentSchemas",
        "dependencies",
        "$defs",
        "definitions",
    ] {
        if let Some(Value::Object(map)) = node.get(key) {
            for (name, sub) in map {
                lint(sub, &format!("{path}.{key}.{name}"), Some(key), out);
            }
        }
    }
    for key in ["allOf", "anyOf", "oneOf", "prefixItems"] {
        if let Some(Value::Array(arr)) = node.get(key) {
            for (i, sub) in arr.iter().enumerate() {
                lint(sub, &format!("{path}.{key}[{i}]"), Some(key), out);
            }
        }
    }
    for key in [
        "items",
        "contains",
        "not",
        "propertyNames",
        "if",
        "then",
        "else",
        "additionalProperties",
        "unevaluatedProperties",
        "additionalItems",
        "unevaluatedItems",
        "contentSchema",
    ] {
        match node.get(key) {
            Some(Value::Array(arr)) if key == "items" => {
                for (i, sub) in arr.iter().enumerate() {
                    lint(sub, &format!("{path}.{key}[{i}]"), Some(key), out);
                }
            }
            Some(sub) => lint(sub, &format!("{path}.{key}"), Some(key), out),
            None => {}
        }
    }
}

/// The lint catches what the Inspector reports (so a clean result below means something).
#[test]
fn the_schema_lint_finds_what_strict_mode_reports() {
    let mut out = Vec::new();
    let bad = json!({"type": "object", "properties": {
        "a": {"type": ["string", "null"]},
        "b": {"description": "anything"},
        "c": true,
        "d": {"$ref": "https://example.com/s.json"},
    }, "additionalProperties": false});
    lint(&bad, "inputSchema", None, &mut out);
    assert_eq!(out.len(), 4, "{out:?}");
}

/// Point 9: every input and output schema fsgate publishes passes the Inspector's
/// strict portability rules, under a policy that lists every tool.
#[test]
fn every_published_schema_is_portable() {
    let mut g = McpGate::start(Some(&base64_policy()));
    g.initialize("2025-06-18");
    let tools = g.call(1, "tools/list", json!({}))["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(tools.len(), 22);
    let mut out = Vec::new();
    for t in &tools {
        let name = t["name"].as_str().unwrap_or_default();
        lint(
            &t["inputSchema"],
            &format!("{name}.inputSchema"),
            None,
            &mut out,
        );
        if let Some(s) = t.get("outputSchema") {
            lint(s, &format!("{name}.outputSchema"), None, &mut out);
        }
    }
    assert!(out.is_empty(), "{out:#?}");
}
