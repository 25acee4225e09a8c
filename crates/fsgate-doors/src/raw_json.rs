//! Editing one member deep inside a JSON message while every other byte of it passes
//! unchanged: key order, number spelling (`12345678901234567890123` stays exact) and
//! fields no schema knows. Used for the proxy's `initialize` capability rewrite.

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

/// A JSON object as its members in order, each value kept as the raw text received.
struct RawObject(Vec<(String, Box<RawValue>)>);

impl<'de> Deserialize<'de> for RawObject {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawObject;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawObject, A::Error> {
                let mut members = Vec::new();
                while let Some(entry) = map.next_entry::<String, Box<RawValue>>()? {
                    members.push(entry);
                }
                Ok(RawObject(members))
            }
        }
        d.deserialize_map(V)
    }
}

impl RawObject {
    fn parse(text: &str) -> Option<RawObject> {
        serde_json::from_str(text).ok()
    }

    /// Sets `key` to `value` (every occurrence, or appended if absent).
    fn set(&mut self, key: &str, value: Box<RawValue>) {
        let mut found = false;
        for (k, v) in &mut self.0 {
            if k == key {
                *v = value.clone();
                found = true;
            }
        }
        if !found {
            self.0.push((key.to_string(), value));
        }
    }

    /// The object member `key` (the last one if repeated, as JSON parsers take it), or
    /// an empty object when it is absent or not an object.
    fn child(&self, key: &str) -> RawObject {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .and_then(|(_, v)| RawObject::parse(v.get()))
            .unwrap_or(RawObject(Vec::new()))
    }

    fn into_raw(self) -> Box<RawValue> {
        let mut out = String::from("{");
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&serde_json::to_string(k).unwrap_or_else(|_| "\"\"".into()));
            out.push(':');
            out.push_str(v.get());
        }
        out.push('}');
        // Built from valid member texts, so this parses; fall back to an empty object.
        RawValue::from_string(out)
            .unwrap_or_else(|_| RawValue::from_string("{}".into()).unwrap_or_default())
    }
}

fn raw_bool(b: bool) -> Box<RawValue> {
    RawValue::from_string(b.to_string()).unwrap_or_default()
}

/// `message` with `params.clientCapabilities.fs.readTextFile` / `writeTextFile` set,
/// creating the objects on the way when absent; `None` if `message` is not a JSON
/// object. Everything else is kept byte for byte, in its order.
pub(crate) fn set_fs_capabilities(message: &str, read: bool, write: bool) -> Option<String> {
    let mut top = RawObject::parse(message)?;
    let mut params = top.child("params");
    let mut caps = params.child("clientCapabilities");
    let mut fs = caps.child("fs");
    fs.set("readTextFile", raw_bool(read));
    fs.set("writeTextFile", raw_bool(write));
    caps.set("fs", fs.into_raw());
    params.set("clientCapabilities", caps.into_raw());
    top.set("params", params.into_raw());
    Some(top.into_raw().get().to_string())
}

/// `message` with `entry` appended to `params.mcpServers` (the list created when
/// absent or not a list); `None` if `message` is not a JSON object. Everything else,
/// the list's other entries included, is kept byte for byte, in its order.
pub(crate) fn append_mcp_server(message: &str, entry: &serde_json::Value) -> Option<String> {
    let mut top = RawObject::parse(message)?;
    let mut params = top.child("params");
    let mut list: Vec<Box<RawValue>> = params
        .0
        .iter()
        .rev()
        .find(|(k, _)| k == "mcpServers")
        .and_then(|(_, v)| serde_json::from_str(v.get()).ok())
        .unwrap_or_default();
    list.push(serde_json::value::to_raw_value(entry).ok()?);
    params.set("mcpServers", serde_json::value::to_raw_value(&list).ok()?);
    top.set("params", params.into_raw());
    Some(top.into_raw().get().to_string())
}

#[cfg(test)]
mod tests {
    use super::{append_mcp_server, set_fs_capabilities};

    #[test]
    fn a_server_is_appended_and_the_rest_kept() {
        let msg = r#"{"jsonrpc":"2.0","id":3,"method":"session/new","params":{"cwd":"/w","mcpServers":[{"name":"x","command":"/bin/x","args":[],"env":[],"n":1.50}],"_meta":{"a":12345678901234567890123}}}"#;
        let out = append_mcp_server(msg, &serde_json::json!({"name": "fsgate"})).unwrap();
        assert_eq!(
            out,
            r#"{"jsonrpc":"2.0","id":3,"method":"session/new","params":{"cwd":"/w","mcpServers":[{"name":"x","command":"/bin/x","args":[],"env":[],"n":1.50},{"name":"fsgate"}],"_meta":{"a":12345678901234567890123}}}"#
        );
        let out = append_mcp_server(
            r#"{"id":1,"method":"session/resume","params":{"sessionId":"s"}}"#,
            &serde_json::json!({"name": "fsgate"}),
        )
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["params"]["mcpServers"][0]["name"], "fsgate");
        assert_eq!(v["params"]["sessionId"], "s");
        assert!(append_mcp_server("[]", &serde_json::json!({})).is_none());
    }

    #[test]
    fn only_the_fs_flags_change() {
        let msg = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"big":12345678901234567890123,"clientCapabilities":{"terminal":true,"fs":{"writeTextFile":true,"_meta":{"x":1.50}},"z":[1, 2]},"a":"é"}}"#;
        let out = set_fs_capabilities(msg, true, false).unwrap();
        assert_eq!(
            out,
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"big":12345678901234567890123,"clientCapabilities":{"terminal":true,"fs":{"writeTextFile":false,"_meta":{"x":1.50},"readTextFile":true},"z":[1, 2]},"a":"é"}}"#
        );
    }

    #[test]
    fn missing_or_wrong_typed_objects_are_created() {
        let out = set_fs_capabilities(r#"{"id":1,"method":"initialize"}"#, false, false).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            v["params"]["clientCapabilities"]["fs"]["readTextFile"],
            false
        );
        let out = set_fs_capabilities(
            r#"{"id":1,"params":{"clientCapabilities":"yes"}}"#,
            true,
            true,
        )
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            v["params"]["clientCapabilities"]["fs"]["writeTextFile"],
            true
        );
        assert!(set_fs_capabilities("[1]", true, true).is_none());
    }
}
