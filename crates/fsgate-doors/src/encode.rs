//! JSON text of a `serde_json::Value`, byte for byte as `serde_json::to_vec` writes it,
//! with strings escaped eight bytes at a time ([`escape_json_into`]): serde_json's own
//! escaping, a byte at a time, was 4-6% of a pipelined read's time on the ACP and
//! WebSocket doors, whose answers carry the file's text.

use serde_json::Value;

use fsgate_gateway::escape_json_into;

/// Appends `v` as compact JSON.
pub(crate) fn write_json(out: &mut Vec<u8>, v: &Value) {
    // No limit: `usize::MAX` is never passed.
    let _ = write_upto(out, v, usize::MAX);
}

/// `v` as compact JSON, or `None` if it would be longer than `max` bytes (found before
/// more than `max` bytes plus one short piece are written: a string is measured before
/// it is escaped).
pub(crate) fn json_upto(v: &Value, max: usize, capacity: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(capacity.min(max));
    write_upto(&mut out, v, max).then_some(out)
}

/// Appends `v`; false as soon as `out` would pass `max` bytes.
fn write_upto(out: &mut Vec<u8>, v: &Value, max: usize) -> bool {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        // serde_json's own formatting of numbers (itoa, ryu).
        Value::Number(n) => {
            let _ = serde_json::to_writer(&mut *out, n);
        }
        Value::String(s) => return string_upto(out, s, max),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                if !write_upto(out, item, max) {
                    return false;
                }
            }
            out.push(b']');
        }
        Value::Object(map) => {
            out.push(b'{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                if !string_upto(out, k, max) {
                    return false;
                }
                out.push(b':');
                if !write_upto(out, item, max) {
                    return false;
                }
            }
            out.push(b'}');
        }
    }
    out.len() <= max
}

/// Appends `s` as a JSON string unless even unescaped it would pass `max`.
fn string_upto(out: &mut Vec<u8>, s: &str, max: usize) -> bool {
    if out.len().saturating_add(s.len()).saturating_add(2) > max {
        return false;
    }
    escape_json_into(out, s);
    out.len() <= max
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            any::<String>().prop_map(Value::String),
            "[\"\\\\\\n\\t\\u{0}-\\u{1f}\\u{7f}é\\u{2028}a-z ]{0,40}".prop_map(Value::String),
        ]
    }

    fn value() -> impl Strategy<Value = Value> {
        leaf().prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::btree_map(any::<String>(), inner, 0..8)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// The same bytes as serde_json, for any value.
        #[test]
        fn writes_what_serde_json_writes(v in value()) {
            let mut out = Vec::new();
            write_json(&mut out, &v);
            prop_assert_eq!(out, serde_json::to_vec(&v).expect("encode"));
        }

        /// Within the limit: the whole text; past it: nothing.
        #[test]
        fn a_limit_cuts_nothing_short(v in value(), max in 0usize..400) {
            let full = serde_json::to_vec(&v).expect("encode");
            match json_upto(&v, max, 64) {
                Some(text) => prop_assert_eq!(text, full),
                None => prop_assert!(full.len() > max),
            }
        }
    }

    /// A read's answer with text full of escapes, as the doors send it.
    #[test]
    fn an_answer_with_escapes_is_serde_jsons() {
        let v = json!({"jsonrpc": "2.0", "id": 7, "result": {"content": "a\"b\\c\n\u{1}é\t", "n": 1.5}});
        let mut out = Vec::new();
        write_json(&mut out, &v);
        assert_eq!(out, serde_json::to_vec(&v).expect("encode"));
        assert_eq!(json_upto(&v, 10, 64), None);
    }
}
