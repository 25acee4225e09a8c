//! The order of a durable write's syncs, as the kernel saw them: `fsgate serve
//! --transport mcp` under `strace -f -y` writes a new file and overwrites one, and the
//! trace must show, for each, every sync the promise needs finished before what depends
//! on it started: the intent record, the staged content and (overwrite) the backup's file
//! and directory before the content is linked into the workspace; the outcome record
//! only after it; the directory and the outcome record (synced at once, the record
//! saying `entryPending`) both before the answer. Several of these syncs run at once on
//! helper threads (`workspace::sync_pool`): the test fails if any is waited for too
//! late, or not at all. A second run makes the syncs most likely to finish early anyway
//! (those started first, on helper threads) return 300 ms late, so that a missing wait
//! shows whatever the disk.
//!
//! Included from tests/all.rs as `mod durable_order;` (uses `crate::common`).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{bin, canonical_tempdir, skip_or_fail};

/// One syscall's start or end, in the order strace saw them.
#[derive(Debug, Clone)]
struct Event {
    end: bool,
    call: String,
    /// The call's arguments as strace printed them (with `-y`, each fd's path).
    args: String,
}

/// Parses `strace -f` output: a call that blocked is printed as `<unfinished ...>` and
/// later `<... call resumed>`; its end event carries the arguments of its start.
fn parse(trace: &str) -> Vec<Event> {
    let mut open: HashMap<String, (String, String)> = HashMap::new();
    let mut out = Vec::new();
    for line in trace.lines() {
        let Some((pid, rest)) = line.split_once(' ') else {
            continue;
        };
        let rest = rest.trim_start();
        if let Some(resumed) = rest.strip_prefix("<... ") {
            let call = resumed.split(' ').next().unwrap_or_default().to_string();
            if let Some((call, args)) = open.remove(pid).filter(|(c, _)| *c == call) {
                out.push(Event {
                    end: true,
                    call,
                    args,
                });
            }
            continue;
        }
        let Some((call, args)) = rest.split_once('(') else {
            continue;
        };
        let call = call.to_string();
        out.push(Event {
            end: false,
            call: call.clone(),
            args: args.to_string(),
        });
        if let Some(args) = args.strip_suffix(" <unfinished ...>") {
            open.insert(pid.to_string(), (call, args.to_string()));
        } else {
            out.push(Event {
                end: true,
                call,
                args: args.to_string(),
            });
        }
    }
    out
}

fn is_sync(e: &Event) -> bool {
    e.call == "fsync" || e.call == "fdatasync"
}

/// The path strace printed for a call's first argument (`-y`: `5</path>`).
fn first_fd_path(args: &str) -> &str {
    args.split_once('<')
        .and_then(|(_, r)| r.split_once('>'))
        .map_or("", |(p, _)| p)
}

struct Trace(Vec<Event>);

impl Trace {
    /// The first event at or after `from` that matches.
    fn find(&self, from: usize, what: impl Fn(&Event) -> bool) -> Option<usize> {
        (from..self.0.len()).find(|&i| what(&self.0[i]))
    }

    /// Index of the start of a call matching `what`, at or after `from`.
    fn start(&self, from: usize, what: impl Fn(&Event) -> bool) -> Option<usize> {
        self.find(from, |e| !e.end && what(e))
    }

    /// Whether a sync of the file or directory at `path` started after `after` and
    /// ended before `before`.
    fn synced_between(&self, path: &str, after: usize, before: usize) -> bool {
        (after..before).any(|i| {
            let e = &self.0[i];
            !e.end
                && is_sync(e)
                && first_fd_path(&e.args) == path
                && (i..before).any(|j| {
                    let f = &self.0[j];
                    f.end && f.call == e.call && first_fd_path(&f.args) == path
                })
        })
    }
}

/// Runs a new-file write then an overwrite through MCP under strace; the trace, or None
/// if strace cannot run here. `slow`: the first `fsync` and the first `fdatasync` of each
/// thread return 300 ms late (strace counts per thread): on a helper thread, the first
/// sync it runs (a new file's content, a backup's file or directory).
fn traced_writes(root: &Path, state: &Path, slow: bool) -> Option<String> {
    let trace = state.join("trace.txt");
    let inject: &[&str] = if slow {
        &[
            "-e",
            "inject=fdatasync:delay_exit=300000:when=1",
            "-e",
            "inject=fsync:delay_exit=300000:when=1",
        ]
    } else {
        &[]
    };
    let strace = Command::new("strace").arg("-V").output();
    if strace.is_err() {
        skip_or_fail("durable_order", "strace is not installed");
        return None;
    }
    let mut child = Command::new("strace")
        .args(["-f", "-qq", "-y", "-s", "4096", "-o"])
        .arg(&trace)
        .args([
            "-e",
            "trace=write,pwrite64,fsync,fdatasync,linkat,renameat,renameat2",
        ])
        .args(inject)
        .args([bin(), "serve", "--transport", "mcp", "--workspace"])
        .arg(root)
        .arg("--audit-log")
        .arg(state.join("audit/audit.jsonl"))
        .arg("--backup-dir")
        .arg(state.join("backups"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run strace");
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut call = |id: u64, method: &str, params: Value| {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{msg}").expect("send");
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("an answer within 60 s");
        let answer: Value = serde_json::from_str(&line).expect("JSON answer");
        assert!(answer.get("error").is_none(), "{answer}");
        assert_ne!(answer["result"]["isError"], json!(true), "{answer}");
    };
    call(
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "durable-order", "version": "1"}}),
    );
    for (id, name) in [(2, "n.txt"), (3, "a.txt")] {
        let path = root.join(name).to_string_lossy().into_owned();
        call(
            id,
            "tools/call",
            json!({"name": "write_file", "arguments": {"path": path, "content": "new\n"}}),
        );
    }
    drop(stdin);
    assert!(child.wait().expect("wait").success());
    Some(std::fs::read_to_string(&trace).expect("trace"))
}

/// The checks of one write: its answer (id `id`) came after every sync it needs, each
/// after what it makes durable.
fn check_write(t: &Trace, root: &str, log: &str, id: u64, name: &str, overwrite: bool) {
    let what = format!(
        "{} {name}",
        if overwrite { "overwrite" } else { "new file" }
    );
    let answer = t
        .start(0, |e| {
            e.call == "write"
                && e.args.contains("pipe:")
                && e.args.contains(&format!("\\\"id\\\":{id},"))
        })
        .unwrap_or_else(|| panic!("{what}: no answer in the trace"));
    let record = |kind: &str| {
        let (kind, path) = (
            format!("\\\"kind\\\":\\\"{kind}\\\""),
            format!("\\\"path\\\":\\\"{name}\\\""),
        );
        t.start(0, |e| {
            e.call == "write"
                && first_fd_path(&e.args) == log
                && e.args.contains(&kind)
                && e.args.contains(&path)
        })
        .unwrap_or_else(|| panic!("{what}: no {kind} record written"))
    };
    let (intent, outcome) = (record("intent"), record("request"));
    // The content's first appearance in the workspace: linked at its name (a new file),
    // or at a temporary name that is then renamed over the old one.
    let link = t
        .start(intent, |e| {
            e.call == "linkat" && e.args.contains(&format!("<{root}>"))
        })
        .unwrap_or_else(|| panic!("{what}: no linkat"));
    let staged = first_fd_path(&t.0[link].args).to_string();
    assert!(
        staged.contains("/#"),
        "{what}: not an unnamed file: {staged}"
    );
    let published = if overwrite {
        t.start(link, |e| {
            e.call.starts_with("renameat") && e.args.contains(&format!("\"{name}\""))
        })
        .unwrap_or_else(|| panic!("{what}: no rename"))
    } else {
        assert!(
            t.0[link].args.contains(&format!("\"{name}\"")),
            "{what}: {:?}",
            t.0[link]
        );
        link
    };
    let intent_end = t
        .find(intent, |e| e.end && e.call == "write")
        .unwrap_or(intent);
    assert!(
        t.synced_between(log, intent_end, link),
        "{what}: the intent record was not durable before the workspace changed"
    );
    assert!(
        t.synced_between(&staged, 0, link),
        "{what}: the content was not durable before it was linked"
    );
    if overwrite {
        let backup = t
            .start(0, |e| {
                e.call == "pwrite64" && first_fd_path(&e.args).ends_with(".backup")
            })
            .unwrap_or_else(|| panic!("{what}: no backup written"));
        let file = first_fd_path(&t.0[backup].args).to_string();
        let shard = Path::new(&file)
            .parent()
            .expect("shard")
            .to_string_lossy()
            .into_owned();
        assert!(
            t.synced_between(&file, backup, link),
            "{what}: the backup file was not durable before the change"
        );
        assert!(
            t.synced_between(&shard, backup, link),
            "{what}: the backup's directory was not durable before the change"
        );
    }
    assert!(
        outcome > published,
        "{what}: the outcome was recorded before the change"
    );
    assert!(
        t.0[outcome].args.contains("\\\"entryPending\\\":true"),
        "{what}: the outcome written beside the directory's sync does not say so: {:?}",
        t.0[outcome]
    );
    assert!(
        t.synced_between(root, published, answer),
        "{what}: answered before the directory was durable"
    );
    let outcome_end = t
        .find(outcome, |e| e.end && e.call == "write")
        .unwrap_or(outcome);
    assert!(
        t.synced_between(log, outcome_end, answer),
        "{what}: answered before the outcome record was durable"
    );
}

/// One traced run on a fresh workspace: (trace, workspace root, audit log).
fn run(slow: bool) -> Option<(Trace, String, String)> {
    let (_ws, root) = canonical_tempdir("durable-ws");
    let (_st, state) = canonical_tempdir("durable-state");
    std::fs::write(root.join("a.txt"), "old\n").expect("seed");
    let text = traced_writes(&root, &state, slow)?;
    let log = state
        .join("audit/audit.jsonl")
        .to_string_lossy()
        .into_owned();
    Some((
        Trace(parse(&text)),
        root.to_string_lossy().into_owned(),
        log,
    ))
}

#[test]
fn a_write_is_answered_only_after_each_of_its_syncs_in_order() {
    for slow in [false, true] {
        let Some((t, root, log)) = run(slow) else {
            return;
        };
        check_write(&t, &root, &log, 2, "n.txt", false);
        check_write(&t, &root, &log, 3, "a.txt", true);
    }
}

/// A cold start syncs the log once before its first answer, for both `start` records
/// (the log's own is not synced alone), and nothing of the new backup store; the store's
/// `FORMAT` and directory are synced by its first backup, before that overwrite changes
/// the workspace.
#[test]
fn a_cold_start_syncs_its_start_records_once_and_the_new_store_at_its_first_backup() {
    let (_ws, root) = canonical_tempdir("durable-ws");
    let (_st, state) = canonical_tempdir("durable-state");
    std::fs::write(root.join("a.txt"), "old\n").expect("seed");
    let Some(text) = traced_writes(&root, &state, false) else {
        return;
    };
    let t = Trace(parse(&text));
    let path = |p: &str| state.join(p).to_string_lossy().into_owned();
    let (log, store, format) = (
        path("audit/audit.jsonl"),
        path("backups"),
        path("backups/FORMAT"),
    );
    let start_record = |from: usize| {
        t.start(from, |e| {
            e.call == "write"
                && first_fd_path(&e.args) == log
                && e.args.contains("\\\"kind\\\":\\\"start\\\"")
        })
    };
    let log_open = start_record(0).expect("the log's start record");
    let gateway = start_record(log_open + 1).expect("the gateway's start record");
    let answer = t
        .start(0, |e| {
            e.call == "write" && e.args.contains("pipe:") && e.args.contains("\\\"id\\\":1,")
        })
        .expect("the initialize answer");
    assert!(
        t.find(log_open, |e| is_sync(e) && first_fd_path(&e.args) == log)
            .is_some_and(|i| i > gateway),
        "the log's start record was synced on its own"
    );
    assert!(
        t.synced_between(&log, gateway, answer),
        "the start records were not durable before the first answer"
    );
    let store_sync = |e: &Event| {
        !e.end && is_sync(e) && [&store, &format].contains(&&first_fd_path(&e.args).to_string())
    };
    assert!(
        t.find(0, store_sync).is_none_or(|i| i > answer),
        "the new backup store was synced before the first answer"
    );
    let rename = t
        .start(answer, |e| {
            e.call.starts_with("renameat") && e.args.contains("\"a.txt\"")
        })
        .expect("the overwrite's rename");
    assert!(
        t.synced_between(&format, 0, rename) && t.synced_between(&store, 0, rename),
        "the new store's FORMAT and directory were not durable before its first backup was relied on"
    );
}
