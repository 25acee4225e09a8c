//! `edit_file` edit lists as the reference server applies them, and the unified diff it
//! returns: pure text functions, no file access.

use similar::{ChangeTag, TextDiff};

use super::args::EditPair;

/// How an edit finds its `oldText`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Matching {
    /// The contract's form: the text must occur exactly once, matched exactly.
    ExactlyOnce,
    /// The reference server's form: the first exact occurrence, else the first run of
    /// lines equal after trimming leading and trailing whitespace.
    FirstOrLines,
}

/// Why an edit list could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum EditError {
    /// An edit with an empty `oldText`.
    #[error("edit {index} of {total}: oldText must not be empty")]
    EmptyOld {
        /// 1-based.
        index: usize,
        /// Number of edits.
        total: usize,
    },
    /// `oldText` was not found.
    #[error(
        "edit {index} of {total}: oldText not found (neither exactly nor line by line ignoring leading and trailing whitespace)"
    )]
    NotFound {
        /// 1-based.
        index: usize,
        /// Number of edits.
        total: usize,
    },
    /// `oldText` must occur exactly once but occurs `count` times.
    #[error("oldText occurs {count} times; it must occur exactly once{hint}")]
    NotUnique {
        /// Occurrences.
        count: usize,
        /// Advice for the model.
        hint: &'static str,
    },
}

/// The result of applying edits: the new text with the file's own line endings, and
/// both versions with `\n` endings for the diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Edited {
    /// New content to write, in the file's line-ending convention.
    pub new_raw: String,
    /// Old content, `\n` line endings.
    pub old_lf: String,
    /// New content, `\n` line endings.
    pub new_lf: String,
}

fn to_lf(s: &str) -> String {
    if s.contains('\r') {
        s.replace("\r\n", "\n")
    } else {
        s.to_string()
    }
}

/// True if every line ending in `s` is CRLF (and there is at least one).
fn all_crlf(s: &str) -> bool {
    let crlf = s.matches("\r\n").count();
    crlf > 0 && crlf == s.matches('\n').count()
}

/// Applies `edits` in order to `original`. Matching works on `\n` line endings; a file
/// that used CRLF throughout keeps CRLF.
pub(super) fn apply(
    original: &str,
    edits: &[EditPair],
    how: Matching,
) -> Result<Edited, EditError> {
    let old_lf = to_lf(original);
    let mut text = old_lf.clone();
    let total = edits.len();
    for (i, e) in edits.iter().enumerate() {
        let index = i + 1;
        let old = to_lf(&e.old_text);
        let new = to_lf(&e.new_text);
        if old.is_empty() {
            return Err(EditError::EmptyOld { index, total });
        }
        match how {
            Matching::ExactlyOnce => {
                let count = fsgate_gateway::occurrences(&text, old.as_str());
                if count != 1 {
                    let hint = if count == 0 {
                        ""
                    } else {
                        " (add surrounding lines to make it unique)"
                    };
                    return Err(EditError::NotUnique { count, hint });
                }
                text = text.replacen(old.as_str(), &new, 1);
            }
            Matching::FirstOrLines => {
                if text.contains(old.as_str()) {
                    text = text.replacen(old.as_str(), &new, 1);
                } else {
                    text = replace_lines(&text, &old, &new)
                        .ok_or(EditError::NotFound { index, total })?;
                }
            }
        }
    }
    let new_raw = if all_crlf(original) {
        text.replace('\n', "\r\n")
    } else {
        text.clone()
    };
    Ok(Edited {
        new_raw,
        old_lf,
        new_lf: text,
    })
}

fn indent_of(line: &str) -> &str {
    &line[..line.len() - line.trim_start().len()]
}

/// Replaces the first run of lines of `text` equal to `old`'s lines after trimming,
/// re-indenting `new` to the matched block's indentation as the reference server does.
fn replace_lines(text: &str, old: &str, new: &str) -> Option<String> {
    let old_lines: Vec<&str> = old.split('\n').collect();
    let lines: Vec<&str> = text.split('\n').collect();
    if old_lines.len() > lines.len() {
        return None;
    }
    let start = (0..=lines.len() - old_lines.len()).find(|&i| {
        old_lines
            .iter()
            .zip(&lines[i..i + old_lines.len()])
            .all(|(o, l)| o.trim() == l.trim())
    })?;
    let base_indent = indent_of(lines[start]);
    let replacement: Vec<String> = new
        .split('\n')
        .enumerate()
        .map(|(j, line)| {
            if j == 0 {
                return format!("{base_indent}{}", line.trim_start());
            }
            let old_indent = old_lines.get(j).map_or("", |l| indent_of(l));
            let new_indent = indent_of(line);
            if !old_indent.is_empty() && !new_indent.is_empty() {
                let extra = new_indent.len().saturating_sub(old_indent.len());
                format!("{base_indent}{}{}", " ".repeat(extra), line.trim_start())
            } else {
                line.to_string()
            }
        })
        .collect();
    let mut out: Vec<String> = lines[..start].iter().map(|s| (*s).to_string()).collect();
    out.extend(replacement);
    out.extend(
        lines[start + old_lines.len()..]
            .iter()
            .map(|s| (*s).to_string()),
    );
    Some(out.join("\n"))
}

/// A unified diff as the reference server shows it (jsdiff's `createTwoFilesPatch`):
/// `Index:` header, `original` / `modified` labels (also when nothing changed), 4 lines
/// of context, `start,len` ranges, fenced in enough backticks for its content.
pub(super) fn fenced_diff(path: &str, old: &str, new: &str) -> String {
    let diff = TextDiff::from_lines(old, new);
    let mut patch = format!(
        "Index: {path}\n{}\n--- {path}\toriginal\n+++ {path}\tmodified\n",
        "=".repeat(67)
    );
    for group in diff.grouped_ops(CONTEXT) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let olds = first.old_range().start..last.old_range().end;
        let news = first.new_range().start..last.new_range().end;
        patch.push_str(&format!("@@ -{} +{} @@\n", range(&olds), range(&news)));
        for change in group.iter().flat_map(|op| diff.iter_changes(op)) {
            let sign = match change.tag() {
                ChangeTag::Equal => ' ',
                ChangeTag::Delete => '-',
                ChangeTag::Insert => '+',
            };
            let line = change.value();
            patch.push(sign);
            patch.push_str(line);
            if !line.ends_with('\n') {
                patch.push_str("\n\\ No newline at end of file\n");
            }
        }
    }
    let mut ticks = 3;
    while patch.contains(&"`".repeat(ticks)) {
        ticks += 1;
    }
    let fence = "`".repeat(ticks);
    format!("{fence}diff\n{patch}{fence}\n\n")
}

/// Lines of context around each change, as jsdiff's default.
const CONTEXT: usize = 4;

/// A hunk range as jsdiff writes it: 1-based `start,len`, `start` one lower when empty.
fn range(r: &std::ops::Range<usize>) -> String {
    let len = r.end - r.start;
    let start = if len == 0 { r.start } else { r.start + 1 };
    format!("{start},{len}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(o: &str, n: &str) -> EditPair {
        EditPair {
            old_text: o.into(),
            new_text: n.into(),
        }
    }

    #[test]
    fn exact_first_occurrence_in_order() {
        let r = apply(
            "a b a\n",
            &[pair("a", "x"), pair("x b", "y")],
            Matching::FirstOrLines,
        )
        .unwrap();
        assert_eq!(r.new_raw, "y a\n");
    }

    #[test]
    fn whitespace_flexible_lines_keep_indentation() {
        let text = "fn f() {\n    let a = 1;\n    let b = 2;\n}\n";
        let r = apply(
            text,
            &[pair("let a = 1;\nlet b = 2;", "let a = 10;\nlet b = 20;")],
            Matching::FirstOrLines,
        )
        .unwrap();
        assert_eq!(r.new_raw, "fn f() {\n    let a = 10;\nlet b = 20;\n}\n");
        let r = apply(
            text,
            &[pair(
                "  let a = 1;\n  let b = 2;",
                "  let a = 1;\n    if x {}",
            )],
            Matching::FirstOrLines,
        )
        .unwrap();
        assert_eq!(r.new_raw, "fn f() {\n    let a = 1;\n      if x {}\n}\n");
    }

    #[test]
    fn not_found_and_empty_old_text_are_errors() {
        assert_eq!(
            apply(
                "abc",
                &[pair("abc", "d"), pair("zzz", "y")],
                Matching::FirstOrLines
            ),
            Err(EditError::NotFound { index: 2, total: 2 })
        );
        assert_eq!(
            apply("abc", &[pair("", "y")], Matching::FirstOrLines),
            Err(EditError::EmptyOld { index: 1, total: 1 })
        );
    }

    #[test]
    fn exactly_once_counts() {
        assert!(matches!(
            apply("aa", &[pair("a", "b")], Matching::ExactlyOnce),
            Err(EditError::NotUnique { count: 2, .. })
        ));
        assert_eq!(
            apply("ab", &[pair("a", "c")], Matching::ExactlyOnce)
                .unwrap()
                .new_raw,
            "cb"
        );
    }

    #[test]
    fn crlf_files_stay_crlf() {
        let r = apply(
            "a\r\nb\r\n",
            &[pair("a\r\nb", "c\nd")],
            Matching::FirstOrLines,
        )
        .unwrap();
        assert_eq!(r.new_raw, "c\r\nd\r\n");
        assert_eq!(r.new_lf, "c\nd\n");
        // Mixed endings are normalised to LF, as the reference server does.
        let r = apply("a\r\nb\n", &[pair("b", "c")], Matching::FirstOrLines).unwrap();
        assert_eq!(r.new_raw, "a\nc\n");
    }

    #[test]
    fn diff_is_fenced_unified() {
        let d = fenced_diff("/w/f.txt", "a\nb\nc\n", "a\nB\nc\n");
        assert!(d.starts_with("```diff\nIndex: /w/f.txt\n===="), "{d}");
        assert!(
            d.contains("--- /w/f.txt\toriginal\n+++ /w/f.txt\tmodified\n"),
            "{d}"
        );
        assert!(d.contains("@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"), "{d}");
        assert!(d.ends_with("```\n\n"), "{d}");
        let d = fenced_diff("/w/f", "a", "b");
        assert!(
            d.contains("@@ -1,1 +1,1 @@\n-a\n\\ No newline at end of file\n+b\n\\ No newline"),
            "{d}"
        );
        let d = fenced_diff("/w/f", "", "b\n");
        assert!(d.contains("@@ -0,0 +1,1 @@\n+b\n"), "{d}");
        let d = fenced_diff("/w/f", "a\n", "a\n");
        assert!(d.ends_with("\tmodified\n```\n\n"), "{d}");
        let d = fenced_diff("/w/f.md", "```\n", "````\n");
        assert!(d.starts_with("`````diff\n"), "{d}");
    }
}
