//! `scripts/demo.sh`: the guided tour tells the same story on every run (times, hashes,
//! durations and the directory aside) and each step shows what it promises.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::common::{bin, wait_output};

/// Runs the tour into `dir` with the binary under test (no build).
fn tour(dir: &Path) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/demo.sh");
    let mut child = Command::new(script)
        .arg(dir)
        .env("FSGATE_BIN", bin())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run scripts/demo.sh (needs bash and python3)");
    let out: Output = wait_output(&mut child, Duration::from_secs(120));
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).expect("utf-8")
}

/// What may differ between runs: the directory, times, hashes, and every number
/// (durations, byte offsets, pids); runs of spaces (table columns follow the numbers).
fn masked(text: &str, dir: &Path) -> String {
    let text = text.replace(&*dir.to_string_lossy(), "<DIR>");
    let subs = [
        (r"\d{4}-\d\d-\d\dT[\d:.]+Z", "<TS>"),
        (r"\d{8}T[\d.]+Z", "<TS>"),
        (r"[0-9a-f]{12,}", "<HEX>"),
        (r"\d+", "N"),
        (r" +", " "),
    ];
    subs.iter().fold(text, |t, (re, by)| {
        regex::Regex::new(re)
            .expect("regex")
            .replace_all(&t, *by)
            .into_owned()
    })
}

/// The lines of the section whose heading starts with `== {n}.`.
fn section<'a>(text: &'a str, n: &str) -> &'a str {
    let head = format!("\n== {n}");
    let start = text
        .find(&head)
        .unwrap_or_else(|| panic!("no section {n}:\n{text}"));
    let rest = &text[start + head.len()..];
    &rest[..rest.find("\n== ").unwrap_or(rest.len())]
}

#[test]
fn the_demo_tells_the_same_story_every_run_and_leaves_its_directory() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let (first, second) = (tour(&a), tour(&b));
    assert_eq!(masked(&first, &a), masked(&second, &b));

    let start = section(&first, "1.");
    assert!(
        start.contains("fsgate: audit log: $DEMO/state/fsgate/"),
        "{start}"
    );
    assert!(
        start.contains("_meta.fsgate.auditLog: $DEMO/state/"),
        "{start}"
    );
    let work = section(&first, "2.");
    assert!(
        !work.contains("<- null\n"),
        "a write says what happened:\n{work}"
    );
    assert!(work.contains("notes/todo.md now holds 13 bytes"), "{work}");
    assert!(work.contains("<- entries: notes/ src/ "), "{work}");
    let refusals = section(&first, "3.");
    assert!(
        refusals.contains("code -32003, rule secrets:dotenv"),
        "{refusals}"
    );
    assert!(refusals.contains("rule workspace-boundary"), "{refusals}");
    let log = section(&first, "4.");
    for shown in [
        "notes/todo.md",
        "secrets:dotenv",
        "workspace-boundary",
        "[stop]",
    ] {
        assert!(log.contains(shown), "audit show lacks {shown}:\n{log}");
    }
    let verify = section(&first, "5.");
    assert!(
        verify.contains("INTACT") && verify.contains("(exit 0)"),
        "{verify}"
    );
    assert!(
        verify.contains("TAMPERED") && verify.contains("(exit 1)"),
        "{verify}"
    );
    let backups = section(&first, "6.");
    assert!(backups.contains("restored src/main.rs"), "{backups}");
    assert!(backups.contains("hello from the workspace"), "{backups}");

    // Left behind, and said where; the tour's own log still verifies.
    assert!(first.contains(&format!("Everything is still in {}", a.display())));
    assert_eq!(
        std::fs::read_to_string(a.join("workspace/src/main.rs")).expect("left behind"),
        "fn main() {\n    println!(\"hello from the workspace\");\n}\n"
    );
    let out = Command::new(bin())
        .args(["audit", "verify", "--workspace"])
        .arg(a.join("workspace"))
        .env("XDG_STATE_HOME", a.join("state"))
        .output()
        .expect("run fsgate audit verify");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}
