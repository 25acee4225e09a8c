//! The MCP door's input: the fuzzer's bytes through the line guard (a small limit, so
//! oversized lines are cut and stood in for), each line classified by the input pump,
//! and each `tools/call` request run through a real gateway on a temp workspace (the
//! built-in default policy or a permissive one), with the tools' own argument parsing.
//! No panic; a cut line never reaches the SDK whole.
#![no_main]

mod common;

use fsgate::ops::{PathStyle, RequestCtx};
use fsgate::transport::mcp::fuzz;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// Line limit for the guard (the real one is the policy's, 24 MiB by default).
const MAX_LINE: usize = 1024;

fuzz_target!(|data: &[u8]| {
    let gws = common::gateways();
    let ctx = RequestCtx {
        style: PathStyle::AbsoluteOrRelative,
        session: "fuzz".into(),
        transport: "mcp",
        peer: "fuzz".into(),
        scope: Default::default(),
        asker: None,
        notifier: None,
    };
    let out = fuzz::guard(data, MAX_LINE).expect("guard reads a slice");
    for (n, line) in out.split(|&b| b == b'\n').enumerate() {
        // What the guard passes: a line within the limit, a cut line ending in NUL, or
        // its small stand-in.
        let stand_in = line.windows(16).any(|w| w == b"fsgate/oversized");
        assert!(
            line.len() <= MAX_LINE + 1 || (stand_in && line.len() <= 4096),
            "line of {} bytes passed the guard",
            line.len()
        );
        assert!(line.len() <= MAX_LINE || line.ends_with(b"\0") || stand_in);
        let (_what, request) = fuzz::classify_line(line);
        let Some((_key, method)) = request else {
            continue;
        };
        if method != "tools/call" {
            continue;
        }
        let Ok(msg) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        let Some(name) = msg["params"]["name"].as_str() else {
            continue;
        };
        let args = match &msg["params"]["arguments"] {
            Value::Object(m) => m.clone(),
            _ => serde_json::Map::new(),
        };
        if let Some(result) = fuzz::call_tool(gws.pick(n), &ctx, name, args) {
            assert!(result["content"].is_array(), "{result}");
        }
    }
});
