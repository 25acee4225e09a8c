//! The MCP door's input: the fuzzer's bytes through the line guard (a small limit, so
//! oversized lines are cut and stood in for), each line classified by the input pump,
//! and each `tools/call` request read as the door reads it (its era, the SDK's checks of
//! its `_meta`) and run through a real gateway on a temp workspace (the built-in default
//! policy or a permissive one), with the tools' own argument parsing.
//! No panic; a cut line never reaches the SDK whole.
#![no_main]

mod common;

use fsgate_gateway::ops::{PathStyle, RequestCtx};
use fsgate_doors::mcp::fuzz;
use libfuzzer_sys::fuzz_target;

/// Line limit for the guard (the real one is the policy's, 24 MiB by default).
const MAX_LINE: usize = 1024;

fuzz_target!(|data: &[u8]| {
    let gws = common::gateways();
    let _settle = common::SettleOnDrop;
    let ctx = RequestCtx {
        style: PathStyle::AbsoluteOrRelative,
        session: "fuzz".into(),
        door: &fsgate_doors::mcp::DOOR,
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
        // A NUL is the guard's mark alone: a stand-in's first byte, a cut line's last.
        let inner = line.get(1..line.len().saturating_sub(1)).unwrap_or_default();
        assert!(!inner.contains(&0), "a NUL the client sent passed the guard");
        assert!(line.first() != Some(&0) || stand_in, "a stand-in mark on a client line");
        let (_what, _request) = fuzz::classify_line(line);
        // A tools/call as the door takes it: read once (its era, its _meta checked),
        // then run; a refusal is a JSON-RPC error with a message.
        match fuzz::call_line(gws.pick(n), &ctx, line) {
            None => {}
            Some(Ok(result)) => assert!(result["content"].is_array(), "{result}"),
            Some(Err((code, message))) => {
                assert!(code < 0 && !message.is_empty(), "{code} {message}")
            }
        }
    }
});
