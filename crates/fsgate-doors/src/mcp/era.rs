//! Which protocol era a message belongs to, and what the door answers from the message
//! alone, before the SDK sees it.
//!
//! A request whose `params._meta` names `io.modelcontextprotocol/protocolVersion` is a
//! stateless (2026-07-28) request: it is answered from itself alone, whatever came
//! before on the connection. That revision removed `ping`, `initialize` and
//! `logging/setLevel`: with its `_meta` they are "method not found". Without it a
//! request belongs to the 2025 revisions' session, opened by `initialize`.
//!
//! Methods of features the server does not declare (prompts, resources, completions)
//! are "method not found" in both eras, whatever the SDK would make of them.
//!
//! A 2025-era request other than `initialize` and `ping` needs its session: before the
//! client's `initialize` it is refused (-32602) here.

use std::fmt;

use rmcp::model::ServerCapabilities;
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use fsgate_base::error::code;

/// The `_meta` key that marks a stateless request.
pub(super) const VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";

/// Whether a message's `params` carry the stateless marker: `params._meta` names a
/// protocol version. Reads any JSON without failing (and without building it).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Marked(pub bool);

impl<'de> Deserialize<'de> for Marked {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Marked, D::Error> {
        d.deserialize_any(Find {
            key: "_meta",
            inner: true,
        })
    }
}

/// Looks for `key` in an object; with `inner`, then for [`VERSION_KEY`] in its value.
struct Find {
    key: &'static str,
    inner: bool,
}

impl<'de> Visitor<'de> for Find {
    type Value = Marked;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Marked, A::Error> {
        let mut found = false;
        while let Some(k) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if k == self.key && self.inner {
                found |= map.next_value::<Marked2>()?.0;
            } else {
                found |= k == self.key;
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(Marked(found))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Marked, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Marked(false))
    }

    fn visit_bool<E>(self, _: bool) -> Result<Marked, E> {
        Ok(Marked(false))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Marked, E> {
        Ok(Marked(false))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Marked, E> {
        Ok(Marked(false))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Marked, E> {
        Ok(Marked(false))
    }
    fn visit_str<E>(self, _: &str) -> Result<Marked, E> {
        Ok(Marked(false))
    }
    fn visit_unit<E>(self) -> Result<Marked, E> {
        Ok(Marked(false))
    }
}

/// `_meta`'s value: whether it is an object naming [`VERSION_KEY`].
struct Marked2(bool);

impl<'de> Deserialize<'de> for Marked2 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Marked2, D::Error> {
        let found = d.deserialize_any(Find {
            key: VERSION_KEY,
            inner: false,
        })?;
        Ok(Marked2(found.0))
    }
}

/// Methods the stateless revision removed.
fn removed(method: &str) -> bool {
    matches!(method, "ping" | "initialize" | "logging/setLevel")
}

/// Whether `method` belongs to a feature `caps` declares (methods of no optional
/// feature always do).
fn declared(method: &str, caps: &ServerCapabilities) -> bool {
    if method.starts_with("prompts/") {
        caps.prompts.is_some()
    } else if method.starts_with("resources/") {
        caps.resources.is_some()
    } else if method == "completion/complete" {
        caps.completions.is_some()
    } else if method == "logging/setLevel" {
        caps.logging.is_some()
    } else {
        true
    }
}

/// The error a request for `method` gets from the door itself, from the request alone:
/// a method the stateless revision removed, sent with its `_meta`, or a method of a
/// feature the server does not declare.
pub(super) fn refusal(
    method: &str,
    stateless: bool,
    caps: &ServerCapabilities,
) -> Option<(i64, String)> {
    if stateless && removed(method) {
        return Some((
            code::METHOD_NOT_FOUND,
            format!(
                "method not found: `{method}` is not part of the stateless revision \
                 (2026-07-28) its `_meta` names"
            ),
        ));
    }
    if !declared(method, caps) {
        return Some((
            code::METHOD_NOT_FOUND,
            format!("method not found: `{method}` belongs to a feature this server does not offer"),
        ));
    }
    None
}

/// Methods the SDK knows: for these, params it cannot read are a params error (-32602);
/// any other method is unknown (-32601).
pub(super) fn known(method: &str) -> bool {
    matches!(
        method,
        "initialize"
            | "ping"
            | "tools/list"
            | "tools/call"
            | "server/discover"
            | "resources/list"
            | "resources/read"
            | "resources/templates/list"
            | "resources/subscribe"
            | "resources/unsubscribe"
            | "prompts/list"
            | "prompts/get"
            | "completion/complete"
            | "logging/setLevel"
    )
}

/// The error for a 2025-era request of `method` sent before the session's
/// `initialize`, if it needs the session.
pub(super) fn sessionless(method: &str) -> Option<(i64, String)> {
    if matches!(method, "initialize" | "ping") {
        return None;
    }
    Some((
        code::INVALID_PARAMS,
        format!(
            "no session for `{method}`: send `initialize` first (2025 revisions), or send \
             each request with the 2026-07-28 `_meta` ({VERSION_KEY} and \
             io.modelcontextprotocol/clientCapabilities)"
        ),
    ))
}

/// The error for a request of `method` whose params the SDK cannot read.
pub(super) fn unreadable(method: &str) -> (i64, String) {
    if known(method) {
        (
            code::INVALID_PARAMS,
            format!("invalid params for `{method}`: they do not match the method's schema"),
        )
    } else {
        (code::METHOD_NOT_FOUND, format!("unknown method `{method}`"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct Msg {
        #[serde(default)]
        params: Marked,
    }

    fn marked(line: &str) -> bool {
        serde_json::from_str::<Msg>(line)
            .map(|m| m.params.0)
            .unwrap()
    }

    #[test]
    fn the_stateless_marker_is_found_in_any_params() {
        let v = VERSION_KEY;
        assert!(marked(&format!(
            r#"{{"params":{{"_meta":{{"{v}":"2026-07-28"}}}}}}"#
        )));
        assert!(marked(&format!(
            r#"{{"params":{{"a":[1,{{"_meta":1}}],"_meta":{{"x":{{}},"{v}":5}}}}}}"#
        )));
        // Escaped key names are the same names.
        assert!(marked(
            r#"{"params":{"\u005fmeta":{"io.modelcontextprotocol\/protocolVersion":"x"}}}"#
        ));
        for unmarked in [
            r#"{}"#,
            r#"{"params":null}"#,
            r#"{"params":[1,2]}"#,
            r#"{"params":"text"}"#,
            r#"{"params":5.5}"#,
            r#"{"params":{"_meta":5}}"#,
            r#"{"params":{"_meta":[]}}"#,
            r#"{"params":{"_meta":{"progressToken":1}}}"#,
            r#"{"params":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#,
        ] {
            assert!(!marked(unmarked), "{unmarked}");
        }
    }

    #[test]
    #[allow(deprecated)] // logging: deprecated in the SDK, current in the 2025 revisions
    fn removed_and_undeclared_methods_are_refused_from_the_request_alone() {
        let caps = ServerCapabilities::builder()
            .enable_tools()
            .enable_logging()
            .build();
        let code = |m: &str, stateless| refusal(m, stateless, &caps).map(|(c, _)| c);
        for m in ["ping", "initialize", "logging/setLevel"] {
            assert_eq!(code(m, true), Some(code::METHOD_NOT_FOUND), "{m}");
            assert_eq!(code(m, false), None, "{m}");
        }
        for m in ["prompts/list", "resources/read", "completion/complete"] {
            assert_eq!(code(m, true), Some(code::METHOD_NOT_FOUND), "{m}");
            assert_eq!(code(m, false), Some(code::METHOD_NOT_FOUND), "{m}");
        }
        for m in ["tools/list", "tools/call", "server/discover", "x/y"] {
            assert_eq!(code(m, true), None, "{m}");
            assert_eq!(code(m, false), None, "{m}");
        }
        let bare = ServerCapabilities::builder().enable_tools().build();
        assert!(refusal("logging/setLevel", false, &bare).is_some());
    }
}
