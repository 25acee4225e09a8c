//! The ACP door: the fuzzer's bytes as the agent's stdin, framed into lines as `acp`
//! frames them (a small line limit, so oversized lines are exercised), each classified
//! as JSON-RPC, and each request answered through a real gateway on a temp workspace
//! (built-in default policy or a permissive one). No panic; every answer is one JSON-RPC
//! 2.0 response line echoing the request's id. `@ROOT` in the input stands for the
//! workspace root (a temp directory).
#![no_main]

mod common;

use std::sync::OnceLock;

use fsgate_doors::acp;
use fsgate_doors::jsonrpc::{self, Incoming};
use fsgate_doors::lines::{Line, read_line};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// Stands for the workspace root in inputs: ACP paths are absolute, and the root is a
/// temp directory the fuzzer cannot guess.
const ROOT: &[u8] = b"@ROOT";

/// Line limit for the framing (the real one is the policy's, 24 MiB by default).
const MAX_LINE: usize = 2048;

fuzz_target!(|data: &[u8]| {
    let gws = common::gateways();
    let _settle = common::SettleOnDrop;
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    let rt = RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    });
    let lines = rt.block_on(async {
        let mut r = tokio::io::BufReader::with_capacity(64, data);
        let mut out = Vec::new();
        while let Ok(line) = read_line(&mut r, MAX_LINE).await {
            match line {
                Line::Eof => break,
                Line::TooLong { len } => assert!(len > MAX_LINE as u64),
                Line::Message(m) => {
                    assert!(m.len() <= MAX_LINE && !m.contains(&b'\n'));
                    out.push(m);
                }
            }
        }
        out
    });
    for (n, line) in lines.iter().enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let line = with_root(line, &gws.root);
        match jsonrpc::classify(&line) {
            Incoming::Request { id, method, params } => {
                let request = acp::AcpRequest {
                    id: id.clone(),
                    method,
                    params,
                };
                let (reply, lease) = acp::answer(gws.pick(n), "fuzz", request);
                drop(lease);
                let bytes = acp::line_bytes(&reply);
                assert_eq!(bytes.iter().filter(|&&b| b == b'\n').count(), 1);
                let back: Value = serde_json::from_slice(&bytes).expect("answer is JSON");
                assert_eq!(back["jsonrpc"], "2.0");
                assert_eq!(back["id"], id);
                assert!(back.get("result").is_some() != back.get("error").is_some());
            }
            Incoming::Invalid { id, error } => {
                assert!(matches!(
                    id,
                    Value::Null | Value::Number(_) | Value::String(_)
                ));
                assert!(error["code"].is_i64());
            }
            Incoming::Notification { .. } | Incoming::Response { .. } => {}
        }
    }
});

/// `line` with every [`ROOT`] replaced by the workspace root.
fn with_root(line: &[u8], root: &std::path::Path) -> Vec<u8> {
    let root = root.as_os_str().as_encoded_bytes();
    let mut out = Vec::with_capacity(line.len());
    let mut rest = line;
    while let Some(i) = rest.windows(ROOT.len()).position(|w| w == ROOT) {
        out.extend_from_slice(&rest[..i]);
        out.extend_from_slice(root);
        rest = &rest[i + ROOT.len()..];
    }
    out.extend_from_slice(rest);
    out
}
