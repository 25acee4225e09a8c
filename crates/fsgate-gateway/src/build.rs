//! What a gateway is given besides its policy and workspace (the audit log, the backup
//! store, the git work tree, session names, `initialize`'s facts), and access to them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;

use crate::gateway::{Gateway, StartPass};
use fsgate_audit::AuditLog;
use fsgate_backup::BackupStore;

/// What a gateway is given besides its policy and workspace ([`Gateway::with_parts`]);
/// a part left None is left as it was.
#[derive(Default)]
pub struct Parts {
    /// The audit log: one record per request, durable before the reply (None in unit
    /// tests and offline tools only).
    pub audit: Option<AuditLog>,
    /// Where previous versions go before a change (None only where nothing changes).
    pub backups: Option<BackupStore>,
    /// The git work tree changes are staged in (`[vcs] stage`), found at start.
    pub vcs: Option<crate::vcs::Stager>,
}

impl Gateway {
    /// From now on the session named `provisional` is the session `real`: its requests
    /// are served, recorded and asked about under `real`. False when too many names
    /// are held already (its records then keep the provisional name).
    pub fn name_session(&self, provisional: &str, real: &str) -> bool {
        self.names.give(provisional, real)
    }

    /// Attaches the parts given: the audit log, the backup store, the git work tree.
    pub fn with_parts(mut self, parts: Parts) -> Gateway {
        let Parts {
            audit,
            backups,
            vcs,
        } = parts;
        if let Some(audit) = audit {
            self.audit = Some(audit);
        }
        if let Some(backups) = backups {
            self.backups = Some(backups);
        }
        if let Some(stager) = vcs {
            self.vcs = Some(Arc::new(stager));
        }
        self
    }

    /// The git work tree changes are staged in, if one was found at start.
    pub fn vcs(&self) -> Option<&crate::vcs::Stager> {
        self.vcs.as_deref()
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
        self.saver().prune_backups();
    }

    /// [`prune_backups`](Self::prune_backups) on a thread of its own: the start-up's
    /// pass reads every version's record (seconds for a large store whose records the
    /// kernel has not cached), and serving need not wait for it. A save meanwhile that
    /// needs the store's byte count waits for the pass to give it. Call
    /// [`finish_background_prune`](Self::finish_background_prune) before the log is
    /// closed, so that what the pass removed is recorded.
    pub fn prune_backups_in_background(self: &Arc<Self>) {
        if self.backups.is_none() {
            return;
        }
        let gw = Arc::clone(self);
        let stop = Arc::new(AtomicBool::new(false));
        let until = Arc::clone(&stop);
        let spawned = std::thread::Builder::new()
            .name("backup-prune".into())
            .spawn(move || gw.saver().prune_backups_until(&until));
        match spawned {
            Ok(thread) => *self.lock_start_pass() = Some(StartPass { thread, stop }),
            Err(e) => {
                tracing::warn!("backup retention: no thread for it ({e}); running it now");
                self.prune_backups();
            }
        }
    }

    /// Ends the pass [`prune_backups_in_background`](Self::prune_backups_in_background)
    /// started, if it is still running: it stops after the shard it is in (the next
    /// start's pass goes on from there), and what it removed is recorded. What
    /// `BackupStore::prune_until` does not cut short is waited for.
    pub fn finish_background_prune(&self) {
        let pass = self.lock_start_pass().take();
        if let Some(pass) = pass {
            pass.stop.store(true, Ordering::Relaxed);
            if pass.thread.join().is_err() {
                tracing::error!("backup retention: its thread panicked");
            }
        }
    }

    fn lock_start_pass(&self) -> std::sync::MutexGuard<'_, Option<StartPass>> {
        self.start_pass.lock().unwrap_or_else(|p| p.into_inner())
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

#[cfg(test)]
impl Gateway {
    /// [`with_parts`](Self::with_parts) of the audit log alone, for tests.
    pub(crate) fn with_audit(self, audit: AuditLog) -> Gateway {
        self.with_parts(Parts {
            audit: Some(audit),
            ..Parts::default()
        })
    }
}
