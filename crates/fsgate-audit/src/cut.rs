//! Long strings in a record are cut (audit/FORMAT.md section 2, "Long strings").
//!
//! Much of a record is text an agent chose: a path, a method or tool name, a session
//! id, a pattern, an error message quoting them. Written whole, one 2 MiB request
//! would add 2 MiB to the log. So the record builder (`super::AuditEvent::body`) cuts
//! every string written longer than `MAX_WHOLE` bytes, wherever it is (a record field,
//! or a string anywhere in `args` or `details`), to its first `HEAD` bytes as written,
//! and says so in `details.cut`: for each cut string, its JSON Pointer in the record,
//! its written length and the SHA-256 of the whole. The pointer, not the text, marks a
//! string as cut, so no agent can make an uncut string read as a cut one.
//!
//! Lengths are measured as written, escapes included: 4096 control characters take
//! 24 KiB in the line, and it is the line that must stay small. `MAX_WHOLE` is the
//! kernel's `PATH_MAX`: every path a request can act on is recorded whole (an intent
//! must name its file exactly; a path written longer is refused before any work), and a
//! record holds at most 4 KiB of any one text.

use fsgate_base::sha256::Sha256;
use serde_json::{Map, Value};

use crate::record::AuditEvent;

/// The longest string recorded whole, in bytes: the kernel's `PATH_MAX`.
pub(crate) const MAX_WHOLE: usize = 4096;
/// The most bytes of a cut string that are kept (cut back to a character boundary).
pub(crate) const HEAD: usize = 256;
/// The `details` member that lists the strings cut.
pub(crate) const CUT_KEY: &str = "cut";

pub use fsgate_base::text::head;

/// One string cut: where it was, how long it was, its digest.
struct Cut {
    pointer: String,
    bytes: usize,
    sha256: String,
}

/// The bytes `s` takes in a record line between its quotes: `"`, `\\` and control
/// characters escaped as the canonical form writes them (`\n` 2 bytes, `\u0001` 6).
pub fn written_len(s: &str) -> usize {
    s.len() + s.bytes().map(escape_extra).sum::<usize>()
}

/// What escaping byte `b` adds to its one byte.
fn escape_extra(b: u8) -> usize {
    match b {
        b'"' | b'\\' | 0x08 | 0x0c | b'\n' | b'\r' | b'\t' => 1,
        0x00..=0x1f => 5,
        _ => 0,
    }
}

/// Whether `s` is written in more than `MAX_WHOLE` bytes (its escapes included: an
/// agent's control characters take six bytes each in the line).
pub fn is_long(s: &str) -> bool {
    // At most six bytes written per byte: most strings are decided by their length.
    s.len() > MAX_WHOLE || (s.len() * 6 > MAX_WHOLE && written_len(s) > MAX_WHOLE)
}

/// The longest prefix of `s` that ends on a character boundary and is written in at
/// most `max` bytes.
pub fn written_head(s: &str, max: usize) -> &str {
    let mut n = 0;
    for (i, c) in s.char_indices() {
        let w = if c.is_ascii() {
            1 + escape_extra(c as u8)
        } else {
            c.len_utf8()
        };
        if n + w > max {
            return &s[..i];
        }
        n += w;
    }
    s
}

/// Whether `v` holds a string (or member name) written longer than [`MAX_WHOLE`].
fn has_long(v: &Value) -> bool {
    match v {
        Value::String(s) => is_long(s),
        Value::Array(items) => items.iter().any(has_long),
        Value::Object(m) => map_has_long(m),
        _ => false,
    }
}

fn map_has_long(m: &Map<String, Value>) -> bool {
    m.iter().any(|(k, v)| is_long(k) || has_long(v))
}

/// RFC 6901: `~` is written `~0`, `/` is written `~1`.
fn push_token(pointer: &mut String, token: &str) {
    pointer.push('/');
    for c in token.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            c => pointer.push(c),
        }
    }
}

/// Cuts `s` in place if it is too long, noting the cut at `pointer`.
fn cut_string(s: &mut String, pointer: String, cuts: &mut Vec<Cut>) {
    if !is_long(s) {
        return;
    }
    cuts.push(Cut {
        pointer,
        bytes: written_len(s),
        sha256: hex::encode(Sha256::digest(s.as_bytes())),
    });
    let keep = written_head(s, HEAD).len();
    s.truncate(keep);
}

fn cut_value(v: &mut Value, pointer: &mut String, cuts: &mut Vec<Cut>) {
    match v {
        Value::String(s) => cut_string(s, pointer.clone(), cuts),
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                let len = pointer.len();
                push_token(pointer, &i.to_string());
                cut_value(item, pointer, cuts);
                pointer.truncate(len);
            }
        }
        Value::Object(m) => cut_map(m, pointer, cuts),
        _ => {}
    }
}

/// Member names are fsgate's own, never an agent's; one that is too long anyway is
/// replaced by its head (its value keeps its place under that name).
fn cut_map(m: &mut Map<String, Value>, pointer: &mut String, cuts: &mut Vec<Cut>) {
    if m.keys().any(|k| is_long(k)) {
        let old = std::mem::take(m);
        for (k, v) in old {
            let k = if is_long(&k) {
                written_head(&k, HEAD).to_string()
            } else {
                k
            };
            m.insert(k, v);
        }
    }
    for (k, v) in m.iter_mut() {
        let len = pointer.len();
        push_token(pointer, k);
        cut_value(v, pointer, cuts);
        pointer.truncate(len);
    }
}

impl AuditEvent {
    /// Whether any string of the record is longer than [`MAX_WHOLE`] (checked on every
    /// record; nothing is copied when none is).
    fn has_long_text(&self) -> bool {
        let fields = [
            &self.session,
            &self.transport,
            &self.peer,
            &self.op,
            &self.decision,
            &self.outcome,
        ];
        let optional = [
            &self.path,
            &self.path2,
            &self.rule,
            &self.reason,
            &self.sha256,
            &self.backup,
        ];
        fields.iter().any(|s| is_long(s))
            || optional.iter().flat_map(|s| s.as_ref()).any(|s| is_long(s))
            || map_has_long(&self.args)
            || map_has_long(&self.details)
    }

    /// The record as it is written: `None` when no string is too long (the event is
    /// written as it is), else a copy with every long string cut and `details.cut`
    /// saying which.
    pub(crate) fn bounded(&self) -> Option<AuditEvent> {
        if !self.has_long_text() {
            return None;
        }
        let mut ev = self.clone();
        let mut cuts = Vec::new();
        for (name, s) in [
            ("session", &mut ev.session),
            ("transport", &mut ev.transport),
            ("peer", &mut ev.peer),
            ("op", &mut ev.op),
            ("decision", &mut ev.decision),
            ("outcome", &mut ev.outcome),
        ] {
            cut_string(s, format!("/{name}"), &mut cuts);
        }
        for (name, s) in [
            ("path", &mut ev.path),
            ("path2", &mut ev.path2),
            ("rule", &mut ev.rule),
            ("reason", &mut ev.reason),
            ("sha256", &mut ev.sha256),
            ("backup", &mut ev.backup),
        ] {
            if let Some(s) = s {
                cut_string(s, format!("/{name}"), &mut cuts);
            }
        }
        cut_map(&mut ev.args, &mut "/args".to_string(), &mut cuts);
        cut_map(&mut ev.details, &mut "/details".to_string(), &mut cuts);
        let mut listed = Map::new();
        for c in cuts {
            let mut entry = Map::new();
            entry.insert("bytes".into(), c.bytes.into());
            entry.insert("sha256".into(), c.sha256.into());
            listed.insert(c.pointer, Value::Object(entry));
        }
        ev.details.insert(CUT_KEY.into(), Value::Object(listed));
        Some(ev)
    }
}

/// Why a record's `details.cut` is not what fsgate writes (both verifiers check it):
/// an object whose every member names, by a JSON Pointer into the record, a string of
/// at most [`HEAD`] bytes as written, with `{bytes, sha256}`: a length over [`MAX_WHOLE`] and 64
/// lowercase hex digits.
pub(crate) fn check_cuts(record: &Value) -> Result<(), String> {
    let Some(cut) = record.get("details").and_then(|d| d.get(CUT_KEY)) else {
        return Ok(());
    };
    let Value::Object(cut) = cut else {
        return Err("details.cut is not an object".into());
    };
    for (pointer, entry) in cut {
        let what = || format!("details.cut[{pointer:?}]");
        let Some(Value::String(kept)) = record.pointer(pointer).filter(|_| !pointer.is_empty())
        else {
            return Err(format!("{} names no string in the record", what()));
        };
        if written_len(kept) > HEAD {
            return Err(format!(
                "{} names a string of more than {HEAD} bytes",
                what()
            ));
        }
        let Some(entry) = entry.as_object().filter(|e| e.len() == 2) else {
            return Err(format!("{} is not {{bytes, sha256}}", what()));
        };
        let long = entry
            .get("bytes")
            .and_then(Value::as_u64)
            .is_some_and(|n| n > MAX_WHOLE as u64);
        if !long {
            return Err(format!("{}.bytes is not a length over {MAX_WHOLE}", what()));
        }
        let digest = entry.get("sha256").and_then(Value::as_str).unwrap_or("");
        if !super::record::is_lower_hex(digest, 64) {
            return Err(format!("{}.sha256 is not 64 lowercase hex digits", what()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn long(c: char, n: usize) -> String {
        std::iter::repeat_n(c, n).collect()
    }

    #[test]
    fn control_characters_count_as_the_bytes_they_are_written_in() {
        let s: String = std::iter::repeat_n('\u{1}', 700).collect();
        assert_eq!(written_len(&s), 4200);
        assert!(is_long(&s));
        assert!(!is_long(&s[..682]));
        assert_eq!(written_head(&s, HEAD).len(), 42);
        assert_eq!(written_len("a\"b\\c\n"), 9);
        let ev = AuditEvent {
            session: s.clone(),
            ..AuditEvent::lifecycle("t", Map::new())
        };
        let cut = ev.bounded().expect("cut");
        assert_eq!(cut.session.len(), 42);
        assert_eq!(cut.details[CUT_KEY]["/session"]["bytes"], json!(4200));
        let line = serde_json::to_value(&cut.details).expect("json");
        assert!(check_cuts(&json!({"session": cut.session, "details": line})).is_ok());
    }

    #[test]
    fn a_head_ends_on_a_character_boundary() {
        let s = format!("{}é", long('a', 255));
        assert_eq!(head(&s, 256), long('a', 255));
        assert_eq!(head("short", 256), "short");
        let cjk = long('漢', 100);
        assert_eq!(head(&cjk, 256).len(), 255);
    }

    #[test]
    fn only_long_strings_are_cut_and_each_is_listed() {
        let path = format!("dir/{}", long('p', 2 << 20));
        let ev = AuditEvent {
            session: long('s', MAX_WHOLE),
            path: Some(path.clone()),
            op: long('m', MAX_WHOLE + 1),
            args: json!({"exclude": ["x", long('e', 5000)], "a/b~": long('k', 5000)})
                .as_object()
                .cloned()
                .unwrap_or_default(),
            ..Default::default()
        };
        let cut = ev.bounded().unwrap();
        assert_eq!(cut.session.len(), MAX_WHOLE, "at the limit: whole");
        assert_eq!(cut.path.as_deref(), Some(head(&path, HEAD)));
        assert_eq!(cut.op.len(), HEAD);
        let listed = &cut.details[CUT_KEY];
        assert_eq!(
            listed["/path"],
            json!({"bytes": path.len(), "sha256": hex::encode(Sha256::digest(path.as_bytes()))})
        );
        assert_eq!(listed["/op"]["bytes"], json!(MAX_WHOLE + 1));
        assert!(listed.get("/args/exclude/1").is_some(), "{listed}");
        assert!(listed.get("/args/a~1b~0").is_some(), "{listed}");
        assert_eq!(listed.as_object().map(Map::len), Some(4));
        let record = serde_json::to_value(RecordView(&cut)).unwrap();
        assert_eq!(check_cuts(&record), Ok(()));
        // The session kept whole (4 KiB), four heads and their digests: 2 MiB in, 6 KiB out.
        assert!(ev.body("").len() < 6 * 1024, "{}", ev.body("").len());
    }

    #[test]
    fn a_record_without_long_strings_is_written_as_it_is() {
        let ev = AuditEvent {
            path: Some(long('p', MAX_WHOLE)),
            ..Default::default()
        };
        assert!(ev.bounded().is_none());
    }

    #[test]
    fn a_cut_list_that_fsgate_would_not_write_is_refused() {
        let ok = json!({"path": "abc", "details": {"cut": {"/path": {"bytes": 5000, "sha256": "ab".repeat(32)}}}});
        assert_eq!(check_cuts(&ok), Ok(()));
        let cases = [
            json!({"details": {"cut": []}}),
            json!({"path": "abc", "details": {"cut": {"/path2": {"bytes": 5000, "sha256": "ab".repeat(32)}}}}),
            json!({"path": long('a', HEAD + 1), "details": {"cut": {"/path": {"bytes": 5000, "sha256": "ab".repeat(32)}}}}),
            json!({"path": "abc", "details": {"cut": {"/path": {"bytes": 4096, "sha256": "ab".repeat(32)}}}}),
            json!({"path": "abc", "details": {"cut": {"/path": {"bytes": 5000, "sha256": "AB".repeat(32)}}}}),
            json!({"path": "abc", "details": {"cut": {"/path": {"bytes": 5000, "sha256": "ab".repeat(32), "x": 1}}}}),
            json!({"path": "abc", "details": {"cut": {"": {"bytes": 5000, "sha256": "ab".repeat(32)}}}}),
        ];
        for c in cases {
            assert!(check_cuts(&c).is_err(), "{c}");
        }
    }

    /// The record's fields as JSON, as a verifier reads them.
    struct RecordView<'a>(&'a AuditEvent);

    impl serde::Serialize for RecordView<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let body = self.0.body("");
            let text = format!("{{{}}}", String::from_utf8_lossy(&body));
            let v: Value = serde_json::from_str(&text).map_err(serde::ser::Error::custom)?;
            v.serialize(s)
        }
    }
}
