//! Signed sidecar objects (checkpoints and tombstones): `key` and `sig` added over the
//! object's canonical bytes, and how a signature stands against a pinned key.

use ed25519_dalek::{SigningKey, VerifyingKey};
use serde_json::{Map, Value};

use super::{canonical, keys};

/// How a signed sidecar object (checkpoint or tombstone) stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SigStatus {
    /// No signature, and no key was required.
    Unsigned,
    /// Signed by the pinned (`--pubkey`) key.
    ValidPinned,
    /// Signed by the key it names, which nobody pinned: proves consistency, not origin.
    ValidUnpinned(String),
    /// The signature is missing where required, from another key, or wrong.
    Invalid(String),
}

/// One line of a signed sidecar object: a JSON object whose `type` is `kind`, whose `v`
/// is 1, and with no key but those two and `keys` (what is not understood is refused,
/// never skipped: a signature must cover everything the reader acts on).
pub(crate) fn parse_object(
    line: &str,
    kind: &str,
    keys: &[&str],
) -> Result<Map<String, Value>, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(obj) = v else {
        return Err("not an object".into());
    };
    if let Some(k) = obj
        .keys()
        .find(|k| !matches!(k.as_str(), "type" | "v") && !keys.contains(&k.as_str()))
    {
        return Err(format!("unknown field {k}"));
    }
    let typed = obj.get("type").and_then(Value::as_str) == Some(kind);
    if !typed || obj.get("v") != Some(&Value::from(1)) {
        return Err(format!("not a version 1 {kind}"));
    }
    Ok(obj)
}

/// Adds `key` and `sig` to `obj`: `sig` signs the canonical bytes of the object with
/// `key` set and `sig` absent.
pub(crate) fn sign_object(obj: &mut Map<String, Value>, key: &SigningKey) {
    obj.remove("sig");
    obj.insert(
        "key".into(),
        Value::String(hex::encode(key.verifying_key().to_bytes())),
    );
    let mut msg = Vec::with_capacity(256);
    canonical::push_object(&mut msg, obj);
    obj.insert("sig".into(), Value::String(keys::sign_hex(key, &msg)));
}

/// Checks the signature of a sidecar object against the pinned key, if any.
pub(crate) fn check_signature(
    obj: &Map<String, Value>,
    pinned: Option<&VerifyingKey>,
) -> SigStatus {
    let sig = obj.get("sig").and_then(Value::as_str);
    let key = obj.get("key").and_then(Value::as_str);
    let Some(sig) = sig else {
        return match pinned {
            Some(_) => SigStatus::Invalid("not signed, but a public key was given".into()),
            None => SigStatus::Unsigned,
        };
    };
    let Some(key_hex) = key else {
        return SigStatus::Invalid("signature without a key".into());
    };
    let named =
        super::record::decode_hash(key_hex).and_then(|raw| VerifyingKey::from_bytes(&raw).ok());
    let Some(named) = named else {
        return SigStatus::Invalid("the key it names is not an Ed25519 public key".into());
    };
    if let Some(p) = pinned
        && p != &named
    {
        return SigStatus::Invalid(format!("signed by another key ({key_hex})"));
    }
    let mut unsigned = obj.clone();
    unsigned.remove("sig");
    let mut msg = Vec::with_capacity(256);
    canonical::push_object(&mut msg, &unsigned);
    if !keys::verify_hex(&named, &msg, sig) {
        return SigStatus::Invalid("signature does not match".into());
    }
    match pinned {
        Some(_) => SigStatus::ValidPinned,
        None => SigStatus::ValidUnpinned(key_hex.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_object;

    /// A sidecar line is taken only whole: its type, its version, and no key it does not
    /// know.
    #[test]
    fn a_sidecar_line_with_an_unknown_key_another_type_or_version_is_refused() {
        let keys = ["log", "sig"];
        let ok = r#"{"type":"tombstone","v":1,"log":"a","sig":"x"}"#;
        assert!(parse_object(ok, "tombstone", &keys).is_ok());
        let refused = [
            (
                r#"{"type":"tombstone","v":1,"extra":0}"#,
                "unknown field extra",
            ),
            (
                r#"{"type":"checkpoint","v":1}"#,
                "not a version 1 tombstone",
            ),
            (r#"{"type":"tombstone","v":2}"#, "not a version 1 tombstone"),
            (
                r#"{"type":"tombstone","v":1.0}"#,
                "not a version 1 tombstone",
            ),
            (r#"{"v":1}"#, "not a version 1 tombstone"),
            ("[1]", "not an object"),
        ];
        for (line, why) in refused {
            assert_eq!(
                parse_object(line, "tombstone", &keys).err().as_deref(),
                Some(why),
                "{line}"
            );
        }
        assert!(parse_object("{", "tombstone", &keys).is_err_and(|e| e.starts_with("not JSON")));
    }
}
