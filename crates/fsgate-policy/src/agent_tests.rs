//! The `[agent]` section as the policy loads and lints it (the section's own rules are
//! tested in fsgate-sandbox).

use std::path::{Path, PathBuf};

use crate::lint::{LintOptions, Severity, lint_text};
use crate::{Policy, PolicyError};
use fsgate_sandbox::agent_config::user_home;

/// `version = 1` and an `[agent]` section holding `body`.
fn policy(body: &str) -> String {
    format!("version = 1\n[agent]\n{body}\n")
}

/// (key, line) of the load error of `text`.
fn load_error(text: &str) -> (String, usize, String) {
    match Policy::from_toml(text, "t") {
        Err(PolicyError::Invalid { key, line, message }) => (key, line, message),
        other => panic!("expected an invalid policy, got {:?}", other.map(|_| ())),
    }
}

/// The error findings of `policy check` on `text`: (line, col, message).
fn lint_errors(text: &str) -> Vec<(usize, usize, String)> {
    let r = lint_text(text, "p.toml", None, None, &LintOptions::default());
    r.findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(|f| (f.line, f.col, f.message.clone()))
        .collect()
}

#[test]
fn unknown_keys_and_wrong_types_do_not_parse() {
    for bad in [
        "reed = [\"/x\"]",
        "network = 443",
        "network = [\"https\"]",
        "env = \"A\"",
    ] {
        let text = policy(bad);
        assert!(
            matches!(
                Policy::from_toml(&text, "t"),
                Err(PolicyError::Parse { .. })
            ),
            "{bad}"
        );
    }
}

#[test]
fn every_validation_error_names_its_key_and_line() {
    // (entry on line 4 after two lines of padding, expected key, words of the message)
    for (body, key, words) in [
        (
            "read = [\"/ok\", \"rel/path\"]",
            "agent.read[1]",
            "relative",
        ),
        ("read_write = [\"/a/../b\"]", "agent.read_write[0]", "`..`"),
        ("execute = [\"~bob/bin\"]", "agent.execute[0]", "only `~/`"),
        ("read = [\"~\"]", "agent.read[0]", "whole home"),
        ("read = [\"\"]", "agent.read[0]", "empty path"),
        ("read = [\"/a\\u0000b\"]", "agent.read[0]", "NUL"),
        ("home = \"agent-home\"", "agent.home", "relative"),
        ("tmpdir = \"/tmp/../etc\"", "agent.tmpdir", "`..`"),
        (
            "unix_sockets = [\"bus\"]",
            "agent.unix_sockets[0]",
            "relative",
        ),
        (
            "system_paths = [\"usr\"]",
            "agent.system_paths[0]",
            "relative",
        ),
        ("env = [\"\"]", "agent.env[0]", "empty"),
        ("env = [\"A=B\"]", "agent.env[0]", "`=`"),
        ("env = [\"*\"]", "agent.env[0]", "whole environment"),
        ("env = [\"A*B\"]", "agent.env[0]", "may only end"),
        ("env = [\"LC_**\"]", "agent.env[0]", "may only end"),
        ("env = [\"HOME\"]", "agent.env[0]", "set by fsgate"),
        (
            "env = [\"PATH\", \"TMPDIR\"]",
            "agent.env[1]",
            "set by fsgate",
        ),
        ("network = \"some\"", "agent.network", "expected \"all\""),
        ("network = []", "agent.network", "\"none\""),
        ("network = [0]", "agent.network[0]", "outside 1..=65535"),
        ("network = [443, 70000]", "agent.network[1]", "outside"),
        (
            "network = [443, 80, 443]",
            "agent.network[2]",
            "listed twice",
        ),
    ] {
        let text = policy(&format!("\n\n{body}"));
        let (k, line, message) = load_error(&text);
        assert_eq!((k.as_str(), line), (key, 5), "{body}: {message}");
        assert!(message.contains(words), "{body}: {message}");
    }
}

#[test]
fn policy_check_points_at_the_exact_entry() {
    let text = "version = 1\n[agent]\nread = [\"/ok\",  \"rel\"]\nnetwork = [\n  443,\n    0,\n]\n";
    let errors = lint_errors(text);
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert_eq!((errors[0].0, errors[0].1), (3, 17), "{errors:?}");
    assert!(errors[0].2.starts_with("agent.read[1]: "), "{errors:?}");
    assert_eq!((errors[1].0, errors[1].1), (6, 5), "{errors:?}");
    assert!(errors[1].2.starts_with("agent.network[1]: "), "{errors:?}");
}

#[test]
fn the_older_sandbox_key_is_still_accepted_but_not_with_the_new_one() {
    let old = "version = 1\n[sandbox]\nagent_system_paths = [\"/usr\", \"/opt/tools\"]\n";
    let p = Policy::from_toml(old, "t").expect("the older key loads");
    assert_eq!(
        p.agent().system_paths(None),
        Some(vec![PathBuf::from("/usr"), PathBuf::from("/opt/tools")])
    );
    assert_eq!(
        p.agent().system_paths_source(),
        "[sandbox] agent_system_paths"
    );
    let bad_old = "version = 1\n[sandbox]\n\nagent_system_paths = [\"usr\"]\n";
    let (key, line, _) = load_error(bad_old);
    assert_eq!((key.as_str(), line), ("sandbox.agent_system_paths[0]", 4));
    let both = "version = 1\n[sandbox]\nagent_system_paths = [\"/usr\"]\n[agent]\nsystem_paths = [\"/usr\"]\n";
    let (key, line, message) = load_error(both);
    assert_eq!((key.as_str(), line), ("agent.system_paths", 5), "{message}");
    assert!(
        message.contains("keep only [agent] system_paths"),
        "{message}"
    );
}

#[test]
fn a_policy_refuses_agent_entries_reaching_its_own_files() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = |p: PathBuf| p.display().to_string();
    let audit = d(tmp.path().join("logs/audit.jsonl"));
    let logs = d(tmp.path().join("logs"));
    let key = d(tmp.path().join("keys/sign.key"));
    let backups = d(tmp.path().join("backups"));
    let head = format!(
        "version = 1\n[audit]\npath = {audit:?}\nsigning_key = {key:?}\n[backup]\ndir = {backups:?}\n[agent]\n"
    );
    for (entry, label) in [
        (format!("read = [{logs:?}]"), "audit log directory"),
        (format!("read = [{audit:?}]"), "audit log"),
        (
            format!("execute = [{:?}]", d(tmp.path().join("keys"))),
            "audit signing key",
        ),
        (
            format!("read_write = [{:?}]", d(tmp.path().join("backups/x"))),
            "backup store",
        ),
        (
            format!("tmpdir = {:?}", d(tmp.path().to_path_buf())),
            "audit log directory",
        ),
    ] {
        let (k, line, message) = load_error(&format!("{head}{entry}\n"));
        assert_eq!(line, 8, "{entry}: {message}");
        assert!(k.starts_with("agent."), "{k}");
        assert!(message.contains(label), "{entry}: {message}");
    }
    assert!(
        Policy::from_toml(
            &format!("{head}read = [{:?}]\n", d(tmp.path().join("data"))),
            "t"
        )
        .is_ok()
    );
}

#[test]
fn policy_check_warns_of_credential_grants_and_names() {
    let Some(home) = user_home() else { return };
    if home == Path::new("/") {
        return;
    }
    let text = "version = 1\n[agent]\nread = [\"~/.config\", \"~/.ssh/config\", \"~/.cache/x\"]\nenv = [\"OPENAI_API_KEY\", \"GITHUB_TOKEN\"]\n";
    let r = lint_text(text, "p.toml", None, None, &LintOptions::default());
    let warn: Vec<(usize, usize, &str)> = r
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Warning)
        .map(|f| (f.line, f.col, f.code))
        .collect();
    assert_eq!(
        warn,
        [
            (3, 9, "agent-credentials"),
            (3, 22, "agent-credentials"),
            (4, 26, "agent-env-credential")
        ],
        "{:?}",
        r.findings
    );
    assert!(!r.invalid);
}
