//! What the gateway knows of a door: its name for the records, and how its answers
//! carry content and name the ways to read what one request could not. Each door
//! defines its own [`DoorSpec`] next to its code; the gateway reads the fields and never
//! tells doors apart by name.

/// One door, as a request carries it (`RequestCtx::door`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DoorSpec {
    /// The audit records' `transport` (acp, mcp, ws, view...): for records and
    /// session names only.
    pub name: &'static str,
    /// Copies of read content in one answer (MCP sends a text block and structured
    /// content): what a read's answer is sized by.
    pub content_copies: u64,
    /// Ends the refusal of an answer over the message limit: the door's way to read
    /// the file in parts ("; read the file in parts (...)"), or "" if it has none.
    pub read_in_parts: &'static str,
    /// Ends the refusal of binary content as text when the policy lets binary files be
    /// read as base64 (`binary = "base64"`): "; " and the door's way to, or "".
    pub binary_read: &'static str,
    /// Ends the refusal of a media file's content as text when the policy lets media
    /// files be read (`binary = "media"`): "; " and the door's way to, or "".
    pub media_read: &'static str,
    /// Its requests are a process's (`fsgate run`'s view), not a model's: a file's size
    /// is bounded by `limits.max_process_file_bytes`, a host limit, instead of
    /// `max_read_bytes` and `max_write_bytes`, which bound what reaches a model.
    pub for_processes: bool,
}

/// How a transport writes paths: what it accepts, and how results are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathStyle {
    /// ACP: absolute paths under the workspace root only.
    Absolute,
    /// MCP: absolute under the root, or relative to it; results absolute.
    AbsoluteOrRelative,
    /// WebSocket files channel: `/src/a.ts` is `<root>/src/a.ts`.
    Rooted,
}

/// A door for the gateway's own tests: one copy, no ways to read named.
#[cfg(test)]
pub(crate) static TEST_DOOR: DoorSpec = DoorSpec {
    name: "test",
    content_copies: 1,
    read_in_parts: "",
    binary_read: "",
    media_read: "",
    for_processes: false,
};
