//! A client's root (an absolute path it names, e.g. an MCP root's `file://` path) as the
//! real workspace directories it narrows a session to (see [`crate::scope::Scope`]). Roots only
//! narrow: a root outside every workspace is refused, one that holds a workspace counts
//! as that whole workspace. The door decodes its wire form; the path is resolved here.

use fsgate_base::path::{PathError, RelPath};
use fsgate_workspace::{FileKind, Follow, Workspace};

use crate::gateway::Gateway;

/// Why a root narrows nothing; its text is recorded in the `roots` record.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RootError {
    /// Outside the workspace.
    #[error("outside the workspace {0}: roots only narrow it")]
    Outside(String),
    /// Not a path the gateway can name.
    #[error("not a usable path: {0}")]
    Unusable(String),
    /// Resolving it left the workspace or failed.
    #[error("cannot be resolved inside the workspace: {0}")]
    Unresolvable(String),
    /// It names a file.
    #[error("not a directory")]
    NotADirectory,
    /// Nothing is there.
    #[error("not an existing directory: {0}")]
    Missing(String),
}

impl Gateway {
    /// The real workspace directories the absolute `path` names. With several
    /// workspaces: the one it lies in (its paths named `<name>/...`), or every one it
    /// holds.
    pub fn root_dirs(&self, path: &str) -> Result<Vec<RelPath>, RootError> {
        if !self.is_several() {
            return root_dir_in(self.workspace(), path).map(|rel| vec![rel]);
        }
        let mut found = Vec::new();
        let mut why = None;
        for m in self.members() {
            match root_dir_in(m.workspace(), path) {
                Ok(rel) => found.push(crate::scope::named(m.name().unwrap_or(""), &rel)),
                Err(e) => why = why.or(Some(e)),
            }
        }
        match (found.is_empty(), why) {
            (true, Some(e)) => Err(e),
            _ => Ok(found),
        }
    }
}

/// [`Gateway::root_dirs`] in the workspace `ws`.
fn root_dir_in(ws: &Workspace, path: &str) -> Result<RelPath, RootError> {
    let root = ws.root_path();
    let dealiased = ws.dealias(path);
    let rel = match RelPath::parse_absolute(&dealiased, root) {
        Ok(rel) => rel,
        Err(PathError::OutsideRoot { .. }) if contains_workspace(&dealiased, root) => {
            RelPath::root()
        }
        Err(PathError::OutsideRoot { .. }) => {
            return Err(RootError::Outside(root.display().to_string()));
        }
        Err(e) => return Err(RootError::Unusable(e.to_string())),
    };
    let real = ws
        .resolve(&rel, Follow::All)
        .map_err(|e| RootError::Unresolvable(e.to_string()))?;
    match ws.stat(&real.real) {
        Ok(info) if info.kind == FileKind::Directory => Ok(real.real),
        Ok(_) => Err(RootError::NotADirectory),
        Err(e) => Err(RootError::Missing(e.to_string())),
    }
}

/// Whether the directory `path` holds the workspace `root` (then it narrows nothing).
fn contains_workspace(path: &str, root: &std::path::Path) -> bool {
    let Ok(dir) = RelPath::parse_rooted(path) else {
        return false;
    };
    let Ok(ws) = RelPath::parse_rooted(&root.to_string_lossy()) else {
        return false;
    };
    ws.starts_with(&dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_above_the_workspace_contains_it() {
        let root = std::path::Path::new("/home/u/ws");
        assert!(contains_workspace("/home/u", root));
        assert!(contains_workspace("/", root));
        assert!(!contains_workspace("/home/u/w", root));
        assert!(!contains_workspace("/home/other", root));
    }

    #[test]
    fn a_subscription_is_a_normalised_rooted_path_or_invalid_params() {
        let src = RelPath::parse_rooted("/src").expect("rel");
        assert_eq!(crate::notes::subscription("/src/./lib/..").ok(), Some(src));
        assert_eq!(crate::notes::subscription("/").ok(), Some(RelPath::root()));
        let err = crate::notes::subscription("/../etc").expect_err("escapes");
        assert_eq!(err.code(), fsgate_base::error::code::INVALID_PARAMS);
    }

    #[test]
    fn a_root_is_a_real_directory_inside_the_workspace() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().canonicalize().expect("canonical");
        std::fs::create_dir_all(root.join("src/lib")).expect("mkdir");
        std::fs::write(root.join("a.txt"), "x").expect("write");
        let gw = Gateway::new(
            fsgate_policy::Policy::builtin_default().expect("policy"),
            fsgate_workspace::Workspace::open(&root).expect("workspace"),
        );
        let at = |p: &str| root.join(p).to_string_lossy().into_owned();
        let src = RelPath::parse_rooted("src/lib").expect("rel");
        assert_eq!(gw.root_dirs(&at("src/lib")), Ok(vec![src]));
        assert_eq!(gw.root_dirs(&at("")), Ok(vec![RelPath::root()]));
        assert_eq!(gw.root_dirs("/"), Ok(vec![RelPath::root()]));
        assert_eq!(gw.root_dirs(&at("a.txt")), Err(RootError::NotADirectory));
        assert!(matches!(
            gw.root_dirs(&at("gone")),
            Err(RootError::Missing(_))
        ));
        assert!(matches!(
            gw.root_dirs("/elsewhere/x"),
            Err(RootError::Outside(_))
        ));
    }
}
