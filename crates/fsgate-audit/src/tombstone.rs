//! The prune tombstone (audit/FORMAT.md): one line, optionally signed, saying which
//! records were removed on purpose, so a pruned start is told apart from a deleted one.

use ed25519_dalek::SigningKey;
use serde_json::{Map, Value, json};

use super::record;
use super::signed::{self, sign_object};

/// A tombstone: records `first_seq..=last_seq` were removed on purpose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tombstone {
    /// The log id.
    pub log: String,
    /// First removed seq.
    pub first_seq: u64,
    /// Last removed seq.
    pub last_seq: u64,
    /// Hash of the last removed record: the `prev` of the first record kept.
    pub last_hash: String,
    /// When the prune ran.
    pub ts: String,
    /// The `--before` cut-off.
    pub before: String,
    /// The whole object (with `key` and `sig` when signed).
    pub obj: Map<String, Value>,
}

impl Tombstone {
    /// Parses one tombstone line.
    pub fn parse(line: &str) -> Result<Self, String> {
        let obj = signed::parse_object(
            line,
            "tombstone",
            &[
                "log",
                "first_seq",
                "last_seq",
                "last_hash",
                "ts",
                "before",
                "files",
                "key",
                "sig",
            ],
        )?;
        let s = |k: &str| obj.get(k).and_then(Value::as_str).map(str::to_owned);
        let n = |k: &str| obj.get(k).and_then(Value::as_u64);
        let last_hash = s("last_hash").ok_or("last_hash missing")?;
        if record::decode_hash(&last_hash).is_none() {
            return Err("last_hash is not 64 lowercase hex digits".into());
        }
        Ok(Tombstone {
            log: s("log").ok_or("log missing")?,
            first_seq: n("first_seq").ok_or("first_seq missing")?,
            last_seq: n("last_seq").ok_or("last_seq missing")?,
            last_hash,
            ts: s("ts").ok_or("ts missing")?,
            before: s("before").ok_or("before missing")?,
            obj,
        })
    }
}

/// Builds a tombstone object (signed when a key is given) for `seqs` = (first, last,
/// last hash).
pub(crate) fn tombstone_object(
    log: &str,
    seqs: (u64, u64, &str),
    ts: &str,
    before: &str,
    files: Vec<Value>,
    key: Option<&SigningKey>,
) -> Map<String, Value> {
    let mut obj = match json!({
        "type": "tombstone", "v": 1, "log": log, "first_seq": seqs.0, "last_seq": seqs.1,
        "last_hash": seqs.2, "ts": ts, "before": before, "files": files,
    }) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    if let Some(key) = key {
        sign_object(&mut obj, key);
    }
    obj
}
