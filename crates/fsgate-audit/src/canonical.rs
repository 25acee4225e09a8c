//! The canonical JSON encoding that record hashes and signatures cover (audit/FORMAT.md).
//!
//! Strings: `"` and `\` escaped, control characters U+0000..U+001F escaped as `\b \f \n
//! \r \t` or `\u00xx` (lowercase hex), everything else raw UTF-8. Numbers: integers only.
//! Objects: keys sorted by UTF-8 bytes, no whitespace anywhere. Encoding and checking
//! live side by side so that they cannot drift apart.

//!
//! This file holds the encoding and the timestamps; `check`: the checker that a line's
//! nested values are canonical (its tests below check both against each other).

pub(crate) mod check;

use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Length of a canonical timestamp: `YYYY-MM-DDTHH:MM:SS.ffffffZ`.
pub(crate) const TS_LEN: usize = 27;

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `s` as a canonical JSON string (with quotes).
pub(crate) fn push_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let short = match b {
            b'"' => b'"',
            b'\\' => b'\\',
            0x08 => b'b',
            0x0c => b'f',
            b'\n' => b'n',
            b'\r' => b'r',
            b'\t' => b't',
            0x00..=0x1f => 0,
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        if short == 0 {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[(b >> 4) as usize]);
            out.push(HEX[(b & 15) as usize]);
        } else {
            out.push(b'\\');
            out.push(short);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Appends an unsigned integer in decimal.
pub(crate) fn push_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// Appends a JSON value canonically: sorted keys, integers kept, any other number written
/// as a string of its JSON text (the format has no floats).
pub(crate) fn push_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                push_u64(out, u);
            } else if let Some(i) = n.as_i64() {
                out.push(b'-');
                push_u64(out, i.unsigned_abs());
            } else {
                push_str(out, &n.to_string());
            }
        }
        Value::String(s) => push_str(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                push_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => push_object(out, map),
    }
}

/// Appends an object with its keys sorted by UTF-8 bytes, whatever order `map` keeps.
pub(crate) fn push_object(out: &mut Vec<u8>, map: &serde_json::Map<String, Value>) {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    out.push(b'{');
    for (i, (k, v)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        push_str(out, k);
        out.push(b':');
        push_value(out, v);
    }
    out.push(b'}');
}

/// The canonical bytes of a whole value (used for checkpoints and tombstones).
pub(crate) fn to_vec(v: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    push_value(&mut out, v);
    out
}

/// Formats a UTC time canonically: RFC 3339, microseconds, `Z`.
pub(crate) fn format_ts(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    let Ok(year) = u32::try_from(t.year()) else {
        return "0000-01-01T00:00:00.000000Z".to_owned();
    };
    // Hot path (one per record): digits by hand, no formatting machinery.
    let mut b = *b"0000-00-00T00:00:00.000000Z";
    let mut put = |at: usize, width: usize, mut v: u32| {
        for i in (at..at + width).rev() {
            b[i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(0, 4, year.min(9999));
    put(5, 2, u8::from(t.month()).into());
    put(8, 2, t.day().into());
    put(11, 2, t.hour().into());
    put(14, 2, t.minute().into());
    put(17, 2, t.second().into());
    put(20, 6, t.microsecond());
    String::from_utf8_lossy(&b).into_owned()
}

/// The current time, canonically formatted.
pub fn now_ts() -> String {
    format_ts(OffsetDateTime::now_utc())
}

/// Whether `s` has exactly the canonical timestamp shape (digits where digits belong).
pub(crate) fn is_canonical_ts(s: &[u8]) -> bool {
    if s.len() != TS_LEN {
        return false;
    }
    const SHAPE: &[u8; TS_LEN] = b"dddd-dd-ddTdd:dd:dd.ddddddZ";
    SHAPE.iter().zip(s).all(|(&want, &got)| match want {
        b'd' => got.is_ascii_digit(),
        _ => want == got,
    })
}

/// Parses a canonical (or any RFC 3339) timestamp.
pub fn parse_ts(s: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(s, &Rfc3339).ok()
}

#[cfg(test)]
mod tests {
    use super::check::check_value;
    use super::*;
    use serde_json::json;

    fn enc(v: &Value) -> String {
        String::from_utf8(to_vec(v)).unwrap()
    }

    #[test]
    fn strings_escape_exactly_the_documented_set() {
        let s = "q\" b\\ \u{8}\u{c}\n\r\t \u{0}\u{1f} / é \u{7f} \u{2028} 😀";
        let mut out = Vec::new();
        push_str(&mut out, s);
        assert_eq!(
            String::from_utf8(out.clone()).unwrap(),
            "\"q\\\" b\\\\ \\b\\f\\n\\r\\t \\u0000\\u001f / é \u{7f} \u{2028} 😀\""
        );
        // serde_json agrees with the spec, byte for byte, and the checker accepts it.
        assert_eq!(serde_json::to_vec(s).unwrap(), out);
        assert_eq!(check_value(&out), Ok(()));
    }

    #[test]
    fn objects_sort_keys_by_bytes_and_numbers_stay_integers() {
        let v = json!({"b": 1, "a": [true, null, -5, 18446744073709551615u64], "é": {}, "Z": 1.5});
        let text = enc(&v);
        assert_eq!(
            text,
            r#"{"Z":"1.5","a":[true,null,-5,18446744073709551615],"b":1,"é":{}}"#
        );
        assert_eq!(check_value(text.as_bytes()), Ok(()));
    }

    #[test]
    fn checker_rejects_every_non_canonical_spelling() {
        for bad in [
            r#"{"b":1,"a":2}"#,
            r#"{"a":1,"a":2}"#,
            r#"{ "a":1}"#,
            r#"{"a":1.0}"#,
            r#"{"a":1e3}"#,
            r#"{"a":01}"#,
            r#"{"a":-0}"#,
            r#"{"a":"\u0041"}"#,
            r#"{"a":"\u000a"}"#,
            r#"{"a":"\u001F"}"#,
            r#"{"a":"\/"}"#,
            r#"{"a":99999999999999999999}"#,
            "{\"a\":\"\t\"}",
            r#"{"a":1}x"#,
            r#"[1,]"#,
        ] {
            assert!(check_value(bad.as_bytes()).is_err(), "accepted {bad}");
        }
    }

    #[test]
    fn keys_with_escapes_sort_by_their_unescaped_bytes() {
        // "\n" (0x0a) sorts before "A" (0x41) although its escaped form '\' (0x5c) does not.
        let v = json!({"A": 1, "\n": 2});
        let text = enc(&v);
        assert_eq!(text, r#"{"\n":2,"A":1}"#);
        assert_eq!(check_value(text.as_bytes()), Ok(()));
        assert!(check_value(br#"{"A":1,"\n":2}"#).is_err());
    }

    #[test]
    fn timestamps_have_one_fixed_shape() {
        let t = OffsetDateTime::from_unix_timestamp_nanos(1_700_000_000_123_456_789).unwrap();
        let s = format_ts(t);
        assert_eq!(s, "2023-11-14T22:13:20.123456Z");
        assert!(is_canonical_ts(s.as_bytes()));
        assert!(!is_canonical_ts(b"2023-11-14T22:13:20.123Z"));
        assert!(!is_canonical_ts(b"2023-11-14T22:13:20.123456+00:00"));
        assert_eq!(parse_ts(&s).unwrap().unix_timestamp(), 1_700_000_000);
    }
}
