//! The MCP-over-HTTP door's reading of a POSTed body: the body made one line, classified
//! as the door's pump classifies it, and a request handed on under the exchange's own
//! id (a cancellation naming it), as `route.rs` does. No panic; the line is the body
//! with each CR and LF a space; a request reaches the door as a request with the same
//! method under exactly our id, a cancellation names exactly our id, and nothing else in
//! the message changes.
#![no_main]

use fsgate_doors::http::fuzz::post_body;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

const OURS: u64 = 4242;

/// The message without the member at `path` (a JSON pointer's parent and key).
fn without(mut v: Value, parent: &str, key: &str) -> Value {
    if let Some(obj) = v.pointer_mut(parent).and_then(Value::as_object_mut) {
        obj.remove(key);
    }
    v
}

/// The message as JSON, past the whitespace the pump skips; None for one the pump admits
/// but a JSON value cannot hold (a string that is not UTF-8, a number out of range: the
/// SDK decides on those).
fn parse(b: &[u8]) -> Option<Value> {
    serde_json::from_slice(b.trim_ascii()).ok()
}

fuzz_target!(|data: &[u8]| {
    let posted = post_body(data, OURS);
    assert_eq!(posted.line.len(), data.len());
    assert!(!posted.line.iter().any(|b| *b == b'\n' || *b == b'\r'));
    let Some(to_door) = &posted.to_door else {
        return;
    };
    let again = post_body(to_door, OURS + 1);
    if let Some((_, method)) = &posted.request {
        let (key, m) = again.request.expect("still a request");
        assert_eq!((key.as_str(), &m), (OURS.to_string().as_str(), method));
        if let (Some(a), Some(b)) = (parse(&posted.line), parse(to_door)) {
            assert_eq!(without(a, "", "id"), without(b, "", "id"));
        }
    } else if posted.cancels.is_some() {
        assert_eq!(again.cancels, Some(OURS.to_string()), "{to_door:?}");
        if let (Some(a), Some(b)) = (parse(&posted.line), parse(to_door)) {
            let inner = |v| without(v, "/params", "requestId");
            assert_eq!(inner(a), inner(b));
        }
    } else {
        assert_eq!(to_door, &posted.line);
    }
});
