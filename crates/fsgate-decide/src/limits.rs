//! What a read or a write may weigh, and how binary files are read.

/// How binary files are treated on read.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum BinaryMode {
    /// Refuse to read binary files.
    Deny,
    /// Binary reads (`_fsgate/read_file`, MCP read_media_file, WebSocket read) return
    /// media files base64-encoded: images and audio whose extension and first bytes
    /// agree (png, jpg, gif, webp, bmp, mp3, wav, ogg, flac). Other binary files are
    /// refused, and text reads refuse every binary file.
    Media,
    /// `_fsgate/read_file` returns them base64-encoded.
    Base64,
}

/// Size and content limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Limits {
    /// Largest file the agent may read, in bytes.
    pub max_read_bytes: u64,
    /// Largest content the agent may write in one request, in bytes.
    pub max_write_bytes: u64,
    /// Binary files: deny, base64 for media files only, or base64.
    pub binary: BinaryMode,
    /// Largest protocol message.
    pub max_message_bytes: u64,
    /// Largest file a process may open or write through `fsgate run`'s view, in bytes:
    /// the view's own bound in place of `max_read_bytes` and `max_write_bytes`, which
    /// bound what reaches a model. A host limit: the gateway holds such a file whole
    /// while it checks its content or applies a write.
    pub max_process_file_bytes: u64,
}
