//! Checking a proof with nothing but the log's public key: the signed checkpoint
//! note(s), then the inclusion or consistency path against the tree's root.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::VerifyingKey;

use crate::merkle::{self, Hash};
use crate::note::SignedNote;

use super::layout::{CONSISTENCY_HEADER, INCLUSION_HEADER, ProofError, record_seq};

/// Longest record line a proof may carry (a record is bounded far below this).
const MAX_RECORD: usize = 1 << 20;

fn invalid(msg: impl Into<String>) -> ProofError {
    ProofError::Invalid(msg.into())
}

/// What a valid proof established.
#[derive(Debug)]
pub(crate) enum Proven {
    /// Record `seq` (its line) is in the log at tree size `size`.
    Inclusion {
        /// The log's origin line.
        origin: String,
        /// The record's seq.
        seq: u64,
        /// The checkpoint's tree size.
        size: u64,
        /// The record's line.
        record: String,
    },
    /// The tree at `new` extends the tree at `old`.
    Consistency {
        /// The log's origin line.
        origin: String,
        /// The older tree size.
        old: u64,
        /// The newer tree size.
        new: u64,
    },
}

/// Checks a proof against a public key, with nothing else.
pub(crate) fn check(proof: &str, key: &VerifyingKey) -> Result<Proven, ProofError> {
    match proof.lines().next() {
        Some(INCLUSION_HEADER) => check_inclusion(proof, key),
        Some(CONSISTENCY_HEADER) => check_consistency(proof, key),
        _ => Err(invalid("not a proof: unknown first line")),
    }
}

fn signed_note(text: &str, key: &VerifyingKey) -> Result<SignedNote, ProofError> {
    let note = SignedNote::parse(text).map_err(|e| invalid(e.to_string()))?;
    if !note.signed_by(key) {
        return Err(invalid(
            "the checkpoint is not signed by this key (forged, or another log's)",
        ));
    }
    Ok(note)
}

/// A number as the format writes it: decimal digits, no sign, no leading zero (`0`
/// alone excepted), so one proof has one spelling, as the independent checker reads it.
fn decimal(text: &str) -> Option<u64> {
    let canonical = text.bytes().all(|b| b.is_ascii_digit())
        && !text.is_empty()
        && (text == "0" || !text.starts_with('0'));
    canonical.then(|| text.parse().ok()).flatten()
}

fn b64_hash(line: &str) -> Result<Hash, ProofError> {
    B64.decode(line)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| invalid(format!("not a base64 SHA-256 hash: {line:.80}")))
}

fn check_inclusion(proof: &str, key: &VerifyingKey) -> Result<Proven, ProofError> {
    let (head, note) = proof
        .split_once("\n\n")
        .ok_or_else(|| invalid("no empty line before the checkpoint"))?;
    let mut lines = head.lines().skip(1);
    let mut next = lines.next();
    let mut record = None;
    if let Some(extra) = next.and_then(|l| l.strip_prefix("extra ")) {
        let bytes = B64
            .decode(extra)
            .map_err(|_| invalid("extra is not base64"))?;
        if bytes.len() > MAX_RECORD {
            return Err(invalid("the record is too long"));
        }
        record = Some(bytes);
        next = lines.next();
    }
    let record = record.ok_or_else(|| invalid("no record (extra line)"))?;
    let index = next
        .and_then(|l| l.strip_prefix("index "))
        .and_then(decimal)
        .ok_or_else(|| invalid("no index line"))?;
    let path = lines.map(b64_hash).collect::<Result<Vec<_>, _>>()?;
    let note = signed_note(note, key)?;
    let seq = record_seq(&record).ok_or_else(|| invalid("extra is not an fsgate record"))?;
    if seq != index + 1 {
        return Err(invalid(format!(
            "the record is seq {seq}, the proof is for index {index}"
        )));
    }
    let (size, root) = (note.head.size, note.head.root);
    if !merkle::verify_inclusion(&merkle::leaf_hash(&record), index, size, &path, &root) {
        return Err(invalid(format!(
            "the inclusion path does not lead from record seq {seq} to the root of tree size {size}"
        )));
    }
    Ok(Proven::Inclusion {
        origin: note.head.origin,
        seq,
        size,
        record: String::from_utf8_lossy(&record).into_owned(),
    })
}

fn check_consistency(proof: &str, key: &VerifyingKey) -> Result<Proven, ProofError> {
    let mut lines = proof.lines().skip(1);
    let mut note = |tag: &str| -> Result<SignedNote, ProofError> {
        let text = lines
            .next()
            .and_then(|l| l.strip_prefix(tag))
            .and_then(|b| B64.decode(b).ok())
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or_else(|| invalid(format!("no {}line", tag)))?;
        signed_note(&text, key)
    };
    let (old, new) = (note("old ")?, note("new ")?);
    let path = lines
        .filter(|l| !l.is_empty())
        .map(b64_hash)
        .collect::<Result<Vec<_>, _>>()?;
    if old.head.origin != new.head.origin {
        return Err(invalid("the two checkpoints are of different logs"));
    }
    let (o, n) = (&old.head, &new.head);
    if !merkle::verify_consistency(o.size, n.size, &o.root, &n.root, &path) {
        return Err(invalid(format!(
            "the tree of size {} does not extend the tree of size {}",
            n.size, o.size
        )));
    }
    Ok(Proven::Consistency {
        origin: new.head.origin.clone(),
        old: o.size,
        new: n.size,
    })
}

#[cfg(test)]
mod tests {
    use super::decimal;

    /// One spelling per number, as the independent checker (`audit/verify.py`) reads it.
    #[test]
    fn an_index_has_one_spelling() {
        assert_eq!(decimal("0"), Some(0));
        assert_eq!(decimal("19"), Some(19));
        for other in ["019", "+19", "00", "", " 19", "19 ", "1e3", "-1"] {
            assert_eq!(decimal(other), None, "{other:?}");
        }
    }
}
