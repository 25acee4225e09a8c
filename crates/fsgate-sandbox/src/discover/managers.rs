//! Version managers on PATH: pyenv, rbenv, nvm and the like keep interpreters in a tree
//! of their own under HOME, and put a shim or a version's `bin` on PATH. A command run
//! inside the wall (a shell's `python3`, a test runner's `node`) then fails with
//! `Permission denied` on the manager's own files. For each such tree found on PATH,
//! its program directories are granted read and execute: every `bin`, `lib`, `lib64`,
//! `libexec` and `shims` in it (a shim runs the manager's `libexec`, an interpreter
//! its `lib`), and the manager's global `version` file, read only. Not the rest: a
//! version's own root and `etc/` may hold credentials (npm's global `etc/npmrc` with
//! its `_authToken`, pip's site `pip.conf`). Nothing else on PATH is granted by this
//! (a `~/bin` may hold anything).

use std::path::{Component, Path, PathBuf};

use super::Discovery;
use crate::plan::AgentAccess;

/// Where each version manager keeps its tree, relative to HOME.
const MANAGERS: &[&str] = &[
    ".pyenv",
    ".rbenv",
    ".nodenv",
    ".goenv",
    ".jenv",
    ".asdf",
    ".nvm",
    ".volta",
    ".local/share/mise",
    ".local/share/fnm",
];
/// Directories of programs and their libraries, granted where found in a tree.
const PROGRAM_DIRS: &[&str] = &["bin", "lib", "lib64", "libexec", "shims"];
/// How deep in a tree they are looked for (`~/.volta/tools/image/node/V/bin` is 5).
const MAX_DEPTH: usize = 6;
/// Directories looked at in one tree, at most (a tree of many versions stays cheap).
const MAX_VISITED: usize = 4096;

impl Discovery<'_> {
    /// Grants the program directories of each version manager a PATH entry lies in.
    pub(super) fn managers_on_path(&mut self) {
        for tree in self.manager_trees() {
            let why = format!("version manager's tree {}", tree.display());
            for dir in program_dirs(&tree) {
                self.grant(&dir, AgentAccess::ReadExec, why.clone());
            }
            let version = tree.join("version");
            if version.is_file() {
                self.grant(&version, AgentAccess::Read, why.clone());
            }
        }
    }

    /// The canonical trees, under the canonical HOME, that a PATH entry lies in.
    fn manager_trees(&self) -> Vec<PathBuf> {
        let Some(path_var) = self.input.path_var else {
            return Vec::new();
        };
        let mut trees: Vec<PathBuf> = Vec::new();
        for entry in std::env::split_paths(path_var).filter(|p| plain_absolute(p)) {
            if let Some(tree) = self.manager_tree(&entry)
                && !trees.contains(&tree)
            {
                trees.push(tree);
            }
        }
        trees
    }

    /// The tree `dir` lies in, canonical, if it is a directory that stays under HOME
    /// (a tree that is a link to elsewhere, `/etc`, is not one).
    fn manager_tree(&self, dir: &Path) -> Option<PathBuf> {
        let canonical_dir = std::fs::canonicalize(dir).ok();
        self.homes.iter().find_map(|home| {
            let home_canon = std::fs::canonicalize(home).ok()?;
            MANAGERS.iter().find_map(|m| {
                let tree = home.join(m);
                let canon = std::fs::canonicalize(&tree).ok()?;
                let on_path = dir.starts_with(&tree)
                    || canonical_dir
                        .as_ref()
                        .is_some_and(|d| d.starts_with(&canon));
                (on_path && canon.is_dir() && canon.starts_with(&home_canon) && canon != home_canon)
                    .then_some(canon)
            })
        })
    }

    /// Whether `exe` lies in a version manager's tree found on PATH.
    pub(super) fn in_manager_tree(&self, exe: &Path) -> bool {
        let exe = std::fs::canonicalize(exe).unwrap_or_else(|_| exe.to_path_buf());
        self.manager_trees()
            .iter()
            .any(|tree| exe.starts_with(tree))
    }
}

/// An absolute path with no `.` or `..` in it (`starts_with` compares names, and
/// `~/.pyenv/../bin` is not in `~/.pyenv`).
pub(super) fn plain_absolute(p: &Path) -> bool {
    p.is_absolute()
        && p.components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
}

/// Every program directory in `tree`, breadth first, not looking inside one found.
fn program_dirs(tree: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut level = vec![tree.to_path_buf()];
    let mut visited = 0;
    for _ in 0..MAX_DEPTH {
        let mut next = Vec::new();
        for dir in level {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                // Not followed: a link in the tree may lead anywhere.
                if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                visited += 1;
                if visited > MAX_VISITED {
                    return found;
                }
                let name = entry.file_name();
                if PROGRAM_DIRS.iter().any(|d| name == *d) {
                    found.push(entry.path());
                } else {
                    next.push(entry.path());
                }
            }
        }
        level = next;
    }
    found
}
