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
