//! Writing checkpoints outside the leader role: the atomic checkpoint file beside the
//! log, then the sink.

use std::path::PathBuf;

use cap_std::fs::Dir;
use ed25519_dalek::SigningKey;

use super::Io;
use crate::checkpoint::{self, Checkpoint, Sink};
use crate::error::AuditError;
use crate::merkle::CompactRange;
use crate::series::checkpoint_name;

impl Io {
    /// The checkpoint writer, which takes over the sink; it shares the directory.
    pub(crate) fn checkpoint_writer(&mut self) -> Result<CkptWriter, AuditError> {
        Ok(CkptWriter {
            dir: self
                .dir
                .try_clone()
                .map_err(|e| AuditError::io("reopen", &self.dir_path, &e))?,
            dir_path: self.dir_path.clone(),
            name: checkpoint_name(&self.name),
            signer: self.signer.clone(),
            sink: self.sink.take(),
        })
    }
}

/// Writes checkpoints: the atomic checkpoint file, then the sink. Runs outside the
/// leader role, so appends go on while a checkpoint is synced.
pub(crate) struct CkptWriter {
    /// A second handle on the log's directory.
    dir: Dir,
    /// Its path, for messages.
    dir_path: PathBuf,
    /// `NAME.checkpoint`.
    name: String,
    /// Signs checkpoints, when configured.
    signer: Option<SigningKey>,
    /// The second place checkpoints go, when configured.
    sink: Option<Sink>,
}

impl CkptWriter {
    /// Writes a checkpoint of (`seq`, `head`); the record must already be on disk.
    pub(crate) fn write(
        &mut self,
        log_id: &str,
        (seq, head): (u64, &[u8; 32]),
        tree: Option<&CompactRange>,
        kind: &str,
    ) -> Result<(), AuditError> {
        let head = hex::encode(head);
        let ts = crate::canonical::now_ts();
        let signer = self.signer.as_ref();
        let cp = Checkpoint::build(log_id, (seq, &head), kind, &ts, tree, signer);
        let mut line = cp.to_line();
        line.push('\n');
        checkpoint::write_atomic(&self.dir, &self.name, line.as_bytes()).map_err(|e| {
            AuditError::Checkpoint {
                message: format!("{}: {e}", self.dir_path.join(&self.name).display()),
            }
        })?;
        if let Some(sink) = &mut self.sink {
            sink.send(line.trim_end())
                .map_err(|message| AuditError::Checkpoint { message })?;
        }
        Ok(())
    }
}
