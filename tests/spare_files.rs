//! A write takes an unnamed file made ahead for its directory (issue 34): after a write
//! in a directory, the gateway makes the next write's file there off the request's path,
//! and likewise the next backup's file (made in the store's `versions/`, linked into
//! whichever shard the backup goes to). Seen from outside by the
//! files' birth times (`statx` btime): a file made ahead was born before its request
//! was sent. A directory never written before gets a file made on the spot; what is
//! written, its mode and its backups are as without spares.
//!
//! Included from tests/all.rs as `mod spare_files;` (uses `crate::common`).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::json;

use crate::common::Gate;

fn born(path: &Path) -> SystemTime {
    std::fs::metadata(path)
        .and_then(|m| m.created())
        .unwrap_or_else(|e| {
            panic!("this test needs birth times (statx btime) on its filesystem: {e}")
        })
}

fn write(g: &Gate, rel: &str, content: &str) {
    g.call(
        "fs/write_text_file",
        json!({"path": g.abs(rel), "content": content}),
    )
    .unwrap_or_else(|e| panic!("write {rel}: {e:?}"));
}

/// The moment just before a request, with the helpers' work since the last one done.
fn settled_now() -> SystemTime {
    std::thread::sleep(Duration::from_millis(300));
    let now = SystemTime::now();
    // Birth times have the kernel's clock tick; step past it.
    std::thread::sleep(Duration::from_millis(20));
    now
}

/// Waits (10 s at most) until the gateway `pid` holds an unnamed file made in `dir`: the
/// spare its helpers make after a request, on their own time. A fixed pause was too
/// short when the whole suite shared the two cores.
fn wait_for_spare_in(pid: u32, dir: &Path) {
    let prefix = format!("{}/#", dir.display());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let held = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| std::fs::read_link(e.path()).ok())
            .any(|l| l.to_string_lossy().starts_with(&prefix));
        if held {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no spare file made in {} within 10 s",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every regular file under `dir`, depth first.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let p = e.path();
        match e.file_type().expect("file type") {
            t if t.is_dir() => out.extend(files_under(&p)),
            t if t.is_file() => out.push(p),
            _ => {}
        }
    }
    out
}

#[test]
fn a_second_write_in_a_directory_takes_a_file_made_before_its_request() {
    let g = Gate::start();
    std::fs::create_dir(g.path("fresh")).expect("mkdir");
    write(&g, "a.txt", "first\n");
    let root = g
        .path("a.txt")
        .parent()
        .expect("the workspace")
        .to_path_buf();
    wait_for_spare_in(g.pid(), &root);
    let before_second = settled_now();
    write(&g, "b.txt", "second\n");
    assert!(
        born(&g.path("b.txt")) < before_second,
        "the second write's file was made ahead, before its request"
    );
    assert_eq!(g.get("b.txt").as_deref(), Some(&b"second\n"[..]));
    let mode = std::fs::metadata(g.path("b.txt"))
        .expect("stat")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o644, "a new file's mode, as without a spare");

    // No spare is ever another directory's.
    let before_fresh = settled_now();
    write(&g, "fresh/c.txt", "third\n");
    assert!(
        born(&g.path("fresh/c.txt")) >= before_fresh,
        "a directory never written before gets its file on the spot"
    );
    assert_eq!(g.get("fresh/c.txt").as_deref(), Some(&b"third\n"[..]));
}

#[test]
fn a_second_backup_takes_a_version_file_made_before_its_request_whatever_its_path() {
    let g = Gate::start();
    g.put("f.txt", "f1\n");
    g.put("other/g.txt", "g1\n");
    write(&g, "f.txt", "f2\n");
    let backups = g.state.join("backups");
    let first: Vec<_> = files_under(&backups);
    wait_for_spare_in(g.pid(), &backups.join("versions"));
    let before_second = settled_now();
    // Another file, in another directory (and another of the store's shards).
    write(&g, "other/g.txt", "g2\n");
    let new: Vec<_> = files_under(&backups)
        .into_iter()
        .filter(|p| !first.contains(p))
        .collect();
    assert_eq!(new.len(), 1, "one new version file: {new:?}");
    assert!(
        born(&new[0]) < before_second,
        "the second backup's file was made ahead, before its request"
    );
    let saved = std::fs::read(&new[0]).expect("read the version");
    assert!(
        saved.starts_with(b"g1\n"),
        "the version holds what was replaced"
    );
    assert_eq!(g.get("other/g.txt").as_deref(), Some(&b"g2\n"[..]));
    let listed = crate::common::run_cli(&[
        "backup",
        "list",
        "--json",
        "--backup-dir",
        backups.to_str().expect("utf-8"),
    ]);
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    assert_eq!(text.lines().count(), 2, "both versions listed:\n{text}");
}
