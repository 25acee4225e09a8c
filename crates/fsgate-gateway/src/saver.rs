//! The backup taken before a change replaces or removes a file: saved, or the change is
//! refused (or, past a size limit the policy lets through, noted as made without one).

use std::sync::atomic::AtomicBool;

use serde_json::{Value, json};

use crate::facts::Facts;
use crate::rules::ws_error;
use fsgate_backup::{BackupError, BackupStore, OnLimit, PrunedVersion, Saving};
use fsgate_base::error::GatewayError;
use fsgate_base::path::RelPath;
use fsgate_workspace::{Entry, WsError};

/// The fstat sizes a backup's limits and copy use: size, blocks, device.
fn sizes(meta: &std::fs::Metadata) -> (u64, u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.size(), meta.blocks(), meta.dev())
}

/// The backups taken before a change: what an operation (and a start's
/// reconciliation) saves through.
#[derive(Clone, Copy)]
pub(crate) struct Saver<'a> {
    /// The workspace the saved files are opened in.
    pub(crate) workspace: &'a fsgate_workspace::Workspace,
    /// Where previous versions go (None where nothing changes).
    pub(crate) store: Option<&'a BackupStore>,
    /// Backups saved since start (retention passes run amortised over them).
    pub(crate) saves: &'a std::sync::atomic::AtomicU64,
    /// Where a retention pass is recorded.
    pub(crate) audit: Option<&'a fsgate_audit::AuditLog>,
}

impl<'a> Saver<'a> {
    /// The backup store, if there is one.
    pub(crate) fn backups(&self) -> Option<&'a BackupStore> {
        self.store
    }

    /// Applies the backup retention rules once, recording what was removed.
    pub(crate) fn prune_backups(&self) {
        self.prune_backups_until(&AtomicBool::new(false));
    }

    /// [`prune_backups`](Self::prune_backups), cut short between two shards once
    /// `stop` is set (`BackupStore::prune_until`).
    /// What it removes is recorded as it goes, a part at a time, so that a pass that
    /// removes much of a large store holds little of it.
    pub(crate) fn prune_backups_until(&self, stop: &AtomicBool) {
        let Some(store) = self.store else { return };
        let record = &mut |removed: Vec<PrunedVersion>| record_prune(self.audit, &removed);
        match store.prune_until(stop, record) {
            Ok(report) if report.stopped => tracing::info!(
                "backup retention: the pass was cut short by the stop; the next start goes on"
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!("backup retention: {e}"),
        }
    }

    /// Saves the current content of the regular file at `real` to the backup store
    /// before it is replaced or removed. No backup, no change (fail closed), unless the
    /// policy's `[backup] on_limit` lets a change past a size limit go ahead without one:
    /// its audit record then says so (`noBackup`).
    pub(crate) fn backup(
        &self,
        real: &RelPath,
        shown: &str,
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        self.backup_if(real, None, shown, facts)
    }

    /// [`backup`](Self::backup) of a file listed by an inspection: refused (nothing
    /// saved, nothing changed) if the name no longer holds the inspected file, whose
    /// content the later removal would otherwise delete without a backup.
    pub(crate) fn backup_inspected(
        &self,
        e: &Entry,
        shown: &str,
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        self.backup_if(&e.path, Some(e), shown, facts)
    }

    fn backup_if(
        &self,
        real: &RelPath,
        inspected: Option<&Entry>,
        shown: &str,
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        let Some((store, file, meta)) = self.backup_open(real, inspected, shown, facts)? else {
            return Ok(());
        };
        let saved = store.save_opened(real.as_str(), &file, sizes(&meta));
        self.backup_saved(store, real, shown, saved, &meta, facts)
    }

    /// [`backup`](Self::backup) whose syncs run beside the request: the version is
    /// written and named (its id and hash in `facts`) when this returns, and the change
    /// waits for [`backup_durable`](Self::backup_durable) before it touches the file.
    pub(crate) fn backup_beside(
        &self,
        real: &RelPath,
        shown: &str,
        facts: &mut Facts,
    ) -> Result<Option<Saving<'a>>, GatewayError> {
        let Some((store, file, meta)) = self.backup_open(real, None, shown, facts)? else {
            return Ok(None);
        };
        let (saved, saving) = match store.save_opened_beside(real.as_str(), &file, sizes(&meta)) {
            Ok(s) => (Ok(s.saved().clone()), Some(s)),
            Err(e) => (Err(e), None),
        };
        self.backup_saved(store, real, shown, saved, &meta, facts)?;
        Ok(saving)
    }

    /// Waits until a backup started by [`backup_beside`](Self::backup_beside) is durable:
    /// Err means there is no backup, and nothing may change.
    pub(crate) fn backup_durable(
        &self,
        saving: Option<Saving<'_>>,
        shown: &str,
    ) -> Result<(), GatewayError> {
        let Some(saving) = saving else { return Ok(()) };
        let done = saving.wait();
        if let Some(store) = self.backups() {
            for report in store.take_prune_reports() {
                record_prune(self.audit, &report.removed);
            }
        }
        done.map(|_| ()).map_err(|e| {
            GatewayError::Internal(format!(
                "cannot back up the previous content of {shown}, so nothing was changed: {e}"
            ))
        })
    }

    /// The store and the opened regular file at `real` to back up, once nobody is to be
    /// asked any more; None when there is no store.
    fn backup_open(
        &self,
        real: &RelPath,
        inspected: Option<&Entry>,
        shown: &str,
        facts: &mut Facts,
    ) -> Result<Option<(&'a BackupStore, std::fs::File, std::fs::Metadata)>, GatewayError> {
        // Nobody is asked about a change another check refuses: only now, before the
        // first side effect.
        facts.settle_pending()?;
        let Some(store) = self.backups() else {
            return Ok(None);
        };
        let (file, meta) = self
            .workspace
            .open_regular(real)
            .map_err(|e| ws_error(e, shown))?;
        use std::os::unix::fs::MetadataExt;
        if let Some(e) = inspected
            && e.id != Some((meta.dev(), meta.ino()))
        {
            return Err(ws_error(WsError::Unseen(e.path.clone()), shown));
        }
        Ok(Some((store, file, meta)))
    }

    /// What follows a save (durable or not yet): its id and the hash of what it holds
    /// in `facts`, or the refusal (or the note of a change without backup) past a limit.
    fn backup_saved(
        &self,
        store: &BackupStore,
        real: &RelPath,
        shown: &str,
        saved: Result<fsgate_backup::BackupRef, BackupError>,
        meta: &std::fs::Metadata,
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        use std::os::unix::fs::MetadataExt;
        for report in store.take_prune_reports() {
            record_prune(self.audit, &report.removed);
        }
        let saved = match saved {
            Ok(s) => s,
            Err(BackupError::TooLarge { limit, message }) => {
                return self.past_backup_limit(store, real, shown, limit, message, facts);
            }
            Err(e) => {
                return Err(GatewayError::Internal(format!(
                    "cannot back up the previous content of {shown}, so nothing was changed: {e}"
                )));
            }
        };
        facts.old_sha256 = Some(saved.sha256);
        facts.saved_file = Some((meta.dev(), meta.ino()));
        facts.backups.push(saved.id);
        let n = self
            .saves
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        // The save itself kept its file to `keep_versions`; what is left to a pass over
        // the whole store (ages of other files, crash leftovers) runs amortised.
        if store.sweep_due(n, crate::rules::PRUNE_EVERY) {
            self.prune_backups();
        }
        Ok(())
    }

    /// A backup past a `[backup]` size limit: refuse (the default), or note in the
    /// request's facts that the change goes ahead without a backup.
    fn past_backup_limit(
        &self,
        store: &BackupStore,
        real: &RelPath,
        shown: &str,
        limit: &'static str,
        message: String,
        facts: &mut Facts,
    ) -> Result<(), GatewayError> {
        if store.on_limit() == OnLimit::Refuse {
            return Err(GatewayError::Limit {
                reason: format!("{message}; nothing was changed"),
                rule: limit.into(),
                path: shown.to_string(),
            });
        }
        tracing::warn!(
            limit,
            "changing {real} without a backup ([backup] on_limit)"
        );
        let skipped = facts
            .args
            .entry("noBackup")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(list) = skipped {
            list.push(json!({"path": real.as_str(), "limit": limit}));
        }
        store.note_changed(real.as_str());
        Ok(())
    }

    /// Notes that the gateway wrote `real` (a file it may have created): a later backup
    /// of it holds this session's content, not the user's.
    pub(crate) fn note_changed(&self, real: &RelPath) {
        if let Some(store) = self.backups() {
            store.note_changed(real.as_str());
        }
    }
}

/// A `backup-prune` record lists at most this many removed versions...
const PRUNED_PER_RECORD: usize = 1000;
/// ...in at most about this many bytes of JSON: a pass that removes more writes several
/// records, so none grows past what a reader or a proof takes whole.
const PRUNE_RECORD_BYTES: usize = 256 * 1024;

/// Records what a retention pass removed, if anything (a failure is logged), a record
/// at a time.
fn record_prune(audit: Option<&fsgate_audit::AuditLog>, removed: &[PrunedVersion]) {
    let Some(a) = audit else { return };
    each_prune_record(removed, &mut |details| {
        if let Err(e) = a.append(fsgate_audit::AuditEvent::lifecycle("backup-prune", details)) {
            tracing::error!("audit log: cannot record `backup-prune`: {e}");
        }
    });
}

/// Gives `each` the details of the `backup-prune` records for `removed`, one after the
/// other: each lists the next versions in order (`removed`) and the bytes they held
/// (`removedBytes`).
fn each_prune_record(
    removed: &[PrunedVersion],
    each: &mut dyn FnMut(serde_json::Map<String, Value>),
) {
    let mut chunk: Vec<Value> = Vec::new();
    let (mut bytes, mut held) = (0usize, 0u64);
    let mut flush = |chunk: &mut Vec<Value>, held: &mut u64| {
        let mut details = serde_json::Map::new();
        details.insert("removed".into(), Value::Array(std::mem::take(chunk)));
        details.insert("removedBytes".into(), std::mem::take(held).into());
        each(details);
    };
    for p in removed {
        let entry = serde_json::to_value(p).unwrap_or(Value::Null);
        let size = serde_json::to_vec(&entry).map_or(0, |v| v.len());
        if !chunk.is_empty()
            && (chunk.len() >= PRUNED_PER_RECORD || bytes + size > PRUNE_RECORD_BYTES)
        {
            flush(&mut chunk, &mut held);
            bytes = 0;
        }
        bytes += size;
        held += p.backup.size;
        chunk.push(entry);
    }
    if !chunk.is_empty() {
        flush(&mut chunk, &mut held);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fsgate_backup::{BackupRef, PruneReason};

    fn pruned(i: usize, path_len: usize) -> PrunedVersion {
        PrunedVersion {
            backup: BackupRef {
                id: format!("v{i}"),
                rel_path: "p".repeat(path_len),
                ts: "2026-11-29T08:00:00.000000000Z".into(),
                sha256: "0".repeat(64),
                size: 10,
                original: false,
                mode: None,
            },
            reason: PruneReason::MaxTotalBytes,
        }
    }

    /// A pass that removed many versions is recorded in several records, in order, none
    /// past its count or size, together naming every version and byte once.
    #[test]
    fn a_large_prune_is_recorded_in_bounded_records() {
        for (n, path_len, want_records) in [(0, 1, 0), (3, 1, 1), (2500, 1, 3), (300, 4000, 5)] {
            let removed: Vec<PrunedVersion> = (0..n).map(|i| pruned(i, path_len)).collect();
            let mut records = Vec::new();
            each_prune_record(&removed, &mut |d| records.push(d));
            assert_eq!(
                records.len(),
                want_records,
                "{n} versions, paths of {path_len}"
            );
            let mut ids = Vec::new();
            for d in &records {
                let list = d["removed"].as_array().expect("removed");
                assert!(list.len() <= PRUNED_PER_RECORD);
                let json = serde_json::to_vec(d).expect("json");
                assert!(
                    json.len() <= PRUNE_RECORD_BYTES + 1024,
                    "{} bytes",
                    json.len()
                );
                assert_eq!(d["removedBytes"], 10 * list.len() as u64);
                ids.extend(
                    list.iter()
                        .map(|e| e["backup"]["id"].as_str().unwrap().to_owned()),
                );
            }
            let want: Vec<String> = (0..n).map(|i| format!("v{i}")).collect();
            assert_eq!(ids, want);
        }
    }
}
