//! A message as the line the relay writes, and an id as the key it is kept under.

use serde_json::Value;

pub(super) fn id_key(id: &Value) -> String {
    id.to_string()
}

/// Raw bytes plus a newline, ready to write.
pub(super) fn line_of(v: &Value) -> Vec<u8> {
    let mut b = serde_json::to_vec(v).unwrap_or_default();
    b.push(b'\n');
    b
}

pub(super) fn with_newline(mut raw: Vec<u8>) -> Vec<u8> {
    raw.push(b'\n');
    raw
}
