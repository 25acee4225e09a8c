//! Version managers on PATH: pyenv, rbenv, nvm and the like keep interpreters in a tree
//! of their own under HOME, and put a shim or a version's `bin` on PATH. A command run
//! inside the wall (a shell's `python3`, a test runner's `node`) then fails with
//! `Permission denied` on the manager's own files. Each such tree found on PATH is
//! granted read and execute, whole: its shims run its `libexec`, its versions'
//! interpreters their standard libraries. Nothing else on PATH is granted by this (a
//! `~/bin` may hold anything); managers keep no credentials in these trees.

use std::path::{Path, PathBuf};

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

impl Discovery<'_> {
    /// Grants the tree of each version manager a PATH entry lies in.
    pub(super) fn managers_on_path(&mut self) {
        let Some(path_var) = self.input.path_var else {
            return;
        };
        for entry in std::env::split_paths(path_var).filter(|p| p.is_absolute()) {
            if let Some(tree) = self.manager_tree(&entry) {
                let why = format!(
                    "version manager's tree of the PATH entry {}",
                    entry.display()
                );
                self.grant(&tree, AgentAccess::ReadExec, why);
            }
        }
    }

    /// The version manager's tree under HOME that `dir` lies in, if it is a directory.
    fn manager_tree(&self, dir: &Path) -> Option<PathBuf> {
        self.homes.iter().find_map(|home| {
            MANAGERS
                .iter()
                .map(|m| home.join(m))
                .find(|tree| dir.starts_with(tree) && tree.is_dir())
        })
    }

    /// Whether `exe` lies in a version manager's tree granted from PATH.
    pub(super) fn in_manager_tree(&self, exe: &Path) -> bool {
        let Some(path_var) = self.input.path_var else {
            return false;
        };
        std::env::split_paths(path_var)
            .filter_map(|entry| self.manager_tree(&entry))
            .any(|tree| {
                exe.starts_with(&tree)
                    || std::fs::canonicalize(&tree).is_ok_and(|c| exe.starts_with(c))
            })
    }
}
