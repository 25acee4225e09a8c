//! MCP over Streamable HTTP is the MCP door under another name: a read that cannot be
//! answered names the MCP tools' way to read it (read_media_file, read_text_file with
//! line and limit), never an ACP method, and its content is sized as the two copies
//! an MCP answer carries.

use serde_json::{Value, json};

use crate::mcp_harness::{Dirs, modern_meta};
use crate::mcp_http::{HttpGate, post};

/// A stateless `tools/call` of `read_text_file` on `path`: the answer's text.
fn read_text(g: &HttpGate, id: u64, path: &str) -> String {
    let bearer = g.bearer();
    let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "_meta": modern_meta(), "name": "read_text_file", "arguments": {"path": path}}});
    let auth = ("Authorization", bearer.as_str());
    let reply = post(g, &msg, &[auth, ("MCP-Protocol-Version", "2026-07-28")]);
    let answer: Value = reply.json();
    assert_eq!(answer["result"]["isError"], true, "{}", reply.body);
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text: {}", reply.body))
        .to_string()
}

#[test]
fn http_mcp_refusals_name_the_mcp_tools_and_size_both_copies() {
    let dirs = Dirs::new();
    dirs.put("b.png", b"a\0b");
    // Fits an answer once (3002 + 4096 bytes), not twice.
    dirs.put("half.txt", "x".repeat(3000));
    let policy = fsgate_policy::DEFAULT_POLICY_TOML
        .replace("[limits]\n", "[limits]\nmax_message_bytes = 8192\n");
    let g = HttpGate::start(&dirs, Some(&policy));
    let png = read_text(&g, 1, "b.png");
    assert_eq!(
        png,
        "limit exceeded: binary content (NUL byte or invalid UTF-8) cannot be read as text; \
         the policy lets media files (images, audio) be read with read_media_file if their \
         content matches their extension (rule limits.binary, path b.png)"
    );
    let half = read_text(&g, 2, "half.txt");
    assert_eq!(
        half,
        "limit exceeded: the answer would be 10100 bytes once encoded, over the message limit \
         of 8192 bytes; read the file in parts (read_text_file with line and limit) (rule \
         limits.max_message_bytes, path half.txt)"
    );
    let ops: Vec<(String, String)> = dirs
        .audit_records()
        .into_iter()
        .filter(|r| r["kind"] == "request" && r["op"] == "read_text_file")
        .map(|r| (r["transport"].to_string(), r["path"].to_string()))
        .collect();
    assert_eq!(ops.len(), 2, "{ops:?}");
    assert!(ops.iter().all(|(t, _)| t == "\"http\""), "{ops:?}");
}
