//! Set-up shared by the gateway read benches: a workspace with a 4 KiB source file and a
//! gateway over it with the built-in default policy, as `fsgate serve` builds it.

use fsgate_gateway::ops;
use std::path::{Path, PathBuf};

use fsgate_audit::{AuditLog, AuditSettings, FsyncMode, OpenOptions};
use fsgate_gateway::ops::{Op, Output, PathStyle, RequestCtx};
use fsgate_gateway::{Gateway, Request};
use fsgate_policy::Policy;
use fsgate_workspace::Workspace;

/// 4 KiB of source-like text that no content rule flags.
pub fn clean_text(len: usize) -> String {
    let mut s = String::with_capacity(len + 64);
    let mut i = 0u32;
    while s.len() < len {
        s.push_str(&format!(
            "fn item_{i}(v: &[u32]) -> u32 {{ v.iter().map(|x| x * {i}).sum() }}\n"
        ));
        i += 1;
    }
    s.truncate(len - 1);
    s.push('\n');
    s
}

/// A workspace holding `src/main.rs` (4 KiB). Returns the directory and the file's
/// absolute path under the canonical root, as an ACP client sends it.
pub fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir(dir.path().join("src")).expect("mkdir src");
    let file = dir.path().join("src/main.rs");
    std::fs::write(&file, clean_text(4096)).expect("write file");
    let abs = std::fs::canonicalize(&file).expect("canonical path");
    (dir, abs)
}

/// The gateway over `ws`, with the default policy and, if `fsync` is given, an audit
/// log in `state` (on the same disk as the workspace, not a tmpfs).
pub fn gateway(ws: &Path, state: &Path, fsync: Option<FsyncMode>) -> Gateway {
    let pol = Policy::builtin_default().expect("default policy");
    let sha = pol.sha256().to_string();
    let gw = Gateway::new(pol, Workspace::open(ws).expect("workspace"));
    let Some(mode) = fsync else { return gw };
    let settings = AuditSettings {
        fsync: mode,
        ..AuditSettings::default()
    };
    let log = AuditLog::open(
        &state.join("audit.jsonl"),
        &settings,
        &sha,
        OpenOptions::default(),
    )
    .expect("audit log");
    log.start().expect("heartbeat");
    gw.with_parts(fsgate_gateway::Parts {
        audit: Some(log),
        ..Default::default()
    })
}

/// The ACP door's context.
pub fn ctx() -> RequestCtx {
    RequestCtx {
        style: PathStyle::Absolute,
        session: "bench".into(),
        door: &fsgate_doors::acp::DOOR,
        peer: "pid=1,uid=1000".into(),
        scope: Default::default(),
        asker: None,
        notifier: None,
    }
}

/// One `fs/read_text_file` of `path` through the gateway; panics unless it succeeds
/// with `len` bytes (a bench of a refusal would measure the wrong thing).
pub fn read_once(gw: &Gateway, ctx: &RequestCtx, path: &str, len: usize) -> Output {
    let op = Op::ReadText(ops::ReadText {
        path: path.to_string(),
        line: None,
        limit: None,
    });
    match gw
        .serve(ctx, Request::Op(op), fsgate_gateway::How::alone())
        .0
    {
        Ok(Output::Text(t)) if t.len() == len => Output::Text(t),
        other => panic!("read through the gateway failed: {other:?}"),
    }
}
