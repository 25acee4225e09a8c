//! Parsing a request path into a [`RelPath`]: lexically, with `.` and `..` applied and
//! nothing above the root, an absolute path only beneath the workspace root; and why a
//! path is refused ([`PathError`]).

use std::path::Path;

use super::rel::{RelPath, beneath};

/// Why a request path cannot be turned into a workspace-relative path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// NUL bytes cannot occur in Unix paths; a request carrying one is malformed.
    #[error("path contains a NUL byte")]
    Nul,
    /// ACP requires absolute paths.
    #[error("path must be absolute (inside the workspace root {root})")]
    NotAbsolute {
        /// The workspace root, as the message names it.
        root: String,
    },
    /// Absolute, but not under the workspace root.
    #[error("path is outside the workspace root {root}")]
    OutsideRoot {
        /// The workspace root, as the message names it.
        root: String,
    },
    /// `..` climbs above the workspace root.
    #[error("path climbs out of the workspace with `..`")]
    Escapes,
    /// The empty string names nothing.
    #[error("path is empty")]
    Empty,
}

impl RelPath {
    /// Normalises a path that is relative to the workspace root (a leading `/` is
    /// allowed and means the root, as on the WebSocket files channel).
    pub fn parse_rooted(input: &str) -> Result<Self, PathError> {
        if input.is_empty() {
            return Err(PathError::Empty);
        }
        if input.contains('\0') {
            return Err(PathError::Nul);
        }
        // Most request paths are normal already: one copy instead of a split and a join.
        if let Some(clean) = already_normal(input) {
            return Ok(RelPath(clean.to_string()));
        }
        normalise(input).map(RelPath)
    }

    /// Normalises an absolute path that must lie under `root` (itself absolute and
    /// normalised, e.g. canonicalised at start-up).
    pub fn parse_absolute(input: &str, root: &Path) -> Result<Self, PathError> {
        if input.contains('\0') {
            return Err(PathError::Nul);
        }
        let root_str = root.to_string_lossy();
        if !input.starts_with('/') {
            if input.is_empty() {
                return Err(PathError::Empty);
            }
            return Err(PathError::NotAbsolute {
                root: root_str.into_owned(),
            });
        }
        // Normalise the whole absolute path first, so `/ws/../etc` is judged as `/etc`.
        let full = RelPath::parse_rooted(input).map_err(|e| match e {
            PathError::Escapes => PathError::OutsideRoot {
                root: root_str.to_string(),
            },
            other => other,
        })?;
        // The root is normal already unless a caller passed an odd one: then normalise.
        let root_rel = match already_normal(&root_str) {
            Some(clean) => std::borrow::Cow::Borrowed(clean),
            None => std::borrow::Cow::Owned(normalise(&root_str).unwrap_or_default()),
        };
        match beneath(&full.0, &root_rel) {
            Some(at) => {
                let mut rel = full.0;
                rel.drain(..at);
                Ok(RelPath(rel))
            }
            None => Err(PathError::OutsideRoot {
                root: root_str.into_owned(),
            }),
        }
    }

    /// Accepts either form: absolute under `root`, or relative to it (MCP).
    pub fn parse_any(input: &str, root: &Path) -> Result<Self, PathError> {
        if input.starts_with('/') {
            Self::parse_absolute(input, root)
        } else {
            Self::parse_rooted(input)
        }
    }
}

/// `input` without its leading `/`s if what remains is normal already (no empty, `.`
/// or `..` component, no trailing `/`): then [`normalise`] would return exactly that.
fn already_normal(input: &str) -> Option<&str> {
    let rest = input.trim_start_matches('/');
    if rest.is_empty() {
        return Some(rest);
    }
    rest.split('/')
        .all(|c| !matches!(c, "" | "." | ".."))
        .then_some(rest)
}

/// The general case: splits on `/`, drops empty and `.` components, applies `..`.
fn normalise(input: &str) -> Result<String, PathError> {
    let mut parts: Vec<&str> = Vec::new();
    for comp in input.split('/') {
        match comp {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(PathError::Escapes);
                }
            }
            c => parts.push(c),
        }
    }
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn root() -> &'static Path {
        Path::new("/ws")
    }

    #[test]
    fn absolute_inside_root() {
        assert_eq!(
            RelPath::parse_absolute("/ws/src/a.rs", root())
                .unwrap()
                .as_str(),
            "src/a.rs"
        );
        assert!(RelPath::parse_absolute("/ws", root()).unwrap().is_root());
        assert!(RelPath::parse_absolute("/ws/", root()).unwrap().is_root());
        assert_eq!(
            RelPath::parse_absolute("/ws/./a//b/../c", root())
                .unwrap()
                .as_str(),
            "a/c"
        );
    }

    #[test]
    fn absolute_outside_root_is_refused() {
        for p in [
            "/etc/passwd",
            "/ws_evil/x",
            "/ws/../etc",
            "/",
            "/w",
            "/../ws/x/../../etc",
        ] {
            assert!(
                matches!(
                    RelPath::parse_absolute(p, root()),
                    Err(PathError::OutsideRoot { .. })
                ),
                "{p}"
            );
        }
        assert_eq!(
            RelPath::parse_absolute("/ws/../ws/a", root())
                .unwrap()
                .as_str(),
            "a"
        );
    }

    #[test]
    fn relative_and_nul_are_refused_on_absolute_parse() {
        assert!(matches!(
            RelPath::parse_absolute("src/a", root()),
            Err(PathError::NotAbsolute { .. })
        ));
        assert_eq!(
            RelPath::parse_absolute("/ws/a\0b", root()),
            Err(PathError::Nul)
        );
        assert_eq!(RelPath::parse_absolute("", root()), Err(PathError::Empty));
    }

    #[test]
    fn rooted_paths() {
        assert_eq!(RelPath::parse_rooted("/src/x").unwrap().as_str(), "src/x");
        assert_eq!(RelPath::parse_rooted("a/../b").unwrap().as_str(), "b");
        assert_eq!(RelPath::parse_rooted("../x"), Err(PathError::Escapes));
        assert_eq!(RelPath::parse_rooted("a/../../x"), Err(PathError::Escapes));
        assert!(RelPath::parse_rooted("/").unwrap().is_root());
    }

    fn token() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("..".to_string()),
            Just(".".to_string()),
            Just("".to_string()),
            "[a-z.]{1,4}",
        ]
    }

    proptest! {
        /// Whatever the tokens, a parsed path never contains `.`/`..`/empty components,
        /// and re-parsing it is the identity.
        #[test]
        fn normalised_paths_are_clean(tokens in proptest::collection::vec(token(), 0..12)) {
            let input = tokens.join("/");
            if let Ok(p) = RelPath::parse_rooted(&input) {
                for c in p.components() {
                    prop_assert!(c != ".." && c != "." && !c.is_empty());
                }
                prop_assert_eq!(RelPath::parse_rooted(&format!("/{}", p.as_str())).unwrap(), p);
            }
        }

        /// The shortcut for paths that are normal already gives what the general
        /// normalisation gives, on every input.
        #[test]
        fn shortcut_agrees_with_normalise(tokens in proptest::collection::vec(token(), 0..12), lead in "/{0,2}") {
            let input = format!("{lead}{}", tokens.join("/"));
            if let Some(clean) = already_normal(&input) {
                prop_assert_eq!(normalise(&input), Ok(clean.to_string()));
            }
        }

        /// An absolute path is accepted only if it lies under the root, and then its
        /// absolute form round-trips.
        #[test]
        fn absolute_parse_stays_under_root(tokens in proptest::collection::vec(token(), 0..12)) {
            let input = format!("/{}", tokens.join("/"));
            if let Ok(p) = RelPath::parse_absolute(&input, root()) {
                let abs = p.to_absolute(root());
                prop_assert!(abs == "/ws" || abs.starts_with("/ws/"));
                prop_assert_eq!(RelPath::parse_absolute(&abs, root()).unwrap(), p);
            }
        }
    }
}
