//! [`Workspace`]: the root handle every operation resolves beneath.

use std::io;
use std::path::{Path, PathBuf};

use cap_std::fs::Dir;

/// The workspace root: one capability handle, opened once at start-up.
#[derive(Debug)]
pub struct Workspace {
    /// Every operation resolves beneath this handle.
    pub(crate) root: Dir,
    /// The canonical absolute root path, to turn request paths into relative ones.
    pub(crate) root_path: PathBuf,
    /// The root as the operator named it, when that differs from the canonical path
    /// (a symlinked directory such as `/home/me/proj` -> `/data/proj`): requests naming
    /// the root this way are accepted too, since editors send the path they were given.
    alias: Option<String>,
}

impl Workspace {
    /// Opens the workspace root.
    ///
    /// # Ambient Authority
    /// Canonicalises and opens `path` from the ambient filesystem; start-up code only.
    pub fn open(path: &Path) -> io::Result<Workspace> {
        let root_path = std::fs::canonicalize(path)?;
        if !root_path.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not a directory", root_path.display()),
            ));
        }
        let root = Dir::open_ambient_dir(&root_path, cap_std::ambient_authority())?;
        let alias = std::path::absolute(path)
            .ok()
            .and_then(|p| p.to_str().map(str::to_string))
            .and_then(|p| fsgate_base::path::RelPath::parse_rooted(&p).ok())
            .map(|rel| format!("/{}", rel.as_str()))
            .filter(|a| Path::new(a) != root_path);
        Ok(Workspace {
            root,
            root_path,
            alias,
        })
    }

    /// The canonical absolute path of the root.
    pub fn root_path(&self) -> &Path {
        &self.root_path
    }

    /// `input` with the operator's name for the root (see [`Workspace::open`]) replaced
    /// by the canonical root, so that both name the same workspace. Lexical only.
    pub fn dealias<'a>(&self, input: &'a str) -> std::borrow::Cow<'a, str> {
        if let Some(alias) = &self.alias
            && let Some(rest) = input.strip_prefix(alias.as_str())
            && (rest.is_empty() || rest.starts_with('/'))
        {
            return std::borrow::Cow::Owned(format!("{}{rest}", self.root_path.display()));
        }
        std::borrow::Cow::Borrowed(input)
    }

    /// The root handle (for Landlock rules bound to the same descriptor).
    pub fn root_dir(&self) -> &Dir {
        &self.root
    }
}
