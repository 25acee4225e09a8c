//! Text kept as UTF-16 (PowerShell's and many Windows tools' default): its secrets are
//! not in its bytes as the rules spell them, so the scan also reads the text decoded.

/// How many leading bytes are looked at to tell UTF-16 text without a byte-order mark.
const SAMPLE: usize = 8192;

/// `text` decoded to UTF-8 when it is UTF-16: it starts with a byte-order mark, or its
/// first bytes hold zeros at one parity of positions only (ASCII in UTF-16 has every
/// other byte zero). `None` for anything else.
pub(super) fn utf16_decoded(text: &[u8]) -> Option<Vec<u8>> {
    let (body, little) = match text {
        [0xFF, 0xFE, rest @ ..] => (rest, true),
        [0xFE, 0xFF, rest @ ..] => (rest, false),
        _ => (text, zeros_at_odd(text)?),
    };
    let units = body.chunks_exact(2).map(|p| match little {
        true => u16::from_le_bytes([p[0], p[1]]),
        false => u16::from_be_bytes([p[0], p[1]]),
    });
    let decoded: String = char::decode_utf16(units)
        .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
        .collect();
    Some(decoded.into_bytes())
}

/// `text` without its zero bytes, if it has any: a secret kept as UTF-16 or UTF-32
/// anywhere in a file (after 8 KiB of ASCII, behind an image's header, beside CJK text
/// whose bytes hold no zeros) reads there as the ASCII the rules know, its characters'
/// zero bytes left out.
pub(super) fn without_zeros(text: &[u8]) -> Option<Vec<u8>> {
    memchr::memchr(0, text)?;
    Some(text.iter().copied().filter(|&b| b != 0).collect())
}

/// Whether the sample's zero bytes sit at odd positions (little-endian UTF-16 of mostly
/// ASCII), at even ones (big-endian), or neither (`None`): at least a third of one
/// parity's bytes are zero and almost none of the other's.
fn zeros_at_odd(text: &[u8]) -> Option<bool> {
    let sample = &text[..text.len().min(SAMPLE)];
    let pairs = sample.len() / 2;
    if pairs < 8 {
        return None;
    }
    let (mut even, mut odd) = (0usize, 0usize);
    for p in sample.chunks_exact(2) {
        even += usize::from(p[0] == 0);
        odd += usize::from(p[1] == 0);
    }
    let many = |n: usize| n * 3 >= pairs;
    let few = |n: usize| n * 20 <= pairs;
    match (many(odd) && few(even), many(even) && few(odd)) {
        (true, false) => Some(true),
        (false, true) => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn le(s: &str, bom: bool) -> Vec<u8> {
        let mut out = if bom { vec![0xFF, 0xFE] } else { vec![] };
        out.extend(s.encode_utf16().flat_map(u16::to_le_bytes));
        out
    }

    fn be(s: &str, bom: bool) -> Vec<u8> {
        let mut out = if bom { vec![0xFE, 0xFF] } else { vec![] };
        out.extend(s.encode_utf16().flat_map(u16::to_be_bytes));
        out
    }

    #[test]
    fn utf16_with_or_without_a_mark_is_decoded() {
        let text = "$env:KEY = \"value\" caf\u{e9}\r\n";
        for bytes in [
            le(text, true),
            le(text, false),
            be(text, true),
            be(text, false),
        ] {
            assert_eq!(utf16_decoded(&bytes), Some(text.as_bytes().to_vec()));
        }
    }

    #[test]
    fn zero_bytes_are_left_out_only_where_there_are_some() {
        assert_eq!(without_zeros(b"plain"), None);
        let mut mixed = b"x".repeat(9000);
        mixed.extend("KEY".encode_utf16().flat_map(u16::to_le_bytes));
        mixed.extend("KEY".chars().flat_map(|c| (c as u32).to_le_bytes()));
        let stripped = without_zeros(&mixed).expect("zeros");
        assert!(stripped.ends_with(b"KEYKEY"));
    }

    #[test]
    fn utf8_and_binaries_are_not_decoded() {
        assert_eq!(
            utf16_decoded(b"plain text, long enough to be looked at\n"),
            None
        );
        assert_eq!(utf16_decoded(&[0u8; 4096]), None, "all zeros: no parity");
        let elf: Vec<u8> = (0..4096u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        assert_eq!(utf16_decoded(&elf), None);
        assert_eq!(utf16_decoded(b"ab"), None, "too short to tell");
    }
}
