//! Kernel-wall tests: this test binary re-executes itself as a child that applies a plan
//! and then checks, with plain `std::fs` and `std::net`, what the kernel still allows.
//!
//! The restriction happens in a child because tests run on many threads and Landlock
//! cannot be undone. On a kernel without Landlock each test prints `SKIPPED: ...` on
//! stderr (past the harness's capture) instead of passing silently.

use fsgate_workspace::Replace;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;

use cap_std::ambient_authority;
use cap_std::fs::Dir;

use super::{
    AgentAccess, AgentPlan, DEFAULT_AGENT_DEVICES, DEFAULT_AGENT_SYSTEM_PATHS, Enforcement,
    Protected, SandboxPlan, confine_agent_command, kernel_abi, restrict_self,
};
use fsgate_backup::{BackupSettings, BackupStore, restore};

const SCENARIO_ENV: &str = "FSGATE_LANDLOCK_SCENARIO";
const ROOT_ENV: &str = "FSGATE_LANDLOCK_ROOT";
const PORT_ENV: &str = "FSGATE_LANDLOCK_PORT";
const DONE: &str = "CHILD-DONE";

/// True (after saying so on stderr) when the kernel has no Landlock; under CI (`CI`
/// set, not false/0) or `FSGATE_REQUIRE_PEERS`, where these tests must prove something,
/// a failure instead (the rule of tests/common's `skip_or_fail`).
pub(super) fn skipped(test: &str) -> bool {
    if kernel_abi().is_some() {
        return false;
    }
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    if ci || std::env::var_os("FSGATE_REQUIRE_PEERS").is_some() {
        panic!("{test}: this kernel has no Landlock (required under CI / FSGATE_REQUIRE_PEERS)");
    }
    // Written to the real stderr, not through the harness's captured `eprintln!`.
    let _ = writeln!(
        io::stderr(),
        "SKIPPED: no Landlock in this kernel; {test} proved nothing"
    );
    true
}

/// A workspace, an audit dir, a policy file and things that must stay out of reach.
fn fixture() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    for d in ["ws/sub1", "ws/sub2", "outside", "audit", "backups"] {
        std::fs::create_dir_all(root.join(d)).expect("mkdir");
    }
    std::fs::write(root.join("ws/a.txt"), "inside").expect("write");
    std::fs::write(root.join("ws/sub1/moved.txt"), "m").expect("write");
    std::fs::write(root.join("outside/secret.txt"), "secret").expect("write");
    std::fs::write(root.join("policy.toml"), "version = 1\n").expect("write");
    std::fs::write(root.join("sibling.toml"), "not granted\n").expect("write");
    tmp
}

/// Runs scenario `name` in a child process and checks it finished.
fn run_child(name: &str, root: &Path, port: Option<u16>) {
    run_child_at(name, root, port, None);
}

/// Env var carrying the ABI a simulated kernel reports, checked by the child.
const EXPECT_ABI_ENV: &str = "FSGATE_LANDLOCK_EXPECT_ABI";

/// [`run_child`]; with `simulate_abi`, under `strace` fault injection that makes the
/// kernel's ABI-version query answer that ABI (the ruleset is then really built and
/// enforced with that ABI's rights on this kernel).
fn run_child_at(name: &str, root: &Path, port: Option<u16>, simulate_abi: Option<u8>) {
    let test_path = module_path!()
        .split_once("::")
        .map_or(module_path!(), |(_, rest)| rest);
    let exe = std::env::current_exe().expect("current exe");
    let test_args = [
        format!("{test_path}::landlock_child"),
        "--exact".into(),
        "--ignored".into(),
        "--nocapture".into(),
        "--test-threads=1".into(),
    ];
    let mut cmd = match simulate_abi {
        None => Command::new(exe),
        Some(abi) => {
            // restrict_self asks the ABI version twice (probe, then Ruleset::default)
            // before the real landlock_create_ruleset call.
            let mut c = Command::new("strace");
            c.args(["-f", "-qq", "-o", "/dev/null", "-e"])
                .arg(format!(
                    "inject=landlock_create_ruleset:retval={abi}:when=1..2"
                ))
                .arg(exe)
                .env(EXPECT_ABI_ENV, abi.to_string());
            c
        }
    };
    let name_tag = match simulate_abi {
        Some(abi) => format!("{name}@ABI{abi}"),
        None => name.to_owned(),
    };
    cmd.args(&test_args)
        .env(SCENARIO_ENV, name)
        .env(ROOT_ENV, root);
    if let Some(p) = port {
        cmd.env(PORT_ENV, p.to_string());
    }
    let name = name_tag.as_str();
    let out = cmd.output().expect("run child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let scenario = name.split('@').next().unwrap_or(name);
    assert!(
        out.status.success() && stdout.contains(&format!("{DONE} {scenario}")),
        "child scenario {name} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    // Show what the kernel enforced and refused in the parent's (captured) output.
    // libtest prints "test name ... " without a newline first, hence `find`.
    for line in stdout.lines() {
        for tag in ["STATUS", "NOTE", "denied"] {
            if let Some(i) = line.find(tag) {
                println!("[{name}] {}", &line[i..]);
                break;
            }
        }
    }
}

#[test]
fn kernel_refuses_outside_files_and_allows_the_plan() {
    if skipped("kernel_refuses_outside_files_and_allows_the_plan") {
        return;
    }
    let tmp = fixture();
    run_child("read-write", tmp.path(), None);
}

#[test]
fn read_only_policy_makes_the_kernel_refuse_writes() {
    if skipped("read_only_policy_makes_the_kernel_refuse_writes") {
        return;
    }
    let tmp = fixture();
    run_child("read-only", tmp.path(), None);
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("ws/a.txt")).expect("read"),
        "inside"
    );
}

#[test]
fn tcp_is_limited_to_the_listen_port_and_the_collectors_port() {
    if skipped("tcp_is_limited_to_the_listen_port_and_the_collectors_port") {
        return;
    }
    let tmp = fixture();
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    run_child("network", tmp.path(), Some(port));
}

#[test]
fn confined_agent_sees_only_system_paths_and_scratch() {
    if skipped("confined_agent_sees_only_system_paths_and_scratch") {
        return;
    }
    let tmp = fixture();
    let root = tmp.path();
    let scratch = root.join("scratch");
    std::fs::create_dir(&scratch).expect("mkdir");
    std::fs::write(scratch.join("s.txt"), "scratch file").expect("write");
    let mut plan = AgentPlan {
        protected: ["ws", "audit"]
            .map(|d| Protected {
                path: root.join(d),
                label: d.into(),
            })
            .to_vec(),
        env: vec![("TMPDIR".into(), scratch.clone().into_os_string())],
        ..Default::default()
    };
    for p in DEFAULT_AGENT_SYSTEM_PATHS {
        plan.grant(p, AgentAccess::ReadExec, "built-in system paths");
    }
    for p in DEFAULT_AGENT_DEVICES {
        plan.grant(p, AgentAccess::ReadWrite, "built-in devices");
    }
    plan.grant(&scratch, AgentAccess::ReadWrite, "scratch");
    let sh = |script: &str, args: &[&Path]| {
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c").arg(script).arg("sh").args(args);
        let status = confine_agent_command(&mut cmd, &plan).expect("confine");
        assert_ne!(status.enforcement, Enforcement::Not, "{status}");
        cmd.output().expect("spawn sh")
    };
    let ok = sh(
        "cat \"$1\" && echo hi > \"$2\" && echo \"$TMPDIR\"",
        &[&scratch.join("s.txt"), &scratch.join("new.txt")],
    );
    let text = String::from_utf8_lossy(&ok.stdout);
    assert!(ok.status.success(), "{ok:?}");
    assert!(
        text.contains("scratch file") && text.contains(&scratch.display().to_string()),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(scratch.join("new.txt")).expect("read"),
        "hi\n"
    );
    for forbidden in [root.join("ws/a.txt"), root.join("outside/secret.txt")] {
        let out = sh("cat \"$1\"", &[&forbidden]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("Permission denied"),
            "{}: {out:?}",
            forbidden.display()
        );
    }
    let out = sh("echo x > \"$1\"", &[&root.join("ws/new.txt")]);
    assert!(!out.status.success(), "{out:?}");
    assert!(!root.join("ws/new.txt").exists());
}

/// The agent's scratch directory alone takes links and fifos and runs programs: a
/// read-write grant of the policy's does not (what is left there outlives the run).
#[test]
fn only_the_scratch_dir_takes_links_fifos_and_programs() {
    if skipped("only_the_scratch_dir_takes_links_fifos_and_programs") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let (scratch, kept) = (tmp.path().join("scratch"), tmp.path().join("kept"));
    let bare = tmp.path().join("bare");
    for d in [&scratch, &kept, &bare] {
        std::fs::create_dir(d).expect("mkdir");
    }
    let mut plan = AgentPlan::default();
    for p in DEFAULT_AGENT_SYSTEM_PATHS {
        plan.grant(p, AgentAccess::ReadExec, "built-in system paths");
    }
    for p in DEFAULT_AGENT_DEVICES {
        plan.grant(p, AgentAccess::ReadWrite, "built-in devices");
    }
    plan.grant(&scratch, AgentAccess::Scratch { links: true }, "scratch");
    plan.grant(&bare, AgentAccess::Scratch { links: false }, "scratch");
    plan.grant(&kept, AgentAccess::ReadWrite, "[agent] read_write");
    let tried = |dir: &Path| {
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(
                "ln -s x \"$1/l\" 2>/dev/null; echo l=$?; mkfifo \"$1/q\" 2>/dev/null; echo q=$?; \
                 cp /bin/true \"$1/t\" && \"$1/t\" 2>/dev/null; echo t=$?",
            )
            .arg("sh")
            .arg(dir);
        let status = confine_agent_command(&mut cmd, &plan).expect("confine");
        assert_ne!(status.enforcement, Enforcement::Not, "{status}");
        String::from_utf8_lossy(&cmd.output().expect("spawn sh").stdout).into_owned()
    };
    assert_eq!(tried(&scratch), "l=0\nq=0\nt=0\n");
    assert_eq!(tried(&kept), "l=1\nq=1\nt=126\n");
    assert!(std::fs::symlink_metadata(kept.join("l")).is_err());
    // Without links (a read-write grant shares its filesystem): programs only.
    assert_eq!(tried(&bare), "l=1\nq=1\nt=0\n");
}

/// Java's configuration: the files beneath `java*` directories in either layout, never
/// under `management`, never through a link, nor another name that starts with "java".
#[test]
fn java_configuration_is_its_files_without_management_or_links() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let etc = tmp.path();
    let put = |rel: &str| {
        let p = etc.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, "x").expect("write");
    };
    put("java-17-openjdk/security/java.security");
    put("java-17-openjdk/management/jmxremote.password");
    put("java/java-17-openjdk/java-17-openjdk-17.0.9/conf/logging.properties");
    put("java/java-17-openjdk/java-17-openjdk-17.0.9/conf/management/jmxremote.password");
    put("javascript-common/javascript-common.conf");
    put("outside/secret");
    std::os::unix::fs::symlink(etc.join("outside"), etc.join("java-17-openjdk/linked"))
        .expect("symlink");
    let found: Vec<String> = crate::plan::java_config_under(etc)
        .iter()
        .map(|p| p.strip_prefix(etc).expect("beneath").display().to_string())
        .collect();
    assert_eq!(
        found,
        [
            "java/java-17-openjdk/java-17-openjdk-17.0.9/conf/logging.properties",
            "java-17-openjdk/security/java.security",
        ]
    );
}

/// Which read-write directories share the scratch dir's filesystem: another
/// filesystem's, a read-only grant's and a file's do not count.
#[test]
fn a_read_write_directory_on_the_scratch_filesystem_is_found() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (scratch, beside) = (tmp.path().join("scratch"), tmp.path().join("beside"));
    for d in [&scratch, &beside] {
        std::fs::create_dir(d).expect("mkdir");
    }
    std::fs::write(tmp.path().join("file"), "f").expect("write");
    let mut plan = AgentPlan::default();
    plan.grant("/proc", AgentAccess::ReadWrite, "another filesystem");
    plan.grant(&beside, AgentAccess::Read, "read only");
    plan.grant(tmp.path().join("file"), AgentAccess::ReadWrite, "a file");
    assert!(plan.shares_filesystem_with(&scratch).is_none());
    plan.grant(&beside, AgentAccess::ReadWrite, "[agent] read_write");
    let found = plan
        .shares_filesystem_with(&scratch)
        .map(|g| g.path.clone());
    assert_eq!(found, Some(beside));
}

/// True (after saying so) when `strace` cannot inject faults here.
fn no_strace(test: &str) -> bool {
    let works = Command::new("strace")
        .args([
            "-qq",
            "-o",
            "/dev/null",
            "-e",
            "inject=landlock_create_ruleset:retval=1:when=1",
            "true",
        ])
        .output()
        .is_ok_and(|o| o.status.success());
    if !works {
        let _ = writeln!(
            io::stderr(),
            "SKIPPED: strace fault injection unavailable; {test} proved nothing"
        );
    }
    !works
}

#[test]
fn older_kernels_still_hold_the_wall_and_say_what_is_missing() {
    let test = "older_kernels_still_hold_the_wall_and_say_what_is_missing";
    if skipped(test) || no_strace(test) {
        return;
    }
    for abi in [1u8, 3, 5] {
        let tmp = fixture();
        run_child_at("read-write", tmp.path(), None, Some(abi));
        let tmp = fixture();
        run_child_at("read-only", tmp.path(), None, Some(abi));
    }
}

#[test]
fn signals_to_outside_processes_follow_scope_signals() {
    if skipped("signals_to_outside_processes_follow_scope_signals") {
        return;
    }
    let tmp = fixture();
    run_child("signals-scoped", tmp.path(), None);
    run_child("signals-allowed", tmp.path(), None);
}

#[test]
fn harden_gateway_makes_the_process_not_dumpable() {
    let tmp = fixture();
    run_child("harden-gateway", tmp.path(), None);
}

#[test]
fn exdev_gets_a_clear_message() {
    let exdev = io::Error::from(rustix::io::Errno::XDEV);
    assert!(super::exdev_hint(&exdev).is_some_and(|m| m.contains("copy and delete")));
    assert_eq!(
        super::exdev_hint(&io::Error::from(io::ErrorKind::NotFound)),
        None
    );
}

// ---- the child side ----

#[test]
#[ignore = "child-process entry of the Landlock tests above; run by them with the scenario in the environment"]
fn landlock_child() {
    let (Ok(scenario), Ok(root)) = (std::env::var(SCENARIO_ENV), std::env::var(ROOT_ENV)) else {
        println!("landlock_child: not started by a Landlock test, nothing to do");
        return;
    };
    let root = PathBuf::from(root);
    match scenario.as_str() {
        "read-write" => read_write(&root),
        "read-only" => read_only(&root),
        "network" => network(&root),
        "signals-scoped" => signals(&root, true),
        "signals-allowed" => signals(&root, false),
        "harden-gateway" => harden_gateway(),
        other => panic!("unknown scenario {other}"),
    }
    println!("{DONE} {scenario}");
}

/// Asserts the kernel refused with EACCES.
#[track_caller]
fn denied<T: std::fmt::Debug>(what: &str, r: io::Result<T>) {
    match r {
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            println!("denied as expected: {what}")
        }
        other => panic!("{what}: expected EACCES from the kernel, got {other:?}"),
    }
}

fn open_dir(p: PathBuf) -> Dir {
    Dir::open_ambient_dir(p, ambient_authority()).expect("open dir")
}

/// Threads in this process; call before restricting (afterwards /proc is out of reach).
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| d.count())
        .expect("read /proc/self/task")
}

fn print_status(status: &super::SandboxStatus, threads: usize) {
    println!("STATUS {status} | {}", status.detail);
    if let Some(abi) = std::env::var(EXPECT_ABI_ENV)
        .ok()
        .and_then(|a| a.parse::<u8>().ok())
    {
        assert_eq!(
            status.abi,
            Some(abi),
            "the simulated ABI was not the one used"
        );
    }
    assert_ne!(status.enforcement, Enforcement::Not, "{status}");
    // In this child the harness's main thread may exist too: below ABI 8 that must be
    // reported, never hidden.
    if status.abi.is_some_and(|a| a >= 6) && (threads <= 1 || status.abi.is_some_and(|a| a >= 8)) {
        assert_eq!(status.enforcement, Enforcement::Fully, "{status}");
    } else {
        assert_eq!(status.enforcement, Enforcement::Partially, "{status}");
    }
}

fn read_write(root: &Path) {
    let ws = open_dir(root.join("ws"));
    let audit = open_dir(root.join("audit"));
    let policy = std::fs::File::open(root.join("policy.toml")).expect("open policy");
    let store = BackupStore::open(
        &root.join("backups"),
        &BackupSettings {
            keep_versions: Some(1),
            ..Default::default()
        },
    )
    .expect("open store");
    let workspace = fsgate_workspace::Workspace::open(&root.join("ws")).expect("workspace");
    let secret = root.join("outside/secret.txt");
    assert_eq!(
        std::fs::read_to_string(&secret).expect("readable before"),
        "secret"
    );

    let plan = SandboxPlan::new(&ws, true)
        .read_write_dir("audit dir", &audit)
        .read_write_dir("backup dir", store.dir())
        .read_only("policy file", &policy);
    let threads = threads();
    let status = restrict_self(&plan).expect("restrict");
    print_status(&status, threads);
    assert!(status.workspace_write);

    // The wall: plain std::fs, no policy engine involved.
    denied(
        "read a file outside the plan that was readable before",
        std::fs::read(&secret),
    );
    denied(
        "list a directory outside",
        std::fs::read_dir(root.join("outside")),
    );
    denied("read /etc/passwd", std::fs::read("/etc/passwd"));
    denied(
        "read a file next to the policy file",
        std::fs::read(root.join("sibling.toml")),
    );
    denied(
        "create a file outside",
        std::fs::write(root.join("outside/new.txt"), "x"),
    );
    denied("execute a program", Command::new("/bin/true").status());

    // What the plan grants still works, by path and by handle.
    assert_eq!(
        std::fs::read_to_string(root.join("ws/a.txt")).expect("read inside"),
        "inside"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("policy.toml")).expect("read policy"),
        "version = 1\n"
    );
    std::fs::write(root.join("audit/log.jsonl"), "{}\n").expect("write audit dir");
    let moved = ws.rename("sub1/moved.txt", &ws, "sub2/moved.txt");
    if status.abi == Some(1) {
        // ABI 1 cannot express Refer: the kernel refuses every reparenting rename.
        let err = moved.expect_err("ABI 1 refuses cross-directory renames");
        let hint = super::exdev_hint(&err).expect("EXDEV");
        println!("NOTE ABI 1 cross-directory rename: {err}; told the agent: {hint}");
        assert!(hint.contains("ABI 1"), "{hint}");
    } else {
        moved.expect("cross-directory rename inside the workspace");
    }
    // Atomic replace the way the workspace does it: a temp file in the same directory,
    // create_new + sync_all + rename.
    let mut tmp = ws
        .open_with(
            ".a.txt.tmp",
            cap_std::fs::OpenOptions::new().write(true).create_new(true),
        )
        .expect("temp file");
    tmp.write_all(b"replaced")
        .and_then(|()| tmp.sync_all())
        .expect("write temp");
    ws.rename(".a.txt.tmp", &ws, "a.txt")
        .expect("atomic replace");
    ws.create_dir_all("new/dir").expect("mkdir");
    ws.remove_dir("new/dir").expect("rmdir");
    // A new file the way the gateway writes one (an O_TMPFILE linked at its name, or the
    // named fallback moved there without replacing), and never over a file that
    // appeared meanwhile.
    let fresh = fsgate_base::path::RelPath::parse_rooted("sub2/fresh.txt").expect("rel");
    let temp = fsgate_workspace::TempName::new().expect("temp name");
    workspace
        .write_atomic(&fresh, b"new", &temp, Replace::Nothing)
        .expect("a new file under Landlock");
    assert_eq!(ws.read_to_string("sub2/fresh.txt").expect("read"), "new");
    assert!(matches!(
        workspace.write_atomic(&fresh, b"again", &temp, Replace::Nothing),
        Err(fsgate_workspace::WsError::Raced)
    ));
    assert_eq!(ws.read_to_string("sub2/fresh.txt").expect("read"), "new");

    // Backups keep working under confinement: save, list, prune, restore.
    let saved = store
        .save("a.txt", &mut ws.open("a.txt").expect("open"))
        .expect("backup under Landlock");
    ws.write("a.txt", "agent edit").expect("overwrite");
    let report = restore(&store, &ws, "a.txt", Some(&saved.ts), &mut |_, _| Ok(()))
        .expect("restore under Landlock");
    assert_eq!(ws.read_to_string("a.txt").expect("read"), "replaced");
    assert!(report.previous.is_some());
    let pruned = store.prune().expect("prune under Landlock");
    assert_eq!(pruned.removed.len(), 1, "keep_versions = 1");
    assert_eq!(store.list(None).expect("list").len(), 1);
}

fn read_only(root: &Path) {
    let ws = open_dir(root.join("ws"));
    let threads = threads();
    let status = restrict_self(&SandboxPlan::new(&ws, false)).expect("restrict");
    print_status(&status, threads);
    assert!(!status.workspace_write);
    let a = root.join("ws/a.txt");
    assert_eq!(std::fs::read_to_string(&a).expect("read"), "inside");
    assert_eq!(
        ws.read_to_string("sub1/moved.txt").expect("read by handle"),
        "m"
    );
    denied("overwrite a workspace file", std::fs::write(&a, "x"));
    denied(
        "append to a workspace file",
        OpenOptions::new().append(true).open(&a),
    );
    denied(
        "create a workspace file",
        std::fs::write(root.join("ws/new.txt"), "x"),
    );
    denied(
        "create a file through the handle",
        ws.write("new2.txt", "x"),
    );
    denied("delete a workspace file", std::fs::remove_file(&a));
    denied("make a directory", std::fs::create_dir(root.join("ws/d")));
    denied(
        "rename inside the workspace",
        std::fs::rename(&a, root.join("ws/b.txt")),
    );
    denied(
        "read outside",
        std::fs::read(root.join("outside/secret.txt")),
    );
    denied("read /proc/self/status", std::fs::read("/proc/self/status"));
}

fn network(root: &Path) {
    let port: u16 = std::env::var(PORT_ENV)
        .ok()
        .and_then(|p| p.parse().ok())
        .expect("port");
    let ws = open_dir(root.join("ws"));
    // An audit collector, listening before the gateway confines itself.
    let collector = TcpListener::bind("127.0.0.1:0").expect("bind the collector");
    let collector_port = collector.local_addr().expect("collector address").port();
    let threads = threads();
    let plan = SandboxPlan::new(&ws, false)
        .listen_port(port)
        .connect_port(collector_port);
    let status = restrict_self(&plan).expect("restrict");
    print_status(&status, threads);
    if status.abi.is_some_and(|a| a < 4) {
        println!(
            "NOTE: ABI {:?} cannot restrict TCP; network checks not run",
            status.abi
        );
        return;
    }
    let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind the listen port");
    denied("bind another port", TcpListener::bind("127.0.0.1:0"));
    denied(
        "connect anywhere, even to our own listener",
        TcpStream::connect(("127.0.0.1", port)),
    );
    TcpStream::connect(("127.0.0.1", collector_port)).expect("connect to the collector's port");
    println!("allowed as planned: connect to the collector's port");
    drop(listener);
}

/// A process started before confinement (like the agent of `fsgate acp`) is outside the
/// sandbox: with signal scoping it cannot be signalled, without it it can.
fn signals(root: &Path, scoped: bool) {
    // Null stdio: a survivor must not hold the parent's pipe open.
    let mut child = Command::new("sleep")
        .arg("5")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn sleep");
    let pid = rustix::process::Pid::from_child(&child);
    let ws = open_dir(root.join("ws"));
    let threads = threads();
    let plan = SandboxPlan::new(&ws, false).scope_signals(scoped);
    let status = restrict_self(&plan).expect("restrict");
    print_status(&status, threads);
    let sent = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    if scoped && status.abi.is_some_and(|a| a >= 6) {
        assert_eq!(
            sent,
            Err(rustix::io::Errno::PERM),
            "signal scoping must refuse"
        );
        println!("denied as expected: SIGKILL to a process outside the sandbox");
        // The harness cannot kill it either now; let it end on its own.
        drop(child);
    } else {
        sent.expect("signal allowed");
        child.wait().expect("reap");
        println!("NOTE signalled a process outside the sandbox (scope_signals = {scoped})");
    }
}

/// Not dumpable: no ptrace, /proc/PID/mem or environ for a process of the same user
/// without CAP_SYS_PTRACE (a confined agent has none).
fn harden_gateway() {
    use rustix::process::{DumpableBehavior, dumpable_behavior};
    assert_eq!(
        dumpable_behavior().expect("get"),
        DumpableBehavior::Dumpable
    );
    super::harden_gateway().expect("harden");
    assert_eq!(
        dumpable_behavior().expect("get"),
        DumpableBehavior::NotDumpable
    );
    println!("NOTE the gateway is no longer dumpable");
}
