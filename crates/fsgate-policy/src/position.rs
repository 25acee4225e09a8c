//! Where in a policy's text a value sits: a line and column, a spanned value's line, the
//! line of a key or a section header.

use toml::Spanned;

/// Where in the source a value sits: 1-based line and column.
pub(crate) fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let before = &src[..offset.min(src.len())];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rfind('\n')
        .map_or(before.len(), |i| before.len() - i - 1)
        + 1;
    (line, col)
}

/// The 1-based line a spanned value starts on.
pub(crate) fn at<T>(src: &str, s: &Spanned<T>) -> usize {
    line_col(src, s.span().start).0
}

/// The line of `key = ...` inside the `[section]` table (0 if not found).
pub(crate) fn key_line(src: &str, section: &str, key: &str) -> usize {
    let start = section_line(src, section);
    if start == 0 || key.is_empty() {
        return 0;
    }
    src.lines()
        .enumerate()
        .skip(start)
        .take_while(|(_, l)| !l.trim_start().starts_with('['))
        .find(|(_, l)| {
            l.trim_start()
                .strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map_or(0, |(i, _)| i + 1)
}

/// The line of a `[name]` table header (0 if not found).
pub(crate) fn section_line(src: &str, name: &str) -> usize {
    let header = format!("[{name}]");
    src.lines()
        .position(|l| l.trim() == header)
        .map_or(0, |i| i + 1)
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_cols() {
        assert_eq!(line_col("a\nbc\nd", 3), (2, 2));
        assert_eq!(line_col("abc", 0), (1, 1));
    }
}
