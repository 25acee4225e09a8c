//! Git staging (`[vcs] stage = true`): after a change the gateway made, git's index is
//! updated for exactly the changed paths, in-process through libgit2 (never a command
//! line built from a path).
//!
//! The repository is found once at start ([`Stager::discover`]), before the process
//! confines itself: the git dir (and its common dir) must then be writable by the
//! gateway's own Landlock ruleset when it lies outside the workspace ([`Stager::grants`]).

pub(crate) mod stage;
pub(crate) mod step;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use fsgate_base::path::RelPath;
use fsgate_decide::{EntryKind, OpClass};
use fsgate_policy::Policy;

/// Why staging could not be set up, or failed.
#[derive(Debug, thiserror::Error)]
pub enum VcsError {
    /// The workspace lies in no git work tree (or only in a bare repository).
    #[error("the workspace {0} is in no git work tree")]
    NoWorkTree(String),
    /// libgit2 refused.
    #[error("git: {0}")]
    Git(#[from] git2::Error),
    /// A path could not be made absolute or canonical.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The policy would let the agent reach the git dir.
    #[error(
        "[vcs] stage = true, but the policy lets the agent reach git's own files: {0}; deny them (the built-in secret patterns do: [secrets] builtin = true) or turn staging off"
    )]
    GitDirReachable(String),
}

/// The repository the workspace lies in, and how workspace paths map into it.
pub struct Stager {
    /// libgit2's handle; not `Sync`, so one request stages at a time (shared by the
    /// workspaces of one repository: their changes go to one index, one at a time).
    repo: Arc<Mutex<git2::Repository>>,
    /// The workspace relative to the work tree root ("" when they are the same), with a
    /// trailing `/` when not empty.
    prefix: String,
    /// The work tree root, canonical.
    workdir: PathBuf,
    /// The git dir and the common dir (the same but for linked work trees), canonical.
    git_dirs: Vec<PathBuf>,
}

impl std::fmt::Debug for Stager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stager")
            .field("workdir", &self.workdir)
            .field("prefix", &self.prefix)
            .field("git_dirs", &self.git_dirs)
            .finish()
    }
}

fn canonical(p: &Path) -> Result<PathBuf, VcsError> {
    p.canonicalize().map_err(|source| VcsError::Io {
        what: format!("canonicalise {}", p.display()),
        source,
    })
}

impl Stager {
    /// Finds the work tree `workspace_root` (canonical) lies in. Call once, at start.
    pub fn discover(workspace_root: &Path) -> Result<Stager, VcsError> {
        let shown = workspace_root.display().to_string();
        let repo = match git2::Repository::discover(workspace_root) {
            Ok(r) => r,
            Err(e) if e.code() == git2::ErrorCode::NotFound => {
                return Err(VcsError::NoWorkTree(shown));
            }
            Err(e) => return Err(e.into()),
        };
        let workdir = match repo.workdir() {
            Some(w) if !repo.is_bare() => canonical(w)?,
            _ => return Err(VcsError::NoWorkTree(shown)),
        };
        let mut git_dirs = vec![canonical(repo.path())?];
        let common = canonical(repo.commondir())?;
        if !git_dirs.contains(&common) {
            git_dirs.push(common);
        }
        // A workspace inside the git dir itself is no work tree.
        if git_dirs.iter().any(|g| workspace_root.starts_with(g)) {
            return Err(VcsError::NoWorkTree(shown));
        }
        let prefix = match workspace_root.strip_prefix(&workdir) {
            Ok(p) if p.as_os_str().is_empty() => String::new(),
            Ok(p) => match p.to_str() {
                Some(s) => format!("{s}/"),
                None => return Err(VcsError::NoWorkTree(shown)),
            },
            Err(_) => return Err(VcsError::NoWorkTree(shown)),
        };
        // Loaded now, while the process may still read them: the configuration (core.
        // autocrlf, core.excludesFile) and the ignore rules are cached by libgit2.
        repo.config()?;
        let _ = repo.is_path_ignored(format!("{prefix}.fsgate-probe"));
        Ok(Stager {
            repo: Arc::new(Mutex::new(repo)),
            prefix,
            workdir,
            git_dirs,
        })
    }

    /// This stager, staging through `earlier`'s handle when both are of one repository
    /// (several workspaces in one work tree): two handles would race for its index.
    pub fn sharing(mut self, earlier: &[&Stager]) -> Stager {
        if let Some(e) = earlier.iter().find(|e| e.git_dirs == self.git_dirs) {
            self.repo = Arc::clone(&e.repo);
        }
        self
    }

    /// The work tree root.
    pub fn workdir(&self) -> &Path {
        &self.workdir
    }

    /// What the gateway's Landlock ruleset must add: the git dirs outside the workspace
    /// (read-write), and the ignore/attribute files of the work tree's directories above
    /// the workspace (read-only; they decide what is ignored).
    pub fn grants(&self, workspace_root: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
        let rw = self
            .git_dirs
            .iter()
            .filter(|g| !g.starts_with(workspace_root))
            .cloned()
            .collect();
        let mut ro = Vec::new();
        let mut dir = workspace_root.parent();
        while let Some(d) = dir.filter(|d| d.starts_with(&self.workdir)) {
            for name in [".gitignore", ".gitattributes"] {
                let f = d.join(name);
                if f.is_file() {
                    ro.push(f);
                }
            }
            dir = d.parent();
        }
        (rw, ro)
    }

    /// Refuses a policy that would let the agent read, list or change git's own files
    /// where they lie inside the workspace.
    pub fn check_policy(&self, pol: &Policy, workspace_root: &Path) -> Result<(), VcsError> {
        const INSIDE: [&str; 5] = ["", "/config", "/index", "/HEAD", "/hooks/pre-commit"];
        // A linked work tree's (or a submodule's) `.git` is a file naming the git dir:
        // rewritten, it would point the person's own git at hooks the agent chose.
        let dot_git = self.workdir.join(".git");
        let link = dot_git.is_file().then_some((dot_git, &INSIDE[..1]));
        let dirs = self.git_dirs.iter().map(|g| (g.clone(), &INSIDE[..]));
        for (g, samples) in dirs.chain(link) {
            let Ok(rel) = g.strip_prefix(workspace_root) else {
                continue;
            };
            let Some(rel) = rel.to_str() else { continue };
            for sample in samples {
                let Ok(p) = RelPath::parse_rooted(&format!("/{rel}{sample}")) else {
                    continue;
                };
                for class in OpClass::ALL {
                    let d = pol.decide(class, &p, EntryKind::Unknown);
                    if d.allowed() || d.asks() {
                        return Err(VcsError::GitDirReachable(format!(
                            "rule `{}` gives {} of `{p}`",
                            d.rule,
                            class.as_str()
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// The repository-relative form of a workspace path.
    fn in_repo(&self, p: &RelPath) -> String {
        format!("{}{}", self.prefix, p.as_str())
    }
}

#[cfg(test)]
mod tests;
