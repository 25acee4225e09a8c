//! fsgate's own files: the audit log opened (its directory made private), and the files
//! beneath the fixed floor, out of every policy's reach.

use std::path::{Path, PathBuf};

use fsgate_audit::{AuditLog, OpenOptions};
use fsgate_decide::floor::FloorKind;
use fsgate_policy::Policy;
use fsgate_policy::floor;

use super::config::GatewayConfig;

/// How `fsgate` opens its audit log: the `start` checkpoint and the `start` record's
/// sync are both left to `confine` (the checkpoint on a thread of its own, the record
/// made durable with the gateway's own `start`: one sync instead of two).
pub(super) fn audit_open_options(cfg: &GatewayConfig) -> OpenOptions {
    OpenOptions {
        allow_broken_chain: cfg.accept_broken_chain,
        defer_start_checkpoint: true,
        defer_start_sync: true,
    }
}

/// fsgate's own files, beneath no policy's reach (the fixed floor): the audit log
/// and its sidecars, the backups, the policy file and the gitleaks configs it names,
/// and the state directory that holds every workspace's defaults.
/// The shipping cursor (`.NAME.ship`) too: an agent that moved it ahead would keep
/// records from the collectors.
pub(super) fn own_files(
    cfg: &GatewayConfig,
    policy: &Policy,
    (audit_path, audit_parent): (&Path, &Path),
    backups: PathBuf,
) -> Vec<(FloorKind, PathBuf)> {
    let audit_settings = &policy.settings().audit;
    let cursor =
        fsgate_audit::ship::cursor::cursor_name(&fsgate_audit::series::file_name(audit_path));
    let mut own: Vec<(FloorKind, PathBuf)> = vec![
        (FloorKind::AuditLog, audit_path.to_path_buf()),
        (FloorKind::AuditLog, audit_parent.join(cursor)),
        (FloorKind::BackupDir, backups),
    ];
    if let Some(k) = &audit_settings.signing_key {
        own.push((FloorKind::SigningKey, k.clone()));
    }
    for k in audit_settings.ship.iter().filter_map(|d| d.tls_key.clone()) {
        own.push((FloorKind::ShipKey, k));
    }
    if let Some(sink) = audit_settings.checkpoint_sink.as_deref()
        && !sink.starts_with("syslog")
    {
        own.push((FloorKind::CheckpointSink, PathBuf::from(sink)));
    }
    if let Some(p) = &cfg.policy {
        own.push((FloorKind::PolicyFile, p.clone()));
    }
    own.extend(floor::gitleaks_configs(policy));
    // Every workspace's default audit log and backups: beneath the floor too where a
    // workspace holds them (`--workspace ~`), or its agent could rewrite another's.
    if let Ok(state) = fsgate_base::state::state_root() {
        own.push((FloorKind::StateDir, state));
    }
    own
}

/// The checkpoint sink's directory, kept open for a read-write rule when the sink is a
/// file.
pub(super) fn sink_parent(audit_settings: &fsgate_audit::AuditSettings) -> Vec<std::fs::File> {
    let mut extra_rw = Vec::new();
    if let Some(sink) = audit_settings.checkpoint_sink.as_deref()
        && sink != "syslog"
        && !sink.starts_with("syslog:")
        && let Some(parent) = Path::new(sink).parent()
        && let Ok(f) = std::fs::File::open(parent)
    {
        extra_rw.push(f);
    }
    extra_rw
}

fn create_private_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))
}

/// Opens the log the operator named (refused if another process holds it), or else the
/// first free chain of the workspace's default log directory: a second gateway on the
/// same workspace gets `audit-2.jsonl` beside `audit.jsonl` (audit/FORMAT.md).
pub(super) fn open_audit(
    cfg: &GatewayConfig,
    settings: &fsgate_audit::AuditSettings,
    policy: &Policy,
    opts: OpenOptions,
    state: impl Fn() -> Result<PathBuf, String>,
) -> Result<(PathBuf, PathBuf, AuditLog), String> {
    let named = cfg.audit_log.as_ref().or(settings.path.as_ref());
    let parent = match named {
        Some(p) => p
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf(),
        None => state()?.join("audit"),
    };
    create_private_dir(&parent)?;
    let opened = match named {
        Some(p) => AuditLog::open(p, settings, policy.sha256(), opts).map(|l| (p.clone(), l)),
        None => fsgate_audit::open_first_free(&parent, settings, policy.sha256(), opts),
    };
    let (path, log) = opened.map_err(|e| e.to_string())?;
    Ok((path, parent, log))
}
