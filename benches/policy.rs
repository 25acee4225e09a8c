//! The policy decision (`Policy::decide`), pure and in memory: the built-in default
//! policy on an allowed read, a secret name and a file whose extension no rule lists
//! (the default policy has no extension lists, so it is allowed; `policies/strict.toml`,
//! which has them, denies it after trying every rule). `explain` builds the trace that
//! `fsgate policy explain` prints.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use fsgate_base::path::RelPath;
use fsgate_decide::{EntryKind, OpClass, PathFacts};
use fsgate_policy::Policy;

fn rel(s: &str) -> RelPath {
    RelPath::parse_rooted(s).expect("valid path")
}

fn decide(c: &mut Criterion) {
    let default = Policy::builtin_default().expect("default policy");
    let strict = Policy::load(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/strict.toml"),
    )
    .expect("strict");
    let cases = [
        ("default/allowed_read", &default, "src/gateway/mod.rs", true),
        ("default/secret_name", &default, "config/.env.local", false),
        ("default/unlisted_ext", &default, "assets/logo.xyz", true),
        ("strict/allowed_read", &strict, "src/gateway/mod.rs", true),
        ("strict/unlisted_ext", &strict, "assets/logo.xyz", false),
    ];
    let mut g = c.benchmark_group("decide");
    for (name, pol, path, allowed) in cases {
        let p = rel(path);
        assert_eq!(
            pol.decide(OpClass::Read, &p, EntryKind::File).allowed(),
            allowed,
            "{name}"
        );
        g.bench_function(name, |b| {
            b.iter(|| pol.decide(OpClass::Read, black_box(&p), EntryKind::File))
        });
    }
    g.finish();
    let p = rel("src/gateway/mod.rs");
    c.bench_function("explain/default/allowed_read", |b| {
        b.iter(|| {
            default.explain(
                OpClass::Read,
                black_box(&p),
                &PathFacts::kind(EntryKind::File),
            )
        })
    });
}

criterion_group!(benches, decide);
criterion_main!(benches);
