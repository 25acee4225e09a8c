//! Request paths -> workspace-relative paths, lexically, before any filesystem call.
//!
//! Nothing here touches the filesystem. A [`RelPath`] is a normalised, `/`-separated
//! path relative to the workspace root (`""` is the root itself) with no `.`/`..`
//! components and no NUL bytes. Symlinks are the workspace module's business: it resolves
//! them beneath the root handle and re-checks the policy on where they really lead.
//! Parsing a request path (and why one is refused) is in `parse`.

mod parse;
mod rel;

pub use parse::PathError;
pub use rel::RelPath;

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn root() -> &'static Path {
        Path::new("/ws")
    }

    #[test]
    fn the_outermost_component_is_a_path_of_its_own() {
        let p = |s: &str| RelPath::parse_rooted(s).unwrap();
        assert_eq!(p("/api/src/a.rs").outermost(), Some(p("/api")));
        assert_eq!(p("/api").outermost(), Some(p("/api")));
        assert_eq!(RelPath::root().outermost(), None);
    }

    #[test]
    fn parts() {
        let p = RelPath::parse_rooted("a/b/c.tar.gz").unwrap();
        assert_eq!(p.file_name(), Some("c.tar.gz"));
        assert_eq!(p.extension(), Some("gz"));
        assert_eq!(p.parent().unwrap().as_str(), "a/b");
        assert_eq!(RelPath::parse_rooted(".bashrc").unwrap().extension(), None);
        assert_eq!(p.to_absolute(root()), "/ws/a/b/c.tar.gz");
        assert_eq!(p.to_rooted(), "/a/b/c.tar.gz");
        assert!(p.starts_with(&RelPath::parse_rooted("a").unwrap()));
        assert!(!p.starts_with(&RelPath::parse_rooted("a/b/c").unwrap()));
        assert!(
            !RelPath::parse_rooted("ab")
                .unwrap()
                .starts_with(&RelPath::parse_rooted("a").unwrap())
        );
    }
}
