//! The directories the undone changes made, removed once empty.

use super::change::{Change, What};
use super::plan::ancestors;
use super::world::{Action, Node, World};

/// The directories the changes made that are still there and empty once every change
/// is undone, removed deepest first; how many. (Changes made at once record the made
/// directory on whichever created it, not always the oldest: its undo may come while
/// another change's file still holds it.)
pub fn prune_left(w: &mut dyn World, changes: &[Change]) -> usize {
    let mut dirs: Vec<String> = changes
        .iter()
        .flat_map(|c| match &c.what {
            What::Content {
                path, made_dirs, ..
            } => ancestors(path)
                .take(*made_dirs)
                .map(str::to_owned)
                .collect(),
            What::Mkdir { path, made } => std::iter::once(path.as_str())
                .chain(ancestors(path))
                .take(*made)
                .map(str::to_owned)
                .collect(),
            _ => Vec::new(),
        })
        .collect();
    dirs.sort_by(|a, b| {
        let depth = |d: &str| d.matches('/').count();
        depth(b).cmp(&depth(a)).then_with(|| a.cmp(b))
    });
    dirs.dedup();
    let mut done = 0;
    for dir in dirs {
        let empty =
            matches!(w.node(&dir), Ok(Node::Dir)) && matches!(w.is_empty_dir(&dir), Ok(true));
        let remove = Action::Remove {
            path: dir,
            tree: false,
        };
        if empty && w.act(&remove).is_ok() {
            done += 1;
        }
    }
    done
}

/// Removes the directories a change made above `path`, nearest first, while empty.
pub(super) fn prune(w: &mut dyn World, path: &str, made: usize) -> Result<usize, String> {
    let mut done = 0;
    for dir in ancestors(path).take(made) {
        if w.node(dir)? != Node::Dir || !w.is_empty_dir(dir)? {
            break;
        }
        w.act(&Action::Remove {
            path: dir.to_owned(),
            tree: false,
        })?;
        done += 1;
    }
    Ok(done)
}
