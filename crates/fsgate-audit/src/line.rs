//! Checking one record line on its own: the canonical grammar (a direct, fast parser),
//! the hash, and a slow serde-based reference checker that the fast one is tested against.

#[cfg(test)]
use std::borrow::Cow;

#[cfg(test)]
use serde::Deserialize;
#[cfg(test)]
use serde_json::value::RawValue;

use super::canonical;
#[cfg(test)]
use super::canonical::{push_str, push_u64};
use super::record::{
    GENESIS_PREV, HASH_SUFFIX_LEN, KIND_BREAK, KIND_RECOVERED, chain_hash, decode_hash,
    is_lower_hex,
};

/// A record's fields as they appear in a line, borrowed where possible (reference
/// checker). The fields are those of FORMAT.md section 2, in its order.
#[cfg(test)]
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct View<'a> {
    seq: u64,
    #[serde(borrow)]
    ts: Cow<'a, str>,
    #[serde(borrow, default)]
    log: Option<Cow<'a, str>>,
    #[serde(borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    session: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    transport: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    peer: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    op: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    path: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    path2: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    args: Option<&'a RawValue>,
    #[serde(borrow, default)]
    decision: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    rule: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    reason: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    outcome: Option<Cow<'a, str>>,
    #[serde(default)]
    bytes: Option<u64>,
    #[serde(borrow, default)]
    sha256: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    backup: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    policy_sha256: Option<Cow<'a, str>>,
    #[serde(default)]
    duration_us: Option<u64>,
    #[serde(borrow, default)]
    details: Option<&'a RawValue>,
    #[serde(borrow)]
    prev: Cow<'a, str>,
    #[serde(borrow)]
    hash: Cow<'a, str>,
}

/// A record that checked out on its own (content, form and hash).
#[derive(Debug, Clone)]
pub(crate) struct LineInfo {
    /// `seq` field.
    pub seq: u64,
    /// `prev` field, decoded.
    pub prev: [u8; 32],
    /// `hash` field, decoded (and equal to the recomputed hash).
    pub hash: [u8; 32],
    /// `ts` field (canonical shape).
    pub ts: [u8; canonical::TS_LEN],
    /// `log` field, when present.
    pub log: Option<String>,
    /// `kind` is `break` or `recovered` (reported as warnings by verify).
    pub kind: Option<String>,
}

impl LineInfo {
    /// The timestamp as text.
    pub(crate) fn ts_str(&self) -> &str {
        std::str::from_utf8(&self.ts).unwrap_or("")
    }
}

/// Why one line is not a valid record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LineFault {
    /// Not a canonical record (bad JSON, unknown or mistyped field, wrong order, ...).
    Malformed(String),
    /// Well-formed, but the hash does not match the content: the record was edited.
    Modified {
        /// The edited record's seq.
        seq: u64,
    },
}

impl std::fmt::Display for LineFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LineFault::Malformed(m) => write!(f, "malformed record: {m}"),
            LineFault::Modified { seq } => {
                write!(
                    f,
                    "record seq {seq} was modified: its hash does not match its content"
                )
            }
        }
    }
}

/// The complete lines of a file (without their `\n`) and their byte offsets. A last line
/// without `\n` (torn) is not among them.
pub fn lines(bytes: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    let mut pos = 0;
    std::iter::from_fn(move || {
        let rest = &bytes[pos..];
        let nl = memchr::memchr(b'\n', rest)?;
        let start = pos;
        pos += nl + 1;
        Some((start, &rest[..nl]))
    })
}

/// The fields after `seq`, in canonical order: name, type, required.
const FIELDS: &[(&[u8], Ty, bool)] = &[
    (b",\"ts\":", Ty::Str, true),
    (b",\"log\":", Ty::Str, false),
    (b",\"kind\":", Ty::Str, true),
    (b",\"session\":", Ty::Str, false),
    (b",\"transport\":", Ty::Str, false),
    (b",\"peer\":", Ty::Str, false),
    (b",\"op\":", Ty::Str, false),
    (b",\"path\":", Ty::Str, false),
    (b",\"path2\":", Ty::Str, false),
    (b",\"args\":", Ty::Obj, false),
    (b",\"decision\":", Ty::Str, false),
    (b",\"rule\":", Ty::Str, false),
    (b",\"reason\":", Ty::Str, false),
    (b",\"outcome\":", Ty::Str, false),
    (b",\"bytes\":", Ty::U64, false),
    (b",\"sha256\":", Ty::Str, false),
    (b",\"backup\":", Ty::Str, false),
    (b",\"policy_sha256\":", Ty::Str, false),
    (b",\"duration_us\":", Ty::U64, false),
    (b",\"details\":", Ty::Obj, false),
    (b",\"prev\":", Ty::Str, true),
    (b",\"hash\":", Ty::Str, true),
];
const F_TS: usize = 0;
const F_LOG: usize = 1;
const F_KIND: usize = 2;
const F_DETAILS: usize = 19;
const F_PREV: usize = 20;
const F_HASH: usize = 21;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Ty {
    Str,
    U64,
    Obj,
}

/// How `details.cut` (the strings cut, FORMAT.md section 2) starts, when present.
const CUT_MEMBER: &[u8] = b"\"cut\":";

/// Checks `details.cut` of a record that may have one (slow: parses the line; only
/// records with cut strings pay for it).
fn check_cut_list(line: &[u8]) -> Result<(), LineFault> {
    let record: serde_json::Value = serde_json::from_slice(line)
        .map_err(|e| LineFault::Malformed(format!("not a record: {e}")))?;
    super::cut::check_cuts(&record).map_err(LineFault::Malformed)
}

/// Parses a canonical unsigned integer at `i`; returns it and where it ends.
fn u64_at(s: &[u8], i: usize) -> Option<(u64, usize)> {
    let mut end = i;
    while s.get(end).is_some_and(u8::is_ascii_digit) {
        end += 1;
    }
    let digits = &s[i..end];
    if digits.is_empty() || (digits.len() > 1 && digits[0] == b'0') {
        return None;
    }
    let n = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some((n, end))
}

/// Checks one line (without its `\n`): form, canonical encoding and hash.
///
/// This is a direct parser of the canonical grammar (FORMAT.md): a line is accepted
/// exactly when re-encoding its parsed fields gives the line back, which the test
/// `fast_and_reference_checkers_agree` holds it to. `_scratch` is kept for callers.
pub(crate) fn check_line(line: &[u8], _scratch: &mut Vec<u8>) -> Result<LineInfo, LineFault> {
    let bad = |m: &str| LineFault::Malformed(m.to_owned());
    if std::str::from_utf8(line).is_err() {
        return Err(bad("not UTF-8"));
    }
    if !line.starts_with(b"{\"seq\":") {
        return Err(bad("does not start with {\"seq\":"));
    }
    let (seq, i) = u64_at(line, 7).ok_or_else(|| bad("seq is not a canonical integer"))?;
    let (found, i) = scan_fields(line, i)?;
    if i + 1 != line.len() || line[i] != b'}' {
        return Err(bad(
            "not in canonical form (unknown field, field order, spacing or escaping)",
        ));
    }
    let field = |k: usize| found[k].map(|(a, b)| &line[a..b]);
    let ts = field(F_TS).unwrap_or_default();
    if !canonical::is_canonical_ts(ts) {
        return Err(bad("ts is not YYYY-MM-DDTHH:MM:SS.ffffffZ"));
    }
    let as_str = |b: &[u8]| std::str::from_utf8(b).unwrap_or_default().to_owned();
    let prev = decode_hash(std::str::from_utf8(field(F_PREV).unwrap_or_default()).unwrap_or(""))
        .ok_or_else(|| bad("prev is not 64 lowercase hex digits"))?;
    let hash = decode_hash(std::str::from_utf8(field(F_HASH).unwrap_or_default()).unwrap_or(""))
        .ok_or_else(|| bad("hash is not 64 lowercase hex digits"))?;
    let log = field(F_LOG).map(as_str);
    if let Some(log) = &log
        && !is_lower_hex(log, 32)
    {
        return Err(bad("log is not 32 lowercase hex digits"));
    }
    if seq == 0 {
        return Err(bad("seq 0"));
    }
    if prev == GENESIS_PREV && (seq != 1 || log.is_none()) {
        return Err(bad(
            "genesis prev on a record that is not seq 1 with a log id",
        ));
    }
    if field(F_DETAILS).is_some_and(|d| memchr::memmem::find(d, CUT_MEMBER).is_some()) {
        check_cut_list(line)?;
    }
    let head = &line[..line.len() - HASH_SUFFIX_LEN];
    if chain_hash(&prev, head, b"}") != hash {
        return Err(LineFault::Modified { seq });
    }
    let mut ts_out = [0u8; canonical::TS_LEN];
    ts_out.copy_from_slice(ts);
    let kind = match field(F_KIND) {
        Some(k) if k == KIND_BREAK.as_bytes() || k == KIND_RECOVERED.as_bytes() => Some(as_str(k)),
        _ => None,
    };
    Ok(LineInfo {
        seq,
        prev,
        hash,
        ts: ts_out,
        log,
        kind,
    })
}

/// Walks the fields after `seq` (from `i`) in their canonical order: the content
/// ranges of the fields read later, and where the fields end.
fn scan_fields(line: &[u8], mut i: usize) -> Result<(FieldRanges, usize), LineFault> {
    let bad = |m: &str| LineFault::Malformed(m.to_owned());
    let mut found: FieldRanges = [None; FIELDS.len()];
    for (k, (name, ty, required)) in FIELDS.iter().enumerate() {
        if !line[i..].starts_with(name) {
            if *required {
                return Err(LineFault::Malformed(format!(
                    "not in canonical form: expected field {} here",
                    String::from_utf8_lossy(&name[1..name.len() - 1])
                )));
            }
            continue;
        }
        i += name.len();
        match ty {
            Ty::Str => {
                let (a, b) = canonical::check::string_at(line, i)
                    .map_err(|m| LineFault::Malformed(format!("not in canonical form: {m}")))?;
                found[k] = Some((a, b));
                i = b + 1;
            }
            Ty::U64 => {
                i = u64_at(line, i)
                    .ok_or_else(|| bad("not in canonical form: bad integer"))?
                    .1;
            }
            Ty::Obj => {
                if line.get(i) != Some(&b'{') {
                    return Err(bad("args/details is not an object"));
                }
                let start = i;
                i = canonical::check::value_end(line, i).map_err(|m| {
                    LineFault::Malformed(format!("args/details not canonical: {m}"))
                })?;
                found[k] = Some((start, i));
            }
        }
    }
    Ok((found, i))
}

/// Content ranges of the string (and object) fields a check needs, by field.
type FieldRanges = [Option<(usize, usize)>; FIELDS.len()];

/// The reference checker: parse with serde, re-encode, compare. Slow, obviously right;
/// the fast checker must agree with it on every input.
#[cfg(test)]
pub(crate) fn check_line_reference(
    line: &[u8],
    scratch: &mut Vec<u8>,
) -> Result<LineInfo, LineFault> {
    let bad = |m: &str| LineFault::Malformed(m.to_owned());
    let text = std::str::from_utf8(line).map_err(|_| bad("not UTF-8"))?;
    let v: View<'_> = serde_json::from_str(text)
        .map_err(|e| LineFault::Malformed(format!("not a record: {e}")))?;
    for raw in [v.args, v.details].into_iter().flatten() {
        let raw = raw.get().as_bytes();
        if raw.first() != Some(&b'{') {
            return Err(bad("args/details is not an object"));
        }
        canonical::check::check_value(raw)
            .map_err(|m| LineFault::Malformed(format!("args/details not canonical: {m}")))?;
    }
    rebuild(&v, scratch);
    if scratch.as_slice() != line {
        return Err(bad("not in canonical form"));
    }
    if !canonical::is_canonical_ts(v.ts.as_bytes()) {
        return Err(bad("ts is not YYYY-MM-DDTHH:MM:SS.ffffffZ"));
    }
    let prev = decode_hash(&v.prev).ok_or_else(|| bad("prev is not 64 lowercase hex digits"))?;
    let hash = decode_hash(&v.hash).ok_or_else(|| bad("hash is not 64 lowercase hex digits"))?;
    if let Some(log) = &v.log
        && !is_lower_hex(log, 32)
    {
        return Err(bad("log is not 32 lowercase hex digits"));
    }
    if v.seq == 0 {
        return Err(bad("seq 0"));
    }
    if prev == GENESIS_PREV && (v.seq != 1 || v.log.is_none()) {
        return Err(bad(
            "genesis prev on a record that is not seq 1 with a log id",
        ));
    }
    check_cut_list(line)?;
    let head = &line[..line.len() - HASH_SUFFIX_LEN];
    if chain_hash(&prev, head, b"}") != hash {
        return Err(LineFault::Modified { seq: v.seq });
    }
    let mut ts = [0u8; canonical::TS_LEN];
    ts.copy_from_slice(v.ts.as_bytes());
    let kind = match v.kind.as_ref() {
        KIND_BREAK | KIND_RECOVERED => Some(v.kind.into_owned()),
        _ => None,
    };
    Ok(LineInfo {
        seq: v.seq,
        prev,
        hash,
        ts,
        log: v.log.map(Cow::into_owned),
        kind,
    })
}

/// Writes the canonical line for `v` (hash included, no `\n`) into `out`.
#[cfg(test)]
fn rebuild(v: &View<'_>, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(b"{\"seq\":");
    push_u64(out, v.seq);
    let s = |out: &mut Vec<u8>, name: &str, val: &Option<Cow<'_, str>>| {
        if let Some(val) = val {
            out.extend_from_slice(b",\"");
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b"\":");
            push_str(out, val);
        }
    };
    let n = |out: &mut Vec<u8>, name: &str, val: Option<u64>| {
        if let Some(val) = val {
            out.extend_from_slice(b",\"");
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b"\":");
            push_u64(out, val);
        }
    };
    let raw = |out: &mut Vec<u8>, name: &str, val: Option<&RawValue>| {
        if let Some(val) = val {
            out.extend_from_slice(b",\"");
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b"\":");
            out.extend_from_slice(val.get().as_bytes());
        }
    };
    s(out, "ts", &Some(Cow::Borrowed(&v.ts)));
    s(out, "log", &v.log);
    s(out, "kind", &Some(Cow::Borrowed(&v.kind)));
    s(out, "session", &v.session);
    s(out, "transport", &v.transport);
    s(out, "peer", &v.peer);
    s(out, "op", &v.op);
    s(out, "path", &v.path);
    s(out, "path2", &v.path2);
    raw(out, "args", v.args);
    s(out, "decision", &v.decision);
    s(out, "rule", &v.rule);
    s(out, "reason", &v.reason);
    s(out, "outcome", &v.outcome);
    n(out, "bytes", v.bytes);
    s(out, "sha256", &v.sha256);
    s(out, "backup", &v.backup);
    s(out, "policy_sha256", &v.policy_sha256);
    n(out, "duration_us", v.duration_us);
    raw(out, "details", v.details);
    s(out, "prev", &Some(Cow::Borrowed(&v.prev)));
    s(out, "hash", &Some(Cow::Borrowed(&v.hash)));
    out.push(b'}');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::seal;
    use crate::record::tests::sample;
    use serde_json::json;

    #[test]
    fn editing_any_byte_is_caught() {
        let (line, _) = seal(
            2,
            "2026-01-02T03:04:05.000006Z",
            None,
            &sample().body(""),
            &[7; 32],
        );
        let line = &line[..line.len() - 1];
        let mut scratch = Vec::new();
        assert!(check_line(line, &mut scratch).is_ok());
        let text = std::str::from_utf8(line).unwrap();
        let edited = text.replace("\"bytes\":120", "\"bytes\":121");
        assert_eq!(
            check_line(edited.as_bytes(), &mut scratch).unwrap_err(),
            LineFault::Modified { seq: 2 }
        );
        for bad in [
            text.replace("\"op\":\"read\"", "\"op\" :\"read\""),
            text.replace("\"rule\":\"workspace-read\"", "\"rule\":null"),
            text.replace(",\"outcome\":\"ok\"", ",\"extra\":1,\"outcome\":\"ok\""),
            text.replace("\"bytes\":120", "\"bytes\":120.0"),
            text.replace("src/main.rs", "src\\/main.rs"),
            text.replace(
                "\"decision\":\"allow\",\"rule\"",
                "\"rule\":\"x\",\"decision\":\"allow\",\"rule\"",
            ),
        ] {
            assert!(
                matches!(
                    check_line(bad.as_bytes(), &mut scratch),
                    Err(LineFault::Malformed(_))
                ),
                "accepted {bad}"
            );
        }
    }

    fn class(r: &Result<LineInfo, LineFault>) -> String {
        match r {
            Ok(i) => format!(
                "ok {} {:?} {:?} {} {:?} {:?}",
                i.seq,
                i.prev,
                i.hash,
                i.ts_str(),
                i.log,
                i.kind
            ),
            Err(LineFault::Malformed(_)) => "malformed".into(),
            Err(LineFault::Modified { seq }) => format!("modified {seq}"),
        }
    }

    const SPICE: &[u8] = b"\"\\{}[],: 0019-.eunbtfr\x1f\x7fa/";

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(10000))]
        #[test]
        fn fast_and_reference_checkers_agree(
            strs in proptest::collection::vec(".{0,12}", 6),
            flags in proptest::collection::vec(proptest::bool::ANY, 8),
            seq in 1u64..5,
            long in proptest::bool::ANY,
            mutations in proptest::collection::vec(
                (proptest::prelude::any::<proptest::sample::Index>(), 0usize..SPICE.len() + 1, 0u8..3, proptest::prelude::any::<u8>()),
                0..3,
            ),
        ) {
            let mut ev = sample();
            ev.session = format!("{}/x", strs[0]);
            ev.path = flags[0].then(|| strs[1].clone());
            ev.path2 = flags[1].then(|| strs[2].clone());
            if flags[2] {
                ev.args.insert(strs[3].clone(), json!(strs[4].clone()));
                ev.args.insert(strs[4].clone(), json!({"n": -3, "z": [null, true, strs[5].clone()]}));
            } else {
                ev.args.clear();
            }
            ev.rule = flags[3].then(|| strs[5].clone());
            ev.bytes = flags[4].then_some(u64::MAX);
            if flags[5] {
                ev.kind = "break".into();
                ev.details.insert("why".into(), json!(strs[2].clone()));
            }
            if long {
                // Cut by the writer: `details.cut` lists it, and mutations reach the list.
                ev.op = format!("{}é", "m".repeat(crate::cut::MAX_WHOLE));
            }
            let log = (seq == 1 || flags[6]).then(|| "ab".repeat(16));
            let prev = if seq == 1 && flags[7] { GENESIS_PREV } else { [seq as u8; 32] };
            let (mut line, _) = seal(seq, "2026-01-02T03:04:05.000006Z", log.as_deref(), &ev.body("ff"), &prev);
            line.pop();
            for (idx, spice, op, raw) in mutations {
                // Aim at structure: next to a quote, colon, comma, bracket or escape.
                let marks: Vec<usize> = line
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| b":,\"\\[]{}/".contains(b))
                    .map(|(i, _)| i)
                    .collect();
                if marks.is_empty() { break; }
                let pick = idx.index(marks.len() * 2);
                let at = (marks[pick / 2] + pick % 2).min(line.len() - 1);
                let b = SPICE.get(spice).copied().unwrap_or(raw);
                match op {
                    0 => line[at] = b,
                    1 => { line.remove(at); }
                    _ => line.insert(at, b),
                }
            }
            let mut scratch = Vec::new();
            let fast = class(&check_line(&line, &mut scratch));
            let reference = class(&check_line_reference(&line, &mut scratch));
            proptest::prop_assert_eq!(fast, reference, "line: {}", String::from_utf8_lossy(&line));
        }
    }
}
