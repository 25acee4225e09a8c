//! Path resolution: request path text -> `RelPath` (lexical) -> the entry it really
//! names beneath the root (`Workspace::resolve`: one `lstat` per component through the
//! root handle, symlinks spliced in).

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use fsgate_base::path::RelPath;
use fsgate_workspace::{Follow, Workspace};

fn resolve(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let deep = dir.path().join("a/b/c/d/e");
    std::fs::create_dir_all(&deep).expect("mkdir");
    std::fs::write(dir.path().join("a/main.rs"), "fn main() {}\n").expect("write");
    std::fs::write(deep.join("f.rs"), "fn f() {}\n").expect("write");
    std::os::unix::fs::symlink("a/b/c/d/e", dir.path().join("link")).expect("symlink");
    let ws = Workspace::open(dir.path()).expect("workspace");
    let root = ws.root_path().to_path_buf();
    let abs = |rel: &str| format!("{}/{rel}", root.display());
    let cases = [
        ("shallow", abs("a/main.rs"), "a/main.rs"),
        ("deep", abs("a/b/c/d/e/f.rs"), "a/b/c/d/e/f.rs"),
        ("dotdot", abs("a/b/../b/c/./d/e/f.rs"), "a/b/c/d/e/f.rs"),
        ("symlink", abs("link/f.rs"), "a/b/c/d/e/f.rs"),
    ];
    let mut g = c.benchmark_group("path");
    for (name, text, real) in &cases {
        let parsed = RelPath::parse_absolute(text, &root).expect("inside the root");
        let res = ws.resolve(&parsed, Follow::All).expect("resolves");
        assert_eq!(res.real.as_str(), *real);
        g.bench_function(format!("parse/{name}"), |b| {
            b.iter(|| RelPath::parse_absolute(black_box(text), &root))
        });
        g.bench_function(format!("parse_resolve/{name}"), |b| {
            b.iter(|| {
                let rel = RelPath::parse_absolute(black_box(text), &root).expect("parses");
                ws.resolve(&rel, Follow::All).expect("resolves")
            })
        });
    }
    g.finish();
}

criterion_group!(benches, resolve);
criterion_main!(benches);
