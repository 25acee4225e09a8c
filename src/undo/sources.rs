//! What the undo reads: the workspace through its handle, and the backups, each checked
//! against its SHA-256.

use std::collections::HashMap;
use std::io::Read;

use fsgate_backup::{BackupRef, BackupStore};
use fsgate_base::path::RelPath;
use fsgate_base::sha256::Sha256;
use fsgate_workspace::{FileKind, Workspace, WsError};

use super::world::{Content, Node};

/// Reading the workspace (through its handle) and the backup store.
pub struct Sources<'a> {
    ws: &'a Workspace,
    store: Option<&'a BackupStore>,
    saved: HashMap<String, BackupRef>,
}

/// A workspace-relative path from the log as a [`RelPath`].
pub fn rel_path(p: &str) -> Result<RelPath, String> {
    RelPath::parse_rooted(&format!("/{p}")).map_err(|e| format!("{p}: {e}"))
}

impl<'a> Sources<'a> {
    /// Reads `ws`, and backups from `store` (None: there is no store).
    pub fn new(ws: &'a Workspace, store: Option<&'a BackupStore>) -> Sources<'a> {
        Sources {
            ws,
            store,
            saved: HashMap::new(),
        }
    }

    /// What the disk holds at `path`.
    pub fn disk_node(&self, path: &str) -> Result<Node, String> {
        match self.ws.entry_kind(&rel_path(path)?) {
            Ok(FileKind::File) => Ok(Node::File(Content::Disk(path.to_owned()))),
            Ok(FileKind::Directory) => Ok(Node::Dir),
            Ok(_) | Err(WsError::Raced | WsError::SymlinkEscape) => Ok(Node::Other),
            Err(WsError::NotFound | WsError::NotDir) => Ok(Node::Absent),
            Err(e) => Err(format!("{path}: {e}")),
        }
    }

    /// The permission bits of `path` on disk (None: nothing there).
    pub fn disk_mode(&self, path: &str) -> Result<Option<u32>, String> {
        match self.ws.mode_of(&rel_path(path)?) {
            Ok(m) => Ok(Some(m)),
            Err(WsError::NotFound | WsError::NotDir) => Ok(None),
            Err(e) => Err(format!("{path}: {e}")),
        }
    }

    /// The names in the directory `path` on disk.
    pub fn disk_names(&self, path: &str) -> Result<Vec<String>, String> {
        let entries = self.ws.list_names(&rel_path(path)?);
        let entries = entries.map_err(|e| format!("{path}: {e}"))?;
        Ok(entries.into_iter().map(|e| e.name.into()).collect())
    }

    /// The record of backup `id`.
    pub fn saved(&mut self, id: &str) -> Result<BackupRef, String> {
        if let Some(r) = self.saved.get(id) {
            return Ok(r.clone());
        }
        let (r, _) = self.open_saved(id)?;
        self.saved.insert(id.to_owned(), r.clone());
        Ok(r)
    }

    fn open_saved(
        &self,
        id: &str,
    ) -> Result<(BackupRef, std::io::Take<cap_std::fs::File>), String> {
        let store = self
            .store
            .ok_or_else(|| format!("backup {id}: there is no backup store"))?;
        store.open_id(id).map_err(|e| e.to_string())
    }

    /// SHA-256 (hex) of `c`.
    pub fn sha(&mut self, c: &Content) -> Result<String, String> {
        match c {
            Content::Saved(id) => Ok(self.saved(id)?.sha256),
            Content::Disk(path) => {
                let (mut file, _) = self
                    .ws
                    .open_regular(&rel_path(path)?)
                    .map_err(|e| format!("{path}: {e}"))?;
                let (_, sha) = fsgate_backup::store::copy_hashing(&mut file, &mut std::io::sink())
                    .map_err(|e| format!("{path}: {e}"))?;
                Ok(sha)
            }
        }
    }

    /// The bytes of `c`, if it holds at most `limit` (None: more).
    pub fn bytes(&mut self, c: &Content, limit: u64) -> Result<Option<Vec<u8>>, String> {
        match c {
            Content::Saved(id) => {
                let (r, reader) = self.open_saved(id)?;
                if r.size > limit {
                    return Ok(None);
                }
                read_checked(reader, &r).map(Some)
            }
            Content::Disk(path) => match self.ws.read_file(&rel_path(path)?, limit) {
                Ok(c) => Ok(Some(c.bytes)),
                Err(WsError::TooLarge { .. }) => Ok(None),
                Err(e) => Err(format!("{path}: {e}")),
            },
        }
    }

    /// The whole content of backup `id`, checked against its hash.
    pub fn saved_bytes(&mut self, id: &str) -> Result<Vec<u8>, String> {
        let (r, reader) = self.open_saved(id)?;
        read_checked(reader, &r)
    }
}

fn read_checked(mut reader: impl Read, r: &BackupRef) -> Result<Vec<u8>, String> {
    // The record's size is a hint only: a damaged one cannot make this reserve much.
    let hint = usize::try_from(r.size.min(1 << 26)).unwrap_or(0);
    let mut bytes = Vec::with_capacity(hint);
    reader
        .read_to_end(&mut bytes)
        .map_err(|e| format!("backup {}: {e}", r.id))?;
    if hex::encode(Sha256::digest(&bytes)) != r.sha256 {
        return Err(format!(
            "backup {} is damaged: its content does not match its SHA-256",
            r.id
        ));
    }
    Ok(bytes)
}
