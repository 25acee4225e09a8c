//! Sealing a record line into the chain: `seq`, `ts` (and `log` on a file's first
//! record) before the body, then `prev` and the `hash` of `prev` and the line; and
//! decoding a hash back.

use fsgate_base::sha256::Sha256;

use super::canonical::{push_str, push_u64};

/// The `prev` of the first record of a log: 64 zeros.
pub(crate) const GENESIS_PREV: [u8; 32] = [0; 32];
/// `,"hash":"` + 64 hex digits + `"}`: the fixed tail of every record line.
pub(crate) const HASH_SUFFIX_LEN: usize = 9 + 64 + 2;

/// Builds a complete record line (with `\n`) from its parts; returns the line and its hash.
/// `body` comes from `AuditEvent::body`; `log` is set on the first record of a file.
pub(crate) fn seal(
    seq: u64,
    ts: &str,
    log: Option<&str>,
    body: &[u8],
    prev: &[u8; 32],
) -> (Vec<u8>, [u8; 32]) {
    let mut line = Vec::with_capacity(body.len() + 200);
    line.extend_from_slice(b"{\"seq\":");
    push_u64(&mut line, seq);
    line.extend_from_slice(b",\"ts\":");
    push_str(&mut line, ts);
    if let Some(log) = log {
        line.extend_from_slice(b",\"log\":");
        push_str(&mut line, log);
    }
    line.push(b',');
    line.extend_from_slice(body);
    let mut hex64 = [0u8; 64];
    line.extend_from_slice(b",\"prev\":\"");
    let _ = hex::encode_to_slice(prev, &mut hex64);
    line.extend_from_slice(&hex64);
    line.push(b'"');
    let hash = chain_hash(prev, &line, b"}");
    line.extend_from_slice(b",\"hash\":\"");
    let _ = hex::encode_to_slice(hash, &mut hex64);
    line.extend_from_slice(&hex64);
    line.extend_from_slice(b"\"}\n");
    (line, hash)
}

/// `SHA-256(prev || canonical)`, with the canonical bytes given in two pieces.
pub(crate) fn chain_hash(prev: &[u8; 32], head: &[u8], tail: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(prev);
    h.update(head);
    h.update(tail);
    h.finalize()
}

pub(crate) fn is_lower_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Lowercase hex digit values; 0xff marks every other byte.
const HEX_VALUE: [u8; 256] = {
    let mut t = [0xffu8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

/// Decodes 64 lowercase hex digits (two per record line: kept branch-free and cheap).
pub(crate) fn decode_hash(s: &str) -> Option<[u8; 32]> {
    let b = s.as_bytes();
    if b.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    let mut bad = 0u8;
    for (o, pair) in out.iter_mut().zip(b.chunks_exact(2)) {
        let (hi, lo) = (HEX_VALUE[pair[0] as usize], HEX_VALUE[pair[1] as usize]);
        bad |= hi | lo;
        *o = (hi << 4) | (lo & 0x0f);
    }
    (bad & 0xf0 == 0).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::line::check_line;
    use crate::record::tests::sample;

    #[test]
    fn a_sealed_record_has_the_documented_layout_and_checks() {
        let body = sample().body("cd".repeat(32).as_str());
        let (line, hash) = seal(
            1,
            "2026-01-02T03:04:05.000006Z",
            Some(&"0f".repeat(16)),
            &body,
            &GENESIS_PREV,
        );
        let text = String::from_utf8(line.clone()).unwrap();
        let expect_head = format!(
            "{{\"seq\":1,\"ts\":\"2026-01-02T03:04:05.000006Z\",\"log\":\"{}\",\"kind\":\"request\",\
             \"session\":\"s-1\",\"transport\":\"acp\",\"peer\":\"pid=42,uid=1000\",\"op\":\"read\",\
             \"path\":\"src/main.rs\",\"args\":{{\"limit\":20,\"line\":3}},\"decision\":\"allow\",\
             \"rule\":\"workspace-read\",\"outcome\":\"ok\",\"bytes\":120,\"sha256\":\"{}\",\
             \"policy_sha256\":\"{}\",\"duration_us\":57,\"prev\":\"{}\"",
            "0f".repeat(16),
            "ab".repeat(32),
            "cd".repeat(32),
            "0".repeat(64)
        );
        assert!(text.starts_with(&expect_head), "{text}");
        assert!(text.ends_with(&format!(",\"hash\":\"{}\"}}\n", hex::encode(hash))));
        // The hash covers prev || the record without its hash field.
        let mut h = Sha256::new();
        h.update([0u8; 32]);
        h.update(format!("{expect_head}}}").as_bytes());
        assert_eq!(h.finalize(), hash);

        let info = check_line(&line[..line.len() - 1], &mut Vec::new()).unwrap();
        assert_eq!((info.seq, info.hash, info.prev), (1, hash, GENESIS_PREV));
        assert_eq!(info.ts_str(), "2026-01-02T03:04:05.000006Z");
    }

    #[test]
    fn hashes_decode_only_from_64_lowercase_hex_digits() {
        let h = "0123456789abcdef".repeat(4);
        assert_eq!(decode_hash(&h).map(hex::encode), Some(h.clone()));
        assert_eq!(decode_hash(&h.to_uppercase()), None);
        assert_eq!(decode_hash(&h[1..]), None);
        assert_eq!(decode_hash(&format!("{}g", &h[1..])), None);
        assert_eq!(decode_hash(&format!("{} ", &h[1..])), None);
    }
}
