//! Opening the log: the tail checked and recovered, the shared state built, the
//! `start` record written (with its details), and [`AuditLog::start`].

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex, RwLock};

use serde_json::{Map, Value, json};

use super::state::{Beat, Duty, Gate, Shared, State};
use super::{AuditLog, OpenOptions};
use crate::config::{AuditSettings, FsyncMode};
use crate::error::AuditError;
use crate::growth::Growth;
use crate::intents::Intent;
use crate::io::Io;
use crate::record::{self, AuditEvent};
use crate::recover;

impl AuditLog {
    /// Opens (or creates) the log at `path`, checks its tail, and records the start.
    ///
    /// Recovery: a torn last line is cut off and described in a `recovered` record; a
    /// chain or checkpoint that does not verify makes `open` fail with
    /// [`AuditError::BrokenChain`] unless `opts.allow_broken_chain`, in which case the
    /// damaged file is copied aside and a `break` record describes it. Then a `start`
    /// record (with the check result) and a `start` checkpoint are written.
    ///
    /// No thread is started: call [`AuditLog::start`] once the process is confined.
    ///
    /// # Ambient Authority
    ///
    /// Opens the log's directory, the signing key and the checkpoint sink by path. Call it
    /// before Landlock; afterwards everything goes through the directory handle.
    pub fn open(
        path: &Path,
        settings: &AuditSettings,
        policy_sha256: &str,
        opts: OpenOptions,
    ) -> Result<AuditLog, AuditError> {
        let mut io = Io::open(path, settings)?;
        let mut rec = recover::apply(&mut io, opts.allow_broken_chain)?;
        // The active file's bytes are freed here, not kept for the log's lifetime.
        let log_id = rec
            .log_id
            .clone()
            .unwrap_or_else(|| hex::encode(crate::keys::random_bytes::<16>()));
        let (head_seq, head) = rec.head.unwrap_or((0, record::GENESIS_PREV));
        let first = rec.active_first_seq.unwrap_or(head_seq + 1);
        let tree = crate::tree::resume(&io, &log_id, &rec.active, first, head_seq)?;
        let open_intents = crate::intents::pending(&io, &std::mem::take(&mut rec.active))?;
        io.set_active(rec.active_len, rec.active_first_seq.unwrap_or(head_seq + 1));
        let ckpt = io.checkpoint_writer()?;
        let shared = Arc::new(Shared {
            path: path.to_owned(),
            log_id,
            mode: settings.fsync,
            checkpoint_every: settings.checkpoint_every(),
            heartbeat: settings.heartbeat(),
            max_file_bytes: settings.max_file_bytes(),
            policy: RwLock::new(Arc::from(policy_sha256)),
            state: Mutex::new(State::resumed(
                (head_seq, head),
                rec.active_len,
                rec.checkpoint_seq.min(head_seq),
                tree.as_ref().ok().cloned(),
            )),
            cv: Condvar::new(),
            io: Mutex::new(io),
            ckpt: Mutex::new(ckpt),
            failing: AtomicBool::new(false),
            space_low: AtomicBool::new(false),
            checkpoint_failing: AtomicBool::new(false),
            beat: Arc::new((Mutex::new(Beat::default()), Condvar::new())),
            heartbeat_thread: Mutex::new(None),
            start_checkpoint_due: AtomicBool::new(opts.defer_start_checkpoint),
            start_checkpoint_thread: Mutex::new(None),
            background_sync_thread: Mutex::new(None),
            start_gate: Gate::default(),
            open_intents: open_intents.clone(),
            on_close: Mutex::new(Vec::new()),
            durable_entries: Mutex::new(Vec::new()),
            growth: Growth::new(
                settings.max_bytes_per_minute(),
                settings.max_session_bytes_per_minute(),
            ),
            coalescer: Arc::default(),
            coalesce_thread: Mutex::new(None),
            coalescing: AtomicBool::new(false),
        });
        let log = AuditLog {
            shared,
            owner: true,
        };
        for ev in rec.events {
            log.append(ev)?;
        }
        let details = start_details(
            (rec.check, &rec.problems),
            settings,
            tree.as_ref().err().map(|why| (path, why.as_str())),
            &open_intents,
        );
        let start = log.append_deferred(&AuditEvent::lifecycle(record::KIND_START, details))?;
        let defer_sync = opts.defer_start_sync && settings.fsync == FsyncMode::Always;
        log.run_duty(Duty {
            checkpoint: (!opts.defer_start_checkpoint).then_some("start"),
            sync: !defer_sync,
            write_only: defer_sync,
        })?;
        // The turn above wrote it (and synced it unless deferred): this only reports
        // whether that worked.
        log.wait(start)?;
        Ok(log)
    }

    /// Starts the heartbeat thread (idle checkpoints, and timed syncs in `batch` mode).
    /// Call it after Landlock confinement so the thread inherits it. Without it, the log
    /// still works; only idle checkpoints and timed batch syncs are missing. The thread
    /// sleeps until the next thing due, and without end while nothing is.
    pub fn start(&self) -> Result<(), AuditError> {
        let _ = self.start_checkpoint_in_background(None)?;
        self.start_heartbeat()
    }
}

/// The `start` record's details: how the log was found (`check`, and what did not
/// verify), its format, this fsgate, how it syncs, whether it signs, why its
/// checkpoints carry no Merkle tree (warned of too), and the intents still open.
pub(super) fn start_details(
    (check, problems): (&str, &[String]),
    settings: &AuditSettings,
    no_tree: Option<(&Path, &str)>,
    open_intents: &[Intent],
) -> Map<String, Value> {
    let mut details = Map::new();
    details.insert("check".into(), Value::String(check.to_owned()));
    details.insert("format".into(), json!(1));
    details.insert("fsgate".into(), json!(env!("CARGO_PKG_VERSION")));
    details.insert(
        "fsync".into(),
        json!(format!("{:?}", settings.fsync).to_lowercase()),
    );
    details.insert("pid".into(), json!(std::process::id()));
    details.insert("signed".into(), json!(settings.signing_key.is_some()));
    if !problems.is_empty() {
        details.insert("problems".into(), json!(problems));
    }
    if let Some((path, why)) = no_tree {
        tracing::warn!(log = %path.display(), "checkpoints carry no Merkle tree: {why}");
        details.insert("noTree".into(), Value::String(why.to_owned()));
    }
    if !open_intents.is_empty() {
        let carried: Vec<Value> = open_intents.iter().map(Intent::to_value).collect();
        details.insert("openIntents".into(), Value::Array(carried));
    }
    details
}
