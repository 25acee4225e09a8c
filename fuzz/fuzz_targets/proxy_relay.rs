//! The proxy's relay classifier over arbitrary agent lines: it never panics, and a line
//! it would relay to the editor is exactly one JSON-RPC message, with no top-level member
//! twice, whose method (if any) is in no guarded namespace however it is normalised.
//! A line fsgate serves itself names a guarded method spelled exactly.

#![no_main]

use std::collections::HashSet;

use fsgate_doors::relay::{Relay, classify_agent_line, is_guarded, skeleton};
use libfuzzer_sys::fuzz_target;
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};

/// The top-level member names of a JSON object, in order, duplicates kept.
struct Keys(Vec<String>);

impl<'de> serde::Deserialize<'de> for Keys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Keys;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Keys, A::Error> {
                let mut keys = Vec::new();
                while let Some((k, _)) = map.next_entry::<String, IgnoredAny>()? {
                    keys.push(k);
                }
                Ok(Keys(keys))
            }
        }
        d.deserialize_map(V)
    }
}

fuzz_target!(|data: &[u8]| {
    match classify_agent_line(data) {
        Relay::Forward(_) => {
            let keys: Keys = serde_json::from_slice(data).expect("a relayed line is one object");
            let mut seen = HashSet::new();
            for k in &keys.0 {
                assert!(
                    seen.insert(skeleton(k)),
                    "member {k:?} twice in a relayed line"
                );
            }
            let v: serde_json::Value = serde_json::from_slice(data).expect("parses");
            assert_eq!(v["jsonrpc"], "2.0");
            if let Some(m) = v.get("method") {
                let m = m.as_str().expect("a relayed method is a string");
                assert!(!is_guarded(m), "relayed a guarded method {m:?}");
            }
        }
        Relay::Serve { method, .. } => {
            assert!(method.starts_with("fs/") || method.starts_with("_fsgate/"));
            assert_eq!(skeleton(&method), method);
        }
        Relay::Terminal { method, .. } => {
            assert!(method.starts_with("terminal/"));
            assert_eq!(skeleton(&method), method);
        }
        Relay::Refuse(r) => {
            for id in &r.ids {
                assert!(id.is_number() || id.is_string(), "answered id {id}");
            }
        }
    }
});
