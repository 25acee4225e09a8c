//! The gateway's side of `ask` rules, with a fake door that answers a fixed answer and
//! keeps every question it was asked.

use crate::ops;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use crate::ask::{Answer, Asker, Question};
use crate::door::PathStyle;
use crate::gateway::Gateway;
use crate::ops::Op;
use crate::request::RequestCtx;
use fsgate_audit::{AuditLog, AuditSettings, OpenOptions};
use fsgate_base::error::{GatewayError, code};
use fsgate_policy::Policy;
use fsgate_workspace::Workspace;

/// Answers every question with `answer`, keeping the questions and the timeouts given.
#[derive(Debug)]
struct Fake {
    answer: Answer,
    asked: Mutex<Vec<(Question, Duration)>>,
}

impl Fake {
    fn new(answer: Answer) -> Arc<Fake> {
        Arc::new(Fake {
            answer,
            asked: Mutex::new(Vec::new()),
        })
    }

    fn count(&self) -> usize {
        self.asked.lock().expect("questions").len()
    }

    fn question(&self, i: usize) -> (Question, Duration) {
        self.asked.lock().expect("questions")[i].clone()
    }
}

impl Asker for Fake {
    fn ask(&self, q: &Question, timeout: Duration) -> Answer {
        self.asked
            .lock()
            .expect("questions")
            .push((q.clone(), timeout));
        self.answer.clone()
    }
}

/// A deny on `prod`, an ask on `.github` (write, delete), a size rule (so that a write is
/// decided again once its size is known), and everything else allowed.
const POLICY: &str = r#"version = 1
[[rule]]
id = "no-prod"
effect = "deny"
ops = ["write", "delete"]
paths = ["prod"]

[[rule]]
id = "ask-ci"
effect = "ask"
ops = ["write", "delete"]
paths = [".github"]
reason = "CI configuration runs with the repository's secrets"

[[rule]]
id = "huge-read-only"
effect = "deny"
ops = ["write"]
paths = ["**"]
min_size = 1000000

[[rule]]
id = "all"
effect = "allow"
ops = ["*"]
paths = ["**"]

[ask]
timeout_secs = 7
"#;

struct Env {
    gw: Gateway,
    root: PathBuf,
    log: PathBuf,
    _ws: tempfile::TempDir,
    _state: tempfile::TempDir,
}

fn env() -> Env {
    let ws = tempfile::tempdir().expect("workspace");
    let state = tempfile::tempdir().expect("state");
    let log = state.path().join("audit.jsonl");
    let pol = Policy::from_toml(POLICY, "ask-test").expect("policy");
    let audit = AuditLog::open(
        &log,
        &AuditSettings::default(),
        pol.sha256(),
        OpenOptions::default(),
    )
    .expect("audit log");
    let store = fsgate_backup::BackupStore::open(
        &state.path().join("backups"),
        &fsgate_backup::BackupSettings::default(),
    )
    .expect("backups");
    let root = ws.path().canonicalize().expect("root");
    for d in [".github", "prod", "src"] {
        std::fs::create_dir(root.join(d)).expect("dir");
    }
    std::fs::write(root.join(".github/ci.yml"), "on: push\n").expect("ci.yml");
    let gw =
        Gateway::new(pol, Workspace::open(&root).expect("open")).with_parts(crate::build::Parts {
            audit: Some(audit),
            backups: Some(store),
            vcs: None,
        });
    Env {
        gw,
        root,
        log,
        _ws: ws,
        _state: state,
    }
}

fn ctx(session: &str, asker: Option<Arc<Fake>>) -> RequestCtx {
    RequestCtx {
        style: PathStyle::Absolute,
        session: session.into(),
        door: &crate::door::TEST_DOOR,
        peer: "test".into(),
        scope: Default::default(),
        asker: asker.map(|a| a as Arc<dyn Asker>),
        notifier: None,
    }
}

impl Env {
    fn abs(&self, rel: &str) -> String {
        self.root.join(rel).to_string_lossy().into_owned()
    }

    fn write(&self, ctx: &RequestCtx, rel: &str, content: &str) -> Result<(), GatewayError> {
        let op = Op::Write(ops::Write::text(self.abs(rel), content.into()));
        self.gw.handle(ctx, op).0.map(|_| ())
    }

    fn content(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root.join(rel)).expect("content")
    }

    /// The `request` records of the audit log, in order.
    fn requests(&self) -> Vec<Value> {
        requests(&self.log)
    }
}

fn requests(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .expect("log")
        .lines()
        .map(|l| serde_json::from_str(l).expect("record"))
        .filter(|r: &Value| r["kind"] == "request")
        .collect()
}

#[test]
fn allow_once_lets_the_write_through_and_the_record_says_who_allowed_it() {
    let e = env();
    let fake = Fake::new(Answer::AllowOnce);
    e.write(
        &ctx("s1", Some(fake.clone())),
        ".github/ci.yml",
        "on: pull_request\n",
    )
    .expect("allowed by the person");
    assert_eq!(e.content(".github/ci.yml"), "on: pull_request\n");
    assert_eq!(fake.count(), 1, "a write checked twice asks once");
    let (q, timeout) = fake.question(0);
    assert_eq!(
        timeout,
        Duration::from_secs(7),
        "the policy's [ask] timeout_secs"
    );
    assert_eq!(q.rule, "ask-ci");
    assert_eq!(q.class, "write");
    assert_eq!(q.session, "s1");
    assert_eq!(q.path, e.abs(".github/ci.yml"));
    assert_eq!(q.abs_path, e.root.join(".github/ci.yml"));
    assert_eq!(
        q.reason,
        "CI configuration runs with the repository's secrets"
    );
    assert_eq!(
        q.title(),
        format!("write_text_file {}", e.abs(".github/ci.yml"))
    );
    let proposed = q.proposed.expect("the text proposed");
    assert_eq!(proposed.old_text, None);
    assert_eq!(proposed.new_text, "on: pull_request\n");
    let rec = e.requests().pop().expect("record");
    assert_eq!(rec["outcome"], "ok");
    assert_eq!(rec["decision"], "allow");
    assert_eq!(rec["rule"], "ask-ci");
    let asked = rec["details"]["asked"].as_array().expect("details.asked");
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0]["answer"], "allow_once");
    assert_eq!(asked[0]["rule"], "ask-ci");
    assert_eq!(asked[0]["class"], "write");
    for key in ["askedAt", "answeredAt", "waitedMs"] {
        assert!(!asked[0][key].is_null(), "{key}: {asked:?}");
    }
}

#[test]
fn an_edit_checked_as_edit_and_as_write_asks_once_and_shows_its_diff() {
    let e = env();
    let fake = Fake::new(Answer::AllowOnce);
    let op = Op::Edit(ops::Edit {
        path: e.abs(".github/ci.yml"),
        old_text: "push".into(),
        new_text: "pull_request".into(),
    });
    e.gw.handle(&ctx("s1", Some(fake.clone())), op)
        .0
        .expect("allowed by the person");
    assert_eq!(e.content(".github/ci.yml"), "on: pull_request\n");
    assert_eq!(
        fake.count(),
        1,
        "one question per rule and class per request"
    );
    let (q, _) = fake.question(0);
    assert_eq!(q.class, "write");
    let proposed = q.proposed.expect("the edit proposed");
    assert_eq!(proposed.old_text.as_deref(), Some("push"));
    assert_eq!(proposed.new_text, "pull_request");
    let rec = e.requests().pop().expect("record");
    assert_eq!(rec["details"]["asked"].as_array().map(Vec::len), Some(1));
}

#[test]
fn allow_for_the_session_asks_once_per_session_rule_and_class() {
    let e = env();
    let fake = Fake::new(Answer::AllowSession);
    let s1 = ctx("s1", Some(fake.clone()));
    e.write(&s1, ".github/ci.yml", "one\n").expect("first");
    e.write(&s1, ".github/release.yml", "two\n")
        .expect("second");
    assert_eq!(fake.count(), 1, "the second write asked nobody");
    assert_eq!(e.content(".github/release.yml"), "two\n");
    let recs = e.requests();
    let first = &recs[recs.len() - 2]["details"]["asked"][0];
    let second = &recs[recs.len() - 1]["details"]["asked"][0];
    assert_eq!(first["answer"], "allow_always");
    assert_eq!(second["answer"], "allowed_for_session");
    assert_eq!(second["rule"], "ask-ci");
    // Another class of the same rule, and another session, are asked again.
    let rm = Op::Rm(ops::Rm {
        path: e.abs(".github/release.yml"),
        recursive: false,
    });
    e.gw.handle(&s1, rm).0.expect("delete allowed");
    assert_eq!(fake.count(), 2);
    assert_eq!(fake.question(1).0.class, "delete");
    e.write(&ctx("s2", Some(fake.clone())), ".github/ci.yml", "three\n")
        .expect("other session");
    assert_eq!(fake.count(), 3);
}

/// The refusal of an ask: policy code, the ask rule, the message naming why.
fn assert_refused(e: &Env, err: &GatewayError, why: &str, answer: &str) {
    assert_eq!(err.code(), code::REFUSED, "{err:?}");
    assert_eq!(err.rule(), Some("ask-ci"), "{err:?}");
    let want = format!(
        "write of `.github/ci.yml` needs a person's approval (CI configuration runs with the repository's secrets), and {why}"
    );
    assert!(err.message().contains(&want), "{}", err.message());
    assert_eq!(e.content(".github/ci.yml"), "on: push\n", "nothing changed");
    let rec = e.requests().pop().expect("record");
    assert_eq!(rec["decision"], "deny");
    assert_eq!(rec["rule"], "ask-ci");
    assert_eq!(rec["details"]["asked"][0]["answer"], answer);
}

#[test]
fn a_rejection_a_timeout_and_nobody_to_ask_refuse_naming_the_ask_rule() {
    let e = env();
    for (answer, why, name) in [
        (Answer::Reject, "the person asked said no", "reject_once"),
        (Answer::Timeout, "no answer within 7 s", "timeout"),
        (
            Answer::Unanswered("the client closed".into()),
            "nobody could be asked: the client closed",
            "unanswered",
        ),
    ] {
        let fake = Fake::new(answer);
        let err = e
            .write(&ctx("s1", Some(fake.clone())), ".github/ci.yml", "x\n")
            .expect_err("refused");
        assert_eq!(fake.count(), 1);
        assert_refused(&e, &err, why, name);
    }
    let err = e
        .write(&ctx("s1", None), ".github/ci.yml", "x\n")
        .expect_err("nobody to ask");
    assert_refused(
        &e,
        &err,
        "nobody could be asked: this client cannot be asked",
        "unanswered",
    );
    let rec = e.requests().pop().expect("record");
    assert_eq!(
        rec["details"]["asked"][0]["note"],
        "this client cannot be asked"
    );
}

#[test]
fn a_deny_at_the_destination_wins_over_an_ask_at_the_source() {
    let e = env();
    let fake = Fake::new(Answer::AllowOnce);
    let op = Op::Rename(ops::Rename {
        from: e.abs(".github/ci.yml"),
        to: e.abs("prod/ci.yml"),
        replace: true,
    });
    let err =
        e.gw.handle(&ctx("s1", Some(fake.clone())), op)
            .0
            .expect_err("the deny wins");
    assert_eq!(err.code(), code::REFUSED);
    assert_eq!(err.rule(), Some("no-prod"), "{err:?}");
    assert_eq!(e.content(".github/ci.yml"), "on: push\n");
    assert!(!e.root.join("prod/ci.yml").exists());
    let rec = e.requests().pop().expect("record");
    assert_eq!(rec["decision"], "deny");
    assert_eq!(rec["rule"], "no-prod");
}

#[test]
fn paths_no_ask_rule_covers_ask_nobody() {
    let e = env();
    let fake = Fake::new(Answer::Reject);
    let c = ctx("s1", Some(fake.clone()));
    e.write(&c, "src/a.rs", "fn main() {}\n").expect("allowed");
    let err = e.write(&c, "prod/x", "x").expect_err("denied");
    assert_eq!(err.rule(), Some("no-prod"));
    // Reading what an ask rule covers only for write and delete asks nobody either.
    let read = Op::ReadText(ops::ReadText {
        path: e.abs(".github/ci.yml"),
        line: None,
        limit: None,
    });
    e.gw.handle(&c, read).0.expect("read allowed");
    assert_eq!(fake.count(), 0);
    assert!(e.requests().iter().all(|r| r["details"]["asked"].is_null()));
}

#[test]
fn a_write_the_size_rules_refuse_asks_nobody() {
    let e = env();
    let fake = Fake::new(Answer::AllowOnce);
    let big = "x".repeat(1_000_001);
    let err = e
        .write(&ctx("s1", Some(fake.clone())), ".github/ci.yml", &big)
        .expect_err("the size rule denies it");
    assert_eq!(err.rule(), Some("huge-read-only"), "{err:?}");
    assert_eq!(
        fake.count(),
        0,
        "nobody is asked about a write refused anyway"
    );
    let rec = e.requests().pop().expect("record");
    assert!(rec["details"]["asked"].is_null(), "{rec}");
    assert_eq!(e.content(".github/ci.yml"), "on: push\n");
}

#[test]
fn a_rename_to_a_denied_destination_asks_nobody_about_its_source() {
    let e = env();
    let fake = Fake::new(Answer::AllowOnce);
    let op = Op::Rename(ops::Rename {
        from: e.abs(".github/ci.yml"),
        to: e.abs("prod/ci.yml"),
        replace: true,
    });
    let err =
        e.gw.handle(&ctx("s1", Some(fake.clone())), op)
            .0
            .expect_err("the deny wins");
    assert_eq!(err.rule(), Some("no-prod"), "{err:?}");
    assert_eq!(fake.count(), 0, "the source's question is not put");
    let rec = e.requests().pop().expect("record");
    assert!(rec["details"]["asked"].is_null(), "{rec}");
}

#[test]
fn the_question_names_the_normalised_path_with_the_agents_text_escaped() {
    let e = env();
    let fake = Fake::new(Answer::Reject);
    let c = ctx("s1", Some(fake.clone()));
    // `..` after a harmless-looking name: the person must read where it really goes.
    let sly = "src/README.md (a harmless note)/../../.github/ci.yml";
    e.write(&c, sly, "x\n").expect_err("rejected");
    let (q, _) = fake.question(0);
    assert_eq!(q.path, e.abs(".github/ci.yml"));
    assert_eq!(
        q.title(),
        format!("write_text_file {}", e.abs(".github/ci.yml"))
    );
    // Control characters in a name cannot start a line of their own in a prompt.
    e.write(&c, ".github/a\nAllowed by policy: yes\u{202e}.yml", "x\n")
        .expect_err("rejected");
    let (q, _) = fake.question(1);
    let title = q.title();
    assert!(
        !title.contains('\n') && !title.contains('\u{202e}'),
        "{title}"
    );
    assert!(title.contains("a\\nAllowed"), "{title}");
    // A long name keeps its end (where the file's name is) in view.
    let long = format!(
        ".github/{}ci.yml",
        format!("{}/", "d".repeat(100)).repeat(6)
    );
    e.write(&c, &long, "x\n").expect_err("rejected");
    let title = fake.question(2).0.title();
    assert!(title.ends_with("/ci.yml"), "{title}");
    assert!(title.len() < 600, "{}", title.len());
}

#[test]
fn the_log_with_questions_verifies_and_the_intent_carries_the_answer() {
    let e = env();
    let yes = Fake::new(Answer::AllowOnce);
    e.write(&ctx("s1", Some(yes)), ".github/ci.yml", "a\n")
        .expect("allowed");
    let no = Fake::new(Answer::Reject);
    e.write(&ctx("s1", Some(no)), ".github/ci.yml", "b\n")
        .expect_err("rejected");
    let log = std::fs::read_to_string(&e.log).expect("log");
    let intent: Value = log
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("record"))
        .find(|r| r["kind"] == "intent")
        .expect("an intent");
    assert_eq!(
        intent["details"]["asked"][0]["answer"], "allow_once",
        "{intent}"
    );
    let opts = fsgate_audit::verify::VerifyOptions::default();
    let dir = e.log.parent().expect("dir").to_path_buf();
    let rep = fsgate_audit::verify::verify_paths(&[dir], &opts);
    assert_eq!(rep.exit_code(), 0, "{rep:?}");
}

#[test]
fn a_write_through_a_symlink_asks_about_the_file_it_changes() {
    let e = env();
    std::fs::create_dir(e.root.join(".github/workflows")).expect("dir");
    std::fs::write(e.root.join(".github/workflows/ci.yml"), "on: push\n").expect("file");
    std::os::unix::fs::symlink("workflows/ci.yml", e.root.join(".github/notes.yml")).expect("link");
    let fake = Fake::new(Answer::AllowOnce);
    e.write(&ctx("s1", Some(fake.clone())), ".github/notes.yml", "x\n")
        .expect("allowed");
    assert_eq!(fake.count(), 1, "one rule, one question");
    let (q, _) = fake.question(0);
    assert_eq!(q.path, e.abs(".github/workflows/ci.yml"), "where it lands");
    assert_eq!(q.abs_path, e.root.join(".github/workflows/ci.yml"));
}

#[test]
fn a_question_for_many_entries_says_how_many_more_it_covers() {
    let e = env();
    std::fs::write(e.root.join(".github/release.yml"), "x\n").expect("file");
    let fake = Fake::new(Answer::AllowOnce);
    let rm = Op::Rm(ops::Rm {
        path: e.abs(".github"),
        recursive: true,
    });
    e.gw.handle(&ctx("s1", Some(fake.clone())), rm)
        .0
        .expect("allowed");
    assert_eq!(fake.count(), 1, "one question for the rule");
    let (q, _) = fake.question(0);
    assert_eq!(q.path, e.abs(".github"));
    assert!(
        q.reason
            .ends_with("; this rm also covers 2 more entries under the rule"),
        "{}",
        q.reason
    );
    assert!(!e.root.join(".github").exists());
}

#[test]
fn a_session_grant_ends_when_a_reload_changes_its_rule() {
    let e = env();
    let fake = Fake::new(Answer::AllowSession);
    let s1 = ctx("s1", Some(fake.clone()));
    e.write(&s1, ".github/ci.yml", "one\n").expect("first");
    // The same policy again: the grant holds.
    e.gw.reload(Policy::from_toml(POLICY, "same").expect("policy"))
        .expect("reload");
    e.write(&s1, ".github/ci.yml", "two\n").expect("granted");
    assert_eq!(fake.count(), 1);
    // The rule, same id, now reaches `src` too: what was granted is not what it covers.
    let wider = POLICY.replace(r#"paths = [".github"]"#, r#"paths = [".github", "src"]"#);
    e.gw.reload(Policy::from_toml(&wider, "wider").expect("policy"))
        .expect("reload");
    e.write(&s1, "src/a.rs", "x\n")
        .expect("asked again, allowed");
    assert_eq!(fake.count(), 2, "the widened rule asks again");
}

/// Allows, after changing `file` the way a person at the editor might while asked.
#[derive(Debug)]
struct Meddler(PathBuf);

impl Asker for Meddler {
    fn ask(&self, _q: &Question, _timeout: Duration) -> Answer {
        std::fs::write(&self.0, "on: [push, schedule]\n").expect("meddle");
        Answer::AllowOnce
    }
}

#[test]
fn an_edit_of_a_file_changed_while_the_person_was_asked_changes_nothing() {
    let e = env();
    let c = RequestCtx {
        asker: Some(Arc::new(Meddler(e.root.join(".github/ci.yml")))),
        ..ctx("s1", None)
    };
    let op = Op::Edit(ops::Edit {
        path: e.abs(".github/ci.yml"),
        old_text: "on:".into(),
        new_text: "'on':".into(),
    });
    let err = e.gw.handle(&c, op).0.expect_err("the file changed");
    assert!(err.message().contains("changed while"), "{}", err.message());
    assert_eq!(
        e.content(".github/ci.yml"),
        "on: [push, schedule]\n",
        "kept"
    );
}

/// Reloads the policy (all asks turned deny) while the person is asked, then allows.
struct Reloader(Mutex<Option<Arc<Gateway>>>);

impl std::fmt::Debug for Reloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Reloader")
    }
}

impl Asker for Reloader {
    fn ask(&self, _q: &Question, _timeout: Duration) -> Answer {
        if let Some(gw) = self.0.lock().expect("gw").take() {
            let stricter = POLICY.replace(r#"effect = "ask""#, r#"effect = "deny""#);
            gw.reload(Policy::from_toml(&stricter, "stricter").expect("policy"))
                .expect("reload");
        }
        Answer::AllowOnce
    }
}

#[test]
fn a_change_whose_policy_was_reloaded_while_the_person_was_asked_is_not_made() {
    let Env {
        gw,
        root,
        _ws,
        _state,
        ..
    } = env();
    let gw = Arc::new(gw);
    let asker = Arc::new(Reloader(Mutex::new(Some(Arc::clone(&gw)))));
    let c = RequestCtx {
        asker: Some(asker),
        ..ctx("s1", None)
    };
    let op = Op::Write(ops::Write::text(
        root.join(".github/ci.yml").to_string_lossy().into_owned(),
        "x\n".into(),
    ));
    let err = gw
        .handle(&c, op)
        .0
        .expect_err("the policy now in force denies it");
    assert!(err.message().contains("reloaded"), "{}", err.message());
    assert_eq!(
        std::fs::read_to_string(root.join(".github/ci.yml")).expect("read"),
        "on: push\n"
    );
}

#[test]
fn a_change_that_makes_no_change_still_answers_to_its_question() {
    let e = env();
    let fake = Fake::new(Answer::Reject);
    let mkdir = Op::Mkdir(ops::Mkdir {
        path: e.abs(".github"),
        recursive: true,
    });
    let err =
        e.gw.handle(&ctx("s1", Some(fake.clone())), mkdir)
            .0
            .expect_err("the person said no");
    assert_eq!(err.rule(), Some("ask-ci"));
    assert_eq!(fake.count(), 1);
}

#[test]
fn with_several_workspaces_a_websocket_question_names_the_workspace_first() {
    let mut e = env();
    e.gw = e.gw.with_members("app", Vec::new());
    let fake = Fake::new(Answer::Reject);
    let mut c = ctx("s1", Some(fake.clone()));
    c.style = PathStyle::Rooted;
    let op = Op::Write(ops::Write::text("/.github/ci.yml".into(), "x\n".into()));
    e.gw.handle(&c, op).0.expect_err("rejected");
    assert_eq!(fake.question(0).0.path, "/app/.github/ci.yml");
}
