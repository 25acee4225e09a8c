//! A guard in front of the MCP server's input so that an oversized message gets an
//! answer instead of silence: a line longer than the policy's `limits.max_message_bytes`
//! is cut off (never held whole in memory), made unparsable so the pump skips it, and
//! followed by a small stand-in message carrying the original id (null if none could be
//! found), which the input pump records and answers with a JSON-RPC error naming the
//! limit. The session goes on.
//!
//! The guard's marks are NUL bytes (the end of a cut line, the start of a stand-in),
//! which no valid message holds: a NUL the client sent is passed on as byte 0x01 (as
//! invalid in JSON), so that the client can neither forge a mark nor hide a line.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use serde_json::{Value, json};
use tokio::io::{AsyncRead, ReadBuf};

/// The internal request that stands in for an oversized message.
pub(super) const OVERSIZED_METHOD: &str = "fsgate/oversized";

/// Bytes kept from the start and the end of an oversized line, to find its id.
const KEEP: usize = 512;

/// Appended to the kept part of an oversized line: a NUL makes it invalid JSON.
const CUT: &[u8] = b"\0\n";

/// Starts the stand-in of an oversized line.
pub(super) const STAND_IN: u8 = 0;

/// What a NUL the client sent is passed on as.
const CLIENT_NUL: u8 = 1;

/// Passes lines through unchanged, and replaces the part beyond `max` of any longer one.
pub(super) struct LineGuard<R> {
    inner: R,
    max: usize,
    /// Read from `inner`, not yet processed.
    scratch: Box<[u8]>,
    scratch_pos: usize,
    scratch_len: usize,
    /// Processed, not yet handed out.
    out: Vec<u8>,
    out_pos: usize,
    /// Length of the current line so far.
    len: usize,
    /// Its first bytes.
    head: Vec<u8>,
    /// Its last bytes, once it is being cut.
    tail: Vec<u8>,
    /// The current line is over the limit: its bytes are being discarded.
    cutting: bool,
}

impl<R> LineGuard<R> {
    /// A guard allowing lines of at most `max` bytes (newline not counted).
    pub(super) fn new(inner: R, max: usize) -> LineGuard<R> {
        LineGuard {
            inner,
            max,
            scratch: vec![0; 64 * 1024].into_boxed_slice(),
            scratch_pos: 0,
            scratch_len: 0,
            out: Vec::new(),
            out_pos: 0,
            len: 0,
            head: Vec::new(),
            tail: Vec::new(),
            cutting: false,
        }
    }

    /// Whether bytes read from `inner` wait here, not yet handed out.
    pub(super) fn holds_input(&self) -> bool {
        self.out_pos < self.out.len() || self.scratch_pos < self.scratch_len
    }

    /// Moves `data` into `out`, cutting oversized lines.
    fn process(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            let nl = data.iter().position(|&b| b == b'\n');
            let seg = &data[..nl.unwrap_or(data.len())];
            if !self.cutting {
                let room = self.max.saturating_sub(self.len);
                let pass = &seg[..seg.len().min(room)];
                let at = self.out.len();
                self.out.extend_from_slice(pass);
                for b in &mut self.out[at..] {
                    if *b == 0 {
                        *b = CLIENT_NUL;
                    }
                }
                let want = KEEP.saturating_sub(self.head.len()).min(pass.len());
                self.head.extend_from_slice(&pass[..want]);
                if seg.len() > room {
                    self.cutting = true;
                    self.keep_tail(&seg[room..]);
                }
            } else {
                self.keep_tail(seg);
            }
            self.len += seg.len();
            match nl {
                Some(i) => {
                    self.end_line();
                    data = &data[i + 1..];
                }
                None => break,
            }
        }
    }

    fn keep_tail(&mut self, seg: &[u8]) {
        self.tail.extend_from_slice(seg);
        if self.tail.len() > 2 * KEEP {
            let drop = self.tail.len() - KEEP;
            self.tail.drain(..drop);
        }
    }

    fn end_line(&mut self) {
        if self.cutting {
            self.out.extend_from_slice(CUT);
            let id = find_id(&self.head, &self.tail).unwrap_or(Value::Null);
            tracing::warn!(bytes = self.len, limit = self.max, %id, "oversized message refused");
            let msg = json!({
                "jsonrpc": "2.0",
                "id": id,
                "method": OVERSIZED_METHOD,
                "params": {"bytes": self.len, "limit": self.max},
            });
            self.out.push(STAND_IN);
            self.out.extend_from_slice(msg.to_string().as_bytes());
        }
        self.out.push(b'\n');
        self.len = 0;
        self.cutting = false;
        self.head.clear();
        self.tail.clear();
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for LineGuard<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.out_pos < this.out.len() {
                let n = buf.remaining().min(this.out.len() - this.out_pos);
                buf.put_slice(&this.out[this.out_pos..this.out_pos + n]);
                this.out_pos += n;
                if this.out_pos == this.out.len() {
                    this.out.clear();
                    this.out_pos = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.scratch_pos < this.scratch_len {
                let scratch = std::mem::take(&mut this.scratch);
                this.process(&scratch[this.scratch_pos..this.scratch_len]);
                this.scratch = scratch;
                this.scratch_pos = this.scratch_len;
                continue;
            }
            let mut rb = ReadBuf::new(&mut this.scratch);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut rb))?;
            let n = rb.filled().len();
            if n == 0 {
                if this.cutting {
                    // End of input inside an oversized line: just make it unparsable.
                    this.out.extend_from_slice(CUT);
                    this.cutting = false;
                    continue;
                }
                return Poll::Ready(Ok(()));
            }
            this.scratch_pos = 0;
            this.scratch_len = n;
        }
    }
}

/// The JSON-RPC id of a message from its first and last bytes: the `"id"` member before
/// `"params"` (the order most clients write), else the one that ends the message.
fn find_id(head: &[u8], tail: &[u8]) -> Option<Value> {
    let head = String::from_utf8_lossy(head);
    let before_params = head.find("\"params\"").map_or(&head[..], |i| &head[..i]);
    if let Some(v) = id_after(before_params, 0) {
        return Some(v);
    }
    let tail = String::from_utf8_lossy(tail);
    let at = tail.rfind("\"id\"")?;
    let (v, rest) = value_at(&tail[at + 4..])?;
    let rest: String = rest.chars().filter(|c| !c.is_whitespace()).collect();
    (rest == "}" || rest == ",\"jsonrpc\":\"2.0\"}").then_some(v)
}

/// The value of the first `"id"` member in `s` from `from` on.
fn id_after(s: &str, from: usize) -> Option<Value> {
    let at = s[from..].find("\"id\"")? + from;
    value_at(&s[at + 4..])
        .map(|(v, _)| v)
        .or_else(|| id_after(s, at + 4))
}

/// `: <number or string>` at the start of `s`: the value and what follows it.
fn value_at(s: &str) -> Option<(Value, &str)> {
    let s = s.trim_start().strip_prefix(':')?.trim_start();
    let end = if let Some(inner) = s.strip_prefix('"') {
        inner.find(['"', '\\']).map(|i| i + 2)?
    } else {
        s.find(|c: char| !(c.is_ascii_digit() || c == '-'))
            .unwrap_or(s.len())
    };
    let v: Value = serde_json::from_str(&s[..end]).ok()?;
    (v.is_number() || v.is_string()).then_some((v, &s[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    async fn guard(input: &[u8], max: usize) -> Vec<u8> {
        let mut g = LineGuard::new(input, max);
        let mut out = Vec::new();
        g.read_to_end(&mut out).await.unwrap();
        out
    }

    /// A stand-in line: its mark, then the message.
    fn stand_in(line: &str) -> Value {
        let Some(message) = line.strip_prefix('\0') else {
            panic!("no stand-in mark: {line:?}");
        };
        serde_json::from_str(message).unwrap()
    }

    /// The client cannot make the guard's marks: its NULs pass as 0x01, in a line cut
    /// short too, and nothing else changes.
    #[tokio::test]
    async fn a_nul_the_client_sent_is_no_mark() {
        let out = guard(b"\0{\"a\":1}\0\n{\"b\":\"\0\"}\n", 64).await;
        assert_eq!(out, b"\x01{\"a\":1}\x01\n{\"b\":\"\x01\"}\n");
        let out = guard(&[b"\0".repeat(100), b"\n".to_vec()].concat(), 10).await;
        let first = out.split(|&b| b == b'\n').next().unwrap_or_default();
        assert_eq!(first, [[1; 10].as_slice(), b"\0"].concat());
    }

    #[tokio::test]
    async fn short_lines_pass_unchanged() {
        let input = b"{\"a\":1}\n\n{\"b\":2}\npartial";
        assert_eq!(guard(input, 16).await, input);
    }

    #[tokio::test]
    async fn long_line_is_cut_and_answered_with_its_id() {
        let big = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{{\"x\":\"{}\"}}}}",
            "y".repeat(5000)
        );
        let input = format!("{big}\n{{\"ok\":1}}\n");
        let out = String::from_utf8(guard(input.as_bytes(), 100).await).unwrap();
        let lines: Vec<&str> = out.split('\n').collect();
        assert_eq!(lines[0].len(), 101, "kept part plus NUL");
        assert!(lines[0].ends_with('\0'));
        let v = stand_in(lines[1]);
        assert_eq!(v["id"], json!(7));
        assert_eq!(v["method"], json!(OVERSIZED_METHOD));
        assert_eq!(v["params"]["bytes"], json!(big.len()));
        assert_eq!(lines[2], "{\"ok\":1}");
    }

    #[tokio::test]
    async fn id_at_the_end_and_string_ids() {
        let big = format!(
            "{{\"method\":\"x\",\"params\":{{\"id\":1,\"z\":\"{}\"}},\"jsonrpc\":\"2.0\",\"id\":\"abc\"}}",
            "q".repeat(3000)
        );
        let out = String::from_utf8(guard(format!("{big}\n").as_bytes(), 64).await).unwrap();
        let v = stand_in(out.split('\n').nth(1).unwrap());
        assert_eq!(v["id"], json!("abc"));
    }

    #[tokio::test]
    async fn no_id_means_a_null_id_and_eof_inside_a_cut_line() {
        let big = format!(
            "{{\"method\":\"notifications/x\",\"params\":\"{}\"}}\n",
            "q".repeat(3000)
        );
        let out = String::from_utf8(guard(big.as_bytes(), 64).await).unwrap();
        let v = stand_in(out.split('\n').nth(1).unwrap());
        assert_eq!(v["id"], Value::Null);
        let out = guard(&[b'a'; 5000], 64).await;
        assert_eq!(out.len(), 64 + CUT.len());
    }

    #[test]
    fn id_finding() {
        assert_eq!(
            find_id(b"{\"jsonrpc\":\"2.0\", \"id\" : -3, \"method\"", b""),
            Some(json!(-3))
        );
        assert_eq!(
            find_id(b"{\"params\":{\"id\":5", b"..., \"id\":9}"),
            Some(json!(9))
        );
        assert_eq!(
            find_id(b"{\"params\":{\"id\":5", b"\"id\":9, \"more\":1}}"),
            None
        );
    }
}
