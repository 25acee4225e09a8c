//! `fsgate run`'s wall (the default; `--no-confine` lifts it): outside the workspace
//! the command, and every process it starts, gets a confined agent's `[agent]` wall; the
//! workspace is still the view (docs/run.md).

use std::process::Output;

use serde_json::Value;

use crate::common::canonical_tempdir;
use crate::common::view::{ViewWs, finished, session_of, text, view_ws};

view_ws! {
    /// A workspace with `.env` (a secret) and `a.txt`, a state dir beside it.
    Ws
}

const SECRET: &str = "hunter2-confine-secret";
const OUTSIDE: &str = "outside-the-workspace-text";

impl Ws {
    fn new() -> Ws {
        let ws = ViewWs::new("fsgate-confine-ws", "fsgate-confine-state");
        std::fs::write(ws.root.join(".env"), format!("TOKEN={SECRET}\n")).expect("write");
        std::fs::write(ws.root.join("a.txt"), "hello\n").expect("write");
        Ws(ws)
    }

    /// `fsgate run [--no-confine] ... -- sh -c SCRIPT` in the workspace (walled: the
    /// default, without the option).
    fn sh(&self, walled: bool, script: &str) -> Output {
        let mut cmd = self.fsgate_run();
        if !walled {
            cmd.arg("--no-confine");
        }
        cmd.args(["--", "sh", "-c", script]);
        finished(cmd)
    }

    /// The `run` record of `session`.
    fn run_record(&self, session: &str) -> Value {
        self.records()
            .into_iter()
            .find(|r| r["kind"] == "run" && r["details"]["session"] == session)
            .expect("the run record")
    }
}

/// A file in a directory of its own outside the workspace. No `[agent]` grant covers
/// it: the temp dir is not granted (only the wall's own scratch dir in it is).
fn outside_file() -> (tempfile::TempDir, std::path::PathBuf) {
    let (dir, path) = canonical_tempdir("fsgate-confine-outside");
    let file = path.join("notes.txt");
    std::fs::write(&file, OUTSIDE).expect("write");
    (dir, file)
}

#[test]
fn view_confine_refuses_a_file_outside_the_workspace_that_run_alone_reads() {
    let ws = Ws::new();
    let (_dir, file) = outside_file();
    let script = format!(
        "cat {0}; echo cat=$?; sh -c 'cat {0}'; true",
        file.display()
    );
    let open = ws.sh(false, &script);
    assert!(
        text(&open.stdout).contains(OUTSIDE),
        "with --no-confine the command sees the system: {}",
        text(&open.stderr)
    );
    let walled = ws.sh(true, &script);
    let (stdout, stderr) = (text(&walled.stdout), text(&walled.stderr));
    assert!(walled.status.success(), "{stdout}\n{stderr}");
    assert!(!stdout.contains(OUTSIDE), "{stdout}");
    assert!(stdout.contains("cat=1"), "{stdout}");
    // The command and the shell it started: both refused by the wall.
    let denied = format!("{}: Permission denied", file.display());
    assert_eq!(stderr.matches(&denied).count(), 2, "{stderr}");
    assert!(
        stderr.contains("fsgate: command confined: landlock"),
        "{stderr}"
    );
    assert!(stderr.contains("[agent] section grants"), "{stderr}");
}

#[test]
fn view_confine_keeps_the_workspace_governed_by_the_view() {
    let ws = Ws::new();
    let out = ws.sh(
        true,
        "cat .env; echo cat=$?; cat a.txt; echo hi > notes.txt",
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("cat=1") && stdout.contains("hello"),
        "{stdout}"
    );
    assert!(
        stderr.contains(".env: No such file or directory"),
        "{stderr}"
    );
    assert!(!stdout.contains(SECRET) && !stderr.contains(SECRET));
    assert_eq!(
        std::fs::read_to_string(ws.root.join("notes.txt")).expect("notes"),
        "hi\n"
    );
    let session = session_of(&out);
    let recorded = ws.records().into_iter().any(|r| {
        r["op"] == "write_text_file"
            && r["path"] == "notes.txt"
            && r["session"] == session.as_str()
            && r["outcome"] == "ok"
    });
    assert!(recorded, "no write record for the run");
    // The run record says what walls the command in: the kernel's part and the ruleset.
    let run = ws.run_record(&session);
    let confine = &run["details"]["confine"];
    assert!(confine["sandbox"]["enforcement"].is_string(), "{confine}");
    let grants = confine["plan"]["grants"].as_array().expect("grants");
    assert!(grants.iter().any(|g| g["path"] == "/usr"), "{confine}");
    let names = confine["plan"]["envNames"].as_array().expect("envNames");
    assert!(names.iter().any(|n| n == "HOME"), "{confine}");
}

#[test]
fn view_confine_gives_a_scratch_home_and_tmpdir_emptied_at_the_end() {
    let ws = Ws::new();
    // What test suites and `npx` do in TMPDIR: a link, a fifo, a program run there.
    let script = "echo home=$HOME; echo tmp=$TMPDIR; echo kept > \"$HOME/f\" && cat \"$HOME/f\"; \
                  echo aws=${AWS_SECRET_ACCESS_KEY:-unset}; \
                  ln -s f \"$TMPDIR/l\" && cat \"$TMPDIR/l\" && mkfifo \"$TMPDIR/q\" && \
                  cp /bin/echo \"$TMPDIR/e\" && \"$TMPDIR/e\" ran-in-tmp";
    let mut cmd = ws.fsgate_run();
    // `--confine` names the default: accepted, as command lines written before it was.
    cmd.arg("--confine")
        .args(["--", "sh", "-c", script])
        .env("AWS_SECRET_ACCESS_KEY", "not-for-the-command");
    let out = finished(cmd);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let home = stdout
        .lines()
        .find_map(|l| l.strip_prefix("home="))
        .expect("home");
    let scratch = std::env::temp_dir().join("fsgate-agent-");
    assert!(
        home.starts_with(scratch.to_string_lossy().as_ref()),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("tmp={home}\n")), "{stdout}");
    assert!(stdout.contains("kept\n"), "HOME is not writable: {stderr}");
    // The `[agent]` section's environment: a variable it does not name is not passed.
    assert!(stdout.contains("aws=unset"), "{stdout}");
    assert!(
        stdout.ends_with("kept\nran-in-tmp\n"),
        "a link, a fifo or a program in TMPDIR: {stdout}\n{stderr}"
    );
    // Emptied at the end (the confined gateway may not remove the dir itself: the next
    // start sweeps the husk).
    let left = std::fs::read_dir(home).map_or(0, Iterator::count);
    assert_eq!(left, 0, "the scratch dir's content outlived the run");
}

/// A directory the policy grants read-write on the scratch dir's filesystem: a directory
/// of links made in the scratch dir could be moved there and outlive the run, so the
/// scratch dir then takes no links or fifos (programs still run there), and the wall's
/// record says why.
#[test]
fn view_confine_a_scratch_dir_beside_a_granted_directory_takes_no_links() {
    let ws = Ws::new();
    let (_keep, granted) = canonical_tempdir("fsgate-confine-granted");
    let policy = ws.state.join("granted.toml");
    let text_of = include_str!("../policies/default.toml").replacen(
        "[agent]\n",
        &format!("[agent]\nread_write = [{granted:?}]\n"),
        1,
    );
    std::fs::write(&policy, text_of).expect("write policy");
    let script = "ln -s x \"$TMPDIR/l\" 2>/dev/null; echo l=$?; mkfifo \"$TMPDIR/q\" 2>/dev/null; \
                  echo q=$?; cp /bin/echo \"$TMPDIR/e\" && \"$TMPDIR/e\" ran; echo made > \"$1/f\"";
    let out = ws.sh_under(Some(&policy), &format!("set -- {granted:?}; {script}"));
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(stdout, "l=1\nq=1\nran\n", "{stderr}");
    assert!(granted.join("f").is_file(), "the grant is not writable");
    let session = session_of(&out);
    let record = ws.run_record(&session).to_string();
    assert!(
        record.contains("no symbolic links or fifos there"),
        "the record does not say why: {record}"
    );
}

#[test]
fn view_confine_a_killed_runs_scratch_dir_goes_with_its_content_at_the_next_start() {
    use std::io::BufRead;
    use std::os::fd::AsRawFd;
    use std::process::Stdio;
    let ws = Ws::new();
    let (_tmp, tmp) = canonical_tempdir("fsgate-confine-tmp");
    let script = "mkdir -p \"$HOME/.cache/deep\" && echo x > \"$HOME/.cache/deep/f\" && \
                  echo ready && exec sleep 60";
    let mut cmd = ws.fsgate_run();
    cmd.args(["--", "sh", "-c", script])
        .env("TMPDIR", &tmp)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut gateway = cmd.spawn().expect("spawn");
    let mut ready = String::new();
    let stdout = gateway.stdout.take().expect("stdout");
    std::io::BufReader::new(stdout)
        .read_line(&mut ready)
        .expect("read");
    assert_eq!(ready, "ready\n");
    gateway.kill().expect("kill -9");
    let _ = gateway.wait();
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
    let scratch = &left[0];
    assert!(scratch.join(".cache/deep/f").exists(), "nothing was left");
    // The killed run's tree lets go of the scratch dir's lock as it ends.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let dir = std::fs::File::open(scratch).expect("open");
        // SAFETY: flock on a descriptor this test owns.
        let free = unsafe { libc::flock(dir.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
        if free {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the scratch dir stayed locked"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let mut next = ws.fsgate_run();
    next.args(["--", "true"]).env("TMPDIR", &tmp);
    let out = finished(next);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        !scratch.exists(),
        "the next start kept {}",
        scratch.display()
    );
}

#[test]
fn view_confine_runs_sh_and_the_system_python_on_a_script_of_the_workspace() {
    let ws = Ws::new();
    let (_dir, file) = outside_file();
    let script = format!(
        "import pathlib\npathlib.Path('py.txt').write_text(pathlib.Path('a.txt').read_text())\ntry:\n    open({:?}).read()\n    print('outside read')\nexcept PermissionError:\n    print('outside refused')\n",
        file.display().to_string()
    );
    // A script of the workspace named on the command line is read through the view,
    // not granted by the wall (a grant beneath the workspace would be refused).
    std::fs::write(ws.root.join("job.py"), script).expect("write");
    let mut cmd = ws.fsgate_run();
    cmd.args(["--", "/usr/bin/python3", "job.py"]);
    let out = finished(cmd);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("outside refused"), "{stdout}\n{stderr}");
    assert_eq!(
        std::fs::read_to_string(ws.root.join("py.txt")).expect("py.txt"),
        "hello\n"
    );
    let out = ws.sh(true, "uname -s; sh -c 'echo nested'");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "Linux\nnested\n");
    // The command line is run as typed: its records name `sh`, not a resolved path.
    let session = session_of(&out);
    let run = ws.run_record(&session);
    assert_eq!(run["details"]["command"][0], "sh", "{run}");
}

/// A kernel without Landlock: the wall cannot be built; fsgate says so and exits 125
/// without running the command.
#[test]
fn view_confine_without_landlock_the_command_is_not_run() {
    let ws = Ws::new();
    let marker = ws.state.join("ran");
    let mut cmd = std::process::Command::new("/usr/bin/python3");
    cmd.args([
        "-c",
        crate::view_faults::NO_LANDLOCK,
        crate::common::bin(),
        "run",
    ])
    .args(ws.state_args())
    .args(["--", "touch"])
    .arg(&marker)
    .current_dir(&ws.root);
    let out = finished(cmd);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(
        stderr.contains("Landlock is missing (this kernel has no Landlock"),
        "{stderr}"
    );
    assert!(stderr.contains("the command was not run"), "{stderr}");
    assert!(!marker.exists(), "the command ran without its wall");
}

/// `--confine` and `--no-confine` together: a usage error (exit 125, fsgate run's own),
/// nothing run.
#[test]
fn view_confine_and_no_confine_together_are_refused() {
    let ws = Ws::new();
    let marker = ws.state.join("ran");
    let mut cmd = ws.fsgate_run();
    cmd.args(["--confine", "--no-confine", "--", "touch"])
        .arg(&marker);
    let out = finished(cmd);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(stderr.contains("cannot be used with"), "{stderr}");
    assert!(!marker.exists(), "the command ran");
}

/// A version manager's program directories on `PATH` (here a fake pyenv under a HOME of
/// its own: a shim that runs the manager's `libexec`) are granted by the wall, so a
/// shell's `python3` runs; a `~/bin` on the same `PATH` is not granted.
#[test]
fn view_confine_runs_a_version_managers_program_found_on_path() {
    let ws = Ws::new();
    let (_home_dir, home) = canonical_tempdir("fsgate-confine-home");
    let pyenv = home.join(".pyenv");
    let script = |path: &std::path::Path, body: &str| {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, format!("#!/bin/sh\n{body}\n")).expect("write");
        let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        std::fs::set_permissions(path, mode).expect("chmod");
    };
    let real = pyenv.join("libexec/pyenv");
    script(
        &pyenv.join("shims/python3"),
        &format!("exec {} \"$@\"", real.display()),
    );
    script(&real, "echo managed \"$@\"");
    script(&home.join("bin/tool"), "echo tool");
    let path = format!(
        "{}:{}:/usr/bin:/bin",
        pyenv.join("shims").display(),
        home.join("bin").display()
    );
    let mut cmd = ws.fsgate_run();
    cmd.args(["--", "sh", "-c", "python3 x; tool; echo tool=$?"])
        .env("HOME", &home)
        .env("PATH", &path);
    let out = finished(cmd);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.starts_with("managed x\n"), "{stdout}\n{stderr}");
    assert!(
        stdout.ends_with("tool=126\n"),
        "~/bin was granted: {stdout}"
    );
    let session = session_of(&out);
    let grants = ws.run_record(&session)["details"]["confine"]["plan"]["grants"].clone();
    let granted = grants.as_array().expect("grants");
    for dir in ["shims", "libexec"] {
        let dir = pyenv.join(dir);
        assert!(
            granted
                .iter()
                .any(|g| g["path"] == dir.to_string_lossy().as_ref()),
            "{grants}"
        );
    }
}

/// A workspace inside a directory discovery would grant (here a version manager's
/// `shims` on `PATH`): that grant is left out, with a note, and the command runs; the
/// wall never grants a directory holding the workspace.
#[test]
fn view_confine_leaves_out_a_discovered_grant_that_holds_the_workspace() {
    let (_home_dir, home) = canonical_tempdir("fsgate-confine-home");
    let shims = home.join(".pyenv/shims");
    let root = shims.join("proj");
    std::fs::create_dir_all(&root).expect("mkdir");
    std::fs::write(root.join("a.txt"), "inside\n").expect("write");
    let (_state_dir, state) = canonical_tempdir("fsgate-confine-state");
    let mut cmd = std::process::Command::new(crate::common::bin());
    cmd.arg("run")
        .arg("--workspace")
        .arg(&root)
        .arg("--audit-log")
        .arg(state.join("audit.jsonl"))
        .arg("--backup-dir")
        .arg(state.join("backups"))
        .args(["--", "cat", "a.txt"])
        .env("HOME", &home)
        .env("PATH", format!("{}:/usr/bin:/bin", shims.display()))
        .current_dir(&root);
    let out = finished(cmd);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stdout, "inside\n");
    let note = format!("fsgate: note: not granting {}", shims.display());
    assert!(stderr.contains(&note), "{stderr}");
    assert!(stderr.contains("it would reach the workspace"), "{stderr}");
}

#[test]
fn view_a_data_file_of_the_workspace_on_the_command_line_gets_no_not_granted_note() {
    let ws = Ws::new();
    let (_dir, outside) = outside_file();
    let mut cmd = ws.fsgate_run();
    cmd.args(["--", "cat", "a.txt"]).arg(&outside);
    let out = finished(cmd);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    // The workspace's file is read through the view; the outside one is not granted.
    assert!(stdout.starts_with("hello\n"), "{stdout}\n{stderr}");
    assert_eq!(
        stderr.matches("is named on the command line").count(),
        1,
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("note: {} is named", outside.display())),
        "{stderr}"
    );
}
