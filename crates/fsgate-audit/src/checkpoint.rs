//! Checkpoints (seq + head hash, optionally Ed25519-signed) and the atomic checkpoint
//! file; the checkpoint sinks (a second file, or syslog) are in `sink`, the signing of
//! sidecar objects in [`super::signed`].

mod sink;

use std::io::Write;
use std::path::Path;

use ed25519_dalek::{SigningKey, VerifyingKey};
use serde_json::{Map, Value, json};

use super::canonical;
use super::merkle::CompactRange;
use super::note::{self, SignedNote, TreeHead};
use super::signed::{self, sign_object};
pub(crate) use sink::Sink;

/// One checkpoint: the head of the chain at a moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Checkpoint {
    /// The log id (from the genesis record).
    pub log: String,
    /// Seq of the head record.
    pub seq: u64,
    /// Hash (hex) of the head record.
    pub hash: String,
    /// When the checkpoint was taken.
    pub ts: String,
    /// `periodic`, `heartbeat`, `retry`, `shutdown`, `start`.
    pub kind: String,
    /// The whole object as read or written (with `key` and `sig` when signed).
    pub obj: Map<String, Value>,
}

impl Checkpoint {
    /// A new checkpoint, signed when a key is given.
    #[cfg(test)]
    pub(crate) fn new(
        log: &str,
        seq: u64,
        hash: &str,
        kind: &str,
        key: Option<&SigningKey>,
    ) -> Self {
        Self::at(log, seq, hash, kind, &canonical::now_ts(), key)
    }

    /// A checkpoint with a given timestamp (test vectors are reproducible).
    #[cfg(test)]
    pub(crate) fn at(
        log: &str,
        seq: u64,
        hash: &str,
        kind: &str,
        ts: &str,
        key: Option<&SigningKey>,
    ) -> Self {
        Self::build(log, (seq, hash), kind, ts, None, key)
    }

    /// A checkpoint of the head (`seq`, `hash`); with `tree` (the Merkle tree over
    /// records 1..=seq) it also carries the tree's `root`, its `frontier` and the
    /// C2SP checkpoint `note`, signed by `key` as the object is.
    pub(crate) fn build(
        log: &str,
        (seq, hash): (u64, &str),
        kind: &str,
        ts: &str,
        tree: Option<&CompactRange>,
        key: Option<&SigningKey>,
    ) -> Self {
        let ts = ts.to_owned();
        let mut obj = match json!({
            "type": "checkpoint", "v": 1, "log": log, "seq": seq, "hash": hash,
            "ts": ts, "kind": kind,
        }) {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        if let Some(tree) = tree.filter(|t| t.size() == seq) {
            let head = TreeHead {
                origin: note::origin(log),
                size: seq,
                root: tree.root(),
            };
            obj.insert("root".into(), Value::String(hex::encode(head.root)));
            let frontier = tree.nodes().iter().map(|n| Value::String(hex::encode(n)));
            obj.insert("frontier".into(), Value::Array(frontier.collect()));
            obj.insert("note".into(), Value::String(head.sign(key)));
        }
        if let Some(key) = key {
            sign_object(&mut obj, key);
        }
        Checkpoint {
            log: log.to_owned(),
            seq,
            hash: hash.to_owned(),
            ts,
            kind: kind.to_owned(),
            obj,
        }
    }

    /// The Merkle tree this checkpoint commits to, if it carries one: its border (from
    /// which the root follows) and its signed note. Checked against each other and
    /// against `seq` and `log` by [`Checkpoint::parse`].
    pub(crate) fn tree(&self) -> Option<(CompactRange, String)> {
        let nodes = self.obj.get("frontier")?.as_array()?;
        let nodes = nodes
            .iter()
            .map(|n| n.as_str().and_then(super::record::decode_hash))
            .collect::<Option<Vec<_>>>()?;
        let range = CompactRange::from_parts(self.seq, nodes)?;
        let note = self.obj.get("note")?.as_str()?.to_owned();
        Some((range, note))
    }

    /// The canonical line (no `\n`).
    pub(crate) fn to_line(&self) -> String {
        String::from_utf8_lossy(&canonical::to_vec(&Value::Object(self.obj.clone()))).into_owned()
    }

    /// Parses one checkpoint line.
    pub(crate) fn parse(line: &str) -> Result<Self, String> {
        let obj = signed::parse_object(
            line,
            "checkpoint",
            &[
                "log", "seq", "hash", "ts", "kind", "key", "sig", "root", "frontier", "note",
            ],
        )?;
        let s = |k: &str| obj.get(k).and_then(Value::as_str).map(str::to_owned);
        let seq = obj
            .get("seq")
            .and_then(Value::as_u64)
            .ok_or("seq missing")?;
        let hash = s("hash").ok_or("hash missing")?;
        if super::record::decode_hash(&hash).is_none() {
            return Err("hash is not 64 lowercase hex digits".into());
        }
        let cp = Checkpoint {
            log: s("log").ok_or("log missing")?,
            seq,
            hash,
            ts: s("ts").ok_or("ts missing")?,
            kind: s("kind").ok_or("kind missing")?,
            obj,
        };
        cp.check_tree()?;
        Ok(cp)
    }

    /// A checkpoint carries `root`, `frontier` and `note` together or none of them;
    /// the frontier's root is `root`, and the note states this log, `seq` and `root`
    /// (and, when the checkpoint names a key, is signed by it).
    fn check_tree(&self) -> Result<(), String> {
        let present = ["root", "frontier", "note"].map(|k| self.obj.contains_key(k));
        if present == [false; 3] {
            return Ok(());
        }
        let (range, note) = self
            .tree()
            .ok_or("root, frontier and note must all be present and well formed")?;
        let root = self.obj.get("root").and_then(Value::as_str);
        if root.and_then(super::record::decode_hash) != Some(range.root()) {
            return Err("root is not the root of the frontier".into());
        }
        let parsed = SignedNote::parse(&note).map_err(|e| e.to_string())?;
        let expected = TreeHead {
            origin: note::origin(&self.log),
            size: self.seq,
            root: range.root(),
        };
        if parsed.head != expected {
            return Err("the note does not state this log, seq and root".into());
        }
        let key = self.obj.get("key").and_then(Value::as_str);
        let key = key.and_then(super::record::decode_hash);
        if let Some(raw) = key {
            let signed = VerifyingKey::from_bytes(&raw).is_ok_and(|k| parsed.signed_by(&k));
            if !signed {
                return Err("the note is not signed by the checkpoint's key".into());
            }
        }
        Ok(())
    }

    /// Every checkpoint in a file (one per line; the sink keeps a history).
    pub(crate) fn read_all(path: &Path) -> Result<Vec<Result<Self, String>>, std::io::Error> {
        let text = std::fs::read_to_string(path)?;
        Ok(text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(Self::parse)
            .collect())
    }
}

/// Replaces `name` in `dir` atomically: temp file, fsync, rename, fsync of the directory.
pub(crate) fn write_atomic(dir: &cap_std::fs::Dir, name: &str, data: &[u8]) -> std::io::Result<()> {
    let tmp = format!("{name}.tmp");
    let mut opts = cap_std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    let mut f = dir.open_with(&tmp, &opts)?;
    f.write_all(data)?;
    f.sync_all()?;
    drop(f);
    dir.rename(&tmp, dir, name)?;
    sync_dir(dir)
}

/// Makes a rename or a new file in `dir` durable.
pub(crate) fn sync_dir(dir: &cap_std::fs::Dir) -> std::io::Result<()> {
    // The handle itself may be O_PATH, which cannot be synced: open the directory itself.
    #[cfg(unix)]
    {
        dir.open(".")?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signed::{SigStatus, check_signature};

    #[test]
    fn signed_checkpoints_verify_only_with_their_key() {
        let key = SigningKey::from_bytes(&[3; 32]);
        let other = SigningKey::from_bytes(&[4; 32]);
        let cp = Checkpoint::new(&"a".repeat(32), 7, &"b".repeat(64), "periodic", Some(&key));
        let parsed = Checkpoint::parse(&cp.to_line()).unwrap();
        assert_eq!(parsed, cp);
        let pk = key.verifying_key();
        assert_eq!(
            check_signature(&parsed.obj, Some(&pk)),
            SigStatus::ValidPinned
        );
        assert!(matches!(
            check_signature(&parsed.obj, None),
            SigStatus::ValidUnpinned(_)
        ));
        assert!(matches!(
            check_signature(&parsed.obj, Some(&other.verifying_key())),
            SigStatus::Invalid(_)
        ));
        let forged = cp.to_line().replace("\"seq\":7", "\"seq\":8");
        let forged = Checkpoint::parse(&forged).unwrap();
        assert!(matches!(
            check_signature(&forged.obj, Some(&pk)),
            SigStatus::Invalid(_)
        ));
        let unsigned = Checkpoint::new("x", 1, &"c".repeat(64), "start", None);
        assert_eq!(check_signature(&unsigned.obj, None), SigStatus::Unsigned);
        assert!(matches!(
            check_signature(&unsigned.obj, Some(&pk)),
            SigStatus::Invalid(_)
        ));
    }

    #[test]
    fn checkpoint_lines_are_canonical_and_strict() {
        let cp = Checkpoint::new("l", 1, &"0".repeat(64), "start", None);
        let line = cp.to_line();
        assert!(line.starts_with("{\"hash\":"), "{line}");
        assert!(Checkpoint::parse(&line.replace("\"v\":1", "\"v\":2")).is_err());
        assert!(Checkpoint::parse(&line.replace("\"kind\"", "\"extra\":0,\"kind\"")).is_err());
    }

    #[test]
    fn atomic_write_replaces_the_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        let d =
            cap_std::fs::Dir::open_ambient_dir(dir.path(), cap_std::ambient_authority()).unwrap();
        write_atomic(&d, "c", b"one").unwrap();
        write_atomic(&d, "c", b"two").unwrap();
        assert_eq!(std::fs::read(dir.path().join("c")).unwrap(), b"two");
        assert!(!dir.path().join("c.tmp").exists());
    }
}
