//! Updating the index for one change.

use std::path::Path;

use git2::{Index, IndexAddOption, Repository};
use serde_json::{Map, Value};

use crate::vcs::step::Step;
use crate::vcs::{Stager, VcsError};
use fsgate_audit::ChangeOp;
use fsgate_base::path::RelPath;

/// What staging one change did, for the audit record.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Staged {
    /// Repository-relative paths added to (or updated in) the index.
    pub added: Vec<String>,
    /// Repository-relative paths whose entries (and those beneath) were removed.
    pub removed: Vec<String>,
    /// Paths left unstaged because git ignores them.
    pub ignored: Vec<String>,
    /// Why staging failed, if it did (the change itself stands).
    pub error: Option<String>,
}

impl Staged {
    /// The audit record's details.
    pub(crate) fn details(&self, op: &str, session: &str, seq: Option<u64>) -> Map<String, Value> {
        let list = |v: &[String]| Value::from(v.to_vec());
        let mut d = Map::new();
        d.insert("op".into(), op.into());
        d.insert("session".into(), session.into());
        if let Some(seq) = seq {
            d.insert("forSeq".into(), seq.into());
        }
        d.insert("added".into(), list(&self.added));
        d.insert("removed".into(), list(&self.removed));
        d.insert("ignored".into(), list(&self.ignored));
        if let Some(e) = &self.error {
            d.insert("error".into(), e.clone().into());
        }
        d
    }
}

/// A [`Step`](super::step::Step) in repository paths.
enum RepoStep {
    Add(String),
    Remove(String),
}

impl Stager {
    /// Updates the index after `op` changed `path` (and `path2`, a rename's
    /// destination): the change's own file says how (`crate::ops::staging`).
    /// Never fails: what went wrong is in [`Staged::error`].
    pub(crate) fn stage(&self, op: ChangeOp, path: &RelPath, path2: Option<&RelPath>) -> Staged {
        let steps: Vec<RepoStep> = crate::ops::staging(op, path, path2)
            .into_iter()
            .map(|s| match s {
                Step::Add(p) => RepoStep::Add(self.in_repo(p)),
                Step::Remove(p) => RepoStep::Remove(self.in_repo(p)),
            })
            .collect();
        let mut staged = Staged::default();
        if steps.is_empty() {
            return staged;
        }
        let repo = match self.repo.lock() {
            Ok(r) => r,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Err(e) = apply(&repo, &self.workdir, &steps, &mut staged) {
            staged.error = Some(e.to_string());
        }
        staged
    }
}

fn apply(
    repo: &Repository,
    workdir: &Path,
    steps: &[RepoStep],
    staged: &mut Staged,
) -> Result<(), VcsError> {
    let mut index = repo.index()?;
    // Someone (the user's own git) may have changed the index since.
    index.read(false)?;
    let done = update(repo, &mut index, workdir, steps, staged);
    if done.is_err() {
        // What was not written must not ride along with the next change.
        let _ = index.read(true);
    }
    done
}

fn update(
    repo: &Repository,
    index: &mut Index,
    workdir: &Path,
    steps: &[RepoStep],
    staged: &mut Staged,
) -> Result<(), VcsError> {
    for step in steps {
        match step {
            RepoStep::Remove(p) => {
                // Only what the index held is reported: an untracked file's removal
                // changes nothing there.
                let held = index.get_path(Path::new(p), 0).is_some()
                    || index.find_prefix(format!("{p}/")).is_ok();
                if held {
                    index.remove_path(Path::new(p))?;
                    index.remove_dir(Path::new(p), 0)?;
                    staged.removed.push(p.clone());
                }
            }
            RepoStep::Add(p) => add(repo, index, workdir, p, staged)?,
        }
    }
    index.write()?;
    Ok(())
}

/// Adds a file (unless git ignores it and it is not tracked), or a directory's files.
fn add(
    repo: &Repository,
    index: &mut Index,
    workdir: &Path,
    p: &str,
    staged: &mut Staged,
) -> Result<(), VcsError> {
    let meta = std::fs::symlink_metadata(workdir.join(p)).map_err(|source| VcsError::Io {
        what: format!("stat {p}"),
        source,
    })?;
    if meta.is_dir() {
        // Literal pathspec: `*`, `?` and `[` in a name are no patterns here.
        let flags = IndexAddOption::DEFAULT | IndexAddOption::DISABLE_PATHSPEC_MATCH;
        index.add_all([p], flags, None)?;
        staged.added.push(format!("{p}/"));
        return Ok(());
    }
    let tracked = index.get_path(Path::new(p), 0).is_some();
    if !tracked && repo.is_path_ignored(p)? {
        staged.ignored.push(p.to_string());
        return Ok(());
    }
    index.add_path(Path::new(p))?;
    staged.added.push(p.to_string());
    Ok(())
}
