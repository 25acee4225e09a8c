//! What the sections of `fsgate audit report` share for their rows: how many a
//! section lists, a record's string field bounded as fsgate writes it, and text made
//! safe for HTML.

use serde_json::Value;

use fsgate_base::text::escape_for_humans;

/// Sessions, rules and policy events listed at most.
pub(crate) const MAX_ROWS: usize = 2_000;

/// A string field, or "": at most [`crate::cut::MAX_WHOLE`] bytes of it, as fsgate
/// writes them, so that a log written before records were bounded (a 2 MiB path)
/// cannot make the report hold megabytes per row.
pub(crate) fn text<'a>(v: &'a Value, k: &str) -> &'a str {
    let s = v.get(k).and_then(Value::as_str).unwrap_or_default();
    crate::cut::head(s, crate::cut::MAX_WHOLE)
}

/// Text from a log or the file system, made safe to read and to place in HTML.
pub(crate) fn esc(s: &str) -> String {
    let shown = escape_for_humans(s);
    let mut out = String::with_capacity(shown.len());
    for c in shown.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
