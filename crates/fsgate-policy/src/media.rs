//! Media files (images and audio) for `[limits] binary = "media"`: the extensions the
//! reference MCP filesystem server maps to MIME types, and the signatures their content
//! must start with, so a binary file renamed `x.png` is still refused.

/// What kind of media a MIME type names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaKind {
    /// `image/*`.
    Image,
    /// `audio/*`.
    Audio,
}

/// The media type of a file name by its extension (case-insensitive), as the reference
/// server maps them; None for anything else.
pub fn media_type(name: &str) -> Option<(MediaKind, &'static str)> {
    let name = name.rsplit('/').next().unwrap_or(name);
    let (_, ext) = name.rsplit_once('.')?;
    let t = match ext.to_ascii_lowercase().as_str() {
        "png" => (MediaKind::Image, "image/png"),
        "jpg" | "jpeg" => (MediaKind::Image, "image/jpeg"),
        "gif" => (MediaKind::Image, "image/gif"),
        "webp" => (MediaKind::Image, "image/webp"),
        "bmp" => (MediaKind::Image, "image/bmp"),
        "svg" => (MediaKind::Image, "image/svg+xml"),
        "mp3" => (MediaKind::Audio, "audio/mpeg"),
        "wav" => (MediaKind::Audio, "audio/wav"),
        "ogg" => (MediaKind::Audio, "audio/ogg"),
        "flac" => (MediaKind::Audio, "audio/flac"),
        _ => return None,
    };
    Some(t)
}

/// True if `bytes` start as a file of `mime` does. SVG is text, never a binary read.
pub(crate) fn content_matches(mime: &str, bytes: &[u8]) -> bool {
    let riff = |form: &[u8]| bytes.starts_with(b"RIFF") && bytes.get(8..12) == Some(form);
    match mime {
        "image/png" => bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "image/jpeg" => bytes.starts_with(&[0xFF, 0xD8, 0xFF]),
        "image/gif" => bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a"),
        "image/webp" => riff(b"WEBP"),
        "image/bmp" => bytes.starts_with(b"BM"),
        // An ID3 tag, or an MPEG audio frame's sync bits.
        "audio/mpeg" => {
            bytes.starts_with(b"ID3")
                || (bytes.len() >= 2 && bytes[0] == 0xFF && bytes[1] & 0xE0 == 0xE0)
        }
        "audio/wav" => riff(b"WAVE"),
        "audio/ogg" => bytes.starts_with(b"OggS"),
        "audio/flac" => bytes.starts_with(b"fLaC"),
        _ => false,
    }
}

/// True if the file `name` holding `bytes` is a media file `binary = "media"` lets be
/// read as base64: a media extension and content that starts as that type does.
pub fn is_media(name: &str, bytes: &[u8]) -> bool {
    media_type(name).is_some_and(|(_, mime)| content_matches(mime, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extensions_as_the_reference_maps_them() {
        assert_eq!(
            media_type("/w/a.PNG"),
            Some((MediaKind::Image, "image/png"))
        );
        assert_eq!(
            media_type("x/a.flac"),
            Some((MediaKind::Audio, "audio/flac"))
        );
        assert_eq!(media_type("a.bin"), None);
        assert_eq!(media_type("v1.png/x"), None);
        assert_eq!(media_type("png"), None);
    }

    #[test]
    fn content_must_match_the_extension() {
        assert!(is_media("a.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"));
        assert!(!is_media("a.png", b"\x7fELF\x02\x01\x01\0"));
        assert!(!is_media("a.jpg", b"\x89PNG\r\n\x1a\n"));
        assert!(is_media("a.webp", b"RIFF\x10\0\0\0WEBPVP8 "));
        assert!(!is_media("a.webp", b"RIFF\x10\0\0\0WAVEfmt "));
        assert!(is_media("a.wav", b"RIFF\x10\0\0\0WAVEfmt "));
        assert!(is_media("a.mp3", b"ID3\x04\0"));
        assert!(is_media("a.mp3", &[0xFF, 0xFB, 0x90, 0]));
        assert!(is_media("a.ogg", b"OggS\0\x02"));
        assert!(is_media("a.flac", b"fLaC\0"));
        assert!(is_media("a.gif", b"GIF89a\x01\0"));
        assert!(is_media("a.bmp", b"BM\x36\0"));
        assert!(!is_media("a.svg", b"<svg\0"));
        assert!(!is_media("a.bin", b"\x89PNG\r\n\x1a\n"));
        assert!(!is_media("a.png", b""));
    }
}
