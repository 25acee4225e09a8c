//! Cells a person reads: escaped once, measured in terminal columns (not bytes), cut
//! visibly with `…` when they must be, and CSV cells a spreadsheet will not run.

use serde_json::Value;
use unicode_width::UnicodeWidthStr;

use fsgate_base::text::escape_for_humans;

/// The session a record belongs to: its own `session`, else the one its details name
/// (a record that is no request: a run's start and end, an answer to an `ask`, a
/// staging), so that `--session` and the SESSION column find those too.
pub(super) fn session_of(v: &Value) -> Option<&str> {
    let own = v
        .get("session")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    own.or_else(|| v.get("details")?.get("session")?.as_str())
}

/// A column's cell as raw text: [`raw`], but the session as [`session_of`] finds it.
pub(super) fn column(v: &Value, k: &str) -> String {
    match (k, session_of(v)) {
        ("session", Some(s)) if v.get("session").and_then(Value::as_str) != Some(s) => s.to_owned(),
        _ => raw(v, k),
    }
}

/// A field as raw text (objects as compact JSON); not yet escaped. A string the writer
/// cut (listed in `details.cut`) ends in `… (N bytes)`.
pub(super) fn raw(v: &Value, k: &str) -> String {
    let text = match v.get(k) {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    let cut = v
        .get("details")
        .and_then(|d| d.get(crate::cut::CUT_KEY))
        .and_then(|c| c.get(format!("/{k}")))
        .and_then(|c| c.get("bytes"));
    match cut {
        Some(bytes) => format!("{text}… ({bytes} bytes)"),
        None => text,
    }
}

/// Escapes what an agent chose so that it cannot drive the terminal or read as another
/// name (see [`fsgate_base::text`]).
pub(super) fn clean(s: &str) -> String {
    escape_for_humans(s).into_owned()
}

/// Terminal columns `s` takes (escaped text holds no controls, so this is exact).
pub(super) fn width(s: &str) -> usize {
    UnicodeWidthStr::width(s)
}

/// The longest prefix of `s` that fits in `w` columns.
fn head(s: &str, w: usize) -> &str {
    let mut used = 0;
    for (i, c) in s.char_indices() {
        used += unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used > w {
            return &s[..i];
        }
    }
    s
}

/// The longest suffix of `s` that fits in `w` columns.
fn tail(s: &str, w: usize) -> &str {
    let mut used = 0;
    for (i, c) in s.char_indices().rev() {
        used += unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used > w {
            return &s[i + c.len_utf8()..];
        }
    }
    s
}

/// `s` cut to `w` columns at the end, with `…` saying so.
pub(super) fn cut_end(s: &str, w: usize) -> String {
    if width(s) <= w {
        return s.to_owned();
    }
    format!("{}…", head(s, w.saturating_sub(1)))
}

/// `s` cut to `w` columns in the middle (a path keeps its start and its file name),
/// with `…` saying so.
pub(super) fn cut_middle(s: &str, w: usize) -> String {
    if width(s) <= w {
        return s.to_owned();
    }
    let room = w.saturating_sub(1);
    let front = head(s, room / 2);
    let back = tail(s, room - width(front));
    format!("{front}…{back}")
}

/// `s` padded with spaces to `w` columns (left-aligned, or right-aligned).
pub(super) fn pad(s: &str, w: usize, right: bool) -> String {
    let fill = " ".repeat(w.saturating_sub(width(s)));
    if right {
        format!("{fill}{s}")
    } else {
        format!("{s}{fill}")
    }
}

/// Quotes a CSV cell when needed, and defuses text a spreadsheet would run as a formula
/// (`=`, `+`, `-`, `@`, also after leading blanks) by a leading `'`; plain numbers stay.
pub(super) fn csv_cell(s: &str) -> String {
    let numeric = !s.is_empty()
        && s.strip_prefix('-')
            .unwrap_or(s)
            .bytes()
            .all(|b| b.is_ascii_digit())
        && s != "-";
    let mut s = s.to_owned();
    let start = s.trim_start_matches(char::is_whitespace);
    if !numeric && start.starts_with(['=', '+', '-', '@', '\t', '\r', '|', '%']) {
        s.insert(0, '\'');
    }
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

#[cfg(test)]
mod tests;
