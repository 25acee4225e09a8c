//! `fsgate-wallprobe`: a test-only program (built only with the `test-bins` feature,
//! which nothing but the test suite enables) that shows the kernel wall holding on its
//! own. It starts exactly as `fsgate serve` does (same handles, same Landlock ruleset,
//! applied by the same library code), then opens whatever paths it is told to with plain
//! `std::fs`, bypassing every check of fsgate's own, so only the kernel can refuse.
//!
//! The `fsgate` binary has none of this: no method, flag or feature of it opens a path
//! from a request without fsgate's checks.
//!
//! Usage: `fsgate-wallprobe --workspace [NAME=]DIR... --audit-log FILE --backup-dir DIR
//! [--policy FILE]`. First line out: `{"sandbox": STATUS, "probeBefore": OUTCOME}`, where the probe
//! is a read of `$FSGATE_TEST_PROBE` made before confinement. Then one line per input
//! line `{"op": "read" | "write", "path": P, "content": C}`: the outcome.
//!
//! # Ambient Authority
//! Opens request paths with `std::fs`: that is its point.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use fsgate::startup::{self, config::GatewayConfig};
use serde_json::{Value, json};

fn outcome(r: std::io::Result<usize>) -> Value {
    match r {
        Ok(n) => json!({"ok": true, "bytes": n}),
        Err(e) => json!({"ok": false, "errno": e.raw_os_error(), "message": e.to_string()}),
    }
}

fn config() -> Result<GatewayConfig, String> {
    let mut args = std::env::args().skip(1);
    let mut cfg = GatewayConfig {
        workspace: PathBuf::new(),
        policy: None,
        audit_log: None,
        backup_dir: None,
        accept_broken_chain: false,
        several: Vec::new(),
    };
    let mut given: Vec<startup::WorkspaceArg> = Vec::new();
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--workspace" => given.push(value.parse()?),
            "--policy" => cfg.policy = Some(value.into()),
            "--audit-log" => cfg.audit_log = Some(value.into()),
            "--backup-dir" => cfg.backup_dir = Some(value.into()),
            other => return Err(format!("unknown flag {other}")),
        }
    }
    // Several workspaces, as `fsgate serve` takes them.
    if given.len() > 1 {
        cfg.several = startup::several::keep_usable(&given).map_err(|e| e.to_string())?;
    }
    cfg.workspace = match (cfg.several.first(), given.first()) {
        (Some(first), _) => first.dir.clone(),
        (None, Some(only)) => only.dir.clone(),
        (None, None) => PathBuf::new(),
    };
    Ok(cfg)
}

fn answer(line: &str) -> Value {
    let Ok(req) = serde_json::from_str::<Value>(line) else {
        return json!({"ok": false, "message": "not JSON"});
    };
    let path = req["path"].as_str().unwrap_or_default();
    match req["op"].as_str() {
        Some("read") => outcome(std::fs::read(path).map(|b| b.len())),
        Some("write") => {
            let content = req["content"].as_str().unwrap_or_default();
            outcome(std::fs::write(path, content).map(|()| content.len()))
        }
        _ => json!({"ok": false, "message": "op must be read or write"}),
    }
}

fn main() -> ExitCode {
    let cfg = match config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("fsgate-wallprobe: {e}");
            return ExitCode::from(2);
        }
    };
    let before = match std::env::var("FSGATE_TEST_PROBE") {
        Ok(p) => outcome(std::fs::read(&p).map(|b| b.len())),
        Err(_) => Value::Null,
    };
    let opened = match startup::open(&cfg) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("fsgate-wallprobe: {e}");
            return ExitCode::from(2);
        }
    };
    let status = match startup::confine(&opened, None, "wallprobe") {
        Ok(s) => s,
        Err(e) => {
            eprintln!("fsgate-wallprobe: {e}");
            return ExitCode::from(2);
        }
    };
    let mut out = std::io::stdout().lock();
    let first = json!({"sandbox": status, "probeBefore": before});
    if writeln!(out, "{first}").and_then(|()| out.flush()).is_err() {
        return ExitCode::from(2);
    }
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if writeln!(out, "{}", answer(&line))
            .and_then(|()| out.flush())
            .is_err()
        {
            break;
        }
    }
    startup::shutdown(&opened.gateway, serde_json::Map::new());
    ExitCode::SUCCESS
}
