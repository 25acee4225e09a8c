//! The harness of the tests of `fsgate run`'s view (tests/view_*.rs): a workspace with its
//! state directory beside it, commands run to their end under a deadline (killed after it, so
//! no test hangs), the session a run names, and the audit log's records.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

use super::{bin, canonical_tempdir};

/// How long a command may take by default before it is killed and the test fails.
pub const DEADLINE: Duration = Duration::from_secs(120);

/// The `PATH` of a command run under `fsgate run`'s default wall: the system's own
/// programs (`/usr/bin/python3`), the same on every machine, whatever its user's `PATH`
/// holds (a `~/bin` the wall does not grant).
pub const SYSTEM_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// A git identity and no global configuration, for git on the host and through the view.
pub const IDENTITY: [(&str, &str); 5] = [
    ("GIT_AUTHOR_NAME", "a"),
    ("GIT_AUTHOR_EMAIL", "a@example.com"),
    ("GIT_COMMITTER_NAME", "a"),
    ("GIT_COMMITTER_EMAIL", "a@example.com"),
    ("GIT_CONFIG_GLOBAL", "/dev/null"),
];

/// The shipped example policy that lets git work through the view.
pub fn git_policy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/examples/git-through-the-view.toml")
}

/// git on the host, in `dir`; its stdout (panics on failure).
pub fn host_git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .envs(IDENTITY)
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

/// `struct NAME(ViewWs)`: a test file's own workspace, which is the shared one (its
/// fields and methods through `Deref`) with the file's own methods added.
macro_rules! view_ws {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        struct $name($crate::common::view::ViewWs);

        impl std::ops::Deref for $name {
            type Target = $crate::common::view::ViewWs;
            fn deref(&self) -> &Self::Target {
                &self.0
            }
        }
    };
}
pub(crate) use view_ws;

/// A fresh workspace and, beside it (never inside), a state directory for the audit log
/// and the backups.
pub struct ViewWs {
    pub root: PathBuf,
    pub state: PathBuf,
    _dirs: (TempDir, TempDir),
}

impl ViewWs {
    /// An empty workspace and state directory, their temporary names starting with the prefixes.
    pub fn new(root_prefix: &str, state_prefix: &str) -> ViewWs {
        let (d1, root) = canonical_tempdir(root_prefix);
        let (d2, state) = canonical_tempdir(state_prefix);
        ViewWs {
            root,
            state,
            _dirs: (d1, d2),
        }
    }

    /// As [`ViewWs::new`], but the workspace is `NAME` made inside the first directory, so
    /// that there is room beside it.
    pub fn new_inside(root_prefix: &str, state_prefix: &str, name: &str) -> ViewWs {
        let (d1, parent) = canonical_tempdir(root_prefix);
        let (d2, state) = canonical_tempdir(state_prefix);
        let root = parent.join(name);
        std::fs::create_dir(&root).expect("mkdir");
        ViewWs {
            root,
            state,
            _dirs: (d1, d2),
        }
    }

    /// The backups' directory, in the state directory.
    pub fn backups(&self) -> PathBuf {
        self.state.join("backups")
    }

    /// The audit log, in the state directory.
    pub fn log(&self) -> PathBuf {
        self.state.join("audit.jsonl")
    }

    /// `--workspace ROOT --audit-log LOG --backup-dir STATE/backups`.
    pub fn state_args(&self) -> Vec<String> {
        let s = |p: &Path| p.to_string_lossy().into_owned();
        vec![
            "--workspace".into(),
            s(&self.root),
            "--audit-log".into(),
            s(&self.log()),
            "--backup-dir".into(),
            s(&self.backups()),
        ]
    }

    /// The audit log's records.
    pub fn records(&self) -> Vec<Value> {
        read_records(&self.log())
    }

    /// `fsgate run --workspace ROOT --audit-log LOG --backup-dir BACKUPS`, in the workspace
    /// with [`SYSTEM_PATH`]:
    /// the command to run follows.
    pub fn fsgate_run(&self) -> Command {
        let mut cmd = Command::new(bin());
        cmd.arg("run")
            .args(self.state_args())
            .env("PATH", SYSTEM_PATH)
            .env("XDG_STATE_HOME", self.xdg_state())
            .current_dir(&self.root);
        cmd
    }

    /// `XDG_STATE_HOME` for the runs: where `fsgate asks`'s sockets go (the audit log and
    /// backups are named by their options), in the test's state directory rather than the
    /// user's own.
    pub fn xdg_state(&self) -> PathBuf {
        self.state.join("xdg")
    }

    /// `fsgate run [--policy POLICY] ... -- sh -c SCRIPT` in the workspace, with [`IDENTITY`]
    /// and [`SYSTEM_PATH`] (None: the default policy), inside the default wall (which
    /// passes the command none of these variables but `PATH`).
    pub fn sh_under(&self, policy: Option<&Path>, script: &str) -> Output {
        self.sh_with(policy, script, true)
    }

    /// As [`sh_under`](Self::sh_under), `--no-confine`: outside the workspace the
    /// command has what it was given (root's capabilities, for `chown` and set-id
    /// bits, which the wall refuses before a request reaches the view).
    pub fn sh_unwalled(&self, policy: Option<&Path>, script: &str) -> Output {
        self.sh_with(policy, script, false)
    }

    fn sh_with(&self, policy: Option<&Path>, script: &str, walled: bool) -> Output {
        let mut cmd = Command::new(bin());
        cmd.arg("run");
        if let Some(p) = policy {
            cmd.arg("--policy").arg(p);
        }
        cmd.args(self.state_args())
            .args((!walled).then_some("--no-confine"))
            .args(["--", "sh", "-c", script])
            .env("PATH", SYSTEM_PATH)
            .env("XDG_STATE_HOME", self.xdg_state())
            .current_dir(&self.root)
            .envs(IDENTITY);
        finished(cmd)
    }

    pub fn undo(&self, session: &str) -> String {
        let mut undo = Command::new(bin());
        undo.arg("undo")
            .args(self.state_args())
            .args(["--session", session]);
        let undone = finished(undo);
        assert!(
            undone.status.success(),
            "{}{}",
            text(&undone.stdout),
            text(&undone.stderr)
        );
        text(&undone.stdout)
    }
}

/// A policy file in `dir`: the default, but processes through the view may open or write
/// files of 12 MiB at most (`max_process_file_bytes`), so that a test passes the limit
/// without writing hundreds of MiB; above the 10 MiB of `max_write_bytes` and
/// `max_read_bytes`, so that a test can tell which one bound it.
pub fn small_files_policy(dir: &Path) -> PathBuf {
    let text = include_str!("../../policies/default.toml").replacen(
        "max_write_bytes = 10485760\n",
        "max_write_bytes = 10485760\nmax_process_file_bytes = 12582912\n",
        1,
    );
    assert!(
        text.contains("max_process_file_bytes = 12582912"),
        "the limits moved"
    );
    let path = dir.join("small-files.toml");
    std::fs::write(&path, text).expect("write the policy");
    path
}

/// The records of the audit log at `log`, its rotated files first.
pub fn read_records(log: &Path) -> Vec<Value> {
    let series = fsgate_audit::series::discover(&[log.to_path_buf()]).expect("audit log");
    series
        .iter()
        .flat_map(|s| &s.files)
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).expect("audit log");
            text.lines()
                .map(|l| serde_json::from_str(l).expect("a record"))
                .collect::<Vec<Value>>()
        })
        .collect()
}

/// Runs `cmd` to its end, stdin empty, stdout and stderr taken (killed after [`DEADLINE`]).
pub fn finished(cmd: Command) -> Output {
    finished_within(cmd, DEADLINE)
}

/// Runs `cmd` to its end, stdin empty, stdout and stderr taken (killed after `limit`).
pub fn finished_within(mut cmd: Command, limit: Duration) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("spawn fsgate");
    waited(child, &format!("{cmd:?}"), limit)
}

/// `child`'s output once it ended (`what` killed after `limit`: no test hangs).
pub fn waited(mut child: Child, what: &str, limit: Duration) -> Output {
    let deadline = Instant::now() + limit;
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "{what} did not end in {limit:?}; stderr: {}",
                text(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Reads allowed, `asked.txt` asked about, `timeout_secs` to answer.
pub fn ask_policy(timeout_secs: u32) -> String {
    format!(
        r#"version = 1
[[rule]]
id = "all"
effect = "allow"
ops = ["read", "list", "write", "delete"]
paths = ["**"]
reason = "the workspace"

[[rule]]
id = "ask-asked"
effect = "ask"
ops = ["read"]
paths = ["asked.txt"]
reason = "a file a person looks at first"

[ask]
timeout_secs = {timeout_secs}
"#
    )
}

/// The uid and gid of `nobody`.
pub const NOBODY: u32 = 65534;

/// `chown -R 65534:65534 dir`, never following a link.
pub fn give_to_nobody(dir: &Path) {
    std::os::unix::fs::lchown(dir, Some(NOBODY), Some(NOBODY)).expect("chown");
    for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let path = entry.path();
        if entry.file_type().expect("type").is_dir() {
            give_to_nobody(&path);
        } else {
            std::os::unix::fs::lchown(&path, Some(NOBODY), Some(NOBODY)).expect("chown");
        }
    }
}

/// Bytes as text, lossily.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The run's session id, from its last line on stderr (the undo line).
pub fn session_of(out: &Output) -> String {
    let err = text(&out.stderr);
    let at = err
        .rfind("--session ")
        .expect("the undo line names the session");
    err[at + "--session ".len()..]
        .split_whitespace()
        .next()
        .expect("a session id")
        .to_string()
}

/// The `request` records of `op` at `path`.
pub fn requests<'a>(records: &'a [Value], op: &str, path: &str) -> Vec<&'a Value> {
    records
        .iter()
        .filter(|r| r["kind"] == "request" && r["op"] == op && r["path"] == path)
        .collect()
}

/// The `request` records of `op`, at any path.
pub fn requests_of<'a>(records: &'a [Value], op: &str) -> Vec<&'a Value> {
    records
        .iter()
        .filter(|r| r["kind"] == "request" && r["op"] == op)
        .collect()
}
