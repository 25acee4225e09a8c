//! Checkpoints as C2SP signed notes (`c2sp.org/signed-note`, `c2sp.org/tlog-checkpoint`):
//! the note text `<origin>\n<size>\n<base64 root>\n`, a blank line, and one signature
//! line per signer: `— <key name> <base64(key id || Ed25519 signature)>`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use fsgate_base::sha256::Sha256;

use super::merkle::Hash;

/// The signature line's lead: an em dash (U+2014) and a space.
const SIG_LEAD: &str = "\u{2014} ";

/// The origin line of a log's checkpoints: names the log, not a host.
pub(crate) fn origin(log_id: &str) -> String {
    format!("fsgate.audit/{log_id}")
}

/// The 4-byte key id of an Ed25519 key in signed notes:
/// `SHA-256(name || 0x0A || 0x01 || public key)[:4]`.
pub(crate) fn key_id(name: &str, key: &VerifyingKey) -> [u8; 4] {
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update([0x0A, 0x01]);
    h.update(key.as_bytes());
    let d = h.finalize();
    [d[0], d[1], d[2], d[3]]
}

/// A tree head: what a checkpoint note says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TreeHead {
    /// The log's origin line.
    pub origin: String,
    /// Number of leaves (records).
    pub size: u64,
    /// The Merkle root.
    pub root: Hash,
}

impl TreeHead {
    /// The note text (three lines, each ended by a newline).
    pub(crate) fn text(&self) -> String {
        format!(
            "{}\n{}\n{}\n",
            self.origin,
            self.size,
            B64.encode(self.root)
        )
    }

    /// The signed note: text, blank line, and a signature line when a key is given.
    pub(crate) fn sign(&self, key: Option<&SigningKey>) -> String {
        let text = self.text();
        let mut note = format!("{text}\n");
        if let Some(key) = key {
            let sig = key.sign(text.as_bytes());
            let mut blob = key_id(&self.origin, &key.verifying_key()).to_vec();
            blob.extend_from_slice(&sig.to_bytes());
            note.push_str(&format!("{SIG_LEAD}{} {}\n", self.origin, B64.encode(blob)));
        }
        note
    }
}

/// A parsed signed note holding a checkpoint.
#[derive(Debug, Clone)]
pub(crate) struct SignedNote {
    /// The tree head its text states.
    pub head: TreeHead,
    /// The text that was signed.
    text: String,
    /// `(key name, key id, signature)` per signature line.
    sigs: Vec<(String, [u8; 4], [u8; 64])>,
}

/// Why a note is not a checkpoint this tool can read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("checkpoint note: {0}")]
pub(crate) struct NoteError(pub String);

fn bad(msg: impl Into<String>) -> NoteError {
    NoteError(msg.into())
}

impl SignedNote {
    /// Parses a signed note whose text is a checkpoint (extension lines are kept in the
    /// signed text but not interpreted).
    pub(crate) fn parse(note: &str) -> Result<Self, NoteError> {
        let (text, sigs) = note
            .split_once("\n\n")
            .ok_or_else(|| bad("no blank line between text and signatures"))?;
        let text = format!("{text}\n");
        let mut lines = text.lines();
        let origin = lines.next().filter(|l| !l.is_empty());
        let origin = origin.ok_or_else(|| bad("no origin line"))?.to_owned();
        let size = lines.next().ok_or_else(|| bad("no tree size line"))?;
        if size.len() > 1 && size.starts_with('0') || size.is_empty() {
            return Err(bad("the tree size has leading zeroes or is empty"));
        }
        let size: u64 = size
            .parse()
            .map_err(|_| bad("the tree size is no number"))?;
        let root = lines.next().ok_or_else(|| bad("no root hash line"))?;
        let root: Hash = B64
            .decode(root)
            .ok()
            .and_then(|r| r.try_into().ok())
            .ok_or_else(|| bad("the root hash is not 32 bytes of base64"))?;
        let sigs = sigs
            .lines()
            .filter(|l| !l.is_empty())
            .map(parse_sig_line)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SignedNote {
            head: TreeHead { origin, size, root },
            text,
            sigs,
        })
    }

    /// Whether `key` signed the note under the name of its origin.
    pub(crate) fn signed_by(&self, key: &VerifyingKey) -> bool {
        let id = key_id(&self.head.origin, key);
        self.sigs.iter().any(|(name, sid, sig)| {
            name == &self.head.origin
                && sid == &id
                && key
                    .verify(self.text.as_bytes(), &Signature::from_bytes(sig))
                    .is_ok()
        })
    }
}

fn parse_sig_line(line: &str) -> Result<(String, [u8; 4], [u8; 64]), NoteError> {
    let rest = line
        .strip_prefix(SIG_LEAD)
        .ok_or_else(|| bad("a signature line does not start with an em dash"))?;
    let (name, blob) = rest
        .rsplit_once(' ')
        .ok_or_else(|| bad("a signature line has no key name"))?;
    let blob = B64
        .decode(blob)
        .map_err(|_| bad("a signature is not base64"))?;
    if blob.len() != 4 + 64 {
        // Another algorithm's signature: keep the note readable, it just does not count.
        return Ok((name.to_owned(), [0; 4], [0; 64]));
    }
    let mut id = [0u8; 4];
    id.copy_from_slice(&blob[..4]);
    let mut sig = [0u8; 64];
    sig.copy_from_slice(&blob[4..]);
    Ok((name.to_owned(), id, sig))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(seed: u8) -> SigningKey {
        SigningKey::from_bytes(&[seed; 32])
    }

    #[test]
    fn a_signed_note_round_trips_and_checks_only_with_its_key() {
        let head = TreeHead {
            origin: origin("00112233445566778899aabbccddeeff"),
            size: 20852163,
            root: [7; 32],
        };
        let note = head.sign(Some(&key(1)));
        assert!(note.starts_with("fsgate.audit/00112233445566778899aabbccddeeff\n20852163\n"));
        assert!(note.contains("\n\n\u{2014} fsgate.audit/"));
        let parsed = SignedNote::parse(&note).unwrap();
        assert_eq!(parsed.head, head);
        assert!(parsed.signed_by(&key(1).verifying_key()));
        assert!(!parsed.signed_by(&key(2).verifying_key()));
        let forged = note.replace("20852163", "20852164");
        let parsed = SignedNote::parse(&forged).unwrap();
        assert!(!parsed.signed_by(&key(1).verifying_key()));
    }

    #[test]
    fn malformed_notes_are_refused() {
        for bad_note in [
            "",
            "origin\n5\n",
            "origin\n05\nAAAA\n\n",
            "origin\nfive\nAAAA\n\n",
            "origin\n5\nAAAA\n\n",
            "origin\n5\nBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=\n\n- origin AAAA\n",
        ] {
            assert!(SignedNote::parse(bad_note).is_err(), "{bad_note:?}");
        }
    }
}
