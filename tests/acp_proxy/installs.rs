//! `fsgate acp --confine-agent` with agents installed the ways people install them, and
//! no `[agent]` paths in the policy: fsgate must work out each installation itself.
//!
//! A temp dir plays the operator's HOME (fsgate's `HOME`), with a planted SSH key. Each
//! agent is placed in it as a person would have it: the Python SDK agent run by a
//! virtualenv's python, a Node script beside its node_modules (linked or copied), an
//! npm-installed CLI started as `node_modules/.bin/x` and as `npx x`, a binary in
//! `~/.local/bin` found on PATH, and fast-agent in its own venv. Each must start, reach
//! the workspace only through the gateway, and find the wall everywhere else: the audit
//! log, the home's keys, the planted AWS secret, fsgate's process, the operator's
//! session and terminal, pathname Unix sockets.
//!
//! A missing peer goes through `crate::common::skip_or_fail` (a failure under CI).

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

use super::editor::{Editor, Options, repo};
use super::fast_agent::{STARTUP, call_tool, tool_outcome};

const EPERM: i64 = 1;
const EACCES: i64 = 13;
const ENOENT: i64 = 2;
/// Planted in fsgate's environment: no agent may see it (not in any list).
const AWS_SECRET: &str = "planted-aws-secret-value";
/// Planted too: named by the default policy's `[agent] env`, so agents get it.
const API_KEY: &str = "planted-anthropic-key-value";

/// The operator's home for one test: a temp dir holding a planted SSH key.
struct Home {
    path: PathBuf,
    _dir: TempDir,
}

fn home() -> Home {
    let dir = tempfile::Builder::new()
        .prefix("fsgate-home-")
        .tempdir()
        .expect("tempdir");
    let path = dir.path().canonicalize().expect("canonical home");
    std::fs::create_dir_all(path.join(".ssh")).expect("mkdir .ssh");
    std::fs::write(
        path.join(".ssh/id_rsa"),
        "-----BEGIN OPENSSH PRIVATE KEY-----\nPLANTED\n",
    )
    .expect("plant id_rsa");
    Home { path, _dir: dir }
}

/// One way an agent is installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Install {
    /// tests/peers/acp/agent.py copied to ~/agents/py/, run by .peers/acp/bin/python.
    PythonSdk,
    /// tests/peers/acp/agent.mjs copied to ~/agents/node/ with a node_modules beside it:
    /// a symlink to .peers/node/node_modules, or (`copy`) a real copy.
    NodeScript { copy: bool },
    /// ~/proj/node_modules/fsgate-test-agent, started as node_modules/.bin/fsgate-test-agent.
    NpmBin,
    /// The same package, started as `npx fsgate-test-agent` in ~/proj.
    Npx,
    /// fsgate-test-acp-agent copied to ~/.local/bin and found on PATH.
    Binary,
}

/// An agent placed in the home: its command line, fsgate's cwd and extra environment.
struct Placed {
    cmd: Vec<OsString>,
    cwd: PathBuf,
    env: Vec<(String, OsString)>,
}

fn need(path: &Path) -> Result<(), String> {
    match path.exists() {
        true => Ok(()),
        false => Err(format!(
            "{} is missing: run ./scripts/install-peers.sh",
            path.display()
        )),
    }
}

fn need_node() -> Result<(), String> {
    need(&repo().join(".peers/node/node_modules/@agentclientprotocol/sdk"))?;
    let ok = Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        Ok(())
    } else {
        Err("`node` is not on PATH".into())
    }
}

fn mkdir(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
}

fn copy(from: &Path, to: &Path) {
    std::fs::copy(from, to)
        .unwrap_or_else(|e| panic!("copy {} to {}: {e}", from.display(), to.display()));
}

/// A recursive copy; symlinks are copied as symlinks.
fn copy_dir(from: &Path, to: &Path) {
    mkdir(to);
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("dir entry");
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().expect("file type");
        if kind.is_symlink() {
            let target = std::fs::read_link(&src).expect("read_link");
            std::os::unix::fs::symlink(target, &dst).expect("symlink");
        } else if kind.is_dir() {
            copy_dir(&src, &dst);
        } else {
            copy(&src, &dst);
        }
    }
}

fn chmod_x(path: &Path) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod +x");
}

/// The canonical .peers/node/node_modules (.peers may be a link to another checkout).
fn peers_node_modules() -> PathBuf {
    repo()
        .join(".peers/node/node_modules")
        .canonicalize()
        .expect("canonical .peers/node/node_modules")
}

fn place_python(home: &Path) -> Result<Placed, String> {
    let python = repo().join(".peers/acp/bin/python");
    need(&python)?;
    let dir = home.join("agents/py");
    mkdir(&dir);
    copy(
        &repo().join("tests/peers/acp/agent.py"),
        &dir.join("agent.py"),
    );
    Ok(Placed {
        cmd: vec![python.into(), dir.join("agent.py").into()],
        cwd: home.to_path_buf(),
        env: Vec::new(),
    })
}

fn place_node_script(home: &Path, copy_modules: bool) -> Result<Placed, String> {
    need_node()?;
    let dir = home.join("agents/node");
    mkdir(&dir);
    copy(
        &repo().join("tests/peers/acp/agent.mjs"),
        &dir.join("agent.mjs"),
    );
    if copy_modules {
        copy_dir(&peers_node_modules(), &dir.join("node_modules"));
    } else {
        std::os::unix::fs::symlink(peers_node_modules(), dir.join("node_modules"))
            .expect("link node_modules");
    }
    Ok(Placed {
        cmd: vec!["node".into(), dir.join("agent.mjs").into()],
        cwd: home.to_path_buf(),
        env: Vec::new(),
    })
}

/// ~/proj as `npm install fsgate-test-agent` leaves it: the package and its
/// dependencies as real directories in node_modules, and the `.bin` link.
fn place_npm_package(home: &Path) -> Result<PathBuf, String> {
    need_node()?;
    let proj = home.join("proj");
    let modules = proj.join("node_modules");
    let pkg = modules.join("fsgate-test-agent");
    mkdir(&pkg);
    mkdir(&modules.join(".bin"));
    for dep in ["@agentclientprotocol", "zod"] {
        copy_dir(&peers_node_modules().join(dep), &modules.join(dep));
    }
    let script =
        std::fs::read_to_string(repo().join("tests/peers/acp/agent.mjs")).expect("read agent.mjs");
    std::fs::write(
        pkg.join("agent.mjs"),
        format!("#!/usr/bin/env node\n{script}"),
    )
    .expect("write agent.mjs");
    chmod_x(&pkg.join("agent.mjs"));
    let manifest = json!({"name": "fsgate-test-agent", "version": "0.0.0", "type": "module",
        "bin": {"fsgate-test-agent": "agent.mjs"},
        "dependencies": {"@agentclientprotocol/sdk": "^2.4.0"}});
    std::fs::write(pkg.join("package.json"), manifest.to_string()).expect("package.json");
    let project = json!({"name": "proj", "private": true,
        "dependencies": {"fsgate-test-agent": "0.0.0"}});
    std::fs::write(proj.join("package.json"), project.to_string()).expect("package.json");
    std::os::unix::fs::symlink(
        "../fsgate-test-agent/agent.mjs",
        modules.join(".bin/fsgate-test-agent"),
    )
    .expect("link .bin");
    Ok(proj)
}

fn place_binary(home: &Path) -> Result<Placed, String> {
    let bin = option_env!("CARGO_BIN_EXE_fsgate-test-acp-agent").unwrap_or_default();
    // Cargo names the program even when a build without the feature left it out.
    if bin.is_empty() || !Path::new(bin).exists() {
        return Err("built without `--features test-bins` (scripts/test.sh has it)".into());
    }
    let dir = home.join(".local/bin");
    mkdir(&dir);
    copy(Path::new(bin), &dir.join("fsgate-test-acp-agent"));
    chmod_x(&dir.join("fsgate-test-acp-agent"));
    let mut path = OsString::from(dir.as_os_str());
    if let Some(rest) = std::env::var_os("PATH") {
        path.push(":");
        path.push(rest);
    }
    Ok(Placed {
        cmd: vec!["fsgate-test-acp-agent".into()],
        cwd: home.to_path_buf(),
        env: vec![("PATH".into(), path)],
    })
}

fn place(install: Install, home: &Path) -> Result<Placed, String> {
    match install {
        Install::PythonSdk => place_python(home),
        Install::NodeScript { copy } => place_node_script(home, copy),
        Install::NpmBin => Ok(Placed {
            cmd: vec!["node_modules/.bin/fsgate-test-agent".into()],
            cwd: place_npm_package(home)?,
            env: Vec::new(),
        }),
        Install::Npx => Ok(Placed {
            cmd: vec!["npx".into(), "fsgate-test-agent".into()],
            cwd: place_npm_package(home)?,
            env: Vec::new(),
        }),
        Install::Binary => place_binary(home),
    }
}

/// fsgate's environment for these tests: the home, the two planted variables, and no
/// FSGATE_ACP_SDK (the agents find their SDK as installed).
fn options(home: &Path, cwd: PathBuf, mut env: Vec<(String, OsString)>) -> Options {
    env.push(("HOME".into(), home.into()));
    env.push(("AWS_SECRET_ACCESS_KEY".into(), AWS_SECRET.into()));
    env.push(("ANTHROPIC_API_KEY".into(), API_KEY.into()));
    Options {
        confine: true,
        env,
        env_remove: vec!["FSGATE_ACP_SDK".into()],
        cwd: Some(cwd),
        ..Default::default()
    }
}

/// Starts fsgate confining the agent installed as `install`, or None if its peer is
/// missing (a failure under CI).
fn launch(install: Install, test: &str) -> Option<(Editor, Home)> {
    let home = home();
    let placed = match place(install, &home.path) {
        Ok(p) => p,
        Err(reason) => {
            crate::common::skip_or_fail(test, &format!("{install:?} unavailable: {reason}"));
            return None;
        }
    };
    let ed = Editor::launch(&placed.cmd, options(&home.path, placed.cwd, placed.env));
    Some((ed, home))
}

/// The `ok` of a report, failing with the reports and fsgate's stderr otherwise.
fn outcome<'a>(ed: &Editor, what: &str, reports: &'a [Value], i: usize) -> &'a Value {
    match reports.get(i).and_then(|r| r.get("ok")) {
        Some(v) => v,
        None => panic!(
            "{what}: expected report {i} to succeed\nreports: {reports:#?}\nfsgate stderr:\n{}",
            ed.stderr()
        ),
    }
}

/// Whether an OS outcome failed with `errno` (Node also gives the code's name).
fn failed_with(v: &Value, key: &str, errno: i64, code: &str) -> bool {
    v[key] == false && (v["errno"] == errno || v["code"] == code)
}

/// The parent pid of `pid`, from /proc (field 4 of /proc/PID/stat).
fn parent_of(pid: i64) -> Option<i64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    after.split(' ').nth(1)?.parse().ok()
}

/// The session id of `pid`.
fn session_of(pid: u32) -> i64 {
    let pid = libc::pid_t::try_from(pid).expect("pid fits pid_t");
    // SAFETY: getsid only reads the process table; no memory is passed.
    i64::from(unsafe { libc::getsid(pid) })
}

/// The commands every confined agent runs, in the order `assert_walled` checks them.
fn wall_commands(ed: &Editor, home: &Path, socket: &Path) -> Vec<String> {
    let a = ed.root.join("a.txt").display().to_string();
    vec![
        format!("open {a}"),
        format!("read {a}"),
        format!("open {}", ed.state.join("audit.jsonl").display()),
        format!("open {}", home.join(".ssh/id_rsa").display()),
        "env AWS_SECRET_ACCESS_KEY".into(),
        "env ANTHROPIC_API_KEY".into(),
        format!("signal {}", ed.pid()),
        "ppid".into(),
        "tty".into(),
        format!("unix {}", socket.display()),
        "tiocsti".into(),
    ]
}

/// Runs the wall commands in a session, with a listening Unix socket (the operator's,
/// say an SSH agent's) to try; returns the commands and their reports.
fn run_wall_commands(ed: &mut Editor, home: &Path) -> (Vec<String>, Vec<Value>) {
    let sock_dir = tempfile::Builder::new()
        .prefix("fsgate-sock-")
        .tempdir()
        .expect("tempdir");
    let socket = sock_dir.path().join("operator.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind socket");
    std::fs::write(ed.root.join("a.txt"), "inside\n").expect("seed");
    let sid = ed.open_session();
    let cmds = wall_commands(ed, home, &socket);
    let reports = ed.prompt(&sid, &cmds.join("\n"));
    (cmds, reports)
}

/// Runs the wall commands and checks every outcome. `leader_is_agent`: the process
/// that runs the commands is the one fsgate started (not under npx).
fn assert_walled(ed: &mut Editor, home: &Path, what: &str, leader_is_agent: bool) {
    let (cmds, reports) = run_wall_commands(ed, home);
    let get = |i: usize| outcome(ed, what, &reports, i);
    let fail = |i: usize, expected: &str| -> String {
        format!(
            "{what}: `{}` expected {expected}, got {}\nall reports: {reports:#?}\nfsgate stderr:\n{}",
            cmds[i],
            reports.get(i).map(Value::to_string).unwrap_or_default(),
            ed.stderr()
        )
    };
    assert_eq!(
        reports.len(),
        cmds.len(),
        "{}",
        fail(0, "one report per command")
    );
    // The workspace, through fsgate's view (docs/run.md): the file opens, recorded.
    assert_eq!(
        get(0)["opened"],
        true,
        "{}",
        fail(0, "the file through the view")
    );
    // The audit log's directory is covered in the agent's namespace: ENOENT there.
    assert!(
        failed_with(get(2), "opened", ENOENT, "ENOENT")
            || failed_with(get(2), "opened", EACCES, "EACCES"),
        "{}",
        fail(2, "no audit log")
    );
    assert!(
        failed_with(get(3), "opened", EACCES, "EACCES"),
        "{}",
        fail(3, "EACCES opening the home SSH key")
    );
    assert_eq!(
        get(1)["content"],
        "inside\n",
        "{}",
        fail(1, "the content through the gateway")
    );
    assert_eq!(
        get(4)["set"],
        false,
        "{}",
        fail(4, "AWS_SECRET_ACCESS_KEY not set")
    );
    assert_eq!(get(5)["set"], true, "{}", fail(5, "ANTHROPIC_API_KEY set"));
    assert!(
        failed_with(get(6), "ok", EPERM, "EPERM"),
        "{}",
        fail(6, "EPERM signalling fsgate")
    );
    assert_session(
        ed,
        get(7),
        leader_is_agent,
        &fail(7, "a session of the agent's own"),
    );
    assert_eq!(get(8)["opened"], false, "{}", fail(8, "no /dev/tty"));
    assert!(
        failed_with(get(9), "connected", EACCES, "EACCES"),
        "{}",
        fail(9, "EACCES connecting to a Unix socket")
    );
    for fd in ["0", "1", "2", "tty"] {
        assert_eq!(
            get(10)[fd]["ok"],
            false,
            "{}",
            fail(10, &format!("TIOCSTI refused on {fd}"))
        );
    }
}

/// The agent's session is not fsgate's, and its leader is the process fsgate started:
/// the view's child (docs/run.md), whose child the agent is.
fn assert_session(ed: &Editor, ids: &Value, leader_is_agent: bool, msg: &str) {
    let sid = ids["sid"].as_i64().unwrap_or_else(|| panic!("{msg}"));
    assert_ne!(sid, session_of(ed.pid()), "{msg}");
    assert_eq!(parent_of(sid), Some(i64::from(ed.pid())), "{msg}");
    if leader_is_agent {
        assert_eq!(ids["ppid"].as_i64(), Some(sid), "{msg}");
    }
}

fn installed_agent_is_walled(install: Install, test: &str) {
    let Some((mut ed, home)) = launch(install, test) else {
        return;
    };
    let leader_is_agent = install != Install::Npx;
    assert_walled(
        &mut ed,
        &home.path,
        &format!("{install:?}"),
        leader_is_agent,
    );
}

#[test]
fn confined_python_sdk_agent_run_by_a_venv_python() {
    installed_agent_is_walled(
        Install::PythonSdk,
        "confined_python_sdk_agent_run_by_a_venv_python",
    );
}

#[test]
fn confined_node_script_beside_linked_node_modules() {
    installed_agent_is_walled(
        Install::NodeScript { copy: false },
        "confined_node_script_beside_linked_node_modules",
    );
}

#[test]
fn confined_node_script_beside_copied_node_modules() {
    installed_agent_is_walled(
        Install::NodeScript { copy: true },
        "confined_node_script_beside_copied_node_modules",
    );
}

#[test]
fn confined_npm_cli_started_by_its_bin_link() {
    installed_agent_is_walled(Install::NpmBin, "confined_npm_cli_started_by_its_bin_link");
}

#[test]
fn confined_npm_cli_started_by_npx() {
    installed_agent_is_walled(Install::Npx, "confined_npm_cli_started_by_npx");
}

#[test]
fn confined_binary_agent_in_local_bin_on_path() {
    installed_agent_is_walled(
        Install::Binary,
        "confined_binary_agent_in_local_bin_on_path",
    );
}

#[test]
fn confined_fast_agent_in_its_venv_serves_a_read() {
    let test = "confined_fast_agent_in_its_venv_serves_a_read";
    let bin = repo().join(".peers/fast-agent/bin/fast-agent-acp");
    if let Err(reason) = need(&bin) {
        crate::common::skip_or_fail(test, &format!("fast-agent unavailable: {reason}"));
        return;
    }
    let home = home();
    // `~` expands against the agent's own HOME (its private scratch dir): fast-agent
    // keeps its state there instead of in the cwd, which it cannot write.
    let args = [
        "--model",
        "passthrough",
        "--no-permissions",
        "--home",
        "~/.fast-agent",
    ];
    let cmd: Vec<OsString> = std::iter::once(bin.into_os_string())
        .chain(args.map(OsString::from))
        .collect();
    let mut ed = Editor::launch(&cmd, options(&home.path, home.path.clone(), Vec::new()));
    std::fs::write(ed.root.join("f.txt"), "served by the gateway\n").expect("seed");
    let id = ed.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}}}),
    );
    let init = ed.response_within(&id, STARTUP);
    assert!(
        init.get("result").is_some(),
        "confined fast-agent did not initialize: {init}\nfsgate stderr:\n{}",
        ed.stderr()
    );
    let root = ed.root.clone();
    let sid = ed.new_session_in(&root);
    let path = root.join("f.txt");
    let (stop, ups) = call_tool(&mut ed, &sid, "read_text_file", json!({ "path": path }));
    assert_eq!(
        (stop.as_str(), tool_outcome(&ups)),
        (
            "end_turn",
            ("completed".into(), "served by the gateway\n".into())
        ),
        "confined fast-agent's gateway read\nupdates: {ups:#?}\nfsgate stderr:\n{}",
        ed.stderr()
    );
}

/// A finished `fsgate` run: exit status, stdout, stderr.
struct Run {
    success: bool,
    stdout: String,
    stderr: String,
}

/// Runs fsgate with `args` and `stdin_text`, killed after 60 s (the start of a
/// confined agent is what is under test, not the time it takes).
fn run_fsgate(args: &[OsString], opts: &Options, stdin_text: &str) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fsgate"));
    cmd.args(args);
    opts.apply(&mut cmd);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn fsgate");
    let out = child.stdout.take().map(drain);
    let err = child.stderr.take().map(drain);
    if let Some(mut stdin) = child.stdin.take() {
        // fsgate may have exited already: a refused start is what some tests expect.
        let _ = std::io::Write::write_all(&mut stdin, stdin_text.as_bytes());
    }
    let status = wait_or_kill(&mut child, Duration::from_secs(60));
    let joined = |h: Option<std::thread::JoinHandle<String>>| {
        h.and_then(|h| h.join().ok()).unwrap_or_default()
    };
    let run = Run {
        success: status.is_some_and(|s| s.success()),
        stdout: joined(out),
        stderr: joined(err),
    };
    assert!(
        status.is_some(),
        "fsgate did not exit within 60 s\nstderr:\n{}",
        run.stderr
    );
    run
}

/// Reads a pipe to its end on a thread of its own.
fn drain(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = r.read_to_string(&mut s);
        s
    })
}

/// Waits up to `limit` for `child`; kills it and returns None past that.
fn wait_or_kill(
    child: &mut std::process::Child,
    limit: Duration,
) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `fsgate acp` arguments with a fresh workspace and state dir.
fn acp_args(ws: &Path, state: &Path, extra: &[&str], agent: &[OsString]) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec!["acp".into(), "--workspace".into(), ws.into()];
    args.push("--audit-log".into());
    args.push(state.join("audit.jsonl").into());
    args.push("--backup-dir".into());
    args.push(state.join("backups").into());
    args.extend(extra.iter().map(OsString::from));
    args.push("--".into());
    args.extend(agent.iter().cloned());
    args
}

/// A shell-script agent in ~/agents/sh that leaves a marker file when it starts.
fn marker_agent(home: &Path) -> (PathBuf, PathBuf) {
    let dir = home.join("agents/sh");
    mkdir(&dir);
    let script = dir.join("start.sh");
    std::fs::write(&script, "#!/bin/sh\n: > \"$0.started\"\n").expect("write script");
    chmod_x(&script);
    (script.clone(), dir.join("start.sh.started"))
}

#[test]
fn check_sandbox_prints_the_agents_ruleset_and_starts_nothing() {
    let home = home();
    let (script, marker) = marker_agent(&home.path);
    // The marker works: run unconfined (by sh, so no exec of a just-written file can
    // meet ETXTBSY), the script leaves it.
    let ran = Command::new("/bin/sh")
        .arg(&script)
        .status()
        .expect("run the script");
    assert!(
        ran.success() && marker.exists(),
        "the marker agent does not work"
    );
    std::fs::remove_file(&marker).expect("remove marker");
    let (_ws_dir, ws) = crate::common::canonical_tempdir("fsgate-ws-");
    let (_state_dir, state) = crate::common::canonical_tempdir("fsgate-state-");
    let args = acp_args(
        &ws,
        &state,
        &["--confine-agent", "--check-sandbox"],
        &[script.into()],
    );
    let opts = options(&home.path, home.path.clone(), Vec::new());
    let run = run_fsgate(&args, &opts, "");
    let ctx = format!("stdout:\n{}\nfsgate stderr:\n{}", run.stdout, run.stderr);
    assert!(run.success, "--check-sandbox must exit 0\n{ctx}");
    assert!(!marker.exists(), "--check-sandbox started the agent\n{ctx}");
    let dir = home.path.join("agents/sh");
    assert_ruleset(&run.stdout, &dir, &ws, &ctx);
    let all = format!("{}\n{}", run.stdout, run.stderr);
    for value in [API_KEY, AWS_SECRET] {
        assert!(
            !all.contains(value),
            "--check-sandbox printed an environment value\n{ctx}"
        );
    }
}

/// The ruleset `--check-sandbox` prints: each grant with its access and source, what is
/// never reachable, the environment's names, TCP, Unix sockets, and the kernel.
fn assert_ruleset(out: &str, agent_dir: &Path, ws: &Path, ctx: &str) {
    let line = |what: &str, pred: &dyn Fn(&str) -> bool| -> String {
        let found = out.lines().map(str::trim).find(|l| pred(l));
        found
            .unwrap_or_else(|| panic!("no line for {what} in the ruleset\n{ctx}"))
            .to_string()
    };
    let dir = format!("{} ", agent_dir.display());
    line("the agent's directory, read+exec with its source", &|l| {
        l.starts_with(&dir) && l.contains("read+exec (")
    });
    line("/usr, read+exec (built-in ...)", &|l| {
        l.starts_with("/usr ") && l.contains("read+exec (built-in")
    });
    let ws = ws.display().to_string();
    line("the workspace, never reachable", &|l| {
        l.contains(&ws) && l.contains("workspace")
    });
    let env = line("the environment's names", &|l| {
        l.starts_with("environment:")
    });
    for name in ["PATH", "HOME", "ANTHROPIC_API_KEY"] {
        assert!(env.contains(name), "{name} missing from {env:?}\n{ctx}");
    }
    assert!(
        !env.contains("AWS_SECRET_ACCESS_KEY"),
        "{env:?} passes the AWS secret\n{ctx}"
    );
    line("TCP", &|l| l.starts_with("TCP:"));
    line("pathname Unix sockets", &|l| l.contains("Unix sockets"));
    line("what the kernel enforces", &|l| {
        l.contains("kernel") && l.contains("ABI")
    });
}

/// The built-in default policy with `edit` applied to its `[agent]` table.
fn default_policy_with(edit: impl FnOnce(&mut toml::Table)) -> String {
    let text = std::fs::read_to_string(repo().join("policies/default.toml")).expect("default.toml");
    let mut doc: toml::Table = text.parse().expect("default.toml parses");
    let agent = doc
        .entry("agent")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    edit(agent.as_table_mut().expect("[agent] is a table"));
    toml::to_string(&doc).expect("serialise policy")
}

#[test]
fn without_discovery_a_node_agent_is_refused_naming_path_and_key() {
    let test = "without_discovery_a_node_agent_is_refused_naming_path_and_key";
    let home = home();
    let placed = match place_node_script(&home.path, false) {
        Ok(p) => p,
        Err(reason) => return crate::common::skip_or_fail(test, &reason),
    };
    let (_ws_dir, ws) = crate::common::canonical_tempdir("fsgate-ws-");
    let (_state_dir, state) = crate::common::canonical_tempdir("fsgate-state-");
    let policy = state.join("policy.toml");
    let text = default_policy_with(|agent| {
        agent.insert("discover".into(), toml::Value::Boolean(false));
    });
    std::fs::write(&policy, text).expect("write policy");
    let policy_arg = policy.display().to_string();
    let extra = ["--confine-agent", "--policy", &policy_arg];
    let args = acp_args(&ws, &state, &extra, &placed.cmd);
    let opts = options(&home.path, placed.cwd, placed.env);
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}}});
    let run = run_fsgate(&args, &opts, &format!("{init}\n"));
    let ctx = format!("stdout:\n{}\nfsgate stderr:\n{}", run.stdout, run.stderr);
    assert!(
        !run.success,
        "the agent must not start without discovery\n{ctx}"
    );
    assert!(
        !run.stdout.contains("\"result\""),
        "the agent answered\n{ctx}"
    );
    // fsgate's own lines, not the agent's relayed stderr (Node names the path too).
    let own: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| !l.starts_with("agent:"))
        .collect();
    let dir = home.path.join("agents/node").display().to_string();
    let named = own.iter().any(|l| l.contains(&dir));
    assert!(named, "fsgate must name the denied path under {dir}\n{ctx}");
    let keys = ["[agent] execute", "[agent] read"];
    let key = own.iter().any(|l| keys.iter().any(|k| l.contains(k)));
    assert!(
        key,
        "fsgate must name the policy key that would allow it\n{ctx}"
    );
}

#[test]
fn confined_agent_tcp_follows_the_policys_ports() {
    let test = "confined_agent_tcp_follows_the_policys_ports";
    let home = home();
    let placed = match place_binary(&home.path) {
        Ok(p) => p,
        Err(reason) => return crate::common::skip_or_fail(test, &reason),
    };
    let allowed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let other = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = |l: &std::net::TcpListener| l.local_addr().expect("local addr").port();
    let (open_port, closed_port) = (port(&allowed), port(&other));
    let mut opts = options(&home.path, placed.cwd, placed.env);
    opts.policy_text = Some(default_policy_with(|agent| {
        let ports = vec![toml::Value::Integer(i64::from(open_port))];
        agent.insert("network".into(), toml::Value::Array(ports));
    }));
    let mut ed = Editor::launch(&placed.cmd, opts);
    let sid = ed.open_session();
    let cmds = [
        format!("tcp 127.0.0.1 {open_port}"),
        format!("tcp 127.0.0.1 {closed_port}"),
    ];
    let reports = ed.prompt(&sid, &cmds.join("\n"));
    let what = "[agent] network = [one port]";
    assert_eq!(
        outcome(&ed, what, &reports, 0)["connected"],
        true,
        "the listed port must connect\nreports: {reports:#?}\nfsgate stderr:\n{}",
        ed.stderr()
    );
    assert!(
        failed_with(
            outcome(&ed, what, &reports, 1),
            "connected",
            EACCES,
            "EACCES"
        ),
        "another port must fail with EACCES\nreports: {reports:#?}\nfsgate stderr:\n{}",
        ed.stderr()
    );
}
