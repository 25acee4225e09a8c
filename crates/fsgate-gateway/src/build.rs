//! What a gateway is given besides its policy and workspace (the audit log, the backup
//! store, the git work tree, session names, `initialize`'s facts), and access to them.

use std::sync::Arc;

use serde_json::Value;

use super::Gateway;
use fsgate_audit::AuditLog;
use fsgate_backup::BackupStore;

impl Gateway {
    /// From now on the session named `provisional` is the session `real`: its requests
    /// are served, recorded and asked about under `real`. False when too many names
    /// are held already (its records then keep the provisional name).
    pub fn name_session(&self, provisional: &str, real: &str) -> bool {
        self.names.give(provisional, real)
    }

    /// Attaches the git work tree changes are staged in.
    pub fn with_vcs(mut self, stager: crate::vcs::Stager) -> Gateway {
        self.vcs = Some(Arc::new(stager));
        self
    }

    /// The git work tree changes are staged in, if one was found at start.
    pub fn vcs(&self) -> Option<&crate::vcs::Stager> {
        self.vcs.as_deref()
    }

    /// Attaches the audit log.
    pub fn with_audit(mut self, audit: AuditLog) -> Gateway {
        self.audit = Some(audit);
        self
    }

    /// Attaches the backup store.
    pub fn with_backups(mut self, backups: BackupStore) -> Gateway {
        self.backups = Some(backups);
        self
    }

    /// The audit log, if attached.
    pub fn audit(&self) -> Option<&AuditLog> {
        self.audit.as_ref()
    }

    /// The backup store, if attached.
    pub fn backups(&self) -> Option<&BackupStore> {
        self.backups.as_ref()
    }

    /// Applies the backup retention rules once, recording what was removed.
    pub fn prune_backups(&self) {
        let Some(store) = self.backups() else { return };
        match store.prune() {
            Ok(report) => crate::change::record_prune(self.audit.as_ref(), &report),
            Err(e) => tracing::warn!("backup retention: {e}"),
        }
    }

    /// Adds a fact to `initialize`'s `_meta.fsgate`.
    pub fn set_meta(&self, key: &str, value: Value) {
        if let Ok(mut m) = self.meta.write() {
            m.insert(key.to_string(), value);
        }
    }

    /// `_meta.fsgate` for `initialize`.
    pub fn meta(&self) -> Value {
        let pol = self.policy();
        let mut m = self.meta.read().map(|m| m.clone()).unwrap_or_default();
        m.insert("version".into(), env!("CARGO_PKG_VERSION").into());
        m.insert(
            "workspace".into(),
            self.workspace
                .root_path()
                .to_string_lossy()
                .into_owned()
                .into(),
        );
        m.insert(
            "policy".into(),
            serde_json::json!({"origin": pol.origin(), "sha256": pol.sha256()}),
        );
        if self.is_several() {
            m.insert("workspaces".into(), self.members().json());
        }
        Value::Object(m)
    }
}
