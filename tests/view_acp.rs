//! `fsgate acp --confine-agent`: the agent and every process it starts see the
//! workspace through the view, as `fsgate run`'s command does (docs/run.md). Here the
//! agent `fsgate acp` hosts is a shell: it runs a test, changes files and is refused a
//! secret, each change recorded naming its process under the view's session and undone
//! by it; and it gets a pseudo-terminal, with TIOCSTI and TIOCLINUX closed.

use std::ffi::OsString;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::acp_proxy::editor::{Editor, Options};
use crate::common::bin;

const SECRET: &str = "hunter2-acp-view-secret";

/// `fsgate acp --confine-agent -- sh -c SCRIPT`, in a workspace holding `.env`,
/// `a.txt` and `test_app.py`. The script's first line of input is the workspace's
/// path (it starts in a directory of its own) and its output goes to fsgate's stderr;
/// returns once fsgate ended.
fn confined_shell(script: &str) -> Editor {
    let (_cwd_dir, cwd) = crate::common::canonical_tempdir("fsgate-acp-view-cwd");
    let script = format!("exec 1>&2; read root; cd \"$root\" || exit 9; {script}");
    let agent: Vec<OsString> = vec!["sh".into(), "-c".into(), script.into()];
    let opts = Options {
        confine: true,
        cwd: Some(cwd),
        ..Default::default()
    };
    let mut ed = Editor::launch(&agent, opts);
    let root = ed.root.clone();
    std::fs::write(root.join(".env"), format!("TOKEN={SECRET}\n")).expect("seed");
    std::fs::write(root.join("a.txt"), "alpha\n").expect("seed");
    let test = "assert open('a.txt').read() == 'alpha\\n'\n\
                open('result.txt', 'w').write('passed\\n')\nprint('TEST-PASSED')\n";
    std::fs::write(root.join("test_app.py"), test).expect("seed");
    ed.send_raw(&root.to_string_lossy());
    let status = ed.wait_exit(Duration::from_secs(60));
    assert!(status.is_some(), "the agent did not end\n{}", ed.stderr());
    ed
}

/// The records of the view's requests: `request` records naming a process.
fn view_requests(ed: &Editor) -> Vec<Value> {
    ed.audit_records()
        .into_iter()
        .filter(|r| r["kind"] == "request" && !r["peer"].is_null())
        .collect()
}

/// The view's session, from the `agent-start` record.
fn view_session(ed: &Editor) -> String {
    let start = ed
        .audit_records()
        .into_iter()
        .find(|r| r["kind"] == "agent-start")
        .expect("agent-start record");
    start["details"]["view"]["session"]
        .as_str()
        .unwrap_or_else(|| panic!("no view in {start}\n{}", ed.stderr()))
        .to_owned()
}

#[test]
fn view_acp_the_confined_agents_shell_works_on_the_workspace_governed_and_recorded() {
    let ed = confined_shell(
        "cat .env; echo cat=$?; python3 test_app.py; echo test=$?; \
         echo hi > notes2.txt; rm a.txt; echo changed=$?",
    );
    let (stderr, root) = (ed.stderr(), ed.root.clone());
    assert!(stderr.contains("cat=1"), "{stderr}");
    assert!(stderr.contains(".env: No such file"), "{stderr}");
    assert!(!stderr.contains(SECRET), "the secret reached the agent");
    assert!(
        stderr.contains("TEST-PASSED") && stderr.contains("test=0"),
        "{stderr}"
    );
    assert!(stderr.contains("changed=0"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(root.join("result.txt"))
            .ok()
            .as_deref(),
        Some("passed\n")
    );
    assert_eq!(
        std::fs::read_to_string(root.join("notes2.txt"))
            .ok()
            .as_deref(),
        Some("hi\n")
    );
    assert!(!root.join("a.txt").exists());
    let session = view_session(&ed);
    let requests = view_requests(&ed);
    let change = |op: &str, path: &str| {
        requests
            .iter()
            .find(|r| r["op"] == op && r["path"] == path && r["outcome"] == "ok")
            .unwrap_or_else(|| panic!("no {op} {path} record: {requests:#?}"))
    };
    let rm = change("rm", "a.txt");
    assert_eq!(rm["session"], session.as_str(), "{rm}");
    assert!(rm["peer"].to_string().contains("rm"), "{rm}");
    assert!(rm["backup"].is_string(), "{rm}");
    let written = change("write_text_file", "notes2.txt");
    assert_eq!(written["session"], session.as_str(), "{written}");
    let refused = requests
        .iter()
        .any(|r| r["path"] == ".env" && r["decision"] == "deny");
    assert!(refused, "no refusal of .env recorded: {requests:#?}");
    // The end line says what the agent's processes did and under which session, and
    // its command undoes what the agent's shell did.
    let end = stderr
        .lines()
        .find_map(|l| l.strip_prefix("fsgate: the agent's view ended: "))
        .unwrap_or_else(|| panic!("no end line:\n{stderr}"));
    let count = |what: &str| -> u64 {
        let before = end.split(&format!(" {what}")).next().unwrap_or("");
        let n = before.rsplit(' ').next().unwrap_or("");
        n.parse()
            .unwrap_or_else(|_| panic!("no {what} count in {end}"))
    };
    assert!(count("changes") >= 3 && count("refused") >= 1, "{end}");
    assert!(count("reads") >= 1, "{end}");
    assert!(
        end.contains(&format!("recorded under session {session};")),
        "{end}"
    );
    let undo = end
        .split_once("undo one session's changes with: fsgate ")
        .and_then(|(_, cmd)| cmd.strip_suffix(" --session ID"))
        .unwrap_or_else(|| panic!("no undo command in {end}"));
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("\"$0\" {undo} --session {session}"))
        .arg(bin())
        .output()
        .expect("fsgate undo");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).ok().as_deref(),
        Some("alpha\n")
    );
    assert!(!root.join("notes2.txt").exists());
}

/// The shell gets a pseudo-terminal (forkpty works), and a process on it cannot push
/// input into it (TIOCSTI) nor use the console's TIOCLINUX: EPERM both.
#[test]
fn view_acp_the_confined_agent_gets_a_terminal_without_tiocsti() {
    let probe = r#"
import fcntl, os, pty, sys, termios
pid, fd = pty.fork()
if pid == 0:
    for name, cmd, arg in (("TIOCSTI", termios.TIOCSTI, b"x"), ("TIOCLINUX", 0x541C, b"\x07")):
        try:
            fcntl.ioctl(0, cmd, arg)
            print(name, "allowed")
        except OSError as e:
            print(name, "refused", e.errno)
    sys.stdout.flush()
    os._exit(0)
out = b""
while True:
    try:
        chunk = os.read(fd, 1024)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
os.waitpid(pid, 0)
print("PTY:", out.decode().replace("\r\n", " | "))
"#;
    let ed = confined_shell(&format!("python3 -c '{probe}'; echo probe=$?"));
    let stderr = ed.stderr();
    assert!(stderr.contains("probe=0"), "{stderr}");
    assert!(stderr.contains("TIOCSTI refused 1"), "{stderr}");
    assert!(stderr.contains("TIOCLINUX refused 1"), "{stderr}");
    assert!(!stderr.contains("allowed"), "{stderr}");
}

/// The agent's terminals are a devpts instance of its own: another terminal of the
/// user's (one this test opens outside) is not there to open (so neither read, where
/// a password is typed, nor written, where `fsgate asks` prompts), while the agent
/// still opens pseudo-terminals of its own.
#[test]
fn view_acp_the_confined_agent_cannot_open_the_users_other_terminals() {
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).expect("openpt");
    grantpt(&master)
        .and_then(|()| unlockpt(&master))
        .expect("unlockpt");
    let other = ptsname(&master, Vec::new()).expect("ptsname");
    let other = other.to_str().expect("utf-8 pts name").to_owned();
    assert!(std::path::Path::new(&other).exists(), "{other}");
    let probe = r#"
import os, pty, sys
try:
    os.close(os.open(sys.argv[1], os.O_RDWR | os.O_NOCTTY))
    print("OTHER opened")
except OSError as e:
    print("OTHER refused", e.errno)
sys.stdout.flush()
pid, fd = pty.fork()
if pid == 0:
    print("ON-OWN-PTY")
    sys.stdout.flush()
    os._exit(0)
out = b""
while True:
    try:
        chunk = os.read(fd, 1024)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
os.waitpid(pid, 0)
print("PTY:", out.decode().strip())
"#;
    let ed = confined_shell(&format!("python3 -c '{probe}' {other}; echo probe=$?"));
    let stderr = ed.stderr();
    assert!(stderr.contains("probe=0"), "{stderr}");
    assert!(stderr.contains("PTY: ON-OWN-PTY"), "{stderr}");
    assert!(!stderr.contains("OTHER opened"), "{stderr}");
    assert!(stderr.contains("OTHER refused 2"), "{stderr}");
    drop(master);
}

/// With several workspaces the agent gets a view of each and a devpts instance of its
/// own as with one: its own `/dev/ptmx` opens, a terminal of the user's does not exist.
#[test]
fn view_acp_with_several_workspaces_the_confined_agent_gets_only_its_own_terminals() {
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).expect("openpt");
    grantpt(&master)
        .and_then(|()| unlockpt(&master))
        .expect("unlockpt");
    let other = ptsname(&master, Vec::new()).expect("ptsname");
    let other = other.to_str().expect("utf-8 pts name").to_owned();
    let probe = r#"
import os, sys
for name, path in (("PTMX", "/dev/ptmx"), ("OTHER", sys.argv[1])):
    try:
        os.close(os.open(path, os.O_RDWR | os.O_NOCTTY))
        print(name, "opened")
    except OSError as e:
        print(name, "refused", e.errno)
"#;
    let (_cwd_dir, cwd) = crate::common::canonical_tempdir("fsgate-acp-noview-cwd");
    let (_second_dir, second) = crate::common::canonical_tempdir("fsgate-acp-noview-ws2");
    let script = format!("exec 1>&2; python3 -c '{probe}' {other}; echo probe=$?");
    let agent: Vec<OsString> = vec!["sh".into(), "-c".into(), script.into()];
    let opts = Options {
        confine: true,
        cwd: Some(cwd),
        workspaces: vec![second.into()],
        ..Default::default()
    };
    let mut ed = Editor::launch(&agent, opts);
    let status = ed.wait_exit(Duration::from_secs(60));
    assert!(status.is_some(), "the agent did not end\n{}", ed.stderr());
    let stderr = ed.stderr();
    assert!(stderr.contains("probe=0"), "{stderr}");
    assert!(stderr.contains("PTMX opened"), "{stderr}");
    assert!(stderr.contains("OTHER refused 2"), "{stderr}");
    drop(master);
}

/// Whether a view record (a process's request, alone or in a `reads` record) names `file`.
fn view_names(r: &Value, file: &str) -> bool {
    r["kind"] == "request"
        && r["transport"] == "view"
        && (r["path"] == file
            || (r["op"] == "reads"
                && r["details"]["reads"]
                    .to_string()
                    .contains(&format!("\"{file}\""))))
}

/// The view's records carry the ACP session the agent works for: the only one opened,
/// or the one whose prompt is in flight; `audit show --session` finds the file tool's
/// records and the agent's own opens together; a `view-session` record names the
/// sessions whenever that changes.
#[test]
fn view_acp_records_carry_the_acp_session_the_agent_works_for() {
    use crate::acp_proxy::editor::bin_agent;
    let test = "view_acp_records_carry_the_acp_session_the_agent_works_for";
    let Some(agent) = bin_agent(test, &[]) else {
        return;
    };
    let opts = Options {
        confine: true,
        ..Default::default()
    };
    let mut ed = Editor::launch(&agent, opts);
    let root = ed.root.clone();
    std::fs::write(root.join("a.txt"), "alpha\n").expect("seed");
    std::fs::write(root.join("b.txt"), "beta\n").expect("seed");
    let (a, b) = (root.join("a.txt"), root.join("b.txt"));
    let first = ed.open_session();
    let done = ed.prompt(
        &first,
        &format!("read {}\nopen {}", a.display(), a.display()),
    );
    assert_eq!(done.len(), 2, "{done:?}\n{}", ed.stderr());
    assert_eq!(done[1]["ok"]["opened"], true, "{done:?}");
    // A second session: its prompt is the only one in flight while the agent opens b.txt.
    let second = ed.new_session_in(&root);
    assert_ne!(first, second);
    let done = ed.prompt(&second, &format!("open {}", b.display()));
    assert_eq!(done[0]["ok"]["opened"], true, "{done:?}");
    let sessions_of = |file: &str| -> Vec<String> {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let found: Vec<String> = (ed.audit_records().iter())
                .filter(|r| view_names(r, file))
                .map(|r| r["session"].as_str().unwrap_or("").to_owned())
                .collect();
            if !found.is_empty() || std::time::Instant::now() > deadline {
                return found;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let (on_a, on_b) = (sessions_of("a.txt"), sessions_of("b.txt"));
    assert!(
        !on_a.is_empty() && on_a.iter().all(|s| *s == first),
        "{on_a:?} {first}"
    );
    assert!(
        !on_b.is_empty() && on_b.iter().all(|s| *s == second),
        "{on_b:?} {second}"
    );
    // The record of the change of session names both sessions.
    let records = ed.audit_records();
    let changed = (records.iter())
        .filter(|r| r["kind"] == "view-session")
        .find(|r| r["details"]["session"] == second.as_str())
        .unwrap_or_else(|| panic!("no view-session record for {second}"));
    let named = changed["details"]["acpSessions"].to_string();
    assert!(
        named.contains(&first) && named.contains(&second),
        "{changed}"
    );
    // `audit show --session` finds the file tool's read and the agent's own open.
    let log = ed.state.join("audit.jsonl");
    let out = Command::new(bin())
        .args(["audit", "show", "--session", &first, "--json"])
        .arg(&log)
        .output()
        .expect("fsgate audit show");
    let shown: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .flat_map(|v: Value| match v {
            Value::Array(list) => list,
            one => vec![one],
        })
        .collect();
    let read = |r: &Value| r["op"] == "read_text_file" && r["path"] == "a.txt";
    assert!(shown.iter().any(read), "{shown:?}");
    assert!(shown.iter().any(|r| view_names(r, "a.txt")), "{shown:?}");
    // Once the agent ends, the end line names the sessions the records carry.
    ed.close_stdin();
    assert!(
        ed.wait_exit(Duration::from_secs(30)).is_some(),
        "{}",
        ed.stderr()
    );
    let stderr = ed.stderr();
    let end = (stderr.lines())
        .find(|l| l.starts_with("fsgate: the agent's view ended: "))
        .unwrap_or_else(|| panic!("no end line:\n{stderr}"));
    let named = format!("or one of the agent's ACP sessions {first}, {second};");
    assert!(end.contains(&named), "{end}");
}

/// The confined agent's shell makes a symlink in the workspace (its sandbox grants the
/// view link-making: the gateway decides each link) and reads through it; one leading
/// out of the workspace is refused.
#[test]
fn view_acp_the_confined_agents_shell_makes_a_symlink_inside_the_workspace() {
    let ed = confined_shell(
        "ln -s a.txt link; echo made=$?; readlink link; cat link; \
         ln -s /etc/passwd out; echo out=$?",
    );
    let (stderr, root) = (ed.stderr(), ed.root.clone());
    assert!(stderr.contains("made=0"), "{stderr}");
    assert!(stderr.contains("alpha"), "{stderr}");
    assert!(!stderr.contains("out=0"), "{stderr}");
    let target = std::fs::read_link(root.join("link")).expect("the link was made");
    assert_eq!(target, std::path::Path::new("a.txt"));
    assert!(std::fs::symlink_metadata(root.join("out")).is_err());
    let made = view_requests(&ed)
        .into_iter()
        .any(|r| r["op"] == "symlink" && r["path"] == "link" && r["outcome"] == "ok");
    assert!(made, "no symlink record:\n{stderr}");
}
