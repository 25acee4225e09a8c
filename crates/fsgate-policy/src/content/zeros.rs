//! Text kept as UTF-16 or UTF-32 (PowerShell's and many Windows tools' default): its
//! secrets are not in its bytes as the rules spell them. The rules know secrets made of
//! ASCII, and each such character is one byte and zeros there: left without its zero
//! bytes, the text reads as the rules spell it.

/// `text` without its zero bytes, if it has any: a secret kept as UTF-16 or UTF-32
/// anywhere in a file (at its start, after 8 KiB of ASCII, behind an image's header,
/// beside CJK text whose bytes hold no zeros) reads there as the ASCII the rules know.
pub(super) fn without_zeros(text: &[u8]) -> Option<Vec<u8>> {
    memchr::memchr(0, text)?;
    Some(text.iter().copied().filter(|&b| b != 0).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_bytes_are_left_out_only_where_there_are_some() {
        assert_eq!(without_zeros(b"plain"), None);
        let mut mixed = b"x".repeat(9000);
        mixed.extend("KEY".encode_utf16().flat_map(u16::to_le_bytes));
        mixed.extend("KEY".chars().flat_map(|c| (c as u32).to_le_bytes()));
        let stripped = without_zeros(&mixed).expect("zeros");
        assert!(stripped.ends_with(b"KEYKEY"));
    }

    /// UTF-16 with a byte-order mark, little- or big-endian, reads as its ASCII.
    #[test]
    fn utf16_with_a_mark_reads_as_its_ascii() {
        let text = "$env:KEY = \"value\"\r\n";
        let le: Vec<u8> = [0xFF, 0xFE]
            .into_iter()
            .chain(text.encode_utf16().flat_map(u16::to_le_bytes))
            .collect();
        let be: Vec<u8> = [0xFE, 0xFF]
            .into_iter()
            .chain(text.encode_utf16().flat_map(u16::to_be_bytes))
            .collect();
        for bytes in [le, be] {
            let out = without_zeros(&bytes).expect("zeros");
            assert!(out.ends_with(text.as_bytes()), "{out:?}");
        }
    }
}
