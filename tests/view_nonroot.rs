//! `fsgate run` as a user who is not root (`nobody`), where `/dev/fuse` is usable by
//! that user (docs/run.md): reads, writes and refusals as root gets them, and `ask`
//! rules answered with `fsgate asks` by that user only.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::view::{NOBODY, ViewWs, finished, give_to_nobody, text, view_ws};
use crate::common::{DesktopFuse, bin};

view_ws! {
    /// A workspace, a state directory (audit log, backups, policies, XDG_STATE_HOME), all
    /// `nobody`'s.
    Ws
}

impl Ws {
    fn new() -> Ws {
        let ws = ViewWs::new("fsgate-nobody-ws", "fsgate-nobody-state");
        std::fs::write(ws.root.join(".env"), "TOKEN=nobody-secret\n").expect("write");
        std::fs::write(ws.root.join("a.txt"), "hello\n").expect("write");
        std::fs::write(ws.root.join("b.txt"), "keep\n").expect("write");
        std::fs::create_dir(ws.state.join("xdg")).expect("mkdir");
        Ws(ws)
    }

    /// Everything made so far given to `nobody`.
    fn give(&self) {
        for dir in [&self.root, &self.state] {
            give_to_nobody(dir);
        }
    }

    /// `program` as `nobody` (or as root), in the workspace, with its state.
    fn command(&self, as_nobody: bool, program: &str) -> Command {
        let mut cmd = if as_nobody {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", program]);
            c
        } else {
            Command::new(program)
        };
        cmd.env("HOME", &self.state)
            .env("XDG_STATE_HOME", self.state.join("xdg"))
            .current_dir(&self.root)
            .stdin(Stdio::null());
        cmd
    }

    /// `fsgate run [--policy P] -- python3 -c SCRIPT` as `nobody`.
    fn run(&self, policy: Option<&Path>, script: &str) -> Command {
        let mut cmd = self.command(true, bin());
        cmd.arg("run").args(self.state_args());
        if let Some(p) = policy {
            cmd.arg("--policy").arg(p);
        }
        cmd.args(["--", "/usr/bin/python3", "-c", script]);
        cmd
    }

    /// `fsgate asks --workspace ROOT ARGS` as `nobody` or as root.
    fn asks(&self, as_nobody: bool, args: &[&str]) -> Output {
        self.command(as_nobody, bin())
            .arg("asks")
            .arg("--workspace")
            .arg(&self.root)
            .args(args)
            .output()
            .expect("fsgate asks")
    }
}

const READS_WRITES_REFUSALS: &str = "import errno\n\
print(open('a.txt').read(), end='')\n\
with open('c.txt', 'w') as f:\n    f.write('new\\n')\n\
print(open('c.txt').read(), end='')\n\
f = open('b.txt', 'w')\n\
f.write('key = ' + 'AKIA' + 'UJZDEGXDNCF32EPF' + '\\n')\n\
try:\n    f.close()\n    print('closed')\nexcept OSError as e:\n    print('content refused', e.errno == errno.EACCES)\n\
try:\n    open('.env').read()\nexcept OSError as e:\n    print('hidden', e.errno == errno.ENOENT)\n";

/// As `nobody`: an allowed file reads, a new file is written, secret content is
/// refused at close (the file keeps its content), a secret does not exist; under a
/// read-only policy an open for writing is refused at once.
#[test]
fn view_a_user_who_is_not_root_reads_writes_and_is_refused() {
    let ws = Ws::new();
    let readonly = ws.state.join("readonly.toml");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/readonly.toml"),
        &readonly,
    )
    .expect("policy");
    ws.give();
    let _fuse = DesktopFuse::ensure();
    let out = finished(ws.run(None, READS_WRITES_REFUSALS));
    assert_eq!(
        text(&out.stdout),
        "hello\nnew\ncontent refused True\nhidden True\n",
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(ws.root.join("b.txt")).expect("b"),
        "keep\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.root.join("c.txt")).expect("c"),
        "new\n"
    );
    let script = "import errno\nprint(open('a.txt').read(), end='')\n\
        try:\n    open('a.txt', 'w')\nexcept OSError as e:\n    print('refused', e.errno == errno.EACCES)\n";
    let out = finished(ws.run(Some(&readonly), script));
    assert_eq!(
        text(&out.stdout),
        "hello\nrefused True\n",
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(ws.root.join("a.txt")).expect("a"),
        "hello\n"
    );
}

/// As `nobody`: an ask rule's question is answered by `nobody`'s `fsgate asks`; another
/// user's (root's) reaches no question and cannot answer.
#[test]
fn view_a_user_who_is_not_root_answers_an_ask_and_no_other_user_can() {
    let ws = Ws::new();
    let policy = ws.state.join("ask.toml");
    std::fs::write(
        &policy,
        "version = 1\n[[rule]]\nid = \"all\"\neffect = \"allow\"\nops = [\"read\", \"list\", \"write\", \"delete\"]\npaths = [\"**\"]\nreason = \"the workspace\"\n\n[[rule]]\nid = \"ask-a\"\neffect = \"ask\"\nops = [\"read\"]\npaths = [\"a.txt\"]\nreason = \"look first\"\n",
    )
    .expect("policy");
    ws.give();
    let _fuse = DesktopFuse::ensure();
    let mut run = ws.run(Some(&policy), "print(open('a.txt').read(), end='')");
    run.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = run.spawn().expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(60);
    let id = loop {
        // A run that ended before asking says why (not a bare "no question came").
        if child.try_wait().expect("wait").is_some() {
            let out = child.wait_with_output().expect("output");
            panic!("the run ended before asking: {}", text(&out.stderr));
        }
        let out = ws.asks(true, &["--json"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let runs: Vec<Value> = serde_json::from_slice(&out.stdout).expect("json");
        if let Some(id) = runs
            .iter()
            .filter_map(|r| r["questions"].as_array())
            .flatten()
            .find_map(|q| q["id"].as_str().map(str::to_owned))
        {
            break id;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "no question came in 60 s; the run said: {}",
                text(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Root is another user: the run answers it nothing.
    let root_sees = ws.asks(false, &["--json"]);
    assert_eq!(
        text(&root_sees.stdout),
        "[]\n",
        "{}",
        text(&root_sees.stderr)
    );
    assert!(!ws.asks(false, &["--allow", &id]).status.success());
    let allowed = ws.asks(true, &["--allow", &id]);
    assert!(allowed.status.success(), "{}", text(&allowed.stderr));
    let out = child.wait_with_output().expect("output");
    assert_eq!(text(&out.stdout), "hello\n", "{}", text(&out.stderr));
    let log = std::fs::read_to_string(ws.state.join("audit.jsonl")).expect("log");
    let answer: Value = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|r| r["kind"] == "ask_answer")
        .expect("an answer record");
    let by = answer["details"]["by"].as_str().expect("by");
    assert!(by.starts_with("uid 65534 pid "), "{by}");
}

const APPEND_TO_EACH: &str = r#"
import errno, sys
for name in sys.argv[1:]:
    try:
        f = open(name, 'a')
        f.write('appended\n')
        f.close()
        print(name, 'ok')
    except OSError as e:
        print(name, errno.errorcode[e.errno])
"#;

/// A write through the view keeps the file's owner and mode, as a write in place
/// does: root appending to `nobody`'s 0600 file leaves it `nobody`'s, 0600 (before, the
/// file became root's). As `nobody`, a file made read-only through the descriptor that
/// still writes it (git's objects are made so) takes what is written.
#[test]
fn view_a_write_keeps_the_files_owner_and_mode() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let ws = Ws::new();
    ws.give();
    std::fs::set_permissions(
        ws.root.join("b.txt"),
        std::fs::Permissions::from_mode(0o600),
    )
    .expect("chmod");
    let _fuse = DesktopFuse::ensure();
    // As git writes a loose object: created 0444, written through that descriptor.
    let script = "import os\n\
        fd = os.open('obj', os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o444)\n\
        os.write(fd, b'object\\n')\n\
        os.close(fd)\n\
        print(open('obj').read(), end='')\n";
    let out = finished(ws.run(None, script));
    assert_eq!(text(&out.stdout), "object\n", "{}", text(&out.stderr));
    let read = |name: &str| std::fs::read_to_string(ws.root.join(name)).expect("read");
    let obj = std::fs::metadata(ws.root.join("obj")).expect("stat");
    assert_eq!(
        (read("obj").as_str(), obj.mode() & 0o777),
        ("object\n", 0o444)
    );
    // Root, through its own view, appends to nobody's 0600 file: it stays nobody's.
    let (_roots_dir, roots) = crate::common::canonical_tempdir("fsgate-root-state");
    let mut cmd = ws.command(false, bin());
    cmd.arg("run")
        .arg("--workspace")
        .arg(&ws.root)
        .arg("--audit-log")
        .arg(roots.join("audit.jsonl"))
        .arg("--backup-dir")
        .arg(roots.join("backups"))
        .env("XDG_STATE_HOME", &roots);
    cmd.args(["--", "/usr/bin/python3", "-c", APPEND_TO_EACH, "b.txt"]);
    let out = finished(cmd);
    assert_eq!(text(&out.stdout), "b.txt ok\n", "{}", text(&out.stderr));
    assert_eq!(read("b.txt"), "keep\nappended\n");
    let meta = std::fs::metadata(ws.root.join("b.txt")).expect("stat");
    assert_eq!(
        (meta.uid(), meta.gid(), meta.mode() & 0o7777),
        (NOBODY, NOBODY, 0o600)
    );
}
