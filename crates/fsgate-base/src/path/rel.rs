//! The workspace-relative path every layer passes around: normalised, `/`-separated,
//! `""` the root.

use std::fmt;
use std::path::Path;

/// A normalised path relative to the workspace root. `""` is the root.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct RelPath(pub(in crate::path) String);

impl RelPath {
    /// The workspace root itself.
    pub fn root() -> Self {
        RelPath(String::new())
    }

    /// `self` with the leading components of `prefix` removed, if `prefix` is an
    /// ancestor (component-wise, so `/ws` is not a prefix of `/ws_evil`).
    pub fn strip_prefix(&self, prefix: &RelPath) -> Option<RelPath> {
        if prefix.is_root() {
            return Some(self.clone());
        }
        beneath(&self.0, &prefix.0).map(|at| RelPath(self.0[at..].to_string()))
    }

    /// True for the workspace root.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The path as a `/`-separated string (`""` for the root).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The path as a relative `Path` for cap-std (`"."` for the root).
    pub fn as_fs_path(&self) -> &Path {
        if self.0.is_empty() {
            Path::new(".")
        } else {
            Path::new(&self.0)
        }
    }

    /// The components, outermost first.
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.0.split('/').filter(|c| !c.is_empty())
    }

    /// The outermost component as a path, or `None` for the root.
    pub fn outermost(&self) -> Option<RelPath> {
        let first = self.components().next()?;
        Some(RelPath(first.to_string()))
    }

    /// The last component, or `None` for the root.
    pub fn file_name(&self) -> Option<&str> {
        if self.is_root() {
            None
        } else {
            self.0.rsplit('/').next()
        }
    }

    /// The parent directory, or `None` for the root.
    pub fn parent(&self) -> Option<RelPath> {
        if self.is_root() {
            return None;
        }
        Some(match self.0.rfind('/') {
            Some(i) => RelPath(self.0[..i].to_string()),
            None => RelPath::root(),
        })
    }

    /// The extension of the last component, without the dot (`None` for dotfiles
    /// such as `.bashrc`, which have a name and no extension).
    pub fn extension(&self) -> Option<&str> {
        let name = self.file_name()?;
        let idx = name.rfind('.')?;
        if idx == 0 {
            return None;
        }
        Some(&name[idx + 1..])
    }

    /// `self/name`. `name` must be a single component from a directory listing.
    pub fn join(&self, name: &str) -> RelPath {
        if self.is_root() {
            RelPath(name.to_string())
        } else {
            // Not format!: this runs for every entry of every listing.
            let mut s = String::with_capacity(self.0.len() + 1 + name.len());
            s.push_str(&self.0);
            s.push('/');
            s.push_str(name);
            RelPath(s)
        }
    }

    /// True if `self` is `other` or lies beneath it.
    pub fn starts_with(&self, other: &RelPath) -> bool {
        self.strip_prefix(other).is_some()
    }

    /// The absolute form under `root`, as ACP and MCP results carry it.
    pub fn to_absolute(&self, root: &Path) -> String {
        let r = root.to_string_lossy();
        if self.is_root() {
            r.into_owned()
        } else if r.ends_with('/') {
            format!("{r}{}", self.0)
        } else {
            format!("{r}/{}", self.0)
        }
    }

    /// The workspace-rooted form (`/src/a.rs`), as the WebSocket channel carries it.
    pub fn to_rooted(&self) -> String {
        format!("/{}", self.0)
    }
}

/// Where the rest of `path` begins if `prefix` is `path` or one of its ancestors
/// (component-wise, so `ws` is not a prefix of `ws_evil`); both normalised.
pub(in crate::path) fn beneath(path: &str, prefix: &str) -> Option<usize> {
    if prefix.is_empty() {
        return Some(0);
    }
    if path == prefix {
        return Some(path.len());
    }
    let rest = path.strip_prefix(prefix)?;
    rest.starts_with('/').then_some(prefix.len() + 1)
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str(".")
        } else {
            f.write_str(&self.0)
        }
    }
}
