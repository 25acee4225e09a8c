//! `ask` rules under `fsgate run`: the question waits for `fsgate asks`, run from
//! another terminal (docs/run.md).

use std::io::BufRead;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

use crate::common::view::{DEADLINE, SYSTEM_PATH, ViewWs, ask_policy, text, waited};
use crate::common::{bin, canonical_tempdir};

/// A workspace whose `asked.txt` an ask rule guards for reading, a state directory
/// (audit log, backups, the policy, XDG_STATE_HOME) beside it.
struct Ws {
    view: ViewWs,
    /// XDG_STATE_HOME: apart from the audit log's directory (which the command's
    /// namespace covers anyway), so that the sockets' own cover is what is tested.
    xdg: PathBuf,
    _xdg_dir: TempDir,
}

impl Deref for Ws {
    type Target = ViewWs;
    fn deref(&self) -> &ViewWs {
        &self.view
    }
}

impl Ws {
    fn new(timeout_secs: u32) -> Ws {
        let view = ViewWs::new("fsgate-asks-ws", "fsgate-asks-state");
        let (xdg_dir, xdg) = canonical_tempdir("fsgate-asks-xdg");
        std::fs::write(view.root.join("asked.txt"), "the answer\n").expect("write");
        let policy = ask_policy(timeout_secs);
        std::fs::write(view.state.join("policy.toml"), policy).expect("policy");
        Ws {
            view,
            xdg,
            _xdg_dir: xdg_dir,
        }
    }

    fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        // Deep enough that a socket's path is longer than a socket address holds.
        let deep = "a-state-directory-deep-enough-that-its-socket-path-is-long";
        cmd.env("XDG_STATE_HOME", self.xdg.join(deep))
            .current_dir(&self.root);
        cmd
    }

    /// `fsgate run -- python3 -c SCRIPT`, its stdout piped.
    fn run(&self, script: &str) -> Child {
        let mut cmd = self.command(bin());
        cmd.arg("run")
            .args(self.state_args())
            .arg("--policy")
            .arg(self.state.join("policy.toml"))
            .args(["--", "python3", "-c", script])
            .env("PATH", SYSTEM_PATH)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd.spawn().expect("spawn fsgate run")
    }

    /// `fsgate asks --workspace ROOT ARGS...`: its exit status and stdout.
    fn asks(&self, args: &[&str]) -> (bool, String) {
        let out = self
            .command(bin())
            .arg("asks")
            .arg("--workspace")
            .arg(&self.root)
            .args(args)
            .output()
            .expect("fsgate asks");
        (out.status.success(), text(&out.stdout))
    }

    /// The questions waiting, polled until there is one (30 s at most); fails with what
    /// the command printed if it ended first or none came.
    fn waiting(&self, child: &mut Child) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "the command ended ({status}) before anything was asked: {}",
                    printed(child)
                );
            }
            let (ok, out) = self.asks(&["--json"]);
            assert!(ok, "{out}");
            let runs: Vec<Value> = serde_json::from_str(&out).expect("json");
            let questions: Vec<Value> = runs
                .iter()
                .filter_map(|r| r["questions"].as_array())
                .flatten()
                .cloned()
                .collect();
            if !questions.is_empty() {
                return questions;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("no question came: {out}; the command: {}", printed(child));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// What an ended command printed, stdout and stderr, for a failure's message.
fn printed(child: &mut Child) -> String {
    use std::io::Read;
    let read = |r: Option<&mut dyn Read>| {
        let mut buf = Vec::new();
        if let Some(r) = r {
            let _ = r.read_to_end(&mut buf);
        }
        text(&buf)
    };
    let out = read(child.stdout.as_mut().map(|o| o as &mut dyn Read));
    let err = read(child.stderr.as_mut().map(|e| e as &mut dyn Read));
    format!("stdout: {out:?}; stderr: {err}")
}

/// The lines the command printed, and its exit status (60 s at most).
fn ended(child: Child) -> (Option<i32>, Vec<String>, String) {
    let out = waited(child, "fsgate run", DEADLINE);
    let lines = out.stdout.lines().map(|l| l.unwrap_or_default()).collect();
    let err = text(&out.stderr);
    (out.status.code(), lines, err)
}

const OPEN: &str = "import errno\ntry:\n    print(open('asked.txt').read(), end='')\nexcept OSError as e:\n    print('refused', e.errno == errno.EACCES)\n";

/// A command's open waits for the question; `fsgate asks` lists it and allows it: the
/// open succeeds, and the record says who allowed it.
#[test]
fn view_an_ask_is_answered_from_another_terminal() {
    let ws = Ws::new(60);
    let mut child = ws.run(OPEN);
    let questions = ws.waiting(&mut child);
    assert_eq!(questions.len(), 1, "{questions:?}");
    let q = &questions[0];
    assert_eq!(q["path"], "/asked.txt", "{q}");
    assert_eq!(q["rule"], "ask-asked", "{q}");
    assert!(
        q["process"].as_str().is_some_and(|p| p.contains("python3")),
        "{q}"
    );
    // The list a person reads names the question too.
    let (_, table) = ws.asks(&[]);
    let id = q["id"].as_str().expect("id");
    assert!(
        table.contains(id) && table.contains("/asked.txt"),
        "{table}"
    );
    let (ok, out) = ws.asks(&["--allow", id]);
    assert!(ok, "{out}");
    let (code, lines, err) = ended(child);
    assert_eq!(lines, ["the answer"], "{err}");
    assert_eq!(code, Some(0), "{err}");
    let records = ws.records();
    let answer = records
        .iter()
        .find(|r| r["kind"] == "ask_answer")
        .unwrap_or_else(|| panic!("no answer record: {records:?}"));
    let details = &answer["details"];
    assert_eq!(details["answer"], "allow_once", "{answer}");
    let by = details["by"].as_str().expect("by");
    assert!(by.starts_with("uid 0 pid ") && by.contains("asks"), "{by}");
    let open = records
        .iter()
        .find(|r| r["op"] == "open" && r["path"] == "asked.txt" && r["kind"] == "request")
        .expect("the open's record");
    assert_eq!(open["decision"], "allow", "{open}");
    assert_eq!(
        open["details"]["asked"][0]["answer"], "allow_once",
        "{open}"
    );
    // The answer's record is in the chain like any other.
    let verify = Command::new(bin())
        .args(["audit", "verify"])
        .arg(ws.state.join("audit.jsonl"))
        .output()
        .expect("verify");
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stderr)
    );
    // `audit show --session` lists the answer, and the run's own start and end, which
    // name their session in their details; the table and the CSV show it.
    let session = open["session"].as_str().expect("the open's session");
    let show = |format: &[&str]| {
        let out = Command::new(bin())
            .args(["audit", "show", "--session", session])
            .args(format)
            .arg(ws.state.join("audit.jsonl"))
            .output()
            .expect("show");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let shown: Vec<Value> = show(&["--json"])
        .lines()
        .map(|l| serde_json::from_str(l).expect("a record"))
        .collect();
    for kind in ["ask_answer", "run", "stop"] {
        assert!(
            shown.iter().any(|r| r["kind"] == kind),
            "--session {session} lacks `{kind}`: {shown:?}"
        );
    }
    for (format, text) in [
        ("table", show(&["--width", "0"])),
        ("csv", show(&["--csv"])),
    ] {
        let line = text
            .lines()
            .find(|l| l.contains("ask_answer"))
            .unwrap_or_else(|| panic!("{format}: no ask_answer row:\n{text}"));
        assert!(line.contains(session), "{format}: {line}");
    }
}

/// A question nobody answers is refused once the policy's timeout passed: EACCES.
#[test]
fn view_an_unanswered_ask_is_refused_with_eacces() {
    let ws = Ws::new(1);
    let started = Instant::now();
    let child = ws.run(OPEN);
    let (code, lines, err) = ended(child);
    assert_eq!(lines, ["refused True"], "{err}");
    assert_eq!(code, Some(0), "{err}");
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert!(err.contains("waits for a person"), "{err}");
    let open = ws
        .records()
        .into_iter()
        .find(|r| r["op"] == "open" && r["path"] == "asked.txt" && r["kind"] == "request")
        .expect("the open's record");
    assert_eq!(open["details"]["asked"][0]["answer"], "timeout", "{open}");
}

/// A rejection is EACCES at once; the socket is only the user's, and the command cannot
/// reach it (its directory is covered in the command's namespace).
#[test]
fn view_a_rejected_ask_is_eacces_and_the_socket_is_out_of_the_commands_reach() {
    let ws = Ws::new(60);
    let script = format!(
        "import os, glob\nprint('sockets', len(glob.glob('{}/**/*.sock', recursive=True)))\n{OPEN}",
        ws.xdg.display()
    );
    let mut child = ws.run(&script);
    let questions = ws.waiting(&mut child);
    let id = questions[0]["id"].as_str().expect("id");
    let sockets = find_sockets(&ws.xdg);
    assert_eq!(sockets.len(), 1, "{sockets:?}");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&sockets[0])
            .expect("socket")
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    let (ok, out) = ws.asks(&["--reject", id]);
    assert!(ok, "{out}");
    let (code, lines, err) = ended(child);
    assert_eq!(lines, ["sockets 0", "refused True"], "{err}");
    assert_eq!(code, Some(0), "{err}");
    // The run ended: its socket is gone, and a second answer finds nobody.
    assert!(find_sockets(&ws.xdg).is_empty());
    let (ok, _) = ws.asks(&["--allow", id]);
    assert!(!ok);
}

fn find_sockets(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            found.extend(find_sockets(&p));
        } else if p.extension().is_some_and(|x| x == "sock") {
            found.push(p);
        }
    }
    found
}

/// "Allow for the run" answers the same rule and class for the rest of the run: the
/// second open is not asked again, and its record says the grant allowed it.
#[test]
fn view_an_ask_allowed_for_the_run_is_not_asked_again() {
    let ws = Ws::new(60);
    let twice = "for _ in range(2):\n    print(open('asked.txt').read(), end='')\n";
    let mut child = ws.run(twice);
    let questions = ws.waiting(&mut child);
    let id = questions[0]["id"].as_str().expect("id");
    let (ok, out) = ws.asks(&["--allow-run", id]);
    assert!(ok, "{out}");
    let (code, lines, err) = ended(child);
    assert_eq!(lines, ["the answer", "the answer"], "{err}");
    assert_eq!(code, Some(0), "{err}");
    let answers: Vec<Value> = ws
        .records()
        .into_iter()
        .filter(|r| r["op"] == "open" && r["path"] == "asked.txt" && r["kind"] == "request")
        .map(|r| r["details"]["asked"][0]["answer"].clone())
        .collect();
    assert_eq!(answers, ["allow_always", "allowed_for_session"], "{err}");
    assert_eq!(err.matches("waits for a person").count(), 1, "{err}");
}

/// The line on stderr names the path as `fsgate asks` shows it: a control character in
/// it escaped once (`\u{1b}`), not twice (`\\u{1b}`, which stands for a backslash).
#[test]
fn view_the_waiting_line_escapes_the_path_once() {
    let ws = Ws::new(1);
    let policy = ask_policy(1).replace(r#"paths = ["asked.txt"]"#, r#"paths = ["asked*"]"#);
    std::fs::write(ws.state.join("policy.toml"), policy).expect("policy");
    std::fs::write(ws.root.join("asked\u{1b}[2Jy"), "x").expect("write");
    let child = ws.run("import os\ntry:\n    open('asked\\x1b[2Jy').read()\nexcept OSError:\n    print('refused')\n");
    let (code, lines, err) = ended(child);
    assert_eq!(
        (code, lines),
        (Some(0), vec!["refused".to_string()]),
        "{err}"
    );
    assert!(
        err.contains(r"open /asked\u{1b}[2Jy waits for a person"),
        "{err}"
    );
    assert!(!err.contains('\u{1b}'), "{err}");
}

/// `fsgate asks` run in a directory inside the workspace (its default, `.`) finds the
/// runs of the workspace; a workspace that does not exist is an error, not "no question".
#[test]
fn view_asks_in_a_subdirectory_finds_the_workspaces_question() {
    let ws = Ws::new(60);
    let sub = ws.root.join("sub/deeper");
    std::fs::create_dir_all(&sub).expect("mkdir");
    let asks_in = |dir: &Path, args: &[&str]| {
        let out = ws
            .command(bin())
            .current_dir(dir)
            .arg("asks")
            .args(args)
            .output()
            .expect("fsgate asks");
        (out.status.success(), text(&out.stdout), text(&out.stderr))
    };
    let mut child = ws.run(OPEN);
    let id = ws.waiting(&mut child)[0]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let (ok, table, err) = asks_in(&sub, &[]);
    assert!(ok && table.contains(&id), "{table}{err}");
    let (ok, out, err) = asks_in(&sub, &["--allow", &id]);
    assert!(ok, "{out}{err}");
    let (code, lines, err) = ended(child);
    assert_eq!(
        (code, lines),
        (Some(0), vec!["the answer".to_owned()]),
        "{err}"
    );
    let missing = ws.root.join("no-such-dir");
    let missing = missing.to_string_lossy();
    let (ok, out, err) = asks_in(&ws.root, &["--workspace", &missing]);
    assert!(!ok, "{out}");
    assert!(
        err.contains("cannot use workspace") && err.contains("no-such-dir"),
        "{err}"
    );
}

/// A run of a subdirectory that was killed leaves its socket behind: `fsgate asks` run
/// in that subdirectory still finds the workspace's waiting question at once.
#[test]
fn view_asks_a_killed_runs_socket_nearer_does_not_hide_the_workspaces_question() {
    let ws = Ws::new(60);
    let sub = ws.root.join("sub");
    std::fs::create_dir_all(&sub).expect("mkdir");
    let mut killed = ws
        .command(bin())
        .arg("run")
        .arg("--workspace")
        .arg(&sub)
        .arg("--audit-log")
        .arg(ws.state.join("sub-audit.jsonl"))
        .arg("--backup-dir")
        .arg(ws.state.join("sub-backups"))
        .args(["--", "sleep", "60"])
        .env("PATH", SYSTEM_PATH)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the subdirectory's run");
    let socket = poll_for_socket(&ws, "sub-", &mut killed);
    killed.kill().expect("kill");
    let _ = killed.wait();
    assert!(
        socket.exists(),
        "the killed run's socket is gone: {}",
        socket.display()
    );
    let mut child = ws.run(OPEN);
    let id = ws.waiting(&mut child)[0]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let out = ws
        .command(bin())
        .current_dir(&sub)
        .arg("asks")
        .output()
        .expect("fsgate asks");
    let table = text(&out.stdout);
    assert!(table.contains(&id), "{table}{}", text(&out.stderr));
    assert!(!socket.exists(), "the dead socket stays");
    assert!(ws.asks(&["--reject", &id]).0);
    let (code, lines, err) = ended(child);
    assert_eq!(
        (code, lines),
        (Some(0), vec!["refused True".to_owned()]),
        "{err}"
    );
}

/// The socket of the run of the workspace whose state dir starts with `prefix`, once it
/// is there (30 s at most).
fn poll_for_socket(ws: &Ws, prefix: &str, child: &mut Child) -> PathBuf {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let states = ws
            .xdg
            .join("a-state-directory-deep-enough-that-its-socket-path-is-long/fsgate");
        let found = std::fs::read_dir(&states)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
            .flat_map(|e| {
                std::fs::read_dir(e.path().join("asks"))
                    .into_iter()
                    .flatten()
                    .flatten()
            })
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "sock"));
        if let Some(socket) = found {
            return socket;
        }
        assert!(
            child.try_wait().expect("wait").is_none(),
            "the run ended before its socket was made: {}",
            printed(child)
        );
        assert!(
            Instant::now() < deadline,
            "no socket in {}",
            states.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One shell `>` is one question: the person who allowed the open for writing has
/// answered for the truncation and the content its closes apply (recorded as
/// `allowed_at_open`). A later open of the same file is a question of its own: here
/// rejected, so the `>>` fails with EACCES and the file keeps the first write.
#[test]
fn view_a_shell_redirection_is_asked_once() {
    let ws = Ws::new(60);
    let policy = ask_policy(60).replace(
        "ops = [\"read\"]\npaths = [\"asked.txt\"]",
        "ops = [\"write\"]\npaths = [\"guarded.txt\"]",
    );
    std::fs::write(ws.state.join("policy.toml"), policy).expect("policy");
    std::fs::write(ws.root.join("guarded.txt"), "old\n").expect("write");
    let script = "import subprocess\nfor cmd in ['echo new > guarded.txt', 'echo more >> guarded.txt']:\n    print(subprocess.run(['/bin/sh', '-c', cmd], stderr=subprocess.DEVNULL).returncode)\n";
    let mut child = ws.run(script);
    let first = ws.waiting(&mut child);
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0]["op"], "open", "{first:?}");
    let first_id = first[0]["id"].as_str().expect("id").to_owned();
    let (ok, out) = ws.asks(&["--allow", &first_id]);
    assert!(ok, "{out}");
    let second = loop {
        let q = ws.waiting(&mut child);
        if q.iter().all(|q| q["id"] != first_id.as_str()) {
            break q;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(second.len(), 1, "{second:?}");
    // Before, the `>`'s truncation and content were each asked again here.
    assert_eq!(
        second[0]["op"], "open",
        "the `>` was asked again: {second:?}"
    );
    let (ok, out) = ws.asks(&["--reject", second[0]["id"].as_str().expect("id")]);
    assert!(ok, "{out}");
    let (code, lines, err) = ended(child);
    assert_eq!(code, Some(0), "{err}");
    // The `>>` fails (a shell's status for a failed redirection: 2 for dash, 1 for bash).
    assert!(
        lines.len() == 2 && lines[0] == "0" && lines[1] != "0",
        "{lines:?} {err}"
    );
    assert_eq!(err.matches("waits for a person").count(), 2, "{err}");
    let content = std::fs::read_to_string(ws.root.join("guarded.txt")).expect("read");
    assert_eq!(content, "new\n");
    let writes: Vec<Value> = ws
        .records()
        .into_iter()
        .filter(|r| r["op"] == "write_text_file" && r["kind"] == "request")
        .collect();
    assert!(!writes.is_empty(), "no write recorded");
    for w in &writes {
        assert_eq!(w["decision"], "allow", "{w}");
        assert_eq!(w["details"]["asked"][0]["answer"], "allowed_at_open", "{w}");
    }
}

impl Ws {
    /// Runs `script` (sh) under a policy asking before writes of `guarded*`, answering
    /// each question with `answer(op)` ("--allow" or "--reject") until the command
    /// ends: the ops asked about in turn, and what the command printed.
    fn answering(
        &self,
        script: &str,
        answer: impl Fn(&str) -> &'static str,
    ) -> (Vec<String>, Vec<String>, String) {
        let policy = ask_policy(60).replace(
            "ops = [\"read\"]\npaths = [\"asked.txt\"]",
            "ops = [\"write\"]\npaths = [\"guarded*\"]",
        );
        std::fs::write(self.state.join("policy.toml"), policy).expect("policy");
        let run = format!("import subprocess\nsubprocess.run(['/bin/sh', '-c', {script:?}])\n");
        let mut child = self.run(&run);
        let mut asked = Vec::new();
        let mut answered: Vec<String> = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        while child.try_wait().expect("wait").is_none() && Instant::now() < deadline {
            let (ok, out) = self.asks(&["--json"]);
            assert!(ok, "{out}");
            let runs: Vec<Value> = serde_json::from_str(&out).expect("json");
            for q in runs
                .iter()
                .filter_map(|r| r["questions"].as_array())
                .flatten()
            {
                let id = q["id"].as_str().expect("id").to_owned();
                if answered.contains(&id) {
                    continue;
                }
                let op = q["op"].as_str().expect("op").to_owned();
                let (ok, out) = self.asks(&[answer(&op), &id]);
                assert!(ok, "{out}");
                asked.push(op);
                answered.push(id);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let (_, lines, err) = ended(child);
        (asked, lines, err)
    }
}

/// The answer of a create stands for the writes of the handle it opened: a new file
/// written in two steps through one descriptor is one question.
#[test]
fn view_a_created_file_written_twice_through_one_descriptor_is_asked_once() {
    let ws = Ws::new(60);
    let script = "exec 3>guarded-new.txt; /bin/echo one >&3; /bin/echo two >&3; exec 3>&-";
    let (asked, _, err) = ws.answering(script, |_| "--allow");
    assert_eq!(asked.len(), 1, "{asked:?} {err}");
    let content = std::fs::read_to_string(ws.root.join("guarded-new.txt")).expect("read");
    assert_eq!(content, "one\ntwo\n");
}

/// A handle nobody was asked about (opened under another name, before a rename made
/// the file one an ask rule covers) does not ride on another handle's allowed open: its
/// write is asked about at its close, here rejected; the allowed handle's next write is
/// asked about too (the copy holds the rejected bytes), and the file keeps its content.
#[test]
fn view_a_handle_opened_before_a_rename_is_asked_at_its_close() {
    let ws = Ws::new(60);
    // After the refusal the shared copy still holds the refused bytes: the allowed
    // descriptor's next write must not carry them in on its open's answer.
    let script = "echo good > tmp.txt; exec 4<>tmp.txt; mv tmp.txt guarded.txt; exec 3>>guarded.txt; echo evil >&4; exec 4>&-; echo x >&3; exec 3>&-; cat guarded.txt";
    let (asked, lines, err) = ws.answering(script, |op| match op {
        "write_text_file" => "--reject",
        _ => "--allow",
    });
    let writes_asked = asked.iter().filter(|op| *op == "write_text_file").count();
    assert_eq!(writes_asked, 2, "{asked:?} {err}");
    assert_eq!(lines, ["good"], "{asked:?} {err}");
    let writes: Vec<Value> = ws
        .records()
        .into_iter()
        .filter(|r| r["op"] == "write_text_file" && r["path"] == "guarded.txt")
        .filter(|r| r["kind"] == "request" && r["decision"] == "allow")
        .collect();
    assert!(writes.is_empty(), "{writes:?}");
}

/// Ten threads open the asked file at once: six questions wait for a person (as many
/// of the view's eight threads as may wait), the other four are refused at once, and a
/// file no rule asks about is read meanwhile. Before, each question held a thread of
/// the view, and eight froze every process's requests until their timeout.
#[test]
fn view_questions_waiting_never_hold_the_whole_view() {
    let ws = Ws::new(6);
    std::fs::write(ws.root.join("plain.txt"), "plain\n").expect("write");
    let script = "import errno, threading, time\n\
        res = []\n\
        def op():\n    t = time.time()\n    try:\n        open('asked.txt').read(); res.append(('ok', 0))\n    except OSError as e:\n        res.append((errno.errorcode[e.errno], time.time() - t))\n\
        ts = [threading.Thread(target=op) for _ in range(10)]\n\
        [t.start() for t in ts]\n\
        time.sleep(1)\n\
        t = time.time(); open('plain.txt').read(); print('plain', time.time() - t < 2)\n\
        [t.join() for t in ts]\n\
        print('at once', sum(1 for r, d in res if r == 'EACCES' and d < 3))\n\
        print('at the timeout', sum(1 for r, d in res if r == 'EACCES' and d >= 5))\n";
    let child = ws.run(script);
    let (code, lines, err) = ended(child);
    assert_eq!(
        lines,
        ["plain True", "at once 4", "at the timeout 6"],
        "{err}"
    );
    assert_eq!(code, Some(0), "{err}");
    let unasked = (ws.records().into_iter())
        .filter(|r| r["op"] == "open" && r["kind"] == "request")
        .filter(|r| r["details"]["asked"][0]["answer"] == "unanswered")
        .count();
    assert_eq!(unasked, 4, "{err}");
}

/// The command's stderr may stop being read (a paused terminal, a pipe nobody drains):
/// the question's line on it cannot be written then, and `fsgate asks` still lists and
/// answers the question. Before, the line was written with every question's lock held,
/// and `fsgate asks` waited as long as the pipe stayed full.
#[test]
fn view_a_question_is_answered_while_the_commands_stderr_is_full() {
    let ws = Ws::new(60);
    // A thread of the command fills the pipe (its write waits, as the gateway's line does).
    let script = "import os, threading, time\n\
        threading.Thread(target=lambda: os.write(2, b'x' * 300000), daemon=True).start()\n\
        time.sleep(1)\n\
        print(open('asked.txt').read(), end='', flush=True)\n";
    let mut child = ws.run(script);
    let asks = |args: &[&str]| {
        let mut cmd = ws.command(bin());
        cmd.arg("asks").arg("--workspace").arg(&ws.root).args(args);
        crate::common::view::finished_within(cmd, Duration::from_secs(20))
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let id = loop {
        let out = asks(&["--json"]);
        let runs: Vec<Value> = serde_json::from_slice(&out.stdout).expect("json");
        let first = runs
            .iter()
            .filter_map(|r| r["questions"].as_array())
            .flatten()
            .find_map(|q| q["id"].as_str().map(str::to_owned));
        if let Some(id) = first {
            break id;
        }
        assert!(Instant::now() < deadline, "no question came");
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = asks(&["--allow", &id]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The pipe is read from now on: the command, and the gateway's last lines, go on.
    let mut stderr = child.stderr.take().expect("stderr");
    let drained = std::thread::spawn(move || {
        let mut all = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stderr, &mut all);
        all.len()
    });
    let (code, lines, _) = ended(child);
    assert_eq!(lines, ["the answer"]);
    assert_eq!(code, Some(0));
    assert!(drained.join().expect("drained") >= 300_000);
}

/// The address of the run's socket (under the test's state directory), through its
/// directory's descriptor (the path is longer than a socket address holds), which is
/// kept open with it.
fn socket_address(ws: &Ws) -> (std::fs::File, PathBuf) {
    let socket = sockets_under(&ws.xdg).pop().expect("the run's socket");
    let dir = std::fs::File::open(socket.parent().expect("dir")).expect("dir");
    let at = Path::new("/proc/self/fd")
        .join(std::os::fd::AsRawFd::as_raw_fd(&dir).to_string())
        .join(socket.file_name().expect("name"));
    (dir, at)
}

/// The unix sockets under `dir`, found by walking it.
fn sockets_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() {
                todo.push(e.path());
            } else if std::os::unix::fs::FileTypeExt::is_socket(&t) {
                found.push(e.path());
            }
        }
    }
    found
}

/// Connections to a run's socket that send nothing (another process of the same user
/// holding them open) do not keep `fsgate asks` from listing and answering at once.
/// Before, connections were served one after another, each idle one for 5 s: `fsgate
/// asks` said "no question waits", and an answer it reported as failed was applied
/// later.
#[test]
fn view_idle_connections_to_a_run_do_not_hold_a_persons_answer_back() {
    let ws = Ws::new(60);
    let mut child = ws.run(OPEN);
    let questions = ws.waiting(&mut child);
    let id = questions[0]["id"].as_str().expect("id").to_owned();
    let (_dir, at) = socket_address(&ws);
    let idle: Vec<std::os::unix::net::UnixStream> = (0..8)
        .map(|_| std::os::unix::net::UnixStream::connect(&at).expect("connect"))
        .collect();
    let started = Instant::now();
    let (ok, out) = ws.asks(&["--json"]);
    assert!(ok && out.contains(&id), "{out}");
    let (ok, out) = ws.asks(&["--allow", &id]);
    assert!(ok, "{out}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    drop(idle);
    let (code, lines, err) = ended(child);
    assert_eq!(lines, ["the answer"], "{err}");
    assert_eq!(code, Some(0));
}

/// A process killed while its question waits takes the question with it: it is no
/// longer listed, cannot be answered, and its record says `unanswered`. Before, it
/// stayed, and an answer given later was recorded as an open that succeeded.
#[test]
fn view_a_question_of_a_killed_process_goes_with_it() {
    let ws = Ws::new(60);
    let script = "import subprocess\n\
        p = subprocess.Popen(['cat', 'asked.txt'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n\
        print('cat', p.wait())\n";
    let mut child = ws.run(script);
    let questions = ws.waiting(&mut child);
    let process = questions[0]["process"].as_str().expect("process");
    let pid = process
        .strip_prefix("pid ")
        .and_then(|r| r.split_whitespace().next())
        .expect("pid");
    let id = questions[0]["id"].as_str().expect("id").to_owned();
    let killed = Command::new("kill")
        .args(["-9", pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (ok, out) = ws.asks(&["--json"]);
        assert!(ok, "{out}");
        if !out.contains(&id) {
            break;
        }
        assert!(Instant::now() < deadline, "the question stayed: {out}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (ok, _) = ws.asks(&["--allow", &id]);
    assert!(!ok, "a question of a killed process was answered");
    let (code, lines, err) = ended(child);
    assert_eq!(lines, ["cat -9"], "{err}");
    assert_eq!(code, Some(0));
    let unanswered = (ws.records().into_iter())
        .filter(|r| r["op"] == "open" && r["path"] == "asked.txt")
        .any(|r| r["details"]["asked"][0]["answer"] == "unanswered");
    assert!(unanswered, "{err}");
}

/// Peers that send their request a byte at a time hold their places at most 5 s: a
/// person's `fsgate asks` gets through once they are closed, however many there are.
/// Before, a peer dripping a byte every second kept its place for good, and 32 of them
/// shut every person out.
#[test]
fn view_peers_dripping_bytes_do_not_hold_the_run_for_good() {
    let ws = Ws::new(60);
    let mut child = ws.run(OPEN);
    let questions = ws.waiting(&mut child);
    let id = questions[0]["id"].as_str().expect("id").to_owned();
    let (_dir, at) = socket_address(&ws);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let drips: Vec<_> = (0..40)
        .filter_map(|_| std::os::unix::net::UnixStream::connect(&at).ok())
        .map(|mut conn| {
            let stop = std::sync::Arc::clone(&stop);
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    if std::io::Write::write_all(&mut conn, b" ").is_err() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(500));
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(7));
    let (ok, out) = ws.asks(&["--json"]);
    let listed = ok && out.contains(&id);
    let (answered, _) = ws.asks(&["--allow", &id]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    drips.into_iter().for_each(|t| {
        let _ = t.join();
    });
    assert!(listed, "{out}");
    assert!(answered);
    let (code, lines, err) = ended(child);
    assert_eq!(lines, ["the answer"], "{err}");
    assert_eq!(code, Some(0));
}
