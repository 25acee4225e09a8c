//! Ed25519 key files: the signing key (seed hex or PKCS#8 PEM) and public keys.
//!
//! # Ambient Authority
//!
//! These functions read key files by path; the gateway calls them at start-up only.

use std::path::Path;

use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey};
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};

use crate::error::AuditError;

/// Reads a signing key: 64 hex digits (the 32-byte seed) or a PKCS#8 PEM `PRIVATE KEY`.
/// On Unix the file must not be readable by group or others.
pub(crate) fn load_signing_key(path: &Path) -> Result<SigningKey, AuditError> {
    let key_err = |message: String| AuditError::Key {
        path: path.to_owned(),
        message,
    };
    let meta = std::fs::metadata(path).map_err(|e| key_err(e.to_string()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(key_err(
                "readable by group or others; run `chmod 600` on it".into(),
            ));
        }
    }
    if meta.len() > 16 * 1024 {
        return Err(key_err("too large to be a key file".into()));
    }
    let text = std::fs::read_to_string(path).map_err(|e| key_err(e.to_string()))?;
    parse_signing_key(&text).map_err(key_err)
}

/// Parses the text of a signing key file.
pub(crate) fn parse_signing_key(text: &str) -> Result<SigningKey, String> {
    let t = text.trim();
    if t.starts_with("-----BEGIN") {
        return SigningKey::from_pkcs8_pem(t)
            .map_err(|e| format!("not an Ed25519 PKCS#8 key: {e}"));
    }
    let mut seed = [0u8; 32];
    hex::decode_to_slice(t, &mut seed)
        .map_err(|_| "expected 64 hex digits or a PEM PRIVATE KEY".to_owned())?;
    Ok(SigningKey::from_bytes(&seed))
}

/// Parses a public key given as 64 hex digits, or a file holding hex or a PEM `PUBLIC KEY`.
pub(crate) fn parse_public_key(arg: &str) -> Result<VerifyingKey, String> {
    let text = if is_hex_key(arg.trim()) {
        arg.trim().to_owned()
    } else {
        std::fs::read_to_string(arg).map_err(|e| format!("cannot read public key {arg}: {e}"))?
    };
    public_key_from_text(&text)
}

/// Parses the text of a public key (hex or PEM).
pub(crate) fn public_key_from_text(text: &str) -> Result<VerifyingKey, String> {
    let t = text.trim();
    if t.starts_with("-----BEGIN") {
        return VerifyingKey::from_public_key_pem(t)
            .map_err(|e| format!("not an Ed25519 public key: {e}"));
    }
    let mut raw = [0u8; 32];
    hex::decode_to_slice(t, &mut raw).map_err(|_| "expected 64 hex digits or PEM".to_owned())?;
    VerifyingKey::from_bytes(&raw).map_err(|e| format!("invalid Ed25519 public key: {e}"))
}

fn is_hex_key(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Signs `msg`; the signature as 128 lowercase hex digits.
pub(crate) fn sign_hex(key: &SigningKey, msg: &[u8]) -> String {
    hex::encode(key.sign(msg).to_bytes())
}

/// Checks a hex signature over `msg`.
pub(crate) fn verify_hex(key: &VerifyingKey, msg: &[u8], sig_hex: &str) -> bool {
    let mut raw = [0u8; 64];
    let lower_hex = sig_hex
        .bytes()
        .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if sig_hex.len() != 128 || !lower_hex || hex::decode_to_slice(sig_hex, &mut raw).is_err() {
        return false;
    }
    key.verify(msg, &Signature::from_bytes(&raw)).is_ok()
}

/// A new random seed, from the operating system.
pub(crate) fn random_bytes<const N: usize>() -> [u8; N] {
    let mut out = [0u8; N];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        if f.read_exact(&mut out).is_ok() {
            return out;
        }
    }
    // No /dev/urandom (not Unix): mix the clock, the pid and an address. Used for log ids
    // only in that case; `keygen` refuses instead (see `generate_key_file`).
    let seed = format!(
        "{:?}{}{:p}",
        std::time::SystemTime::now(),
        std::process::id(),
        &out
    );
    let digest = fsgate_base::sha256::Sha256::digest(seed.as_bytes());
    for (o, d) in out.iter_mut().zip(digest.iter().cycle()) {
        *o = *d;
    }
    out
}

/// Writes a new signing key (seed hex, mode 0600, never overwriting) and returns its
/// public key.
pub(crate) fn generate_key_file(path: &Path) -> Result<VerifyingKey, String> {
    use std::io::Write;
    let mut seed = [0u8; 32];
    {
        use std::io::Read;
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut seed))
            .map_err(|e| format!("no secure random source: {e}"))?;
    }
    let key = SigningKey::from_bytes(&seed);
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts
        .open(path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    f.write_all(format!("{}\n", hex::encode(seed)).as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(key.verifying_key())
}

/// The PKCS#8 PEM form of a key (used by tests to prove both file forms load).
#[cfg(test)]
pub(crate) fn to_pem(key: &SigningKey) -> Result<String, String> {
    use ed25519_dalek::pkcs8::EncodePrivateKey;
    key.to_pkcs8_pem(Default::default())
        .map(|p| p.to_string())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_hex_and_pem_give_the_same_key() {
        let key = SigningKey::from_bytes(&[9; 32]);
        let from_hex = parse_signing_key(&format!("{}\n", hex::encode([9u8; 32]))).unwrap();
        let from_pem = parse_signing_key(&to_pem(&key).unwrap()).unwrap();
        assert_eq!(from_hex.to_bytes(), key.to_bytes());
        assert_eq!(from_pem.to_bytes(), key.to_bytes());
        assert!(parse_signing_key("not a key").is_err());
    }

    #[test]
    fn signatures_round_trip_and_fail_on_other_messages() {
        let key = SigningKey::from_bytes(&[1; 32]);
        let sig = sign_hex(&key, b"msg");
        let pk = public_key_from_text(&hex::encode(key.verifying_key().to_bytes())).unwrap();
        assert!(verify_hex(&pk, b"msg", &sig));
        assert!(!verify_hex(&pk, b"msh", &sig));
        assert!(!verify_hex(&pk, b"msg", "00"));
    }

    #[cfg(unix)]
    #[test]
    fn key_files_must_be_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        let pk = generate_key_file(&path).unwrap();
        assert_eq!(load_signing_key(&path).unwrap().verifying_key(), pk);
        assert!(
            generate_key_file(&path).is_err(),
            "must never overwrite a key"
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = load_signing_key(&path).unwrap_err().to_string();
        assert!(err.contains("chmod 600"), "{err}");
    }
}
