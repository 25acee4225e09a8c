//! The cursor file `.NAME.ship` beside the log: per destination, the last seq known
//! delivered, and the shipping state `fsgate audit ship-status` shows. Replaced
//! atomically; its leading dot makes it a sidecar, never a log file (audit/FORMAT.md).

use std::collections::BTreeMap;
use std::sync::Mutex;

use cap_std::fs::Dir;

/// The cursor file's name for the log `base`.
pub fn cursor_name(base: &str) -> String {
    format!(".{base}.ship")
}

/// One destination's state.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DestState {
    /// Every record up to this seq was delivered (0: none yet).
    #[serde(rename = "shipped")]
    pub seq: u64,
    /// When `seq` last moved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shipped_at: Option<String>,
    /// `connected`, `retrying` (the last attempt failed) or `stopped` (the gateway
    /// stopped; shipping goes on at its next start).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub state: String,
    /// The last error, kept after shipping works again (with `error_at`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When the last error happened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_at: Option<String>,
    /// A `ship-behind` record was written and no `ship-caught-up` yet.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub alerted: bool,
    /// Records that were gone from the log before they could be shipped (pruned),
    /// as "FIRST..LAST", the latest such range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost: Option<String>,
}

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct CursorDoc {
    /// The log id the seqs belong to (a cursor of another log counts for nothing).
    #[serde(default)]
    pub log: String,
    /// By destination name.
    #[serde(default)]
    pub destinations: BTreeMap<String, DestState>,
}

impl CursorDoc {
    /// Parses the file's text; a damaged file counts as empty (records are shipped
    /// again: at-least-once).
    pub(crate) fn parse(text: &[u8]) -> CursorDoc {
        serde_json::from_slice(text).unwrap_or_default()
    }

    /// Reads `name` in `dir`; missing or damaged: empty.
    pub(crate) fn read(dir: &Dir, name: &str) -> CursorDoc {
        dir.read(name).map(|b| Self::parse(&b)).unwrap_or_default()
    }
}

/// The cursor file, shared by the shipping threads of one log.
#[derive(Debug)]
pub(crate) struct CursorFile {
    /// The log's directory.
    dir: Dir,
    /// `.NAME.ship`.
    name: String,
    /// What the file says (kept in memory, written whole).
    doc: Mutex<CursorDoc>,
}

impl CursorFile {
    /// Loads the cursor of the log `base` whose id is `log_id`.
    pub(crate) fn load(dir: Dir, base: &str, log_id: &str) -> CursorFile {
        let name = cursor_name(base);
        let mut doc = CursorDoc::read(&dir, &name);
        if doc.log != log_id {
            // Another log (replaced, or a first start): its seqs mean nothing here.
            doc = CursorDoc {
                log: log_id.to_owned(),
                destinations: BTreeMap::new(),
            };
        }
        CursorFile {
            dir,
            name,
            doc: Mutex::new(doc),
        }
    }

    /// Forgets the destinations not in `names` (no longer configured), so that
    /// `ship-status` shows only those that ship; writes the file if that changed it.
    pub(crate) fn retain(&self, names: &[String]) -> Result<(), String> {
        let mut doc = self.lock();
        let before = doc.destinations.len();
        doc.destinations.retain(|name, _| names.contains(name));
        if doc.destinations.len() == before {
            return Ok(());
        }
        self.write(&doc)
    }

    /// The state of `dest` (default if unknown).
    pub(crate) fn get(&self, dest: &str) -> DestState {
        self.lock()
            .destinations
            .get(dest)
            .cloned()
            .unwrap_or_default()
    }

    /// Changes `dest`'s state and writes the file; an error says why it was not written.
    pub(crate) fn update(
        &self,
        dest: &str,
        change: impl FnOnce(&mut DestState),
    ) -> Result<(), String> {
        let mut doc = self.lock();
        change(doc.destinations.entry(dest.to_owned()).or_default());
        self.write(&doc)
    }

    fn write(&self, doc: &CursorDoc) -> Result<(), String> {
        let mut text = serde_json::to_vec(doc).map_err(|e| e.to_string())?;
        text.push(b'\n');
        crate::checkpoint::write_atomic(&self.dir, &self.name, &text)
            .map_err(|e| format!("cursor file {}: {e}", self.name))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CursorDoc> {
        self.doc
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn survives_a_restart_and_forgets_another_log() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = || Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).unwrap();
        let c = CursorFile::load(dir(), "audit.jsonl", "aa");
        c.update("x:514", |s| s.seq = 41).unwrap();
        c.update("x:514", |s| s.error = Some("refused".into()))
            .unwrap();
        assert!(crate::series::is_sidecar(&cursor_name("audit.jsonl")));
        let again = CursorFile::load(dir(), "audit.jsonl", "aa");
        assert_eq!(again.get("x:514").seq, 41);
        assert_eq!(again.get("x:514").error.as_deref(), Some("refused"));
        assert_eq!(again.get("other").seq, 0);
        again.retain(&["x:514".into()]).unwrap();
        assert_eq!(again.get("x:514").seq, 41);
        again.retain(&[]).unwrap();
        assert_eq!(
            CursorFile::load(dir(), "audit.jsonl", "aa")
                .get("x:514")
                .seq,
            0
        );
        c.update("x:514", |s| s.seq = 41).unwrap();
        let other_log = CursorFile::load(dir(), "audit.jsonl", "bb");
        assert_eq!(other_log.get("x:514").seq, 0);
        std::fs::write(tmp.path().join(".audit.jsonl.ship"), "{not json").unwrap();
        assert_eq!(
            CursorDoc::read(&dir(), ".audit.jsonl.ship"),
            CursorDoc::default()
        );
    }
}
