//! Escape tests through special files: hard links (link count > 1), FIFOs, unix sockets and
//! device nodes inside the root, and a name swapped between those kinds while being read.
//! A FIFO must never make a request hang: every wait in the harness has a timeout.

use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rustix::fs::{CWD, FileType, Mode, makedev, mknodat};
use serde_json::{Value, json};

use crate::common::{Gate, assert_refused, grep_hits, split};

fn mkfifo(path: &Path) {
    mknodat(CWD, path, FileType::Fifo, Mode::from_raw_mode(0o644), 0).expect("mkfifo");
}

/// Grep for `pattern` must finish and find only the control line in `control.txt`.
fn assert_grep_only_control(g: &Gate, pattern: &str, control_line: &str) {
    let r = g.ok("_fsgate/grep", json!({"pattern": pattern}));
    assert_eq!(
        grep_hits(&r),
        vec![(g.abs("control.txt"), 1, control_line.to_owned())]
    );
}

#[test]
fn hard_link_to_outside_file_is_refused() {
    let g = Gate::start();
    let secret = g.put_outside("secret.txt", "OUTSIDE hardlink\n");
    std::fs::hard_link(&secret, g.path("hl.txt"))
        .expect("hard link (workspace and outside share /tmp)");
    g.put("control.txt", "OUTSIDE control\n");
    for method in ["fs/read_text_file", "_fsgate/read_file"] {
        let e = assert_refused(
            g.call(method, json!({"path": g.abs("hl.txt")})),
            &g,
            "hl.txt",
        );
        assert!(
            !e.message.contains("OUTSIDE"),
            "refusal leaked content: {e:?}"
        );
    }
    assert_refused(
        g.call(
            "_fsgate/edit_text_file",
            json!({"path": g.abs("hl.txt"), "oldText": "OUTSIDE", "newText": "pwned"}),
        ),
        &g,
        "hl.txt",
    );
    let _ = g.call(
        "fs/write_text_file",
        json!({"path": g.abs("hl.txt"), "content": "pwned"}),
    );
    assert_eq!(
        std::fs::read(&secret).ok().as_deref(),
        Some(&b"OUTSIDE hardlink\n"[..]),
        "the outside file was modified through a hard link"
    );
    assert_grep_only_control(&g, "OUTSIDE", "OUTSIDE control");
    // Nor can it be moved (to a name the policy treats differently).
    assert_refused(
        g.call(
            "_fsgate/rename",
            json!({"oldPath": g.abs("hl.txt"), "newPath": g.abs("moved.txt")}),
        ),
        &g,
        "hl.txt",
    );
    assert!(g.path("hl.txt").exists() && !g.exists("moved.txt"));
    // Nor does stat show the outside inode's size and times.
    assert_refused(
        g.call("_fsgate/stat", json!({"path": g.abs("hl.txt")})),
        &g,
        "hl.txt",
    );
}

#[test]
fn hard_link_inside_root_is_refused_too() {
    // fsgate cannot tell where the other name lives, so any link count > 1 is refused.
    let g = Gate::start();
    g.put("a.txt", "shared\n");
    std::fs::hard_link(g.path("a.txt"), g.path("b.txt")).expect("hard link");
    assert_refused(
        g.call("fs/read_text_file", json!({"path": g.abs("a.txt")})),
        &g,
        "a.txt",
    );
    assert_refused(
        g.call("fs/read_text_file", json!({"path": g.abs("b.txt")})),
        &g,
        "b.txt",
    );
}

#[test]
fn fifo_is_refused_without_hanging() {
    let g = Gate::start();
    mkfifo(&g.path("pipe.txt"));
    g.put("control.txt", "FIND me\n");
    assert_refused(
        g.call("fs/read_text_file", json!({"path": g.abs("pipe.txt")})),
        &g,
        "pipe.txt",
    );
    assert_refused(
        g.call("_fsgate/read_file", json!({"path": g.abs("pipe.txt")})),
        &g,
        "pipe.txt",
    );
    assert_refused(
        g.call(
            "_fsgate/edit_text_file",
            json!({"path": g.abs("pipe.txt"), "oldText": "a", "newText": "b"}),
        ),
        &g,
        "pipe.txt",
    );
    assert_grep_only_control(&g, "FIND", "FIND me");
    // Named directly, grep refuses it rather than answering "no matches".
    assert_refused(
        g.call(
            "_fsgate/grep",
            json!({"pattern": "x", "path": g.abs("pipe.txt")}),
        ),
        &g,
        "pipe.txt",
    );
    // Renaming it is refused by fsgate, clearly, not by the kernel as an internal error.
    let e = assert_refused(
        g.call(
            "_fsgate/rename",
            json!({"oldPath": g.abs("pipe.txt"), "newPath": g.abs("pipe2.txt")}),
        ),
        &g,
        "pipe.txt",
    );
    assert!(e.message.contains("special file"), "{e:?}");
    assert!(g.path("pipe.txt").exists());
}

#[test]
fn write_to_fifo_does_not_hang() {
    let g = Gate::start();
    mkfifo(&g.path("pipe.txt"));
    // Refusing and atomically replacing the FIFO are both safe; blocking on open is not.
    let res = g.call(
        "fs/write_text_file",
        json!({"path": g.abs("pipe.txt"), "content": "x"}),
    );
    if let Err(e) = res {
        assert_eq!(e.code, crate::common::REFUSED, "{e:?}");
    }
}

#[test]
fn unix_socket_is_refused() {
    let g = Gate::start();
    let _listener = UnixListener::bind(g.path("agent.sock")).expect("bind unix socket");
    g.put("control.txt", "FIND me\n");
    assert_refused(
        g.call("fs/read_text_file", json!({"path": g.abs("agent.sock")})),
        &g,
        "agent.sock",
    );
    assert_refused(
        g.call("_fsgate/read_file", json!({"path": g.abs("agent.sock")})),
        &g,
        "agent.sock",
    );
    assert_grep_only_control(&g, "FIND", "FIND me");
}

#[test]
fn device_node_inside_root_is_refused() {
    let g = Gate::start();
    // Needs CAP_MKNOD (root in CI containers); say so plainly where it is missing.
    let zero = g.path("zero.txt");
    if let Err(e) = mknodat(
        CWD,
        &zero,
        FileType::CharacterDevice,
        Mode::from_raw_mode(0o666),
        makedev(1, 5),
    ) {
        crate::common::skip_or_fail(
            "device_node_inside_root_is_refused",
            &format!("mknod not permitted here ({e})"),
        );
        return;
    }
    g.put("control.txt", "FIND me\n");
    assert_refused(
        g.call("fs/read_text_file", json!({"path": g.abs("zero.txt")})),
        &g,
        "zero.txt",
    );
    assert_refused(
        g.call("_fsgate/read_file", json!({"path": g.abs("zero.txt")})),
        &g,
        "zero.txt",
    );
    assert_grep_only_control(&g, "FIND", "FIND me");
}

/// Stops the swapper thread even when the test panics, so the tempdir can be removed.
struct StopOnDrop(Arc<AtomicBool>);
impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[test]
fn swapping_a_name_between_file_fifo_and_outside_link_never_hangs_or_leaks() {
    // The type must be checked on what was opened, not on the name: a swap between a check
    // and the open must neither block on a FIFO nor follow a link out.
    let g = Gate::start();
    let secret = g.put_outside("secret.txt", "OUTSIDE race\n");
    g.put("race.txt", "inside\n");
    let root = g.root.clone();
    let stop = StopOnDrop(Arc::new(AtomicBool::new(false)));
    let stop2 = Arc::clone(&stop.0);
    let swaps = Arc::new(AtomicU64::new(0));
    let swaps2 = Arc::clone(&swaps);
    let swapper = std::thread::spawn(move || {
        let (reg, fifo, link, target) = (
            root.join(".s-reg"),
            root.join(".s-fifo"),
            root.join(".s-link"),
            root.join("race.txt"),
        );
        while !stop2.load(Ordering::Relaxed) {
            let _ = std::fs::write(&reg, "inside\n");
            let _ = std::fs::rename(&reg, &target);
            if mknodat(CWD, &fifo, FileType::Fifo, Mode::from_raw_mode(0o644), 0).is_ok() {
                let _ = std::fs::rename(&fifo, &target);
            }
            if std::os::unix::fs::symlink(&secret, &link).is_ok() {
                let _ = std::fs::rename(&link, &target);
            }
            swaps2.fetch_add(1, Ordering::Relaxed);
        }
    });
    // Reads go on in rounds until the swapper has really raced them: on a busy machine
    // it may get little CPU while a round is answered, so a fixed number of reads could
    // end before it swapped at all.
    let (mut ok, mut reads) = (0, 0);
    let deadline = Instant::now() + Duration::from_secs(120);
    while reads < 300 || (swaps.load(Ordering::Relaxed) < 50 && Instant::now() < deadline) {
        let ids: Vec<Value> = (0..100)
            .map(|_| g.send("fs/read_text_file", json!({"path": g.abs("race.txt")})))
            .collect();
        for id in &ids {
            // wait_response times out (and fails) if a read blocked on a FIFO.
            match split(&g.wait_response(id)) {
                Ok(v) => {
                    assert_eq!(
                        v["content"],
                        json!("inside\n"),
                        "a racing read returned foreign content"
                    );
                    ok += 1;
                }
                Err(e) => assert!(!e.message.contains("OUTSIDE"), "{e:?}"),
            }
        }
        reads += ids.len();
    }
    stop.0.store(true, Ordering::Relaxed);
    swapper.join().expect("swapper");
    let swaps = swaps.load(Ordering::Relaxed);
    assert!(
        swaps >= 50,
        "the swapper only managed {swaps} swaps in two minutes; the race was not exercised"
    );
    eprintln!("race: {ok}/{reads} reads saw the regular file, {swaps} swaps");
}
