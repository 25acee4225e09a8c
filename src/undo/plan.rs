//! From the changes a selection made to what undoing them takes: successive rewrites of
//! one file fold into one (only the content before the first matters, and only the
//! content after the last is expected), and who changed a path since is looked up.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::change::{Change, Touch, What};

/// The ancestors of a workspace-relative path, nearest first (not the root).
pub fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    let mut cur = path;
    std::iter::from_fn(move || {
        let (parent, _) = cur.rsplit_once('/')?;
        cur = parent;
        Some(parent)
    })
}

/// Whether anyone changed `path` or one of its ancestors strictly between the changes
/// `after` and `before` (by their order).
fn touched_between(
    touches: &BTreeMap<String, Vec<Touch>>,
    path: &str,
    after: usize,
    before: usize,
) -> bool {
    touched_between_but(touches, path, (after, before), &HashSet::new())
}

/// [`touched_between`], not counting the changes whose order is in `but`.
fn touched_between_but(
    touches: &BTreeMap<String, Vec<Touch>>,
    path: &str,
    (after, before): (usize, usize),
    but: &HashSet<usize>,
) -> bool {
    std::iter::once(path).chain(ancestors(path)).any(|p| {
        touches.get(p).is_some_and(|list| {
            let from = list.partition_point(|t| t.order <= after);
            (list[from..].iter())
                .take_while(|t| t.order < before)
                .any(|t| !but.contains(&t.order))
        })
    })
}

/// Folds each content change into the one before it of the same file when nothing else
/// touched that file (or a directory above it) in between: the folded change expects
/// the content of the later one and puts back what the earlier one replaced, and it
/// keeps the earlier one's place, so the directories that one made are removed after
/// everything made in them since. Intermediate backups are then not needed (retention
/// may have pruned them).
pub fn fold(selected: Vec<Change>, touches: &BTreeMap<String, Vec<Touch>>) -> Vec<Change> {
    let mut out: Vec<Change> = Vec::with_capacity(selected.len());
    let mut last: HashMap<String, usize> = HashMap::new();
    for c in selected {
        let What::Content { path, sha256, .. } = &c.what else {
            out.push(c);
            continue;
        };
        if let Some(&i) = last.get(path.as_str())
            && !touched_between(touches, path, out[i].order, c.order)
            && let What::Content { sha256: expect, .. } = &mut out[i].what
        {
            expect.clone_from(sha256);
            out[i].folded += 1 + c.folded;
            out[i].order = c.order;
            continue;
        }
        last.insert(path.clone(), out.len());
        out.push(c);
    }
    out
}

/// The content the selection last wrote to `path` before its change `order`, if no one
/// touched `path` (or a directory above it) in between but the selection's own changes
/// of modes and times, which leave content where it is (`mkstemp`, `chmod`, then a
/// rename: an editor's save): what a rename of `path` at `order` moved. None where the
/// log does not say (the file was there before).
pub fn written_before<'c>(
    changes: &'c [Change],
    touches: &BTreeMap<String, Vec<Touch>>,
    path: &str,
    order: usize,
) -> Option<&'c str> {
    let (at, sha) = changes.iter().rev().find_map(|c| match &c.what {
        What::Content {
            path: p, sha256, ..
        } if p == path && c.order < order => Some((c.order, sha256.as_str())),
        _ => None,
    })?;
    let on_path = |p: &str| p == path || ancestors(path).any(|a| a == p);
    let metadata: HashSet<usize> = (changes.iter())
        .filter(|c| match &c.what {
            What::Chmod { path: p, .. } | What::Utimes { path: p, .. } => on_path(p),
            _ => false,
        })
        .map(|c| c.order)
        .collect();
    (!touched_between_but(touches, path, (at, order), &metadata)).then_some(sha)
}

/// Who changed a path since a change of the selection: the latest change of `path` or
/// of a directory above it after `order` that the selection did not make.
pub fn changed_since<'t>(
    touches: &'t BTreeMap<String, Vec<Touch>>,
    selected: &HashSet<usize>,
    path: &str,
    order: usize,
) -> Option<&'t Touch> {
    std::iter::once(path)
        .chain(ancestors(path))
        .filter_map(|p| touches.get(p))
        .flat_map(|list| list.iter().rev())
        .filter(|t| t.order > order && !selected.contains(&t.order))
        .max_by_key(|t| t.order)
}

#[cfg(test)]
mod tests {
    use super::super::change::Before;
    use super::*;

    fn write(order: usize, path: &str, sha: &str, before: Before) -> Change {
        Change {
            order,
            chain: 0,
            seq: order as u64,
            ts: String::new(),
            session: "a".into(),
            what: What::Content {
                path: path.into(),
                sha256: sha.into(),
                before,
                made_dirs: order,
            },
            folded: 0,
        }
    }

    fn touches(list: &[(&str, usize, &str)]) -> BTreeMap<String, Vec<Touch>> {
        let mut m: BTreeMap<String, Vec<Touch>> = BTreeMap::new();
        for (p, order, session) in list {
            m.entry((*p).into()).or_default().push(Touch {
                order: *order,
                chain: 0,
                seq: *order as u64,
                session: (*session).into(),
                by_undo: false,
            });
        }
        m
    }

    #[test]
    fn ancestors_nearest_first() {
        assert_eq!(ancestors("a/b/c").collect::<Vec<_>>(), ["a/b", "a"]);
        assert_eq!(ancestors("a").count(), 0);
    }

    #[test]
    fn rewrites_of_one_file_fold_unless_someone_came_between() {
        let t = touches(&[
            ("d/f", 0, "a"),
            ("d/f", 1, "a"),
            ("g", 2, "a"),
            ("d/f", 3, "a"),
            ("d/f", 4, "b"),
            ("d/f", 5, "a"),
        ]);
        let saved = Before::Saved(super::super::change::Saved {
            id: "x".into(),
            sha256: None,
        });
        let changes = vec![
            write(0, "d/f", "s0", Before::Absent),
            write(1, "d/f", "s1", saved.clone()),
            write(2, "g", "g2", Before::Absent),
            write(3, "d/f", "s3", saved.clone()),
            write(5, "d/f", "s5", saved.clone()),
        ];
        let out = fold(changes, &t);
        assert_eq!(out.len(), 3, "{out:#?}");
        // The first keeps its place, what it replaced and the dirs it made, and expects
        // the content after the third.
        assert_eq!(
            out[0].what,
            What::Content {
                path: "d/f".into(),
                sha256: "s3".into(),
                before: Before::Absent,
                made_dirs: 0
            }
        );
        assert_eq!((out[0].order, out[0].folded), (3, 2));
        assert_eq!(out[1].order, 2);
        // b's change at 4 keeps the last one apart.
        assert_eq!(out[2].order, 5);
        assert_eq!(out[2].folded, 0);
    }

    #[test]
    fn a_change_of_a_directory_above_keeps_rewrites_apart() {
        let t = touches(&[("d/f", 0, "a"), ("d", 1, "a"), ("d/f", 2, "a")]);
        let changes = vec![
            write(0, "d/f", "s0", Before::Absent),
            write(2, "d/f", "s2", Before::Absent),
        ];
        assert_eq!(fold(changes, &t).len(), 2);
    }

    #[test]
    fn what_a_rename_moved_is_the_last_content_written_unless_someone_came_between() {
        // t.tmp written twice, then renamed at 3; u written, touched by b at 5, renamed at 6.
        let t = touches(&[
            ("t.tmp", 0, "a"),
            ("t.tmp", 1, "a"),
            ("t.tmp", 3, "a"),
            ("u", 4, "a"),
            ("u", 5, "b"),
            ("u", 6, "a"),
        ]);
        let changes = vec![
            write(0, "t.tmp", "s0", Before::Absent),
            write(1, "t.tmp", "s1", Before::Absent),
            write(4, "u", "u4", Before::Absent),
        ];
        assert_eq!(written_before(&changes, &t, "t.tmp", 3), Some("s1"));
        assert_eq!(written_before(&changes, &t, "t.tmp", 1), Some("s0"));
        assert_eq!(written_before(&changes, &t, "u", 6), None);
        assert_eq!(written_before(&changes, &t, "never", 6), None);
    }

    #[test]
    fn the_selections_own_chmod_and_utimes_do_not_hide_what_a_rename_moved() {
        // f.tmp written at 0, its mode set at 1, its times at 2, renamed at 3; g written
        // at 4, its mode set by b at 5, renamed at 6.
        let t = touches(&[
            ("f.tmp", 0, "a"),
            ("f.tmp", 1, "a"),
            ("f.tmp", 2, "a"),
            ("f.tmp", 3, "a"),
            ("g", 4, "a"),
            ("g", 5, "b"),
            ("g", 6, "a"),
        ]);
        let meta = |order: usize, what: What| Change {
            what,
            ..write(order, "", "", Before::Absent)
        };
        let changes = vec![
            write(0, "f.tmp", "f0", Before::Absent),
            meta(
                1,
                What::Chmod {
                    path: "f.tmp".into(),
                    old: 0o600,
                    new: 0o644,
                },
            ),
            meta(
                2,
                What::Utimes {
                    path: "f.tmp".into(),
                    atime: 0,
                    mtime: 0,
                },
            ),
            write(4, "g", "g4", Before::Absent),
        ];
        assert_eq!(written_before(&changes, &t, "f.tmp", 3), Some("f0"));
        assert_eq!(written_before(&changes, &t, "g", 6), None);
    }

    #[test]
    fn the_latest_other_change_since_is_named() {
        let t = touches(&[
            ("d/f", 0, "a"),
            ("d/f", 2, "b"),
            ("d", 3, "c"),
            ("d/f", 4, "a"),
        ]);
        let selected: HashSet<usize> = [0, 4].into();
        let who = changed_since(&t, &selected, "d/f", 0).map(|t| t.session.as_str());
        assert_eq!(who, Some("c"));
        assert!(changed_since(&t, &selected, "d/f", 4).is_none());
    }
}
