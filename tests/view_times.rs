//! Timestamps through `fsgate run`'s view (docs/run.md): `touch` and `os.utime` are the
//! gateway's `utimes` (recorded with the old times, undone), refused where writes are.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::common::view::{ViewWs, requests_of, session_of, text, view_ws};

view_ws! {
    /// A workspace and its state dir beside it.
    Ws
}

/// 2020-01-02T00:00:00Z, and 2001-01-01T00:00:00Z, in seconds since the epoch.
const JAN_2_2020: i64 = 1_577_923_200;
const OLD: i64 = 978_307_200;

impl Ws {
    fn new() -> Ws {
        Ws(ViewWs::new("fsgate-view-times", "fsgate-view-times-state"))
    }

    fn mtime(&self, name: &str) -> i64 {
        std::fs::metadata(self.root.join(name))
            .expect("stat")
            .mtime()
    }

    /// A file whose mtime is well in the past (set from outside the view).
    fn old_file(&self, name: &str) {
        let path = self.root.join(name);
        std::fs::write(&path, "x\n").expect("write");
        let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(OLD as u64);
        let f = std::fs::File::options()
            .write(true)
            .open(&path)
            .expect("open");
        f.set_times(
            std::fs::FileTimes::new()
                .set_modified(old)
                .set_accessed(old),
        )
        .expect("set times");
    }
}

/// `touch`, `touch -d`, `touch -r`, `cp -p`, `tar x` and `os.utime` set the times (a link's own times, `touch -h`,
/// are refused, never set through it), each recorded and undone.
#[test]
fn view_touch_sets_mtime_is_recorded_and_undone() {
    let ws = Ws::new();
    ws.old_file("f.txt");
    ws.old_file("g.txt");
    std::os::unix::fs::symlink("f.txt", ws.root.join("link")).expect("symlink");
    // Unwalled: `cp -p` and `tar x` as root also chown, which the wall refuses.
    let out = ws.sh_unwalled(
        None,
        "set -e
         python3 -c \"
import os
try:
    os.utime('link', (0, 0), follow_symlinks=False)
    print('link set')
except OSError as e:
    print('link errno', e.errno)
\"
         touch -d 2020-01-02T00:00:00Z f.txt
         stat -c %Y f.txt
         cp -p f.txt c.txt
         touch -r f.txt h.txt
         tar -cf a.tar f.txt && mkdir t && tar -C t -xf a.tar
         stat -c %Y c.txt h.txt t/f.txt
         touch g.txt
         python3 -c \"
import os, time
os.utime('g.txt', (0, 1_000_000_000))
s = os.stat('g.txt')
print(int(s.st_mtime), int(s.st_atime))
os.utime('g.txt')
print(os.stat('g.txt').st_mtime > time.time() - 600)
\"",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!(
            "link errno 13\n{JAN_2_2020}\n{JAN_2_2020}\n{JAN_2_2020}\n{JAN_2_2020}\n1000000000 0\nTrue\n"
        ),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(ws.mtime("f.txt"), JAN_2_2020);
    assert!(
        ws.mtime("g.txt") > OLD + 1_000_000,
        "touch left g.txt's old mtime"
    );
    let records = ws.records();
    let set = requests_of(&records, "utimes");
    assert!(
        set.iter().any(|r| r["path"] == "f.txt"
            && r["decision"] == "allow"
            && r["outcome"] == "ok"
            && r["args"]["mtime"] == JAN_2_2020 * 1_000_000_000
            && r["args"]["oldMtime"] == OLD * 1_000_000_000),
        "no utimes of f.txt recorded: {set:?}"
    );
    assert!(
        records
            .iter()
            .any(|r| r["kind"] == "intent" && r["op"] == "utimes" && r["path"] == "f.txt"),
        "no intent of the utimes"
    );
    ws.undo(&session_of(&out));
    assert_eq!(ws.mtime("f.txt"), OLD);
    assert_eq!(ws.mtime("g.txt"), OLD);
    assert!(!ws.root.join("c.txt").exists(), "undo left the copy");
    assert!(!ws.root.join("t").exists(), "undo left the extracted tree");
}

/// Where writes are refused, so is a change of times, recorded refused.
#[test]
fn view_touch_where_writes_are_refused_fails_and_is_recorded_refused() {
    let ws = Ws::new();
    ws.old_file("f.txt");
    let policy = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/readonly.toml");
    let out = ws.sh_under(
        Some(&policy),
        "python3 -c \"
import os
try:
    os.utime('f.txt', (0, 1_000_000_000))
    print('set')
except OSError as e:
    print('errno', e.errno)
\"",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert_eq!(said, "errno 13\n");
    assert_eq!(ws.mtime("f.txt"), OLD);
    let records = ws.records();
    let set = requests_of(&records, "utimes");
    assert!(
        set.iter()
            .any(|r| r["path"] == "f.txt" && r["decision"] == "deny"),
        "no refused utimes recorded: {set:?}"
    );
}
