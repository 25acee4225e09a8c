//! `fsgate audit show` for people: a table fitted to the width and aligned, `--stats`,
//! `--follow`; and whatever an agent puts in a path (newlines, ANSI and OSC 8 sequences,
//! bidi controls, CSV formula prefixes) is inert and visibly escaped in the table, the
//! CSV and the stats, while `--json` keeps the records byte for byte. The records come
//! from a real gateway whose agent asked for such paths.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;

use serde_json::{Value, json};
use unicode_width::UnicodeWidthStr;

use crate::common::{Gate, TIMEOUT, bin, run_cli};

/// Paths an agent might ask for, each with how the table must show it.
const HOSTILE: &[(&str, &str)] = &[
    ("new\nline.txt", "new\\nline.txt"),
    ("clear\u{1b}[2J.txt", "clear\\u{1b}[2J.txt"),
    (
        "osc\u{1b}]8;;mailto:a@b\u{7}link\u{1b}]8;;\u{7}.txt",
        "osc\\u{1b}]8;;mailto:a@b\\u{7}link\\u{1b}]8;;\\u{7}.txt",
    ),
    ("doc\u{202e}gnp.sh", "doc\\u{202e}gnp.sh"),
    ("iso\u{2066}x\u{2069}.txt", "iso\\u{2066}x\\u{2069}.txt"),
    ("=HYPERLINK(1).txt", "=HYPERLINK(1).txt"),
    ("+cmd.txt", "+cmd.txt"),
    ("-rf.txt", "-rf.txt"),
    ("@SUM(A1).txt", "@SUM(A1).txt"),
    ("  =1+1.txt", "  =1+1.txt"),
    ("\t=2+2.txt", "\\t=2+2.txt"),
];
const LONG: &str = "notes/a/very/long/directory/name/that/goes/on/and/on/and/on/todo.md";

/// A gateway whose agent wrote every hostile path and a long one, read `.env` (refused)
/// and then stopped: its log holds one record per request.
fn hostile_log() -> Gate {
    let mut g = Gate::start();
    for (name, _) in HOSTILE.iter().copied().chain([(LONG, "")]) {
        g.ok(
            "fs/write_text_file",
            json!({"sessionId": "s1", "path": g.abs(name), "content": "x"}),
        );
    }
    g.put(".env", "A=1\n");
    let _ = g.call(
        "fs/read_text_file",
        json!({"sessionId": "s1", "path": g.abs(".env")}),
    );
    g.close_stdin();
    assert_eq!(g.wait_exit(TIMEOUT).code(), Some(0), "{}", g.stderr());
    g.join_readers();
    g
}

fn stdout_of(args: &[&str]) -> String {
    let out = run_cli(args);
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    assert!(
        out.status.success(),
        "{args:?}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// No raw control, format (bidi, zero-width) or separator character but line ends.
fn assert_inert(what: &str, text: &str) {
    let bad = crate::common::raw_controls(text);
    assert!(bad.is_empty(), "{what}: raw {bad:?} in:\n{text}");
    assert!(
        !text.contains("\nline.txt"),
        "{what}: a forged line:\n{text}"
    );
}

/// The cells of one CSV line (RFC 4180 quoting).
fn csv_cells(line: &str) -> Vec<String> {
    let (mut cells, mut cell, mut quoted, mut chars) =
        (Vec::new(), String::new(), false, line.chars().peekable());
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cell.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => cells.push(std::mem::take(&mut cell)),
            (c, _) => cell.push(c),
        }
    }
    cells.push(cell);
    cells
}

#[test]
fn table_csv_and_stats_escape_every_class_and_json_is_exact() {
    let g = hostile_log();
    let log = g.audit_log.display().to_string();
    let table = stdout_of(&["audit", "show", &log, "--width", "0"]);
    let csv = stdout_of(&["audit", "show", &log, "--csv"]);
    let stats = stdout_of(&["audit", "show", &log, "--stats"]);
    for (what, text) in [("table", &table), ("csv", &csv), ("stats", &stats)] {
        assert_inert(what, text);
        for (_, shown) in HOSTILE {
            assert!(text.contains(shown), "{what} lacks {shown}:\n{text}");
        }
    }
    // No CSV cell starts a formula, even after blanks; plain numbers stay numbers.
    for line in csv.lines().skip(1) {
        for cell in csv_cells(line) {
            let start = cell.trim_start();
            let number = cell.parse::<i64>().is_ok();
            assert!(
                number || !start.starts_with(['=', '+', '-', '@']),
                "{cell:?} in {line}"
            );
        }
    }
    assert!(csv.contains(",'=HYPERLINK(1).txt,"), "{csv}");
    assert!(csv.contains(",'  =1+1.txt,"), "{csv}");
    assert!(csv.contains(",'-rf.txt,"), "{csv}");
    // --json: the file's records, byte for byte.
    let json = run_cli(&["audit", "show", &log, "--json"]).stdout;
    assert_eq!(json, std::fs::read(&g.audit_log).expect("log"));
    let stats: Value =
        serde_json::from_str(&stdout_of(&["audit", "show", &log, "--stats", "--json"]))
            .expect("stats JSON");
    for (name, _) in HOSTILE {
        assert_eq!(
            stats["changes_by_path"]["by"][name]["write_text_file"], 1,
            "{name:?}: {stats}"
        );
    }
    assert_eq!(
        stats["refusals_by_rule"]["by"]["secrets:dotenv"], 1,
        "{stats}"
    );
    assert_eq!(
        stats["requests"],
        HOSTILE.len() + 2,
        "the writes and the read"
    );
}

#[test]
fn table_fits_the_width_aligned_and_cuts_only_paths_and_reasons() {
    let g = hostile_log();
    let log = g.audit_log.display().to_string();
    let table = stdout_of(&["audit", "show", &log, "--width", "150"]);
    let lines: Vec<&str> = table.lines().collect();
    for l in &lines {
        assert!(l.width() <= 150, "{} columns: {l}", l.width());
    }
    // Whole operation names and rules; the long path cut in the middle, keeping its name.
    assert!(table.contains(" write_text_file "), "{table}");
    assert!(table.contains("secrets:dotenv"), "{table}");
    assert!(!table.contains(LONG), "{table}");
    let cut = lines
        .iter()
        .find(|l| l.contains("notes/") && l.contains("…") && l.contains("todo.md"))
        .unwrap_or_else(|| panic!("the long path, cut in the middle:\n{table}"));
    // RULE starts in the same terminal column on every row that has one.
    let rule_col = |l: &str| l.find("workspace-write").map(|i| l[..i].width());
    let cols: Vec<usize> = lines.iter().filter_map(|l| rule_col(l)).collect();
    assert!(cols.len() > HOSTILE.len(), "{table}");
    assert!(cols.iter().all(|&c| c == cols[0]), "{cols:?}\n{table}");
    assert_eq!(
        rule_col(lines[0].replace("RULE", "workspace-write").as_str()),
        Some(cols[0])
    );
    assert!(cut.width() <= 150);
    // The reason of the refusal, and one row per start kind, labelled apart.
    assert!(table.contains("REASON"), "{table}");
    assert!(
        table.contains(" refused ") && table.contains("refused: read of"),
        "{table}"
    );
    assert_eq!(
        lines.iter().filter(|l| l.contains("[log-open]")).count(),
        1,
        "{table}"
    );
    assert_eq!(
        lines.iter().filter(|l| l.contains("[start]")).count(),
        1,
        "{table}"
    );
}

#[test]
fn follow_prints_new_records_as_the_gateway_writes_them_across_rotations() {
    // The default policy, with the log rotated every 2 KiB (every few records).
    let default = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/default.toml"),
    )
    .expect("default policy");
    let g = Gate::with_policy(&format!("{default}\n[audit]\nmax_file_bytes = 2048\n"));
    g.ok(
        "fs/write_text_file",
        json!({"sessionId": "s1", "path": g.abs("first.txt"), "content": "x"}),
    );
    let log = g.audit_log.display().to_string();
    let mut child = Command::new(bin())
        .args(["audit", "show", "--follow", "--width", "0", &log])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn follower");
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    // The header comes once the records so far are read; then every write is
    // followed, across the rotations they cause, in order.
    let header = rx.recv_timeout(TIMEOUT).expect("the table's header");
    assert!(
        header.contains("PATH") && header.contains("REASON"),
        "{header}"
    );
    let mut want: Vec<String> = (0..8).map(|i| format!("file-{i}.txt")).collect();
    let (name, shown) = HOSTILE[2];
    want.push(shown.to_string());
    for n in (0..8)
        .map(|i| format!("file-{i}.txt"))
        .chain([name.to_string()])
    {
        g.ok(
            "fs/write_text_file",
            json!({"sessionId": "s1", "path": g.abs(&n), "content": "x"}),
        );
    }
    let mut seen = Vec::new();
    let mut next = 0;
    let found = loop {
        match rx.recv_timeout(TIMEOUT) {
            Ok(l) if l.contains(&want[next]) && l.contains(" ok ") => {
                next += 1;
                seen.push(l);
                if next == want.len() {
                    break true;
                }
            }
            Ok(l) => seen.push(l),
            Err(_) => break false,
        }
    };
    let dir = g.audit_log.parent().expect("log dir");
    let rotated = std::fs::read_dir(dir)
        .expect("log dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("audit.jsonl.0"))
        .count();
    assert!(
        rotated >= 2,
        "the log was rotated while followed ({rotated} files)"
    );
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        found,
        "the new record was not followed:\n{}",
        seen.join("\n")
    );
    assert!(seen.iter().all(|l| assert_inert_line(l)), "{seen:?}");
}

fn assert_inert_line(l: &str) -> bool {
    assert_inert("follow", l);
    true
}

/// A reader that stopped reading (`fsgate audit show | head`): no message, exit 2 (the
/// output was not all written), for every audit command that prints its product.
#[test]
fn a_reader_that_stops_reading_gets_no_broken_pipe_message() {
    let g = hostile_log();
    let log = g.audit_log.display().to_string();
    let commands: [&[&str]; 7] = [
        &["show", &log],
        &["show", &log, "--follow"],
        &["show", &log, "--json"],
        &["show", &log, "--csv"],
        &["verify", &log],
        &["verify", &log, "--json"],
        &["report", &log, "--html", "-"],
    ];
    for args in commands {
        // The pipe's only reader is gone before fsgate starts: its first write fails.
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        let out = Command::new(bin())
            .arg("audit")
            .args(args)
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .expect("run fsgate");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            !stderr.contains("Broken pipe") && !stderr.contains("panicked"),
            "{args:?}: {stderr}"
        );
    }
}
