//! Small pieces of text the sections share: an optional value, a duration between two
//! timestamps, a timestamp that may break, a dash for nothing, a note of rows left out.

use std::fmt::Write as _;

use crate::rows::{MAX_ROWS, esc};

pub(super) fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| esc(&v.to_string()))
}

/// "3 h 5 min" between two timestamps.
pub(super) fn span(first: &str, last: &str) -> String {
    let (Some(a), Some(b)) = (
        crate::canonical::parse_ts(first),
        crate::canonical::parse_ts(last),
    ) else {
        return "-".into();
    };
    let s = (b - a).whole_seconds().max(0);
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        3600..86400 => format!("{} h {} min", s / 3600, s % 3600 / 60),
        _ => format!("{} d {} h", s / 86400, s % 86400 / 3600),
    }
}

pub(super) fn omitted_note(o: &mut String, n: u64, what: &str) {
    if n > 0 {
        let _ = writeln!(
            o,
            "<p class=\"note\">{n} {what} are counted but not listed (at most {} rows are).</p>",
            MAX_ROWS
        );
    }
}

/// A timestamp that may break between its date and its time.
pub(super) fn ts_html(s: &str) -> String {
    esc(s).replacen('T', "T<wbr>", 1)
}

pub(super) fn dash(s: &str) -> String {
    if s.is_empty() { "-".into() } else { esc(s) }
}
