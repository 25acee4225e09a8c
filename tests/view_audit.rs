//! Which command read or changed what, after real commands through `fsgate run`'s view:
//! `audit show` names and filters each process, `audit report` has a section per
//! process, and a process's allowed reads are coalesced into `reads` records that name
//! every path (audit/FORMAT.md section 2, docs/run.md).

use std::collections::HashSet;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::bin;
use crate::common::view::{ViewWs, finished_within, text, view_ws};

view_ws! {
    /// A workspace, with its audit log outside it.
    Ws
}

impl Ws {
    fn new() -> Ws {
        let ws = ViewWs::new("fsgate-vaudit-ws", "fsgate-vaudit-state");
        std::fs::write(ws.root.join(".env"), "TOKEN=x\n").expect("write");
        std::fs::write(ws.root.join("a.txt"), "hello\n").expect("write");
        Ws(ws)
    }

    /// `fsgate run ... -- COMMAND` in the workspace, to its end (`limit` at most).
    fn run(&self, command: &[&str], limit: Duration) -> Output {
        let mut cmd = self.fsgate_run();
        cmd.arg("--").args(command);
        finished_within(cmd, limit)
    }

    /// `fsgate audit ARGS... LOG`: its exit code and stdout.
    fn audit(&self, args: &[&str]) -> (i32, String) {
        let out = Command::new(bin())
            .arg("audit")
            .args(args)
            .arg(self.log())
            .output()
            .expect("fsgate audit");
        (out.status.code().unwrap_or(-1), text(&out.stdout))
    }

    fn lines(&self) -> Vec<String> {
        let log = std::fs::read_to_string(self.log()).expect("audit log");
        log.lines().map(str::to_owned).collect()
    }
}

/// Waits for `child` (killed after 20 s: no test hangs).
fn finished_child(mut child: std::process::Child) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    child.wait().ok()
}

/// The paths a `reads` record names under `op`.
fn named<'a>(r: &'a Value, op: &str) -> Vec<&'a str> {
    let list = r["details"]["reads"][op].as_array();
    list.into_iter()
        .flatten()
        .filter_map(|e| e[0].as_str())
        .collect()
}

/// The pid a record's `peer` names.
fn pid_of(r: &Value) -> String {
    let peer = r["peer"].as_str().expect("peer");
    peer.split(' ').nth(1).expect("pid").to_owned()
}

#[test]
fn view_audit_show_and_report_name_the_command_that_read_and_changed_what() {
    let ws = Ws::new();
    // The shell's $0 carries a terminal escape: every output escapes it.
    let script = "cat a.txt >/dev/null; ls >/dev/null; echo new > notes.txt; cat .env";
    let out = ws.run(
        &["sh", "-c", script, "\u{1b}[2Jevil"],
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let (lines, records) = (ws.lines(), ws.records());
    // Every allowed read of the view is in a process's `reads` record, before `stop`.
    let stop = records
        .iter()
        .position(|r| r["kind"] == "stop")
        .expect("stop");
    let reads: Vec<usize> = (0..records.len())
        .filter(|&i| records[i]["op"] == "reads")
        .collect();
    assert!(reads.iter().all(|&i| i < stop), "{reads:?} {stop}");
    let single: Vec<&Value> = (records.iter())
        .filter(|r| r["transport"] == "view" && r["decision"] == "allow" && r["op"] == "stat")
        .collect();
    assert!(
        single.is_empty(),
        "an allowed lookup was recorded alone: {single:?}"
    );
    let cat_read = reads.iter().map(|&i| &records[i]).find(|r| {
        named(r, "open").contains(&"a.txt") && r["peer"].as_str().unwrap().contains("cat")
    });
    let cat_read = cat_read.expect("cat's reads name a.txt");
    assert!(
        cat_read["details"]["count"].as_u64().unwrap() >= 2,
        "{cat_read}"
    );
    let write = (records.iter())
        .find(|r| r["op"] == "write_text_file" && r["kind"] == "request")
        .expect("the write");
    // The shell's lookup of notes.txt (not there yet) is recorded before its change.
    let intent = (records.iter())
        .position(|r| r["kind"] == "intent" && r["path"] == "notes.txt")
        .expect("the intent");
    let lookup = records.iter().position(|r| {
        r["op"] == "reads" && r["peer"] == write["peer"] && named(r, "stat").contains(&"notes.txt")
    });
    assert!(lookup.is_some_and(|i| i < intent), "{lookup:?} {intent}");
    // show --exe cat: cat's records only, byte for byte as in the log.
    let (code, json) = ws.audit(&["show", "--exe", "cat", "--json"]);
    assert_eq!(code, 0, "{json}");
    assert!(!json.is_empty());
    for line in json.lines() {
        assert!(lines.iter().any(|l| l == line), "not byte-exact: {line}");
        let v: Value = serde_json::from_str(line).expect("json");
        let peer = v["peer"].as_str().expect("peer");
        assert!(
            peer.contains(r#"/cat""#) || peer.contains(r#"comm "cat""#),
            "{peer}"
        );
    }
    // The refusal of `.env` is cat's (the second cat), one record of its own.
    assert!(
        json.lines()
            .any(|l| l.contains(r#""decision":"deny""#) && l.contains(".env")),
        "{json}"
    );
    // show --pid: the shell's records, its change among them.
    let sh_pid = pid_of(write);
    let (code, json) = ws.audit(&["show", "--pid", &sh_pid, "--json"]);
    assert_eq!(code, 0);
    assert!(json.contains(r#""path":"notes.txt""#), "{json}");
    assert!(
        json.lines()
            .all(|l| l.contains(&format!("\"peer\":\"pid {sh_pid} ")))
    );
    // show --path matches a reads record by the paths it names.
    let (_, json) = ws.audit(&["show", "--op", "reads", "--path", "a.txt", "--json"]);
    assert!(json.lines().count() >= 1, "{json}");
    // The table names each process and escapes what it chose.
    let (code, table) = ws.audit(&["show", "--width", "0"]);
    assert_eq!(code, 0);
    assert!(table.lines().next().unwrap().contains("PROCESS"), "{table}");
    assert!(table.contains(&format!("sh[{sh_pid}]")), "{table}");
    assert!(!table.contains('\u{1b}'), "the table holds a raw escape");
    // The report: a section per process, escaped.
    let html = ws.state.join("report.html");
    let (code, _) = ws.audit(&["report", "--html", html.to_str().unwrap()]);
    assert_eq!(code, 0);
    let page = std::fs::read_to_string(&html).expect("report");
    let section = &page[page.find("id=\"processes\"").expect("the section")..];
    let section = &section[..section.find("</section>").unwrap()];
    assert!(section.contains(&format!("sh[{sh_pid}]")), "{section}");
    assert!(
        section.contains("notes.txt") && section.contains(".env"),
        "{section}"
    );
    assert!(!page.contains('\u{1b}'), "the report holds a raw escape");
    let (code, out) = ws.audit(&["verify"]);
    assert_eq!(code, 0, "{out}");
}

/// A process's reads are written within a second of its first, while it still runs
/// (not only at the run's end).
#[test]
fn view_audit_reads_are_recorded_within_a_second_while_the_command_runs() {
    let ws = Ws::new();
    let mut cmd = Command::new(bin());
    cmd.arg("run")
        .arg("--workspace")
        .arg(&ws.root)
        .arg("--audit-log")
        .arg(ws.log())
        .arg("--backup-dir")
        .arg(ws.state.join("backups"))
        .args(["--", "sh", "-c", "cat a.txt >/dev/null; sleep 30"])
        .current_dir(&ws.root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().expect("spawn fsgate");
    let deadline = Instant::now() + Duration::from_secs(20);
    let found = loop {
        let log = std::fs::read_to_string(ws.log()).unwrap_or_default();
        let hit = log.lines().any(|l| {
            let r: Value = serde_json::from_str(l).unwrap_or_default();
            r["op"] == "reads" && named(&r, "open").contains(&"a.txt")
        });
        if hit || Instant::now() > deadline {
            break hit;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let still_running = child.try_wait().expect("wait").is_none();
    // SIGTERM: fsgate passes it on and ends as usual.
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = finished_child(child);
    assert!(found, "cat's reads were not recorded while the command ran");
    assert!(still_running, "the command ended before its sleep");
}

/// The issue's bound: a read-only walk of 10,000 files costs at most 2 MiB of audit
/// log, every file named.
#[test]
fn view_audit_a_walk_of_10000_files_is_at_most_2_mib_and_names_every_file() {
    let ws = Ws::new();
    let mut files = Vec::new();
    for d in 0..100 {
        let dir = ws.root.join(format!("d{d:03}"));
        std::fs::create_dir(&dir).expect("mkdir");
        for f in 0..100 {
            let name = format!("d{d:03}/f{f:03}.txt");
            std::fs::write(ws.root.join(&name), format!("{d} {f}\n")).expect("write");
            files.push(name);
        }
    }
    let before = std::fs::metadata(ws.log()).map_or(0, |m| m.len());
    let script = "find . -type f | wc -l; find . -type f -name '*.txt' -exec cat {} + | wc -l";
    let out = ws.run(&["sh", "-c", script], Duration::from_secs(600));
    assert!(out.status.success(), "{}", text(&out.stderr));
    // a.txt besides them (.env is hidden); each file is one line.
    assert_eq!(text(&out.stdout), "10001\n10001\n");
    let bytes = log_bytes(&ws.state) - before;
    eprintln!("audit bytes for find + cat of 10,000 files through fsgate run: {bytes}");
    assert!(bytes <= 2 * 1024 * 1024, "{bytes} bytes of audit log");
    let records = ws.records();
    let (mut looked_up, mut opened) = (HashSet::new(), HashSet::new());
    for r in records.iter().filter(|r| r["op"] == "reads") {
        looked_up.extend(named(r, "stat"));
        opened.extend(named(r, "open"));
    }
    for f in &files {
        assert!(looked_up.contains(f.as_str()), "{f} was never named");
        assert!(opened.contains(f.as_str()), "{f}'s open was never named");
    }
    let (code, out) = ws.audit(&["verify"]);
    assert_eq!(code, 0, "{out}");
}

/// Bytes of every log file in `state` (the active one and any rotated).
fn log_bytes(state: &Path) -> u64 {
    std::fs::read_dir(state)
        .expect("state dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("audit.jsonl"))
        .filter(|e| !e.file_name().to_string_lossy().contains(".ckpt"))
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}
