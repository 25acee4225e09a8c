//! SHA-256, the one hasher every layer uses (content digests, the audit chain, backups).
//!
//! Backed by ring, whose x86-64 code picks at run time among SHA-NI, AVX (Intel), SSSE3
//! and portable code: `sha2` 0.11 has only SHA-NI and portable code there, and on a
//! CPU without SHA-NI its portable code made a 10 MiB read's hashing ~3× slower.

/// A digest's length in bytes.
pub const LEN: usize = 32;

/// A SHA-256 computed in pieces: [`Sha256::update`] any number of times, then
/// [`Sha256::finalize`]. The digest does not depend on how the input was split.
#[derive(Clone)]
pub struct Sha256(ring::digest::Context);

impl Default for Sha256 {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Sha256 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sha256")
    }
}

impl Sha256 {
    /// A hasher that has seen nothing yet.
    pub fn new() -> Self {
        Self(ring::digest::Context::new(&ring::digest::SHA256))
    }

    /// Hashes `bytes` after everything before.
    pub fn update(&mut self, bytes: impl AsRef<[u8]>) {
        self.0.update(bytes.as_ref());
    }

    /// The digest of everything passed to [`Sha256::update`].
    pub fn finalize(self) -> [u8; LEN] {
        to_array(self.0.finish())
    }

    /// The digest of `bytes` in one call.
    pub fn digest(bytes: impl AsRef<[u8]>) -> [u8; LEN] {
        to_array(ring::digest::digest(&ring::digest::SHA256, bytes.as_ref()))
    }
}

/// The digest of `bytes` as 64 lowercase hex digits, as records and manifests write it.
pub fn hex_digest(bytes: impl AsRef<[u8]>) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn to_array(d: ring::digest::Digest) -> [u8; LEN] {
    let mut out = [0; LEN];
    out.copy_from_slice(d.as_ref());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// FIPS 180-4 / NIST CAVP examples.
    const VECTORS: &[(&[u8], &str)] = &[
        (
            b"",
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        ),
        (
            b"abc",
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        ),
        (
            b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
        ),
        (
            b"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1",
        ),
    ];

    #[test]
    fn known_vectors_one_shot_and_byte_by_byte() {
        for (input, want) in VECTORS {
            assert_eq!(hex_digest(input), *want);
            let mut h = Sha256::new();
            for b in *input {
                h.update([*b]);
            }
            assert_eq!(hex::encode(h.finalize()), *want);
        }
    }

    #[test]
    fn a_million_a() {
        let want = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
        assert_eq!(hex_digest(vec![b'a'; 1_000_000]), want);
        let mut h = Sha256::new();
        for _ in 0..1000 {
            h.update([b'a'; 1000]);
        }
        assert_eq!(hex::encode(h.finalize()), want);
    }

    proptest! {
        /// Streaming updates split anywhere (inside a block, across several, empty pieces)
        /// give the one-shot digest, which is sha2's.
        #[test]
        fn split_updates_match_one_shot(
            data in proptest::collection::vec(any::<u8>(), 0..700),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
        ) {
            let mut at: Vec<usize> = cuts.iter().map(|c| c.index(data.len() + 1)).collect();
            at.sort_unstable();
            let mut h = Sha256::new();
            let mut from = 0;
            for to in at.into_iter().chain([data.len()]) {
                h.update(&data[from..to]);
                from = to;
            }
            let one_shot = Sha256::digest(&data);
            prop_assert_eq!(h.clone().finalize(), one_shot);
            let reference: [u8; LEN] = <sha2::Sha256 as sha2::Digest>::digest(&data).into();
            prop_assert_eq!(one_shot, reference);
        }
    }
}
