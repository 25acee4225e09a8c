//! What start-up tells: where the audit log and backups are (in the gateway's meta) and
//! the `start` record's details.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use fsgate_gateway::Gateway;
use fsgate_policy::Policy;
use fsgate_sandbox::SandboxStatus;

use super::config::GatewayConfig;

/// The audit log and backup store, absolute (a client's working directory may differ),
/// set in the gateway's meta; with several workspaces, the store holding one directory
/// per workspace.
pub(super) fn show_locations(
    gateway: &mut Gateway,
    cfg: &GatewayConfig,
    audit_path: &Path,
    (backup_root, backup_dir): (Option<PathBuf>, PathBuf),
) -> (PathBuf, PathBuf) {
    let shown_backups = match (backup_root, cfg.several.is_empty()) {
        (Some(root), false) => root,
        _ => backup_dir,
    };
    let locations = (absolute(audit_path), absolute(&shown_backups));
    gateway.set_meta(
        "auditLog",
        locations.0.to_string_lossy().into_owned().into(),
    );
    gateway.set_meta(
        "backupDir",
        locations.1.to_string_lossy().into_owned().into(),
    );
    locations
}

pub(super) fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// The `start` record's details: version, transport, pid, workspaces, the policy in
/// force when confined, sandbox.
pub(super) fn start_details(
    gw: &Gateway,
    pol: &Policy,
    transport: &str,
    status: &SandboxStatus,
) -> Map<String, Value> {
    let mut start = Map::new();
    start.insert("version".into(), env!("CARGO_PKG_VERSION").into());
    start.insert("transport".into(), transport.into());
    start.insert("pid".into(), std::process::id().into());
    start.insert(
        "workspace".into(),
        gw.workspace()
            .root_path()
            .to_string_lossy()
            .into_owned()
            .into(),
    );
    if gw.is_several() {
        start.insert("workspaces".into(), gw.members().json());
    }
    start.insert(
        "policy".into(),
        json!({"origin": pol.origin(), "sha256": pol.sha256()}),
    );
    start.insert(
        "sandbox".into(),
        serde_json::to_value(status).unwrap_or(Value::Null),
    );
    start
}
