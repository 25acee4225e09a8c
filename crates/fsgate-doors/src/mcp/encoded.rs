//! A call's answer encoded once, exactly as the SDK would have for the call's protocol
//! era; over the message limit, the limit error in its place; a large text answer left
//! to be escaped as it is written.

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResponse, InputRequiredResult, ServerResult};
use serde::Serialize;

use super::render::Answer;
use super::render::too_big;

use super::text_answer::{encode_escaped, encode_text, escaped_answer_len, text_answer_len};

/// A text answer too large to write from the batch thread: its text, escaped only as it
/// is written, in pieces, once for each copy (no answer buffer twice the text's size,
/// whose page faults and copies cost more than a second escaping); or, `escaped`, the
/// text's escaping already, written twice as it is.
pub(super) struct Streamed {
    pub(super) key: String,
    pub(super) text: String,
    pub(super) escaped: bool,
}

/// An answer ready to go out.
pub(super) enum Encoded {
    Bytes(Vec<u8>),
    /// Its exact encoded length, and the answer.
    Text(usize, Streamed),
}

/// What a call that ran answers.
pub(super) enum Reply {
    /// The tool's result.
    Tool(Answer),
    /// The question a stateless round met (see `mrtr`).
    Input(InputRequiredResult),
    /// A JSON-RPC error.
    Error(McpError),
}

/// Bytes an answering thread writes itself: what fits a pipe's default buffer (64 KiB),
/// so that a client that keeps reading does not make it wait.
pub(super) const WRITE_HERE_MAX: usize = 64 * 1024;

/// The JSON-RPC answer for id `key`, encoded once (not sized first, then encoded), or
/// the limit error in its place if it is over the message limit `max`. A text answer
/// of the 2025 era (`modern` false) is sized exactly first (cheap), then written into
/// a buffer of that size, or, if larger than [`WRITE_HERE_MAX`], left to be escaped as
/// it is written.
pub(super) fn encode_fitted(max: usize, key: &str, reply: Reply, modern: bool) -> Encoded {
    let mut bytes = Vec::new();
    let result = match reply {
        Reply::Tool(Answer::Text(text)) if !modern => match fit_text(max, key, text, false) {
            Ok(encoded) => return encoded,
            Err(size) => return limit_error(max, key, size, modern),
        },
        Reply::Tool(Answer::Escaped(escaped)) if !modern => {
            match fit_text(max, key, escaped, true) {
                Ok(encoded) => return encoded,
                Err(size) => return limit_error(max, key, size, modern),
            }
        }
        Reply::Error(e) => {
            encode(&mut bytes, key, ("error", &e));
            return Encoded::Bytes(bytes);
        }
        Reply::Tool(answer) => ServerResult::CallToolResult(answer.into_result()),
        Reply::Input(ir) => ServerResult::from(CallToolResponse::InputRequired(ir)),
    };
    encode(&mut bytes, key, ("result", &for_era(result, modern)));
    if bytes.len() <= max {
        return Encoded::Bytes(bytes);
    }
    limit_error(max, key, bytes.len(), modern)
}

/// The limit error for an answer of `size` bytes, over the message limit `max`.
pub(super) fn limit_error(max: usize, key: &str, size: usize, modern: bool) -> Encoded {
    let mut bytes = Vec::new();
    let result = ServerResult::CallToolResult(too_big(size, max));
    encode(&mut bytes, key, ("result", &for_era(result, modern)));
    Encoded::Bytes(bytes)
}

/// `result` as the SDK sends it in the call's era: for the 2025 revisions without
/// `resultType: "complete"`, a field they do not have.
pub(super) fn for_era(mut result: ServerResult, modern: bool) -> ServerResult {
    if !modern {
        result.strip_result_type_for_legacy_peer();
    }
    result
}

/// A text answer (`text` plain, or already `escaped`) encoded here, or left to be
/// streamed if larger than [`WRITE_HERE_MAX`]; its size if over the limit `max`.
pub(super) fn fit_text(
    max: usize,
    key: &str,
    text: String,
    escaped: bool,
) -> Result<Encoded, usize> {
    let size = if escaped {
        escaped_answer_len(key, &text)
    } else {
        text_answer_len(key, &text)
    };
    if size > max {
        return Err(size);
    }
    if size > WRITE_HERE_MAX {
        return Ok(streamed(size, key, text, escaped));
    }
    let mut bytes = Vec::with_capacity(size);
    if escaped {
        encode_escaped(&mut bytes, key, &text);
    } else {
        encode_text(&mut bytes, key, &text);
    }
    Ok(Encoded::Bytes(bytes))
}

/// A text answer of `size` bytes left for the copier to write.
pub(super) fn streamed(size: usize, key: &str, text: String, escaped: bool) -> Encoded {
    let key = key.to_string();
    Encoded::Text(size, Streamed { key, text, escaped })
}

/// Appends the JSON-RPC answer for id `key` (the id's JSON text) to `out`: its
/// `member` (`result` or `error`) and value, as the SDK writes it.
pub(super) fn encode(out: &mut Vec<u8>, key: &str, (member, value): (&str, &impl Serialize)) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b",\"");
    out.extend_from_slice(member.as_bytes());
    out.extend_from_slice(b"\":");
    if serde_json::to_writer(&mut *out, value).is_err() {
        // Unreachable for these plain values; still an answer, not a hang.
        out.extend_from_slice(br#"{"content":[{"type":"text","text":"internal error: the answer could not be encoded"}],"isError":true}"#);
    }
    out.extend_from_slice(b"}\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::outgoing::Outgoing;
    use crate::mcp::text_answer::{encode_text, write_text};
    use fsgate_gateway::escape_json_bytes_into;

    /// The bytes an encoded answer puts on the wire.
    fn wire(e: Encoded) -> Vec<u8> {
        let out = Outgoing {
            bytes: Vec::new(),
            text: None,
            pending: Vec::new(),
        };
        let out = match e {
            Encoded::Bytes(bytes) => Outgoing { bytes, ..out },
            Encoded::Text(_, t) => Outgoing {
                text: Some(t),
                ..out
            },
        };
        let mut w = Vec::new();
        out.write_to(&mut w).unwrap();
        w
    }

    fn fitted(max: usize, key: &str, answer: Answer) -> Vec<u8> {
        match encode_fitted(max, key, Reply::Tool(answer), false) {
            Encoded::Bytes(b) => b,
            Encoded::Text(..) => panic!("streamed"),
        }
    }

    /// What the general encoder writes for the same answer (the SDK's shape).
    fn general(max: usize, key: &str, text: &str) -> Vec<u8> {
        let result = Answer::Text(text.to_string()).into_result();
        wire(encode_fitted(
            max,
            key,
            Reply::Tool(Answer::Result(result)),
            false,
        ))
    }

    #[test]
    fn a_text_answer_is_byte_for_byte_the_general_encoding() {
        let texts = [
            String::new(),
            "plain".to_string(),
            "quotes \" and \\ and \t\n\r\u{1}\u{1f}\u{7f} é \u{2028} 日本".to_string(),
            "a line of text\n".repeat(700),
        ];
        for text in &texts {
            for key in ["1", "\"abc\"", "184467440737"] {
                let fast = fitted(usize::MAX, key, Answer::Text(text.clone()));
                assert_eq!(
                    String::from_utf8_lossy(&fast),
                    String::from_utf8_lossy(&general(usize::MAX, key, text))
                );
                assert_eq!(fast.len(), text_answer_len(key, text));
                assert_eq!(fast.capacity(), fast.len(), "sized exactly, never regrown");
            }
        }
    }

    #[test]
    fn a_text_answer_over_the_limit_is_the_same_limit_error() {
        let text = "x\ty\n".repeat(1000);
        let size = text_answer_len("7", &text);
        for max in [size - 1, 4096] {
            let fast = fitted(max, "7", Answer::Text(text.clone()));
            assert_eq!(fast, general(max, "7", &text));
            let v: serde_json::Value = serde_json::from_slice(&fast).unwrap();
            assert_eq!(v["result"]["isError"], true);
            let msg = v["result"]["content"][0]["text"].as_str().unwrap();
            assert!(msg.contains(&format!("would be {size} bytes")), "{msg}");
        }
        let fits = fitted(size, "7", Answer::Text(text.clone()));
        assert_eq!(fits.len(), size);
    }

    /// A large text answer is streamed, and its bytes are the general encoding's, for
    /// any piece size (cuts inside escapes' sources and multi-byte characters); over the
    /// limit it is the limit error, never streamed.
    #[test]
    fn a_streamed_text_answer_is_byte_for_byte_the_general_encoding() {
        let text = "quotes \" and \\ \t\u{1}\u{7f} é 日本 \u{2028}\n".repeat(3000);
        let whole = general(usize::MAX, "12", &text);
        let size = text_answer_len("12", &text);
        assert!(size > WRITE_HERE_MAX);
        let streamed = encode_fitted(
            usize::MAX,
            "12",
            Reply::Tool(Answer::Text(text.clone())),
            false,
        );
        assert!(matches!(streamed, Encoded::Text(len, _) if len == size));
        let bytes = wire(streamed);
        assert_eq!(bytes.len(), size);
        assert!(bytes == whole, "streamed answer differs");
        let part = &text[..text.char_indices().nth(4000).unwrap().0];
        for piece in [1, 2, 3, 5, 7, 64, 1000, 4096] {
            let mut w = Vec::new();
            write_text(&mut w, "12", part, piece).unwrap();
            let mut want = Vec::new();
            encode_text(&mut want, "12", part);
            assert!(w == want, "piece {piece}");
        }
        let over = fitted(size - 1, "12", Answer::Text(text.clone()));
        assert_eq!(over, general(size - 1, "12", &text));
    }

    /// An answer held escaped goes on the wire as the same text held plain: written
    /// here, streamed, or refused over the limit; and the SDK path gets the same result.
    #[test]
    fn an_escaped_answer_is_byte_for_byte_its_text_answer() {
        let small = "quotes \" and \\ \t\u{1}\u{7f} é 日本 \u{2028}\n".to_string();
        for text in [String::new(), small.clone(), small.repeat(3000)] {
            let mut escaped = Vec::new();
            escape_json_bytes_into(&mut escaped, text.as_bytes());
            let escaped = String::from_utf8(escaped).unwrap();
            let size = text_answer_len("9", &text);
            assert_eq!(escaped_answer_len("9", &escaped), size);
            for max in [usize::MAX, size, size - 1, 100] {
                let plain = wire(encode_fitted(
                    max,
                    "9",
                    Reply::Tool(Answer::Text(text.clone())),
                    false,
                ));
                let held = wire(encode_fitted(
                    max,
                    "9",
                    Reply::Tool(Answer::Escaped(escaped.clone())),
                    false,
                ));
                assert!(plain == held, "{} bytes, max {max}", text.len());
            }
            assert_eq!(
                Answer::Escaped(escaped).into_result(),
                Answer::Text(text).into_result()
            );
        }
    }
}
