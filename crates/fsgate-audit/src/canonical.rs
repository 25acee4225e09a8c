//! The canonical JSON encoding that record hashes and signatures cover (audit/FORMAT.md).
//!
//! Strings: `"` and `\` escaped, control characters U+0000..U+001F escaped as `\b \f \n
//! \r \t` or `\u00xx` (lowercase hex), everything else raw UTF-8. Numbers: integers only.
//! Objects: keys sorted by UTF-8 bytes, no whitespace anywhere. Encoding and checking
//! live side by side so that they cannot drift apart.

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

/// Why a nested value is not canonical.
pub(crate) type CheckResult = Result<(), &'static str>;

/// Checks that `raw` (valid UTF-8) is one canonical JSON value and nothing else.
#[cfg(test)]
pub(crate) fn check_value(raw: &[u8]) -> CheckResult {
    let mut p = Checker { s: raw, i: 0 };
    p.value(0)?;
    if p.i != raw.len() {
        return Err("trailing bytes after value");
    }
    Ok(())
}

/// Checks one canonical value starting at `start`; returns where it ends.
pub(crate) fn value_end(s: &[u8], start: usize) -> Result<usize, &'static str> {
    let mut p = Checker { s, i: start };
    p.value(0)?;
    Ok(p.i)
}

/// Checks one canonical string starting at `start` (on its opening quote); returns the
/// range of its content, between the quotes.
pub(crate) fn string_at(s: &[u8], start: usize) -> Result<(usize, usize), &'static str> {
    let mut p = Checker { s, i: start };
    p.string()
}

/// Deepest nesting accepted in `args` and `details`.
const MAX_DEPTH: usize = 32;

struct Checker<'a> {
    /// The text being checked.
    s: &'a [u8],
    /// Where the checker is.
    i: usize,
}

impl Checker<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, lit: &[u8]) -> CheckResult {
        if self.s[self.i..].starts_with(lit) {
            self.i += lit.len();
            Ok(())
        } else {
            Err("invalid literal")
        }
    }

    fn value(&mut self, depth: usize) -> CheckResult {
        if depth > MAX_DEPTH {
            return Err("nested too deeply");
        }
        match self.peek() {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string().map(|_| ()),
            Some(b't') => self.eat(b"true"),
            Some(b'f') => self.eat(b"false"),
            Some(b'n') => self.eat(b"null"),
            Some(b'-' | b'0'..=b'9') => self.integer(),
            _ => Err("expected a value"),
        }
    }

    fn object(&mut self, depth: usize) -> CheckResult {
        self.i += 1;
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(());
        }
        let mut prev: Option<(usize, usize)> = None;
        loop {
            let (ks, ke) = self.string()?;
            if let Some((ps, pe)) = prev
                && !key_less(&self.s[ps..pe], &self.s[ks..ke])
            {
                return Err("object keys not in ascending order (or repeated)");
            }
            prev = Some((ks, ke));
            if self.peek() != Some(b':') {
                return Err("expected ':'");
            }
            self.i += 1;
            self.value(depth + 1)?;
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err("expected ',' or '}'"),
            }
        }
    }

    fn array(&mut self, depth: usize) -> CheckResult {
        self.i += 1;
        if self.peek() == Some(b']') {
            self.i += 1;
            return Ok(());
        }
        loop {
            self.value(depth + 1)?;
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err("expected ',' or ']'"),
            }
        }
    }

    /// Checks a canonical string; returns the byte range of its escaped content.
    fn string(&mut self) -> Result<(usize, usize), &'static str> {
        if self.peek() != Some(b'"') {
            return Err("expected a string");
        }
        self.i += 1;
        let start = self.i;
        loop {
            let b = self.peek().ok_or("unterminated string")?;
            match b {
                b'"' => {
                    self.i += 1;
                    return Ok((start, self.i - 1));
                }
                b'\\' => {
                    let e = *self.s.get(self.i + 1).ok_or("unterminated escape")?;
                    match e {
                        b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => self.i += 2,
                        b'u' => {
                            let hex = self.s.get(self.i + 2..self.i + 6).ok_or("short \\u")?;
                            let ok = hex[0] == b'0'
                                && hex[1] == b'0'
                                && matches!(hex[2], b'0' | b'1')
                                && matches!(hex[3], b'0'..=b'9' | b'a'..=b'f');
                            if !ok {
                                return Err("\\u escape outside U+0000..U+001F or not lowercase");
                            }
                            let c = u8::from_str_radix(
                                std::str::from_utf8(&hex[2..]).map_err(|_| "bad hex")?,
                                16,
                            )
                            .map_err(|_| "bad hex")?;
                            if matches!(c, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d) {
                                return Err("\\u escape where a short escape is canonical");
                            }
                            self.i += 6;
                        }
                        _ => return Err("unknown escape"),
                    }
                }
                _ => {
                    // Fast path: jump to the next quote or backslash, then make sure the
                    // run skipped holds no raw control character (both loops vectorise).
                    let rest = &self.s[self.i..];
                    let run = memchr::memchr2(b'"', b'\\', rest).unwrap_or(rest.len());
                    let controls = rest[..run].iter().fold(0u8, |n, &c| n | u8::from(c < 0x20));
                    if controls != 0 {
                        return Err("raw control character in string");
                    }
                    self.i += run;
                }
            }
        }
    }

    fn integer(&mut self) -> CheckResult {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        let digits = self.i;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.i += 1;
        }
        let body = &self.s[digits..self.i];
        if body.is_empty() {
            return Err("expected digits");
        }
        if matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return Err("not an integer (floats are not canonical)");
        }
        if body.len() > 1 && body[0] == b'0' {
            return Err("leading zero");
        }
        let text = std::str::from_utf8(&self.s[start..self.i]).map_err(|_| "bad digits")?;
        if text == "-0" {
            return Err("negative zero");
        }
        if text.parse::<i64>().is_err() && text.parse::<u64>().is_err() {
            return Err("integer out of range");
        }
        Ok(())
    }
}

/// Compares two escaped key bodies by their unescaped UTF-8 bytes (strictly less).
fn key_less(a: &[u8], b: &[u8]) -> bool {
    if !a.contains(&b'\\') && !b.contains(&b'\\') {
        return a < b;
    }
    unescape(a) < unescape(b)
}

/// Unescapes a canonical string body (already checked) into its UTF-8 bytes.
pub(crate) fn unescape(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] != b'\\' {
            out.push(s[i]);
            i += 1;
            continue;
        }
        let e = s.get(i + 1).copied().unwrap_or(b'\\');
        let (byte, len) = match e {
            b'b' => (0x08, 2),
            b'f' => (0x0c, 2),
            b'n' => (b'\n', 2),
            b'r' => (b'\r', 2),
            b't' => (b'\t', 2),
            b'u' => {
                let hex = s.get(i + 4..i + 6).unwrap_or(b"00");
                let v = std::str::from_utf8(hex)
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .unwrap_or(0);
                (v, 6)
            }
            other => (other, 2),
        };
        out.push(byte);
        i += len;
    }
    out
}

#[cfg(test)]
mod tests {
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
