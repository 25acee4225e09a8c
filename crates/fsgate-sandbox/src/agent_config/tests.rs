use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::validate::credential_env_name;
use super::*;
use crate::plan::Protected;

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
