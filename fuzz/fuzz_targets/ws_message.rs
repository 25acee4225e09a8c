//! The WebSocket files channel: the fuzzer's bytes as one text message, parsed as the
//! connection parses it, and a request decoded and served as the connection serves it,
//! through a real gateway on a temp workspace (the built-in default policy or a
//! permissive one), its answer under a small message limit. No panic; every answer is
//! a JSON object on the `files` channel echoing the request's `type` and `requestId`,
//! within the limit.
#![no_main]

mod common;

use fsgate_base::error::echo;
use fsgate_gateway::ops::{PathStyle, RequestCtx};
use fsgate_base::path::RelPath;
use fsgate_doors::door;
use fsgate_doors::ws::protocol::{self, Incoming};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// Message limit for answers (the real one is the policy's).
const MAX: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let gws = common::gateways();
    let _settle = common::SettleOnDrop;
    match protocol::parse(text) {
        Incoming::Bad { reply, .. } => {
            assert!(reply["errorInfo"]["code"].is_i64(), "{reply}");
            assert!(reply["error"].is_string(), "{reply}");
            assert_eq!(reply["channel"], "files");
        }
        Incoming::Subscribe { path, .. } => {
            if let Ok(rel) = RelPath::parse_rooted(&path) {
                assert!(rel.to_rooted().starts_with('/'));
            }
        }
        Incoming::Unsubscribe { .. } => {}
        // A reply to a question: parsed, nothing to serve.
        Incoming::Permission { .. } => {}
        Incoming::Request(request) => {
            let ctx = RequestCtx {
                style: PathStyle::Rooted,
                session: "fuzz".into(),
                door: &fsgate_doors::ws::DOOR,
                peer: "fuzz".into(),
                scope: Default::default(),
                asker: None,
                notifier: None,
            };
            let gw = gws.pick(data.len());
            let ws = protocol::Ws { max: MAX };
            let served = door::serve_wire(&ws, gw, &ctx, None, request);
            let (head, encoded) = (served.tag.head, served.answer);
            drop(served.leases);
            let back: Value = serde_json::from_str(&encoded).expect("answer is JSON");
            assert_eq!(back["channel"], "files");
            // The type is echoed as any echo is bounded: an unknown one over 1024 bytes
            // comes back cut (docs/ws-protocol.md).
            assert_eq!(back["type"].as_str(), Some(&*echo(&head.kind)));
            assert_eq!(back.get("requestId"), head.request_id.as_ref());
            // An answer over the limit becomes the (small) error saying so.
            assert!(
                encoded.len() <= MAX || back["errorInfo"].is_object(),
                "{} bytes",
                encoded.len()
            );
        }
    }
});
