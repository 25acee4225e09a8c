//! Request path -> `RelPath`, rooted, absolute and either form: whatever the input, the
//! result never escapes (no `..`, `.` or empty component, no NUL, no leading `/`) and
//! round-trips through every form the doors print.
#![no_main]

use std::path::Path;

use fsgate_base::path::RelPath;
use libfuzzer_sys::fuzz_target;

const ROOTS: [&str; 3] = ["/", "/ws", "/home/user/my project/"];

fuzz_target!(|data: &[u8]| {
    let Ok(input) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(rel) = RelPath::parse_rooted(input) {
        check(&rel);
        assert_eq!(
            RelPath::parse_rooted(&rel.to_rooted()).ok(),
            Some(rel.clone())
        );
    }
    for root in ROOTS {
        let root = Path::new(root);
        for parsed in [
            RelPath::parse_absolute(input, root),
            RelPath::parse_any(input, root),
        ] {
            if let Ok(rel) = parsed {
                check(&rel);
                let abs = rel.to_absolute(root);
                assert_eq!(
                    RelPath::parse_absolute(&abs, root).ok(),
                    Some(rel.clone()),
                    "{abs}"
                );
            }
        }
    }
});

/// The invariants of a normalised path.
fn check(rel: &RelPath) {
    let s = rel.as_str();
    assert!(!s.contains('\0'), "{s:?}");
    assert!(!s.starts_with('/') && !s.ends_with('/'), "{s:?}");
    if rel.is_root() {
        assert_eq!(s, "");
        assert!(rel.parent().is_none() && rel.file_name().is_none());
        return;
    }
    for c in s.split('/') {
        assert!(!matches!(c, "" | "." | ".."), "component {c:?} in {s:?}");
    }
    assert_eq!(RelPath::parse_rooted(s).ok().as_ref(), Some(rel));
    let parent = rel.parent().expect("a non-root path has a parent");
    let name = rel.file_name().expect("a non-root path has a name");
    assert_eq!(&parent.join(name), rel);
    assert!(rel.starts_with(&parent) && rel.starts_with(&RelPath::root()));
    assert_eq!(rel.strip_prefix(rel), Some(RelPath::root()));
    assert_eq!(rel.components().count(), s.split('/').count());
}
