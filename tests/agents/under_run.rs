//! Real coding agents' own command lines (`codex exec`, `gemini -p`, `claude -p`) under
//! `fsgate run`, their model replaced by the fake (docs/run.md): the agent and every
//! process its shell starts see the workspace through fsgate's view. One turn of five
//! steps the scripted model asks of the agent's own tools: its shell runs `cat .env`
//! (refused: the secret never reaches the model), `python3 test_app.py` (a test that reads
//! the workspace and writes `result.txt`: it passes), `echo hi > notes2.txt` and `rm a.txt`
//! (each change recorded, naming the process, backed up), then its own edit tool changes
//! `b.txt` (recorded; Claude Code's `Edit` wants a `Read` of the file first, one more
//! call); `fsgate undo` of the run's session brings `a.txt` and `b.txt` back.
//! Under `fsgate run --no-confine` (no wall outside the workspace) that is all; under
//! the default wall the same, and one shell step more: `cat` of a file outside the
//! workspace that the `[agent]` wall does not grant is refused, its text never sent to
//! the model.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

use super::fake::Fake;
use super::scenario::{installed, path_with_node22};
use crate::acp_proxy::editor::repo;
use crate::common::{bin, canonical_tempdir};

/// How long the whole run (five or six steps) may take.
const RUN_LIMIT: Duration = Duration::from_secs(240);
pub(super) const SECRET: &str = "fsgate-run-dotenv-secret-5081";
/// The text of the file outside the workspace a confined agent's shell is asked for.
const OUTSIDE: &str = "fsgate-run-outside-text-7342";
pub(super) const TEST_APP: &str = "import unittest\n\nclass T(unittest.TestCase):\n    def test_reads_and_writes(self):\n        with open('b.txt') as f:\n            self.assertIn('two', f.read())\n        with open('result.txt', 'w') as f:\n            f.write('passed\\n')\n\nunittest.main()\n";
/// Codex's `apply_patch` of `b.txt` (Gemini CLI offers `replace` instead).
pub(super) const PATCH: &str =
    "*** Begin Patch\n*** Update File: b.txt\n@@\n-one\n+uno\n two\n*** End Patch\n";

/// An agent's command line, without its prompt.
struct Cli {
    name: &'static str,
    command: Vec<OsString>,
    env: Vec<(String, OsString)>,
    /// Its configuration's directory (named by `env`), granted read-write when confined.
    config: Option<PathBuf>,
    /// What the process that edits with the agent's own tool is named by (in its argv).
    editor: &'static str,
    /// The steps of its own edit of `b.txt` (given the file's path).
    edit: fn(&Path) -> Vec<Value>,
    /// The record of that edit: `write_text_file` of `b.txt`, or `rename` onto it (a
    /// new file written beside it, then moved over it).
    edit_op: &'static str,
}

/// Codex's `apply_patch` or Gemini CLI's `replace`, whichever is offered, as one step.
fn patch_or_replace(b: &Path) -> Vec<Value> {
    vec![json!([
        {"patch": PATCH},
        {"tool": "replace", "args": {"file_path": b, "old_string": "one", "new_string": "uno",
            "instruction": "one becomes uno"}},
    ])]
}

/// Codex (`codex exec`), its sandbox and approvals off (fsgate's view governs), its model
/// a provider of its own configuration at the fake (`gpt-5.5`: a model its catalog knows,
/// whose tools include `apply_patch`), `CODEX_HOME` its default `~/.codex` of the
/// test's `home`.
fn codex(test: &str, home: &Path, stub: &str) -> Option<Cli> {
    let codex_home = home.join(".codex");
    std::fs::create_dir_all(&codex_home).expect("mkdir .codex");
    let bin = installed(test, "codex/node_modules/.bin/codex")?;
    let provider = format!(
        "model_providers.fsgate-stub={{name=\"fsgate-stub\",base_url=\"{stub}/v1\",env_key=\"FSGATE_STUB_KEY\",wire_api=\"responses\"}}"
    );
    let args = [
        "exec",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        "-c",
        "model_provider=\"fsgate-stub\"",
        "-c",
        &provider,
        "-m",
        "gpt-5.5",
    ];
    let mut command = vec![bin.into_os_string()];
    command.extend(args.iter().map(OsString::from));
    let env = [
        ("CODEX_HOME", codex_home.as_os_str()),
        ("FSGATE_STUB_KEY", "fsgate-test-not-a-key".as_ref()),
    ];
    Some(Cli {
        name: "codex",
        command,
        env: env
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect(),
        config: Some(codex_home.clone()),
        editor: "codex",
        edit: patch_or_replace,
        edit_op: "write_text_file",
    })
}

/// Gemini CLI (`gemini -p ... --yolo`), its API key chosen in its settings, in the
/// `.gemini` of `GEMINI_CLI_HOME`, a directory of the test's `home` (with
/// `GOOGLE_GEMINI_BASE_URL` set and no settings it picks the `gateway` auth type, which
/// `-p` refuses: "Invalid auth method selected.").
fn gemini(test: &str, home: &Path, stub: &str) -> Option<Cli> {
    let bin = installed(test, "gemini-cli/node_modules/.bin/gemini")?;
    let settings = json!({"security": {"auth": {"selectedType": "gemini-api-key"}}});
    let gemini_home = home.join("gemini");
    std::fs::create_dir_all(gemini_home.join(".gemini")).expect("mkdir .gemini");
    let file = gemini_home.join(".gemini/settings.json");
    std::fs::write(file, settings.to_string()).expect("settings");
    let env = [
        ("GOOGLE_GEMINI_BASE_URL", stub),
        ("GEMINI_API_KEY", "fsgate-test-not-a-key"),
        ("GEMINI_CLI_TRUST_WORKSPACE", "true"),
        ("GEMINI_CLI_HOME", &gemini_home.to_string_lossy()),
    ];
    Some(Cli {
        name: "gemini-cli",
        command: vec![bin.into_os_string(), "--yolo".into(), "-p".into()],
        env: env
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect(),
        config: Some(gemini_home.clone()),
        editor: "gemini",
        edit: patch_or_replace,
        edit_op: "write_text_file",
    })
}

/// Where Claude Code's CLI is: the `cli.js` of the Agent SDK that claude-code-acp brings
/// (Claude Code 2.1.44, run by Node 22), or the native `claude` of the one
/// claude-agent-acp brings (2.1.318).
enum Claude {
    NodeCli,
    Native,
}

/// Claude Code's own CLI (`claude -p`), its tools allowed by name (`--allowedTools`: as
/// root, Claude Code refuses `--dangerously-skip-permissions` and `bypassPermissions`
/// unless told it is in a sandbox). Its `Edit` needs a `Read` of the file first; it
/// writes a new file beside `b.txt` and renames it over `b.txt`.
fn claude(test: &str, stub: &str, which: Claude) -> Option<Cli> {
    let mut command = match which {
        Claude::NodeCli => {
            let rel = "claude-acp/node_modules/@anthropic-ai/claude-agent-sdk/cli.js";
            let cli = installed(test, rel)?;
            let node = repo().join(".peers/node22/node_modules/.bin/node");
            vec![node.into_os_string(), cli.into_os_string()]
        }
        Claude::Native => {
            let rel =
                "claude-agent-acp/node_modules/@anthropic-ai/claude-agent-sdk-linux-x64/claude";
            vec![installed(test, rel)?.into_os_string()]
        }
    };
    let args = ["--allowedTools", "Bash,Read,Edit", "-p"];
    command.extend(args.iter().map(OsString::from));
    let env = [
        ("ANTHROPIC_BASE_URL", stub),
        ("ANTHROPIC_API_KEY", "sk-fsgate-test-not-a-key"),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ("DISABLE_AUTOUPDATER", "1"),
        ("DISABLE_TELEMETRY", "1"),
    ];
    Some(Cli {
        name: "claude",
        command,
        env: env
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect(),
        config: None,
        // Claude Code names its process `claude` (Node's process.title, or the binary's).
        editor: r#"comm "claude""#,
        edit: |b| {
            vec![
                json!([{"tool": "Read", "args": {"file_path": b}}]),
                json!([{"tool": "Edit", "args": {"file_path": b, "old_string": "one",
                    "new_string": "uno"}}]),
            ]
        },
        edit_op: "rename",
    })
}

/// The workspace, the run's state beside it, the agent's home, the fake; confined, a
/// file in a directory of its own outside the workspace that no `[agent]` grant covers.
struct Setup {
    root: PathBuf,
    state: PathBuf,
    home: PathBuf,
    fake: Fake,
    outside: Option<(TempDir, PathBuf)>,
    _dirs: (TempDir, TempDir, TempDir),
}

impl Setup {
    fn new(confine: bool) -> Setup {
        let (d1, root) = canonical_tempdir("fsgate-run-agent-ws");
        let (d2, state) = canonical_tempdir("fsgate-run-agent-state");
        let (d3, home) = canonical_tempdir("fsgate-run-agent-home");
        let files = [
            (".env", format!("TOKEN={SECRET}\n")),
            ("a.txt", "hello\n".to_owned()),
            ("b.txt", "one\ntwo\n".to_owned()),
            ("test_app.py", TEST_APP.to_owned()),
        ];
        for (name, text) in files {
            std::fs::write(root.join(name), text).expect("seed workspace");
        }
        let fake = Fake::start(&state.join("model.jsonl"));
        let outside = confine.then(|| {
            let (dir, path) = canonical_tempdir("fsgate-run-agent-outside");
            let file = path.join("notes.txt");
            std::fs::write(&file, OUTSIDE).expect("write the outside file");
            (dir, file)
        });
        Setup {
            root,
            state,
            home,
            fake,
            outside,
            _dirs: (d1, d2, d3),
        }
    }

    /// Walled (the default), the default policy with `cli`'s variables added to `[agent]
    /// env` (the wall passes the keys and base URLs the default names, not the test's
    /// own) and its configuration's directory to `[agent] read_write`; else
    /// `--no-confine`.
    fn confine_args(&self, cli: &Cli) -> Vec<OsString> {
        if self.outside.is_none() {
            return vec!["--no-confine".into()];
        }
        let default = std::fs::read_to_string(repo().join("policies/default.toml"))
            .expect("policies/default.toml");
        let names: String = cli.env.iter().map(|(k, _)| format!("\n  {k:?},")).collect();
        let grant: String = (cli.config.iter())
            .map(|d| format!("read_write = [{d:?}]\n"))
            .collect();
        let policy = default
            .replacen("\n[agent]\n", &format!("\n[agent]\n{grant}"), 1)
            .replacen("\nenv = [", &format!("\nenv = [{names}"), 1);
        assert!(
            policy.contains("\nenv = [\n  \""),
            "no [agent] env in the default"
        );
        let path = self.state.join("policy.toml");
        std::fs::write(&path, policy).expect("write the test policy");
        vec!["--policy".into(), path.into()]
    }

    fn state_args(&self) -> Vec<OsString> {
        vec![
            "--workspace".into(),
            self.root.clone().into(),
            "--audit-log".into(),
            self.state.join("audit.jsonl").into(),
            "--backup-dir".into(),
            self.state.join("backups").into(),
        ]
    }

    /// The steps, one after the other in one turn: four in the shell, then `cli`'s edit.
    fn steps(&self, cli: &Cli) -> Vec<Value> {
        let shell = |c: &str| json!([{ "shell": c }]);
        let mut steps = vec![
            shell("cat .env"),
            shell("python3 test_app.py"),
            shell("echo hi > notes2.txt"),
            shell("rm a.txt"),
        ];
        if let Some((_, file)) = &self.outside {
            steps.push(shell(&format!("cat {}", file.display())));
        }
        steps.extend((cli.edit)(&self.root.join("b.txt")));
        steps
    }

    fn prompt(&self, cli: &Cli) -> String {
        format!("FSGATE-STEP {}", json!({"steps": self.steps(cli)}))
    }

    /// The agent's PATH: Node 22 first; confined, without the directories under HOME
    /// (the system's `python3` runs, the same on every machine).
    fn path(&self) -> OsString {
        let all = path_with_node22();
        let Some(home) = std::env::var_os("HOME").filter(|_| self.outside.is_some()) else {
            return all;
        };
        let node = repo().join(".peers");
        let kept = std::env::split_paths(&all)
            .filter(|p| p.starts_with(&node) || !p.starts_with(&home))
            .collect::<Vec<_>>();
        std::env::join_paths(kept).unwrap_or_default()
    }

    /// `fsgate run ... -- AGENT PROMPT` in the workspace, to its end; (status, stderr).
    fn run(&self, cli: &Cli) -> (Option<i32>, String) {
        let err_path = self.state.join("run.stderr");
        let err = std::fs::File::create(&err_path).expect("stderr file");
        let out = std::fs::File::create(self.state.join("run.stdout")).expect("stdout file");
        let mut cmd = Command::new(bin());
        cmd.arg("run")
            .args(self.confine_args(cli))
            .args(self.state_args())
            .arg("--")
            .args(&cli.command)
            .arg(self.prompt(cli))
            .current_dir(&self.root)
            .env("PATH", self.path())
            .env("HOME", &self.home)
            .envs(cli.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        let mut child = cmd.spawn().expect("spawn fsgate run");
        let deadline = Instant::now() + RUN_LIMIT;
        let status = loop {
            if let Some(s) = child.try_wait().expect("wait") {
                break s;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "{}: fsgate run did not end in {RUN_LIMIT:?}\nstderr:\n{}",
                    cli.name,
                    std::fs::read_to_string(&err_path).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
        (status.code(), stderr)
    }

    fn records(&self) -> Vec<Value> {
        std::fs::read_to_string(self.state.join("audit.jsonl"))
            .expect("audit log")
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    fn file(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.root.join(rel)).ok()
    }
}

/// The run's session id, from its last line on stderr.
fn session_of(stderr: &str) -> String {
    let at = stderr
        .rfind("--session ")
        .unwrap_or_else(|| panic!("no undo line: {stderr}"));
    stderr[at + "--session ".len()..]
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// Runs the scenario with `cli` and checks every promise.
fn governed(cli: &Cli, s: &Setup) {
    let (status, stderr) = s.run(cli);
    let ctx = format!("{}: fsgate run stderr:\n{stderr}", cli.name);
    assert_eq!(status, Some(0), "{ctx}");
    let session = session_of(&stderr);
    let results = the_model_took_every_step_and_saw_no_secret(s, s.steps(cli).len(), &ctx);
    if let Some((_, file)) = &s.outside {
        walled_in(s, file, &results, &stderr, &ctx);
    }
    assert_eq!(s.file("result.txt").as_deref(), Some("passed\n"), "{ctx}");
    assert_eq!(s.file("notes2.txt").as_deref(), Some("hi\n"), "{ctx}");
    assert_eq!(s.file("a.txt"), None, "{ctx}");
    assert_eq!(s.file("b.txt").as_deref(), Some("uno\ntwo\n"), "{ctx}");
    let mine: Vec<Value> = s
        .records()
        .into_iter()
        .filter(|r| r["kind"] == "request" && r["session"] == session.as_str())
        .collect();
    let find = |op: &str, path: &str, decision: &str, by: &str| {
        let found = mine.iter().find(|r| {
            // A rename's path is where it moved from: it changes where it moved to.
            let at = if op == "rename" {
                &r["path2"]
            } else {
                &r["path"]
            };
            r["op"] == op
                && at == path
                && r["decision"] == decision
                && r["transport"] == "view"
                && r["peer"].as_str().is_some_and(|p| p.contains(by))
        });
        found.cloned().unwrap_or_else(|| {
            let seen: Vec<String> = mine
                .iter()
                .filter(|r| r["op"] != "stat" || r["decision"] != "allow")
                .map(|r| format!("{} {} {} {}", r["op"], r["path"], r["decision"], r["peer"]))
                .collect();
            panic!("{ctx}\nno {decision} record of {op} {path} by {by}: {seen:#?}")
        })
    };
    find("stat", ".env", "deny", r#""cat",".env""#);
    find(
        "write_text_file",
        "result.txt",
        "allow",
        r#"python3","test_app.py"]"#,
    );
    // The agent's shell (its script, cut to 256 bytes, may not reach the command).
    find("write_text_file", "notes2.txt", "allow", r#"bash""#);
    let backups = super::scenario::backup_list(&s.state.join("backups"));
    for (op, path, by) in [
        ("rm", "a.txt", r#"["rm","a.txt"]"#),
        (cli.edit_op, "b.txt", cli.editor),
    ] {
        let rec = find(op, path, "allow", by);
        let id = rec["backup"]
            .as_str()
            .unwrap_or_else(|| panic!("{ctx}\nno backup: {rec}"));
        assert!(
            backups.contains(id),
            "{ctx}\nbackup {id} not in the store: {backups}"
        );
    }
    undone(s, &session, &ctx);
}

/// Each step's call was made and its result sent back, the turn ended, and no request
/// held the secret; the refused `cat` came back as a missing file. The results, in order.
fn the_model_took_every_step_and_saw_no_secret(s: &Setup, steps: usize, ctx: &str) -> Vec<String> {
    let reqs = s.fake.requests();
    for r in &reqs {
        let body = r["body"].as_str().unwrap_or_default();
        assert!(
            !body.contains(SECRET),
            "{ctx}\nthe model was sent the secret ({})",
            r["path"]
        );
    }
    let main: Vec<&Value> = reqs.iter().filter(|r| r["kind"] == "main").collect();
    let calls: Vec<&str> = main
        .iter()
        .filter_map(|r| r["answer"]["tool"].as_str())
        .collect();
    assert_eq!(calls.len(), steps, "{ctx}\ncalls: {calls:?}");
    let last = main.last().expect("a tool-loop request");
    assert_eq!(last["answer"]["text"], "FSGATE-DONE", "{ctx}");
    let results: Vec<String> = last["received"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x["text"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(results.len(), steps, "{ctx}\nresults: {results:#?}");
    assert!(
        results[0].contains("No such file or directory"),
        "{ctx}\n{results:#?}"
    );
    assert!(
        results[1].contains("OK"),
        "{ctx}\nthe test's output: {}",
        results[1]
    );
    results
}

/// Confined: the run said so, and the shell's `cat` of `file` (the step after `rm`) was
/// refused by the wall; no request held its text.
fn walled_in(s: &Setup, file: &Path, results: &[String], stderr: &str, ctx: &str) {
    let denied = format!("{}: Permission denied", file.display());
    assert!(
        results.get(4).is_some_and(|r| r.contains(&denied)),
        "{ctx}\nthe outside file's cat: {results:#?}"
    );
    for r in s.fake.requests() {
        let body = r["body"].as_str().unwrap_or_default();
        assert!(
            !body.contains(OUTSIDE),
            "{ctx}\nthe model was sent the outside file ({})",
            r["path"]
        );
    }
    assert!(
        stderr.contains("fsgate: command confined: landlock"),
        "{ctx}"
    );
}

/// `fsgate undo --session` of the run puts back what it removed and edited.
fn undone(s: &Setup, session: &str, ctx: &str) {
    let out = Command::new(bin())
        .arg("undo")
        .args(s.state_args())
        .args(["--session", session])
        .stdin(Stdio::null())
        .output()
        .expect("fsgate undo");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{ctx}\nundo: {err}");
    assert_eq!(
        s.file("a.txt").as_deref(),
        Some("hello\n"),
        "{ctx}\nundo: {err}"
    );
    assert_eq!(
        s.file("b.txt").as_deref(),
        Some("one\ntwo\n"),
        "{ctx}\nundo: {err}"
    );
}

#[test]
fn codex_exec_under_fsgate_run_no_confine_is_governed() {
    let test = "codex_exec_under_fsgate_run_no_confine_is_governed";
    let s = Setup::new(false);
    let Some(cli) = codex(test, &s.home, &s.fake.url()) else {
        return;
    };
    governed(&cli, &s);
}

#[test]
fn gemini_cli_under_fsgate_run_no_confine_is_governed() {
    let test = "gemini_cli_under_fsgate_run_no_confine_is_governed";
    let s = Setup::new(false);
    let Some(cli) = gemini(test, &s.home, &s.fake.url()) else {
        return;
    };
    governed(&cli, &s);
}

#[test]
fn claude_code_cli_under_fsgate_run_no_confine_is_governed() {
    let test = "claude_code_cli_under_fsgate_run_no_confine_is_governed";
    let s = Setup::new(false);
    let Some(cli) = claude(test, &s.fake.url(), Claude::NodeCli) else {
        return;
    };
    governed(&cli, &s);
}

#[test]
fn claude_code_native_cli_under_fsgate_run_no_confine_is_governed() {
    let test = "claude_code_native_cli_under_fsgate_run_no_confine_is_governed";
    let s = Setup::new(false);
    let Some(cli) = claude(test, &s.fake.url(), Claude::Native) else {
        return;
    };
    governed(&cli, &s);
}

#[test]
fn codex_exec_under_fsgate_run_is_governed_and_walled_in() {
    let test = "codex_exec_under_fsgate_run_is_governed_and_walled_in";
    let s = Setup::new(true);
    let Some(cli) = codex(test, &s.home, &s.fake.url()) else {
        return;
    };
    governed(&cli, &s);
}

#[test]
fn gemini_cli_under_fsgate_run_is_governed_and_walled_in() {
    let test = "gemini_cli_under_fsgate_run_is_governed_and_walled_in";
    let s = Setup::new(true);
    let Some(cli) = gemini(test, &s.home, &s.fake.url()) else {
        return;
    };
    governed(&cli, &s);
}

#[test]
fn claude_code_cli_under_fsgate_run_is_governed_and_walled_in() {
    let test = "claude_code_cli_under_fsgate_run_is_governed_and_walled_in";
    let s = Setup::new(true);
    let Some(cli) = claude(test, &s.fake.url(), Claude::NodeCli) else {
        return;
    };
    governed(&cli, &s);
}

#[test]
fn claude_code_native_cli_under_fsgate_run_is_governed_and_walled_in() {
    let test = "claude_code_native_cli_under_fsgate_run_is_governed_and_walled_in";
    let s = Setup::new(true);
    let Some(cli) = claude(test, &s.fake.url(), Claude::Native) else {
        return;
    };
    governed(&cli, &s);
}
