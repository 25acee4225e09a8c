use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::*;
use crate::policy::lint::{LintOptions, Severity, lint_text};
use crate::policy::{Policy, PolicyError};
use crate::sandbox::Protected;

const FULL: &str = r#"
read = ["~/.config/agent-x", "/srv/models"]
read_write = ["~/.cache/agent-x"]
execute = ["~/tools"]
home = "~/.agent-home"
tmpdir = "/var/tmp/agent"
env = ["ANTHROPIC_API_KEY", "LC_*"]
network = [443, 11434]
unix_sockets = ["/run/user/1000/bus"]
system_paths = ["/usr", "/lib"]
discover = false
"#;

fn parse(text: &str) -> AgentSettings {
    toml::from_str(text).expect("a valid [agent] section")
}

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
fn parses_every_key_and_answers_the_lead_api() {
    let a = parse(FULL);
    let home = Path::new("/home/op");
    assert_eq!(a.validate(Some(home)), Ok(()));
    let grants = a.grants(Some(home));
    let got: Vec<(PathBuf, AgentAccess, &str)> = grants
        .iter()
        .map(|g| (g.path.clone(), g.access, g.source.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                PathBuf::from("/home/op/.config/agent-x"),
                AgentAccess::Read,
                "[agent] read"
            ),
            (
                PathBuf::from("/srv/models"),
                AgentAccess::Read,
                "[agent] read"
            ),
            (
                PathBuf::from("/home/op/.cache/agent-x"),
                AgentAccess::ReadWrite,
                "[agent] read_write"
            ),
            (
                PathBuf::from("/home/op/tools"),
                AgentAccess::ReadExec,
                "[agent] execute"
            ),
            (
                PathBuf::from("/home/op/.agent-home"),
                AgentAccess::ReadWrite,
                "[agent] home"
            ),
            (
                PathBuf::from("/var/tmp/agent"),
                AgentAccess::ReadWrite,
                "[agent] tmpdir"
            ),
        ]
    );
    assert_eq!(a.network(), AgentNetwork::Ports(vec![443, 11434]));
    assert_eq!(
        a.unix_sockets(Some(home)),
        vec![PathBuf::from("/run/user/1000/bus")]
    );
    assert_eq!(a.home(Some(home)), Some(home.join(".agent-home")));
    assert_eq!(a.tmpdir(Some(home)), Some(PathBuf::from("/var/tmp/agent")));
    assert_eq!(
        a.system_paths(Some(home)),
        Some(vec![PathBuf::from("/usr"), PathBuf::from("/lib")])
    );
    assert_eq!(a.system_paths_source(), "[agent] system_paths");
    assert!(!a.discover());
}

#[test]
fn defaults_keep_the_built_ins_and_a_scratch_home() {
    let a = AgentSettings::default();
    assert_eq!(parse(""), a);
    assert!(a.discover());
    assert_eq!(a.network(), AgentNetwork::All);
    assert!(a.grants(Some(Path::new("/h"))).is_empty());
    assert_eq!(a.home(Some(Path::new("/h"))), None);
    assert_eq!(a.system_paths(None), None);
    assert_eq!(parse("network = \"none\"").network(), AgentNetwork::None);
    assert_eq!(parse("network = \"all\"").network(), AgentNetwork::All);
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
fn a_tilde_path_without_home_is_refused() {
    let a = parse("read = [\"~/.config/x\"]");
    let err = a.validate(None).expect_err("no HOME");
    assert_eq!(err.key(), "agent.read[0]");
    assert!(err.to_string().contains("HOME is not set"), "{err}");
    assert!(a.grants(None).is_empty(), "never a relative `~` grant");
    // An absolute path naming the home, or above it, is the whole home too.
    for whole in ["/home/op", "/home", "/", "~//"] {
        let a = parse(&format!("read = [{whole:?}]"));
        let err = a.validate(Some(Path::new("/home/op"))).expect_err(whole);
        assert!(err.to_string().contains("whole home"), "{whole}: {err}");
    }
    assert!(
        parse("read = [\"/home/op/proj-data\"]")
            .validate(Some(Path::new("/home/op")))
            .is_ok()
    );
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

fn vars(names: &[&str]) -> Vec<(OsString, OsString)> {
    names
        .iter()
        .map(|n| (OsString::from(n), OsString::from(format!("value of {n}"))))
        .collect()
}

#[test]
fn environment_passes_the_default_list_and_the_named_variables_only() {
    let a = parse("env = [\"ANTHROPIC_API_KEY\", \"MY_TOOL_*\"]");
    let env = vars(&[
        "PATH",
        "AWS_SECRET_ACCESS_KEY",
        "LC_ALL",
        "LC_CTYPE",
        "HOME",
        "TMPDIR",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_API_KEY_2",
        "GITHUB_TOKEN",
        "MY_TOOL_MODE",
        "LANG",
        "TERM",
        "SSH_AUTH_SOCK",
    ]);
    let passed: Vec<String> = a
        .environment(env)
        .into_iter()
        .map(|(k, v)| {
            assert_eq!(
                v,
                OsString::from(format!("value of {}", k.to_string_lossy()))
            );
            k.to_string_lossy().into_owned()
        })
        .collect();
    assert_eq!(
        passed,
        [
            "PATH",
            "LC_ALL",
            "LC_CTYPE",
            "ANTHROPIC_API_KEY",
            "MY_TOOL_MODE",
            "LANG",
            "TERM"
        ]
    );
    // Without [agent] env, only the documented defaults.
    let none = AgentSettings::default().environment(vars(&["ANTHROPIC_API_KEY", "TZ", "USER"]));
    assert_eq!(none.len(), 2);
    for name in DEFAULT_AGENT_ENV {
        let name = name.replace('*', "ALL");
        assert!(AgentSettings::default().passes(OsStr::new(&name)), "{name}");
    }
}

#[cfg(unix)]
#[test]
fn non_utf8_names_are_never_passed() {
    use std::os::unix::ffi::OsStringExt;
    let a = parse("env = [\"LC_*\"]");
    let name = OsString::from_vec(b"LC_\xff".to_vec());
    assert!(a.environment([(name, OsString::from("x"))]).is_empty());
}

fn protected(path: &Path, label: &str) -> Protected {
    Protected {
        path: path.to_path_buf(),
        label: label.to_owned(),
    }
}

#[test]
fn entries_reaching_a_protected_path_are_refused_with_their_key() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let audit = tmp.path().join("var/log/fsgate");
    let other = tmp.path().join("data");
    std::fs::create_dir_all(&audit).expect("mkdir");
    std::fs::create_dir_all(&other).expect("mkdir");
    let prot = [protected(&audit, "audit log directory")];
    let d = |p: &Path| p.display().to_string();
    for (body, key, relation) in [
        (
            format!("read = [{:?}, {:?}]", d(&other), d(&audit)),
            "agent.read[1]",
            "is",
        ),
        (
            format!("read_write = [{:?}]", d(&tmp.path().join("var"))),
            "agent.read_write[0]",
            "contains",
        ),
        (
            format!("execute = [{:?}]", d(&audit.join("x"))),
            "agent.execute[0]",
            "lies inside",
        ),
        (
            format!("home = {:?}", d(&audit.join("home"))),
            "agent.home",
            "lies inside",
        ),
        (
            format!("unix_sockets = [{:?}]", d(&audit.join("s"))),
            "agent.unix_sockets[0]",
            "lies inside",
        ),
        (
            format!("system_paths = [{:?}]", d(tmp.path())),
            "agent.system_paths[0]",
            "contains",
        ),
    ] {
        let err = parse(&body).check_protected(&prot, None).expect_err(&body);
        assert_eq!(err.key(), key, "{body}");
        let AgentConfigError::Protected(r) = &err else {
            panic!("{err:?}");
        };
        assert_eq!(r.relation, relation, "{body}");
        let msg = err.to_string();
        assert!(
            msg.contains("audit log directory") && msg.contains(&d(&audit)),
            "{msg}"
        );
    }
    let rw = parse(&format!("read_write = [{:?}]", d(&audit)));
    let msg = rw.check_protected(&prot, None).expect_err("rw").to_string();
    assert!(msg.contains("read and change"), "{msg}");
    assert!(
        parse(&format!("read = [{:?}]", d(&other)))
            .check_protected(&prot, None)
            .is_ok()
    );
}

#[cfg(unix)]
#[test]
fn a_symlink_to_a_protected_path_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(ws.join("src")).expect("mkdir");
    let link = tmp.path().join("innocent");
    std::os::unix::fs::symlink(&ws, &link).expect("symlink");
    let prot = [protected(&ws, "workspace")];
    for entry in [link.clone(), link.join("src")] {
        let a = parse(&format!("read = [{:?}]", entry.display().to_string()));
        let err = a
            .check_protected(&prot, None)
            .expect_err("through the link");
        assert!(err.to_string().contains("workspace"), "{err}");
    }
    // And a protected path given through a link is compared resolved too.
    let prot_link = [protected(&link, "workspace")];
    let a = parse(&format!(
        "read = [{:?}]",
        ws.join("src").display().to_string()
    ));
    assert!(a.check_protected(&prot_link, None).is_err());
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
fn credential_env_names_are_recognised() {
    for yes in [
        "AWS_SECRET_ACCESS_KEY",
        "AWS_*",
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "NPM_TOKEN",
        "MY_SECRET",
        "DB_PASSWORD",
        "GITHUB_*",
        "A*",
    ] {
        assert!(credential_env_name(yes), "{yes}");
    }
    for no in [
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "OPENAI_API_KEY",
        "LC_*",
        "OPENAI_*",
        "PATH",
        "EDITOR",
    ] {
        assert!(!credential_env_name(no), "{no}");
    }
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
