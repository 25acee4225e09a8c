//! The agent's process wall: real programs (`/bin/sh`, the system Python, Node, getent)
//! started under [`confine_agent_command`] with a plan built here, each checking from
//! inside what the kernel still lets it do.

use std::net::TcpListener;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use super::tests::skipped;
use super::{
    AgentAccess, AgentNetwork, AgentPlan, DEFAULT_AGENT_DEVICES, DEFAULT_AGENT_SYSTEM_PATHS,
    Enforcement, Protected, SandboxStatus, confine_agent_command, describe_agent_plan,
};

const PYTHON: &str = "/usr/bin/python3";
const EACCES: i64 = 13;
const EPERM: i64 = 1;

/// System paths, devices and a scratch dir (HOME, TMPDIR), a protected workspace.
fn plan(root: &Path) -> AgentPlan {
    let scratch = root.join("scratch");
    std::fs::create_dir_all(&scratch).expect("mkdir scratch");
    std::fs::create_dir_all(root.join("ws")).expect("mkdir ws");
    let mut plan = AgentPlan {
        protected: vec![Protected {
            path: root.join("ws"),
            label: "workspace".into(),
        }],
        env: vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("HOME".into(), scratch.clone().into_os_string()),
            ("TMPDIR".into(), scratch.clone().into_os_string()),
        ],
        ..Default::default()
    };
    for p in DEFAULT_AGENT_SYSTEM_PATHS {
        plan.grant(p, AgentAccess::ReadExec, "built-in system paths");
    }
    for p in DEFAULT_AGENT_DEVICES {
        plan.grant(p, AgentAccess::ReadWrite, "built-in devices");
    }
    plan.grant(&scratch, AgentAccess::ReadWrite, "scratch");
    plan
}

/// Runs `program args` confined by `plan`, stdin null, stdout and stderr captured.
fn run(plan: &AgentPlan, program: &str, args: &[&str]) -> (SandboxStatus, Output) {
    let mut cmd = Command::new(program);
    cmd.args(args).env("FSGATE_PLANTED", "leaked");
    let status = confine_agent_command(&mut cmd, plan).expect("confine");
    assert_ne!(status.enforcement, Enforcement::Not, "{status}");
    let out = cmd.output().expect("spawn");
    (status, out)
}

/// Runs a Python script that prints one JSON object, and returns it.
fn python(plan: &AgentPlan, script: &str, args: &[&str]) -> (SandboxStatus, Value) {
    let mut all = vec!["-c", script];
    all.extend_from_slice(args);
    let (status, out) = run(plan, PYTHON, &all);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let v = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    (status, v)
}

const PROCESS: &str = r#"
import json, os
r = {"sid": os.getsid(0), "pid": os.getpid()}
try:
    open("/dev/tty"); r["tty"] = "opened"
except OSError as e:
    r["tty"] = e.errno
r["fds"] = sorted(int(x) for x in os.listdir("/proc/self/fd"))
st = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
for k in ("CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb", "NoNewPrivs"):
    r[k] = int(st[k].strip(), 16)
r["planted"] = os.environ.get("FSGATE_PLANTED")
try:
    os.kill(os.getppid(), 0); r["kill"] = "sent"
except OSError as e:
    r["kill"] = e.errno
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
# KEYCTL_GET_KEYRING_ID of the session keyring, which fsgate's session shares.
rc = libc.syscall(int(sys.argv[1]), 0, -3, 0)
r["keyctl"] = ctypes.get_errno() if rc < 0 else "allowed"
f = os.path.join(os.environ["HOME"], "setid")
open(f, "w").close()
r["chmod"] = []
for m in (0o4755, 0o2755, 0o646, 0o755):
    try:
        os.chmod(f, m); r["chmod"].append(oct(os.stat(f).st_mode & 0o7777))
    except OSError as e:
        r["chmod"].append(e.errno)
try:
    os.chown(f, os.getuid(), os.getgid()); r["chown"] = "allowed"
except OSError as e:
    r["chown"] = e.errno
print(json.dumps(r))
"#;

#[test]
fn agent_runs_alone_without_terminal_descriptors_or_capabilities() {
    if skipped("agent_runs_alone_without_terminal_descriptors_or_capabilities") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    // Descriptors without close-on-exec, as a parent of fsgate might leave them; the
    // second is above 3, which the child's own listing of /proc/self/fd takes.
    let file = std::fs::File::open("/etc/hostname").expect("open");
    let _low = rustix::io::dup(&file).expect("dup");
    let leaked = rustix::io::dup(&file).expect("dup");
    let leaked_no = std::os::fd::AsRawFd::as_raw_fd(&leaked) as i64;
    assert!(leaked_no > 3);
    let keyctl = libc::SYS_keyctl.to_string();
    let (status, r) = python(&plan(tmp.path()), PROCESS, &[&keyctl]);
    // From /proc, not getsid(2) through rustix: the id is 0 when the session's leader
    // lies outside this PID namespace (a suite run in a container), which rustix's Pid
    // type refuses with a panic.
    let own_sid = own_session_id();
    assert_eq!(r["sid"], r["pid"], "own session: {r}");
    assert_ne!(r["sid"], own_sid, "{r}");
    assert!(r["tty"].is_i64(), "/dev/tty must not open: {r}");
    let fds: Vec<i64> = r["fds"]
        .as_array()
        .expect("fds")
        .iter()
        .filter_map(Value::as_i64)
        .collect();
    assert!(!fds.contains(&leaked_no), "inherited fd {leaked_no}: {r}");
    assert!(fds.iter().all(|&fd| fd <= 3), "{r}");
    assert_eq!(r["planted"], Value::Null, "{r}");
    assert_eq!(r["NoNewPrivs"], 1, "{r}");
    for k in ["CapEff", "CapPrm", "CapInh", "CapAmb"] {
        assert_eq!(r[k], 0, "{k}: {r}");
    }
    if rustix::process::geteuid().is_root() {
        assert!(status.detail.contains("capabilities dropped"), "{status:?}");
        // The bounding set can be emptied only with CAP_SETPCAP; without it the
        // status says it was kept, and no_new_privs keeps exec from granting it.
        let setpcap = rustix::thread::capabilities(None)
            .expect("capget")
            .effective
            .contains(rustix::thread::CapabilitySet::SETPCAP);
        let kept = status.detail.contains("bounding set kept");
        assert_eq!(kept, !setpcap, "{status:?}");
        assert_eq!(r["CapBnd"] == 0, setpcap, "{r}");
    }
    assert!(status.detail.contains("own session, no terminal"));
    if super::child::seccomp_supported() {
        assert_eq!(r["keyctl"], i64::from(libc::ENOSYS), "keyrings: {r}");
        let chmod = serde_json::json!([EPERM, EPERM, EPERM, "0o755"]);
        assert_eq!(
            r["chmod"], chmod,
            "set-uid/set-gid/other-writable chmod: {r}"
        );
        assert_eq!(r["chown"], EPERM, "chown: {r}");
        assert!(
            status.detail.contains("kernel keyrings, chown and set-uid"),
            "{status:?}"
        );
    }
    if status.abi.is_some_and(|a| a >= 6) {
        assert_eq!(r["kill"], EPERM, "signal to the gateway: {r}");
    }
    println!("{status} | {}", status.detail);
}

/// This process's session id (field 6 of /proc/self/stat; 0 if its leader lies outside
/// this PID namespace).
fn own_session_id() -> i64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("read /proc/self/stat");
    let after = &stat[stat.rfind(')').expect("comm ends") + 2..];
    after
        .split(' ')
        .nth(3)
        .and_then(|f| f.parse().ok())
        .expect("session field")
}

#[test]
fn agent_with_a_terminal_on_stdin_is_not_started() {
    if skipped("agent_with_a_terminal_on_stdin_is_not_started") {
        return;
    }
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    let tmp = tempfile::tempdir().expect("tempdir");
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).expect("openpt");
    grantpt(&master)
        .and_then(|()| unlockpt(&master))
        .expect("unlockpt");
    let name = ptsname(&master, Vec::new()).expect("ptsname");
    // O_NOCTTY: the test process must not take the pty as its terminal.
    let slave = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(name.to_str().expect("utf-8 pts name"))
        .expect("open the pts");
    let mut cmd = Command::new("/bin/true");
    cmd.stdin(slave).stdout(Stdio::null()).stderr(Stdio::null());
    confine_agent_command(&mut cmd, &plan(tmp.path())).expect("confine");
    let err = cmd
        .spawn()
        .expect_err("a terminal on stdin must refuse the start");
    assert_eq!(err.raw_os_error(), Some(EPERM as i32), "{err}");
}

const CONNECT: &str = r#"
import json, socket, sys
r = {}
for port in sys.argv[1:]:
    try:
        socket.create_connection(("127.0.0.1", int(port)), timeout=5).close(); r[port] = "ok"
    except OSError as e:
        r[port] = e.errno
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)  # IPPROTO_MPTCP
        s.settimeout(5); s.connect(("127.0.0.1", int(port))); s.close(); r[port + "/mptcp"] = "ok"
    except OSError as e:
        r[port + "/mptcp"] = e.errno
print(json.dumps(r))
"#;

#[test]
fn agent_tcp_follows_the_plan() {
    if skipped("agent_tcp_follows_the_plan") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let a = TcpListener::bind("127.0.0.1:0").expect("bind");
    let b = TcpListener::bind("127.0.0.1:0").expect("bind");
    let (pa, pb) = (
        a.local_addr().expect("addr").port(),
        b.local_addr().expect("addr").port(),
    );
    let (sa, sb) = (pa.to_string(), pb.to_string());
    let mut p = plan(tmp.path());
    let (status, r) = python(&p, CONNECT, &[&sa, &sb]);
    assert!(status.detail.contains("TCP: all"), "{status:?}");
    assert_eq!((&r[&sa], &r[&sb]), (&"ok".into(), &"ok".into()), "{r}");
    if status.abi.is_some_and(|a| a < 4) {
        return;
    }
    p.network = AgentNetwork::None;
    let (status, r) = python(&p, CONNECT, &[&sa]);
    assert!(status.detail.contains("TCP: none"), "{status:?}");
    assert_eq!(r[&sa], EACCES, "{r}");
    let mptcp = format!("{sa}/mptcp");
    assert!(r[&mptcp].is_i64(), "MPTCP passes the TCP rules: {r}");
    p.network = AgentNetwork::Ports(vec![pa]);
    let (status, r) = python(&p, CONNECT, &[&sa, &sb]);
    assert!(
        status
            .detail
            .contains(&format!("TCP: connect to ports {pa} only")),
        "{status:?}"
    );
    assert_eq!((&r[&sa], &r[&sb]), (&"ok".into(), &EACCES.into()), "{r}");
    let mptcp = format!("{sb}/mptcp");
    assert!(r[&mptcp].is_i64(), "MPTCP passes the TCP rules: {r}");
}

const UNIX: &str = r#"
import ctypes, json, platform, socket, sys
r = {}
try:
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.close(); r["connect"] = "ok"
except OSError as e:
    r["connect"] = e.errno
a, b = socket.socketpair(); a.send(b"x"); r["pair"] = b.recv(1).decode()
libc = ctypes.CDLL(None, use_errno=True)
params = ctypes.create_string_buffer(120)
# io_uring_setup (425 everywhere): its IORING_OP_SOCKET would bypass the filter.
r["uring"] = "ok" if libc.syscall(425, 1, params) >= 0 else ctypes.get_errno()
if platform.machine() == "x86_64":
    # x32 socket(AF_UNIX, SOCK_STREAM): EACCES from the filter, or ENOSYS without x32.
    r["x32"] = "ok" if libc.syscall(0x40000000 | 41, 1, 1, 0) >= 0 else ctypes.get_errno()
print(json.dumps(r))
"#;

#[test]
fn agent_reaches_only_listed_unix_sockets() {
    if skipped("agent_reaches_only_listed_unix_sockets") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let sock = tmp.path().join("agent.sock");
    let _listener = UnixListener::bind(&sock).expect("bind");
    let sock_arg = sock.to_str().expect("utf-8");
    let mut p = plan(tmp.path());
    let (status, r) = python(&p, UNIX, &[sock_arg]);
    assert_eq!(r["connect"], EACCES, "by default: {r}");
    assert_eq!(r["pair"], "x", "socketpair stays: {r}");
    assert!(
        status.detail.contains("pathname Unix sockets: none"),
        "{status:?}"
    );
    if status.abi.is_some_and(|a| a < 9) {
        assert_eq!(r["uring"], EPERM, "io_uring refused with the filter: {r}");
        assert!(r["x32"].is_null() || r["x32"].is_i64(), "x32 socket(): {r}");
    }
    p.unix_sockets.push(sock.clone());
    let (status, r) = python(&p, UNIX, &[sock_arg]);
    assert_eq!(r["connect"], "ok", "listed: {r}");
    if status.abi.is_some_and(|a| a < 9) {
        assert_eq!(r["uring"], "ok", "no filter when sockets are listed: {r}");
    }
    if status.abi.is_some_and(|a| a < 9) {
        assert_eq!(status.enforcement, Enforcement::Partially, "{status}");
        assert!(
            status
                .missing
                .iter()
                .any(|m| m.contains("cannot limit which pathname Unix sockets")),
            "{status:?}"
        );
        assert!(status.detail.contains("not per path"), "{status:?}");
    }
}

#[test]
fn common_runtimes_start_confined() {
    if skipped("common_runtimes_start_confined") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let p = plan(tmp.path());
    let ok = |program: &str, args: &[&str], want: &str| {
        let (_, out) = run(&p, program, args);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains(want),
            "{program} {args:?}: {out:?}"
        );
    };
    ok(
        PYTHON,
        &[
            "-c",
            "import asyncio, socket, sys; asyncio.run(asyncio.sleep(0)); \
             print(sys.stdin.isatty(), socket.getaddrinfo('localhost', 80)[0][4][1])",
        ],
        "False 80",
    );
    ok("/usr/bin/getent", &["hosts", "localhost"], "localhost");
    ok("/usr/bin/getent", &["passwd", "root"], "root:");
    // What names the system, as pip's `distro` reads it on every install (it stops on
    // any error but "not found").
    let named: Vec<&str> = ["/etc/os-release", "/etc/debian_version", "/etc/lsb-release"]
        .into_iter()
        .filter(|f| Path::new(f).is_file())
        .collect();
    assert!(!named.is_empty(), "no file names this system");
    let mut cat = vec![
        "-c",
        "import sys\nfor f in sys.argv[1:]: open(f).read()\nprint('read')",
    ];
    cat.extend(&named);
    ok(PYTHON, &cat, "read");
    if Path::new("/usr/bin/node").exists() {
        ok(
            "/usr/bin/node",
            &["-e", "console.log('node', Boolean(process.stdin.isTTY))"],
            "node false",
        );
    }
}

#[test]
fn check_sandbox_text_lists_the_ruleset_without_starting_anything() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut p = plan(tmp.path());
    p.grant(tmp.path().join("gone"), AgentAccess::Read, "[agent] read");
    p.env
        .push(("OPENAI_API_KEY".into(), "sk-secret-value".into()));
    p.network = AgentNetwork::Ports(vec![443]);
    let text = describe_agent_plan(&p);
    println!("{text}");
    let gone: PathBuf = tmp.path().join("gone");
    for want in [
        "/usr read+exec (built-in system paths)".to_owned(),
        format!("{} read ([agent] read) missing: skipped", gone.display()),
        format!("{} (workspace)", tmp.path().join("ws").display()),
        "environment: PATH, HOME, TMPDIR, OPENAI_API_KEY".to_owned(),
        "TCP: connect to ports 443 only".to_owned(),
        "pathname Unix sockets: none".to_owned(),
        "kernel: ".to_owned(),
    ] {
        assert!(text.contains(&want), "{want:?} not in:\n{text}");
    }
    assert!(!text.contains("sk-secret-value"), "{text}");
}
