//! What a user installs and pastes: the client configurations in docs/clients/ (each
//! parses, names `fsgate`, and its arguments start the real binary), the shell
//! completions and the man pages generated from the command line's definitions, and
//! every `fsgate ...` command the README and the docs show.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::common::{bin, run_cli};

/// One configuration file: where its servers are, and what each entry must say.
struct Client {
    file: &'static str,
    /// The object holding the server entries.
    servers: &'static str,
    /// The entry's `type`, where the client's format requires one.
    kind: Option<&'static str>,
    /// The subcommand and flags the arguments must hold.
    must_hold: &'static [&'static str],
}

const CLIENTS: &[Client] = &[
    Client {
        file: "zed.settings.json",
        servers: "agent_servers",
        kind: Some("custom"),
        must_hold: &["acp", "--confine-agent", "--workspace", "--"],
    },
    Client {
        file: "claude_desktop_config.json",
        servers: "mcpServers",
        kind: None,
        must_hold: &["serve", "--transport", "mcp", "--workspace"],
    },
    Client {
        file: "claude-code.mcp.json",
        servers: "mcpServers",
        kind: Some("stdio"),
        must_hold: &["serve", "--transport", "mcp", "--workspace"],
    },
    Client {
        file: "cursor.mcp.json",
        servers: "mcpServers",
        kind: None,
        must_hold: &["serve", "--transport", "mcp", "--workspace"],
    },
    Client {
        file: "vscode.mcp.json",
        servers: "servers",
        kind: Some("stdio"),
        must_hold: &["serve", "--transport", "mcp", "--workspace"],
    },
];

/// Stand-ins for the workspace in the files: a placeholder, or the client's variable.
const WORKSPACE_PLACEHOLDERS: &[&str] = &["/path/to/project", "${workspaceFolder}"];

fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/clients")
}

/// The one server entry of a configuration: its arguments, after checking its shape.
fn fsgate_args(c: &Client) -> Vec<String> {
    let path = clients_dir().join(c.file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", c.file));
    let doc: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", c.file));
    let servers = doc[c.servers]
        .as_object()
        .unwrap_or_else(|| panic!("{}: no `{}` object", c.file, c.servers));
    assert_eq!(servers.len(), 1, "{}: one entry", c.file);
    let (name, entry) = servers.iter().next().expect("one entry");
    assert!(!name.is_empty(), "{}: the entry has a name", c.file);
    assert_eq!(entry["command"], "fsgate", "{}: runs fsgate", c.file);
    if let Some(kind) = c.kind {
        assert_eq!(entry["type"], kind, "{}: type", c.file);
    }
    let args: Vec<String> = entry["args"]
        .as_array()
        .unwrap_or_else(|| panic!("{}: args is a list", c.file))
        .iter()
        .map(|a| {
            a.as_str()
                .unwrap_or_else(|| panic!("{}: every argument is a string", c.file))
                .to_owned()
        })
        .collect();
    for flag in c.must_hold {
        assert!(
            args.iter().any(|a| a == flag),
            "{}: {flag} in {args:?}",
            c.file
        );
    }
    args
}

/// Runs `fsgate ARGS --check-sandbox` with the workspace placeholder replaced, a fresh
/// HOME and state directory, and a stand-in for the agent program on PATH.
fn check_sandbox(file: &str, args: &[String]) -> (Output, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().join("project");
    let stand_ins = dir.path().join("bin");
    for d in [&ws, &stand_ins, &dir.path().join("home")] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    let ws_text = ws.to_str().expect("utf-8 temp path");
    let mut replaced = 0;
    let mut args: Vec<String> = args
        .iter()
        .map(|a| match WORKSPACE_PLACEHOLDERS.contains(&a.as_str()) {
            true => {
                replaced += 1;
                ws_text.to_owned()
            }
            false => a.clone(),
        })
        .collect();
    assert_eq!(
        replaced, 1,
        "{file}: the workspace is a placeholder: {args:?}"
    );
    // `--check-sandbox` goes before the agent command, if there is one.
    let at = args.iter().position(|a| a == "--").unwrap_or(args.len());
    if let Some(agent) = args.get(at + 1) {
        let stand_in = stand_ins.join(agent);
        std::fs::write(&stand_in, "#!/bin/sh\nexit 0\n").expect("write stand-in");
        std::fs::set_permissions(&stand_in, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    args.insert(at, "--check-sandbox".into());
    let path = format!(
        "{}:{}",
        stand_ins.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(bin())
        .args(&args)
        .env("HOME", dir.path().join("home"))
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .env("PATH", path)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .expect("run fsgate");
    (out, dir)
}

#[test]
fn every_client_configuration_is_checked_here() {
    let listed: BTreeSet<&str> = CLIENTS.iter().map(|c| c.file).collect();
    let present: BTreeSet<String> = std::fs::read_dir(clients_dir())
        .expect("docs/clients")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    let present: BTreeSet<&str> = present.iter().map(String::as_str).collect();
    assert_eq!(
        present, listed,
        "docs/clients/*.json and the files checked here"
    );
    let readme = std::fs::read_to_string(clients_dir().join("README.md")).expect("README");
    for c in CLIENTS {
        assert!(
            readme.contains(c.file),
            "docs/clients/README.md explains {}",
            c.file
        );
    }
}

#[test]
fn client_configurations_start_fsgate() {
    for c in CLIENTS {
        let args = fsgate_args(c);
        let (out, dir) = check_sandbox(c.file, &args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}: fsgate {args:?} --check-sandbox failed: {}{stdout}",
            c.file,
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.to_lowercase().contains("landlock"),
            "{}: prints what the kernel enforces: {stdout}",
            c.file
        );
        // It really opened the workspace's default state: the audit log is there.
        let state = dir.path().join("state/fsgate");
        let logs: Vec<_> = std::fs::read_dir(&state)
            .unwrap_or_else(|e| panic!("{}: no state directory: {e}", c.file))
            .filter_map(|e| e.ok())
            .filter(|e| e.path().join("audit/audit.jsonl").is_file())
            .collect();
        assert_eq!(logs.len(), 1, "{}: one workspace's audit log", c.file);
    }
}

/// The subcommands every generated document must name.
const SUBCOMMANDS: &[&str] = &[
    "serve",
    "acp",
    "run",
    "policy",
    "audit",
    "backup",
    "undo",
    "completions",
    "man",
    "mcp-connect",
];

#[test]
fn completions_cover_every_subcommand_in_each_shell() {
    for (shell, marker) in [
        ("bash", "_fsgate()"),
        ("zsh", "#compdef fsgate"),
        ("fish", "complete -c fsgate"),
        ("elvish", "edit:completion:arg-completer[fsgate]"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let out = run_cli(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(marker), "{shell}: {marker:?} missing");
        for sub in SUBCOMMANDS {
            assert!(text.contains(sub), "{shell}: no {sub}");
        }
        // Flags of nested subcommands too.
        for flag in ["confine-agent", "check-sandbox", "audit-log"] {
            assert!(text.contains(flag), "{shell}: no --{flag}");
        }
    }
    let bad = run_cli(&["completions", "tcsh"]);
    assert_eq!(
        bad.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );
}

#[test]
fn bash_completion_is_valid_bash_and_completes_subcommands() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("fsgate.bash");
    let out = run_cli(&["completions", "bash"]);
    assert!(out.status.success(), "{out:?}");
    std::fs::write(&script, &out.stdout).expect("write");
    // Load it and ask for the completions of `fsgate se` and `fsgate serve --tr`.
    let probe = format!(
        "source {}\n\
         COMP_WORDS=(fsgate se); COMP_CWORD=1; _fsgate fsgate se fsgate; echo \"1:${{COMPREPLY[*]}}\"\n\
         COMP_WORDS=(fsgate serve --tr); COMP_CWORD=2; _fsgate fsgate --tr serve; echo \"2:${{COMPREPLY[*]}}\"\n",
        script.display()
    );
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &probe])
        .output()
        .expect("run bash");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("1:serve"), "fsgate se<TAB>: {text}");
    assert!(
        text.contains("2:--transport"),
        "fsgate serve --tr<TAB>: {text}"
    );
}

#[test]
fn man_page_documents_fsgate_and_one_page_per_command() {
    let out = run_cli(&["man"]);
    assert!(out.status.success(), "{out:?}");
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(page.contains(".TH fsgate 1"), "a section-1 page: {page}");
    for sub in SUBCOMMANDS {
        // roff escapes every dash, those in the subcommand's name too.
        let sub_roff = sub.replace('-', "\\-");
        assert!(
            page.contains(&format!("fsgate\\-{sub_roff}(1)")),
            "lists {sub}"
        );
    }

    let dir = tempfile::tempdir().expect("tempdir");
    let man1 = dir.path().join("share/man/man1");
    let d = man1.to_str().expect("utf-8 temp path");
    let out = run_cli(&["man", "--dir", d]);
    assert!(out.status.success(), "{out:?}");
    assert!(out.stdout.is_empty(), "pages go to files, not stdout");
    for name in [
        "fsgate.1",
        "fsgate-serve.1",
        "fsgate-acp.1",
        "fsgate-audit-verify.1",
        "fsgate-policy-check.1",
        "fsgate-backup-restore.1",
        "fsgate-undo.1",
        "fsgate-completions.1",
    ] {
        assert!(man1.join(name).is_file(), "{name} written");
    }
    let serve = std::fs::read_to_string(man1.join("fsgate-serve.1")).expect("read");
    assert!(serve.contains(".TH fsgate-serve 1"), "{serve}");
    for flag in [
        "workspace",
        "policy",
        "transport",
        "audit\\-log",
        "check\\-sandbox",
    ] {
        assert!(
            serve.contains(&format!("\\-\\-{flag}")),
            "serve page: --{flag}"
        );
    }
}

/// The documents whose `fsgate ...` commands are checked against the real command line.
fn documents() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs = vec![
        root.join("README.md"),
        root.join("policies/README.md"),
        root.join("audit/FORMAT.md"),
    ];
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir)
            .expect("docs dir")
            .filter_map(|e| e.ok())
        {
            let p = e.path();
            match p.extension().and_then(|x| x.to_str()) {
                _ if p.is_dir() => dirs.push(p),
                Some("md") => docs.push(p),
                _ => {}
            }
        }
    }
    docs
}

/// The documents speak only of documents a reader of the repository has: none of them
/// cites "the contract" (the project's interface is what README.md and docs/ describe).
#[test]
fn documents_cite_no_document_outside_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for doc in documents().into_iter().chain([root.join("SECURITY.md")]) {
        let text = std::fs::read_to_string(&doc).expect("document");
        for (n, line) in text.lines().enumerate() {
            if line.to_lowercase().contains("contract") {
                found.push(format!("{}:{}: {line}", doc.display(), n + 1));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// A documented command's words: up to a comment, redirection or the next shell
/// command; optional parts' brackets and `...` dropped.
fn command_words(text: &str) -> Vec<String> {
    let end = [" #", " >", " & ", " && ", " | "]
        .iter()
        .filter_map(|s| text.find(s))
        .min()
        .unwrap_or(text.len());
    text[..end]
        .split_whitespace()
        .map(|w| w.trim_matches(['[', ']']).trim_end_matches("..."))
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Every `fsgate` command in a code block parses as it stands (subcommand, flags, every
/// required argument); every one quoted in the text names a real subcommand and real
/// flags (it may leave out required arguments: "`fsgate acp --confine-agent` walls in
/// ...").
#[test]
fn documented_commands_parse() {
    use clap::Parser;
    use clap::error::ErrorKind::{DisplayHelp, InvalidValue, MissingRequiredArgument};
    let mut checked = 0;
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).expect("read doc");
        let name = doc.display();
        let mut in_block = false;
        let mut prose = String::new();
        for line in text.lines() {
            if line.starts_with("```") {
                in_block = !in_block;
                continue;
            }
            let l = line.trim();
            if !in_block {
                prose.push_str(line);
                prose.push(' ');
            } else if l.starts_with("fsgate ") {
                let words = command_words(l);
                if let Err(e) = fsgate::cli::args::Cli::try_parse_from(&words) {
                    panic!("{name}: `{l}` does not parse: {e}");
                }
                checked += 1;
            }
        }
        for quoted in prose.split('`').skip(1).step_by(2) {
            if !quoted.starts_with("fsgate ") || quoted.contains('|') {
                continue;
            }
            let words = command_words(quoted);
            match fsgate::cli::args::Cli::try_parse_from(&words) {
                Ok(_) => {}
                Err(e) if matches!(e.kind(), MissingRequiredArgument | DisplayHelp) => {}
                // A synopsis's placeholder (`--op OP`) for a value from a fixed list.
                Err(e) if e.kind() == InvalidValue && is_placeholder(&e) => {}
                Err(e) => panic!("{name}: `{quoted}`: {e}"),
            }
            checked += 1;
        }
    }
    assert!(
        checked > 50,
        "the documents hold the commands: {checked} checked"
    );
}

/// True if the value clap refused is a placeholder in capitals (`OP`, `SHELL`).
fn is_placeholder(e: &clap::Error) -> bool {
    use clap::error::{ContextKind, ContextValue};
    matches!(
        e.get(ContextKind::InvalidValue),
        Some(ContextValue::String(v)) if v.len() > 1 && v.chars().all(|c| c.is_ascii_uppercase() || c == '_')
    )
}
