//! The doors' rules that the crate graph alone does not enforce, checked on the source.
//! The doors crate depends on neither the audit log, the workspace nor the backups (its
//! manifest is checked too), so it cannot name their types; but the gateway still hands
//! out references to them, and the base crate parses paths. So: outside test code, no
//! door parses a path (`RelPath::parse*`), decides policy (`.decide(`), or reaches the
//! audit log, the workspace or the backups through the gateway (`.audit()`,
//! `.workspace()`, `.backups()`). A door decodes and encodes; the gateway does the rest.
//!
//! No operation is recognised by its record name matched as a string, anywhere; the
//! gateway tells no door apart by its name (it reads the door's `DoorSpec`).
//!
//! Included from tests/all.rs as `mod layers;`.

use std::path::{Path, PathBuf};

fn doors_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/fsgate-doors/src")
}

/// Every `.rs` file under `dir` that is not a test file.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if path.is_dir() {
            if name != "tests" {
                sources(&path, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" && !name.ends_with("_tests.rs") {
            out.push(path);
        }
    }
}

/// The lines of `text` before its test module (`#[cfg(test)]` on a line of its own at
/// the top level, followed by `mod`), with their numbers.
fn non_test_lines(text: &str) -> Vec<(usize, &str)> {
    let lines: Vec<&str> = text.lines().collect();
    let end = (0..lines.len())
        .find(|&i| {
            lines[i] == "#[cfg(test)]"
                && lines
                    .get(i + 1)
                    .is_some_and(|l| l.starts_with("mod ") || l.starts_with("#[path"))
        })
        .unwrap_or(lines.len());
    lines[..end]
        .iter()
        .enumerate()
        .map(|(i, l)| (i + 1, *l))
        .collect()
}

const FORBIDDEN: [(&str, &str); 5] = [
    ("RelPath::parse", "parses a path"),
    (".decide(", "decides policy"),
    (".audit()", "reaches the audit log"),
    (".workspace()", "reaches the workspace"),
    (".backups()", "reaches the backups"),
];

#[test]
fn a_door_parses_no_path_decides_no_policy_and_reaches_no_lower_layer() {
    let found = forbidden_calls(&doors_src(), 40);
    assert!(
        found.is_empty(),
        "doors doing a lower layer's work:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_doors_manifest_names_no_lower_layer_but_the_gateway_policy_engine_sandbox_and_base() {
    let (layers, deps) = layers_named(&doors_src());
    assert_eq!(
        layers,
        [
            "fsgate-base",
            "fsgate-sandbox",
            "fsgate-decide",
            "fsgate-policy",
            "fsgate-gateway"
        ],
        "{deps}"
    );
}

fn view_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/fsgate-view/src")
}

/// The filesystem view is a door as the others are: every request through the
/// gateway's `serve`, no path parsed, no policy decided, no lower layer reached.
#[test]
fn the_view_parses_no_path_decides_no_policy_and_reaches_no_lower_layer() {
    let found = forbidden_calls(&view_src(), 5);
    assert!(
        found.is_empty(),
        "the view doing a lower layer's work:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_views_manifest_names_no_lower_layer_but_the_gateway_and_base() {
    let (layers, deps) = layers_named(&view_src());
    assert_eq!(layers, ["fsgate-base", "fsgate-gateway"], "{deps}");
}

/// The decision engine sits on the base alone: it cannot name the policy file, the log
/// it feeds or any section of another layer.
#[test]
fn the_decision_engines_manifest_names_the_base_alone() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/fsgate-decide/src");
    let (layers, deps) = layers_named(&src);
    assert_eq!(layers, ["fsgate-base"], "{deps}");
}

/// The policy file sits above the engine it builds and the layers whose sections it
/// holds, and below the gateway.
#[test]
fn the_policy_files_manifest_names_the_engine_and_the_sections_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/fsgate-policy/src");
    let (layers, deps) = layers_named(&src);
    assert_eq!(
        layers,
        [
            "fsgate-base",
            "fsgate-decide",
            "fsgate-audit",
            "fsgate-backup",
            "fsgate-sandbox"
        ],
        "{deps}"
    );
}

/// Each line of code (not comment, not test module) under `src` that makes a
/// [`FORBIDDEN`] call; `src` must hold more than `at_least` source files.
fn forbidden_calls(src: &Path, at_least: usize) -> Vec<String> {
    let mut files = Vec::new();
    sources(src, &mut files);
    assert!(
        files.len() > at_least,
        "the sources under {} were not found: {files:?}",
        src.display()
    );
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read");
        for (n, line) in non_test_lines(&text) {
            let code = line.split("//").next().unwrap_or_default();
            for (pattern, what) in FORBIDDEN {
                if code.contains(pattern) {
                    found.push(format!("{}:{n} {what}: {}", file.display(), line.trim()));
                }
            }
        }
    }
    found
}

/// The fsgate crates the `[dependencies]` of the crate whose sources are `src` name, in
/// order, and that section's text.
fn layers_named(src: &Path) -> (Vec<String>, String) {
    let manifest =
        std::fs::read_to_string(src.with_file_name("Cargo.toml")).expect("the Cargo.toml");
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .expect("a [dependencies] section")
        .to_string();
    let layers = deps
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| name.starts_with("fsgate"))
        .map(str::to_string)
        .collect();
    (layers, deps)
}

/// The scan sees what it looks for: a forbidden call in code is found, the same in a
/// comment or in the test module is not.
#[test]
fn the_scan_finds_a_call_in_code_only() {
    let text = "fn a() { gw.workspace(); }\n// gw.audit()\n#[cfg(test)]\nmod tests {\n    gw.backups();\n}\n";
    let hits: Vec<usize> = non_test_lines(text)
        .into_iter()
        .filter(|(_, l)| {
            let code = l.split("//").next().unwrap_or_default();
            FORBIDDEN.iter().any(|(p, _)| code.contains(p))
        })
        .map(|(n, _)| n)
        .collect();
    assert_eq!(hits, [1]);
}

/// The names operations have in audit records. Short ones (`ls`, `rm`, `mkdir`...) are
/// also wire methods and policy access names, which doors and the policy parse; these
/// are the record's own.
const RECORD_NAMES: [&str; 4] = [
    "\"read_text_file\"",
    "\"read_file\"",
    "\"write_text_file\"",
    "\"edit_text_file\"",
];

/// Whether `code` matches a record name as a string: a `match` arm (`"x" =>`, `"x" |`)
/// or a comparison (`== "x"`).
fn matches_a_record_name(code: &str) -> Option<&'static str> {
    RECORD_NAMES.into_iter().find(|name| {
        code.contains(&format!("{name} =>"))
            || code.contains(&format!("{name} |"))
            || code.contains(&format!("| {name}"))
            || code.contains(&format!("== {name}"))
    })
}

/// An operation is known by its variant (`OpId`, `ChangeOp`), never by its record name
/// matched as a string: the compiler then lists every place a new operation must be
/// handled. (Records read back from the log are parsed once, by `ChangeOp::from_name`.)
#[test]
fn no_operation_is_recognised_by_its_name_as_a_string() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    sources(&root.join("crates"), &mut files);
    assert!(files.len() > 200, "the sources were not found");
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read");
        for (n, line) in non_test_lines(&text) {
            let code = line.split("//").next().unwrap_or_default();
            if let Some(name) = matches_a_record_name(code) {
                found.push(format!(
                    "{}:{n} matches {name}: {}",
                    file.display(),
                    line.trim()
                ));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The scan sees a name matched in an arm or compared, and not one merely written.
#[test]
fn the_name_scan_finds_matches_not_mentions() {
    assert!(matches_a_record_name(r#"    "write_text_file" | "edit_text_file" => 1,"#).is_some());
    assert!(matches_a_record_name(r#"if op == "read_file" {"#).is_some());
    assert!(matches_a_record_name(r#"    OpId::ReadText => "read_text_file","#).is_none());
}

/// Every MCP tool call takes one path: the SDK's handler has no `call_tool` (the input
/// pump hands the SDK no `tools/call`), and only that path (`mcp/direct.rs`) runs a
/// tool, through the door trait's one `serve` (the fuzz entry points aside, which are
/// no part of `fsgate`). The MCP door is behind that trait, as ACP and WebSocket are.
#[test]
fn mcp_tool_calls_take_one_path() {
    let mut files = Vec::new();
    sources(&doors_src().join("mcp"), &mut files);
    assert!(files.len() > 15, "the MCP sources were not found");
    let mut runners = Vec::new();
    for file in &files {
        if file.file_name().is_some_and(|n| n == "fuzz.rs") {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("read");
        for (n, line) in non_test_lines(&text) {
            let code = line.split("//").next().unwrap_or_default();
            let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
            assert!(
                !code.contains("fn call_tool("),
                "{}:{n}: a second tool-call path: {}",
                file.display(),
                line.trim()
            );
            if code.contains("serve_wire(") || code.contains("door::serve(") {
                runners.push(format!("{name}:{n}"));
            }
        }
    }
    assert_eq!(runners.len(), 1, "tools run from: {runners:?}");
    assert!(runners[0].starts_with("direct.rs:"), "{runners:?}");
    let doors = [
        ("mcp/tools.rs", "impl Door for Tools"),
        ("acp.rs", "impl Door for Acp"),
        ("ws/protocol.rs", "impl Door for Ws"),
    ];
    for (file, implementation) in doors {
        let text = std::fs::read_to_string(doors_src().join(file)).expect("read");
        assert!(
            text.contains(implementation),
            "{file}: no `{implementation}`: the door is not behind the trait"
        );
    }
}

/// The doors' names, as their `DoorSpec`s give them (for the records).
const DOOR_NAMES: [&str; 7] = ["acp", "mcp", "http", "acp-mcp", "ws", "view", "cli"];

/// Whether `code` names a door as a string literal, or tells doors apart by name.
fn names_a_door(code: &str) -> Option<String> {
    let literal = DOOR_NAMES
        .into_iter()
        .map(|name| format!("\"{name}\""))
        .find(|quoted| code.contains(quoted.as_str()));
    let compared = ["door.name ==", "== ctx.door.name", "match ctx.door.name"]
        .into_iter()
        .find(|c| code.contains(c))
        .map(str::to_string);
    literal.or(compared)
}

/// The gateway knows a door by its `DoorSpec` (how its answers carry content, the ways
/// to read it names) and never tells doors apart by name: a new door is one descriptor,
/// not a new arm in the gateway (the name is for records only).
#[test]
fn the_gateway_never_tells_doors_apart_by_name() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/fsgate-gateway/src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    assert!(files.len() > 30, "the gateway's sources were not found");
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read");
        for (n, line) in non_test_lines(&text) {
            let code = line.split("//").next().unwrap_or_default();
            if let Some(name) = names_a_door(code) {
                found.push(format!("{}:{n} {name}: {}", file.display(), line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The scan sees the old way (a door's name matched or compared), not the field read.
#[test]
fn the_door_name_scan_finds_names_not_fields() {
    assert!(names_a_door(r#"    if ctx.transport == "mcp" { 2 } else { 1 }"#).is_some());
    assert!(names_a_door(r#"        (BinaryMode::Base64, "ws") => {"#).is_some());
    assert!(names_a_door("    if ctx.door.name == other.door.name {").is_some());
    assert!(names_a_door("    transport: ctx.door.name.to_string(),").is_none());
    assert!(names_a_door("    ctx.door.content_copies.max(1)").is_none());
}

/// The counting allocator of the tests is linked by tests alone: no crate lists it
/// among its `[dependencies]` (only `[dev-dependencies]`), so no binary a user builds
/// has it.
#[test]
fn the_tests_allocator_is_no_layers_dependency() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut manifests = vec![root.join("Cargo.toml")];
    for entry in std::fs::read_dir(root.join("crates")).expect("crates/") {
        manifests.push(entry.expect("entry").path().join("Cargo.toml"));
    }
    let mut users = 0;
    for manifest in manifests {
        let text = std::fs::read_to_string(&manifest).expect("a manifest");
        for section in text.split("\n[").skip(1) {
            let named = section
                .lines()
                .skip(1)
                .any(|l| l.starts_with("fsgate-peak-heap"));
            if !named {
                continue;
            }
            assert!(
                section.starts_with("dev-dependencies]"),
                "{} lists fsgate-peak-heap in [{}",
                manifest.display(),
                section.lines().next().unwrap_or_default()
            );
            users += 1;
        }
    }
    assert!(users >= 2, "the audit log's and the backups' tests use it");
}
