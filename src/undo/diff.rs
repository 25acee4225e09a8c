//! How content changes when put back: lines added and removed, or sizes when binary
//! or too large to compare.

use super::row::Diff;
use super::world::{Content, Node, World};

/// Content larger than this is not compared line by line.
pub const MAX_DIFF_BYTES: u64 = 4 << 20;

/// How the content at a path changes from `now` to `after`.
pub(super) fn diff(w: &mut dyn World, now: &Node, after: Option<Content>) -> Result<Diff, String> {
    let now = match now {
        Node::File(c) => Some(w.bytes(c, MAX_DIFF_BYTES)?),
        _ => None,
    };
    let after = match &after {
        Some(c) => Some(w.bytes(c, MAX_DIFF_BYTES)?),
        None => None,
    };
    Ok(diffstat(now.as_ref(), after.as_ref()))
}

/// Lines added and removed between two contents (None: no file; Some(None): too large
/// to compare), or their sizes when either is binary.
pub fn diffstat(now: Option<&Option<Vec<u8>>>, after: Option<&Option<Vec<u8>>>) -> Diff {
    match (as_text(now), as_text(after)) {
        (Some(old), Some(new)) => {
            let (added, removed) = line_counts(old, new);
            Diff::Lines { added, removed }
        }
        _ => {
            let size =
                |b: Option<&Option<Vec<u8>>>| b.and_then(|b| b.as_ref()).map(|b| b.len() as u64);
            Diff::Bytes {
                now: size(now),
                after: size(after),
            }
        }
    }
}

/// The text of content (no file: empty), None if binary or too large to compare.
fn as_text(b: Option<&Option<Vec<u8>>>) -> Option<&str> {
    match b {
        None => Some(""),
        Some(None) => None,
        Some(Some(bytes)) if bytes.contains(&0) => None,
        Some(Some(bytes)) => std::str::from_utf8(bytes).ok(),
    }
}

fn line_counts(old: &str, new: &str) -> (u64, u64) {
    use similar::{DiffTag, TextDiff};
    let diff = TextDiff::configure()
        .timeout(std::time::Duration::from_secs(1))
        .diff_lines(old, new);
    let (mut added, mut removed) = (0u64, 0u64);
    for op in diff.ops() {
        let (tag, o, n) = op.as_tag_tuple();
        match tag {
            DiffTag::Equal => {}
            DiffTag::Delete => removed += o.len() as u64,
            DiffTag::Insert => added += n.len() as u64,
            DiffTag::Replace => {
                removed += o.len() as u64;
                added += n.len() as u64;
            }
        }
    }
    (added, removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_counts_lines_and_binary_counts_bytes() {
        let some = |s: &str| Some(s.as_bytes().to_vec());
        assert_eq!(
            diffstat(Some(&some("a\nb\nc\n")), Some(&some("a\nB\nc\nd\n"))),
            Diff::Lines {
                added: 2,
                removed: 1
            }
        );
        assert_eq!(
            diffstat(None, Some(&some("x\ny\n"))),
            Diff::Lines {
                added: 2,
                removed: 0
            }
        );
        assert_eq!(
            diffstat(Some(&Some(vec![0, 1, 2])), None),
            Diff::Bytes {
                now: Some(3),
                after: None
            }
        );
        assert_eq!(
            diffstat(Some(&None), Some(&some("x"))),
            Diff::Bytes {
                now: None,
                after: Some(1)
            }
        );
    }
}
