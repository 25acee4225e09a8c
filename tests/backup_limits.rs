//! Backups of huge and sparse files, their limits, and retention that an agent cannot
//! turn against the user (issue 11, points 3 and 4), on the real gateway:
//! - a 1 TiB sparse file overwritten, renamed onto or removed answers at once (refused by
//!   `backup.max_sparse_bytes`, the file untouched) instead of copying a terabyte;
//! - a sparse file within the limits is backed up sparse (few allocated blocks) and
//!   restores to identical content;
//! - `max_file_bytes` and the store quota `max_total_bytes` refuse with -32004 naming the
//!   limit, unless `on_limit = "change-without-backup"`, whose audit record says so;
//! - the version a file had before the gateway first changed it survives 50 rewrites
//!   under `keep_versions = 2`, and rewrites under a small quota.
//!
//! Included from tests/all.rs as `mod backup_limits;` (uses `crate::common`).

use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::backup_gateway::list;
use crate::common::{Gate, LIMIT, RpcError, TIMEOUT, policy_with, run_cli};

const NEEDLE: &[u8] = b"the user's needle";

fn sha(bytes: impl AsRef<[u8]>) -> String {
    hex::encode(Sha256::digest(bytes.as_ref()))
}

fn policy(backup: &str) -> String {
    policy_with(
        10 * 1024 * 1024,
        10 * 1024 * 1024,
        "deny",
        &format!("\n[backup]\n{backup}\n"),
    )
}

/// A sparse file of apparent size `len` with [`NEEDLE`] at `len / 2`.
fn sparse(g: &Gate, rel: &str, len: u64) -> PathBuf {
    let path = g.put(rel, "");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open sparse file");
    f.set_len(len).expect("set_len");
    f.seek(SeekFrom::Start(len / 2)).expect("seek");
    f.write_all(NEEDLE).expect("write needle");
    path
}

/// The sparse file is as it was: same length, needle in place.
fn assert_untouched(path: &PathBuf, len: u64) {
    let f = std::fs::File::open(path).expect("file still there");
    assert_eq!(f.metadata().expect("stat").len(), len, "{path:?} length");
    let mut buf = vec![0u8; NEEDLE.len()];
    f.read_exact_at(&mut buf, len / 2).expect("read needle");
    assert_eq!(buf, NEEDLE, "{path:?} content");
}

/// A -32004 naming `rule` in its data and message, on one line.
fn assert_limit(res: Result<Value, RpcError>, rule: &str) -> RpcError {
    let err = match res {
        Ok(v) => panic!("expected limit {rule}, got success {v}"),
        Err(e) => e,
    };
    assert_eq!(err.code, LIMIT, "{err:?}");
    let data = err.data.clone().unwrap_or_default();
    assert_eq!(data["rule"], rule, "{err:?}");
    assert!(err.message.contains(rule), "{err:?}");
    assert!(!err.message.contains('\n'), "one line: {err:?}");
    err
}

fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    let took = start.elapsed();
    assert!(took < Duration::from_secs(5), "{what} took {took:?}");
    out
}

fn backup_store(g: &Gate) -> PathBuf {
    g.state.join("backups")
}

fn records(g: &Gate) -> Vec<Value> {
    std::fs::read_to_string(&g.audit_log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn write(g: &Gate, rel: &str, content: &str) -> Result<Value, RpcError> {
    g.call(
        "fs/write_text_file",
        json!({"path": g.abs(rel), "content": content}),
    )
}

#[test]
fn a_terabyte_sparse_file_is_refused_at_once_by_every_change() {
    let g = Gate::start();
    let len = 1u64 << 40;
    let path = sparse(&g, "huge.bin", len);
    g.put("small.txt", "small\n");
    let err = timed("overwrite", || {
        assert_limit(write(&g, "huge.bin", "new\n"), "backup.max_sparse_bytes")
    });
    assert!(err.message.contains("nothing was changed"), "{err:?}");
    timed("rename onto", || {
        let res = g.call(
            "_fsgate/rename",
            json!({"oldPath": g.abs("small.txt"), "newPath": g.abs("huge.bin")}),
        );
        assert_limit(res, "backup.max_sparse_bytes")
    });
    timed("rm", || {
        let res = g.call("_fsgate/rm", json!({"path": g.abs("huge.bin")}));
        assert_limit(res, "backup.max_sparse_bytes")
    });
    assert_untouched(&path, len);
    assert_eq!(g.get("small.txt").as_deref(), Some(&b"small\n"[..]));
    assert!(list(&g, None).is_empty(), "no partial backup left");
}

#[test]
fn a_sparse_file_is_backed_up_sparse_and_restores_identically() {
    let mut g = Gate::start();
    let len = 256u64 << 20;
    let path = sparse(&g, "disk.img", len);
    {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open");
        f.write_all_at(b"head", 0).expect("head");
        f.write_all_at(b"tail", len - 4).expect("tail");
    }
    let original = sha(std::fs::read(&path).expect("read original"));
    timed("overwrite", || write(&g, "disk.img", "replaced\n")).expect("overwrite allowed");
    assert_eq!(g.get("disk.img").as_deref(), Some(&b"replaced\n"[..]));
    let versions = list(&g, Some("disk.img"));
    assert_eq!(versions.len(), 1, "{versions:#?}");
    assert_eq!(versions[0]["sha256"], original.as_str());
    assert_eq!(versions[0]["size"], len);
    let id = versions[0]["id"].as_str().expect("id");
    let file = crate::backup_gateway::version_file(&backup_store(&g), id).expect("version file");
    let data = std::fs::metadata(file).expect("data");
    assert!(
        data.len() > len && data.len() < len + 4096,
        "content + record"
    );
    assert!(
        data.blocks() * 512 < 1 << 20,
        "the backup allocates {} bytes for {len} bytes of mostly holes",
        data.blocks() * 512
    );
    // A restore is audited in the gateway's own log: stop the gateway first.
    g.close_stdin();
    assert!(g.wait_exit(TIMEOUT).success(), "{}", g.stderr());
    let out = run_cli(&[
        "backup",
        "restore",
        "--backup-dir",
        g.state.join("backups").to_str().unwrap(),
        "--workspace",
        g.root.to_str().unwrap(),
        "--audit-log",
        g.audit_log.to_str().unwrap(),
        "disk.img",
        "--at",
        id,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(sha(std::fs::read(&path).expect("read restored")), original);
}

#[test]
fn max_file_bytes_refuses_overwrite_rename_and_rm_of_a_big_file() {
    let g = Gate::with_policy(&policy("max_file_bytes = 100000"));
    let big = "b".repeat(200_000);
    g.put("big.txt", &big);
    g.put("src.txt", "incoming\n");
    assert_limit(write(&g, "big.txt", "x"), "backup.max_file_bytes");
    let res = g.call(
        "_fsgate/rename",
        json!({"oldPath": g.abs("src.txt"), "newPath": g.abs("big.txt")}),
    );
    assert_limit(res, "backup.max_file_bytes");
    let res = g.call("_fsgate/rm", json!({"path": g.abs("big.txt")}));
    assert_limit(res, "backup.max_file_bytes");
    assert_eq!(g.get("big.txt").as_deref(), Some(big.as_bytes()));
    assert!(g.exists("src.txt"));
    // A file within the limit is still backed up as before.
    g.put("ok.txt", "fine\n");
    write(&g, "ok.txt", "changed\n").expect("small file");
    assert_eq!(list(&g, Some("ok.txt")).len(), 1);
}

#[test]
fn the_store_quota_refuses_once_full() {
    let g = Gate::with_policy(&policy("max_total_bytes = 1000000"));
    let body: Vec<String> = (0..4).map(|i| format!("{i}").repeat(300_000)).collect();
    for (i, b) in body.iter().enumerate() {
        g.put(&format!("f{i}.txt"), b);
    }
    for i in 0..3 {
        write(&g, &format!("f{i}.txt"), "x").expect("fits the quota");
    }
    let err = assert_limit(write(&g, "f3.txt", "x"), "backup.max_total_bytes");
    assert!(err.message.contains("max_total_bytes"), "{err:?}");
    assert_eq!(g.get("f3.txt").as_deref(), Some(body[3].as_bytes()));
    assert_eq!(list(&g, None).len(), 3, "the user's originals are all kept");
}

#[test]
fn on_limit_change_without_backup_changes_and_says_so() {
    let g = Gate::with_policy(&policy(
        "max_file_bytes = 1000\non_limit = \"change-without-backup\"",
    ));
    g.put("big.txt", "b".repeat(5000));
    write(&g, "big.txt", "small\n").expect("allowed without backup");
    assert_eq!(g.get("big.txt").as_deref(), Some(&b"small\n"[..]));
    assert!(list(&g, None).is_empty());
    let rec = records(&g)
        .into_iter()
        .find(|r| r["kind"] == "request" && r["op"] == "write_text_file")
        .expect("write record");
    assert!(rec.get("backup").is_none(), "{rec}");
    assert_eq!(
        rec["args"]["noBackup"],
        json!([{"path": "big.txt", "limit": "backup.max_file_bytes"}]),
        "{rec}"
    );
}

#[test]
fn the_first_version_survives_fifty_rewrites_under_keep_versions() {
    let mut g = Gate::with_policy(&policy("keep_versions = 2"));
    g.put("notes.txt", "the user's own notes\n");
    for n in 0..50 {
        write(&g, "notes.txt", &format!("agent rewrite {n}\n")).expect("rewrite");
    }
    g.close_stdin();
    assert!(g.wait_exit(TIMEOUT).success(), "{}", g.stderr());
    // The restart applies retention to the whole store.
    let mut g = Gate::relaunch(g);
    g.ok("fs/read_text_file", json!({"path": g.abs("notes.txt")}));
    g.close_stdin();
    assert!(g.wait_exit(TIMEOUT).success(), "{}", g.stderr());
    let kept = list(&g, Some("notes.txt"));
    assert_eq!(kept.len(), 3, "the original and the newest two: {kept:#?}");
    assert_eq!(
        kept[0]["sha256"],
        sha("the user's own notes\n"),
        "{kept:#?}"
    );
    assert_eq!(kept[0]["original"], true, "{kept:#?}");
    assert_eq!(kept[2]["sha256"], sha("agent rewrite 48\n"), "{kept:#?}");
    let out = run_cli(&[
        "backup",
        "list",
        "--backup-dir",
        g.state.join("backups").to_str().unwrap(),
        "--workspace",
        g.root.to_str().unwrap(),
    ]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("Z *"), "the original is marked: {table}");
}

#[test]
fn rewrites_under_a_small_quota_prune_the_agent_versions_not_the_original() {
    let g = Gate::with_policy(&policy("max_total_bytes = 10000"));
    let original = "u".repeat(3000);
    g.put("data.txt", &original);
    for n in 0..20 {
        write(&g, "data.txt", &format!("{n:>3}").repeat(1000)).expect("rewrite fits");
    }
    let kept = list(&g, Some("data.txt"));
    assert!(
        kept.len() <= 3,
        "{} versions for a 10000-byte quota",
        kept.len()
    );
    assert_eq!(kept[0]["sha256"], sha(&original), "{kept:#?}");
    assert_eq!(kept[0]["original"], true);
    let prunes = records(&g)
        .into_iter()
        .filter(|r| r["kind"] == "backup-prune")
        .count();
    assert!(prunes > 0, "room was made, and recorded");
}
