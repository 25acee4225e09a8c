//! Policy files as `serve` loads them (`Policy::load`): the input is split at lines
//! `---` into up to three files, `top.toml`, `base.toml` and `root.toml`, written to a
//! temp directory, so `extends` chains, `[sets]`, `[agent]` and `[ask]` meet real files;
//! `top.toml` is loaded. No panic; a loaded policy decides fixed requests and gives its
//! settings; it is never looser than a base of its chain loaded alone (what the base
//! denies stays denied, what it asks about is never simply allowed, unless a base rule
//! is `overridable`), inherits the base's `[agent]` and `[ask]`, and with a deny-all
//! rule appended to `top.toml` denies every request.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use fsgate_base::path::RelPath;
use fsgate_policy::Policy;
use fsgate_decide::{Effect, EntryKind, OpClass, PathFacts};
use libfuzzer_sys::fuzz_target;

const FILES: [&str; 3] = ["top.toml", "base.toml", "root.toml"];
const PATHS: [&str; 7] = [
    "src/main.rs",
    ".env",
    "infra/main.tf",
    "docs/adr/x.md",
    "notes/a.txt",
    "a/b/.git/config",
    "ü/ß.rs",
];
const OPS: [OpClass; 4] = [
    OpClass::Read,
    OpClass::Write,
    OpClass::Delete,
    OpClass::List,
];
const DENY_ALL: &str = "\n[[rule]]\nid = \"fuzz-deny-all\"\neffect = \"deny\"\n\
    ops = [\"read\", \"write\", \"delete\", \"list\"]\npaths = [\"**\"]\n";

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = match Path::new("/dev/shm").is_dir() {
            true => "/dev/shm",
            false => "/tmp",
        };
        tempfile::Builder::new()
            .prefix("fsgate-fuzz-policy-")
            .tempdir_in(base)
            .expect("temp dir")
            .keep()
    })
}

/// Every decision of `p` on the fixed requests, in a fixed order.
fn decisions(p: &Policy) -> Vec<Effect> {
    let mut out = Vec::new();
    for path in PATHS {
        let path = RelPath::parse_rooted(path).expect("a fixed path");
        for op in OPS {
            for facts in [
                PathFacts::kind(EntryKind::File),
                PathFacts::kind(EntryKind::Dir),
                PathFacts::file(3_000_000),
            ] {
                out.push(p.decide_with(op, &path, &facts).effect);
            }
        }
    }
    out
}

/// The chain's base `name`, loaded alone, against the merged policy.
fn check_base(merged: &Policy, merged_effects: &[Effect], name: &str, overridable: bool) {
    let path = dir().join(name);
    if !merged.bases().iter().any(|b| Path::new(b) == path) {
        return;
    }
    let Ok(base) = Policy::load(&path) else {
        return;
    };
    if base.raw().agent.is_some() {
        assert_eq!(base.agent(), merged.agent(), "[agent] of {name}");
    }
    if base.raw().ask.is_some() {
        let (b, m) = (&base.raw().ask, &merged.raw().ask);
        assert_eq!(format!("{b:?}"), format!("{m:?}"), "[ask] of {name}");
    }
    if overridable {
        return;
    }
    for (k, (b, m)) in decisions(&base).iter().zip(merged_effects).enumerate() {
        let looser = match b {
            Effect::Deny => *m != Effect::Deny,
            Effect::Ask => *m == Effect::Allow,
            Effect::Allow => false,
        };
        assert!(
            !looser,
            "case {k}: {name} alone decides {b:?}, the chain {m:?}"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The gitleaks loader has its own target; device files only test the filesystem.
    if ["gitleaks_config", "/dev", "/proc", "/sys"]
        .iter()
        .any(|s| text.contains(s))
    {
        return;
    }
    let parts: Vec<&str> = text.splitn(3, "\n---\n").collect();
    for (k, name) in FILES.iter().enumerate() {
        let file = dir().join(name);
        match parts.get(k) {
            Some(part) => std::fs::write(&file, part).expect("write a policy file"),
            None => {
                let _ = std::fs::remove_file(&file);
            }
        }
    }
    let top = dir().join(FILES[0]);
    let Ok(policy) = Policy::load(&top) else {
        return;
    };
    let effects = decisions(&policy);
    let _ = policy.settings();
    for op in OPS {
        let _ = policy.can_ever(op);
    }
    // An `overridable` rule anywhere in the chain may be replaced by a looser one.
    let overridable = text.contains("overridable");
    for name in &FILES[1..] {
        check_base(&policy, &effects, name, overridable);
    }
    std::fs::write(&top, format!("{}{DENY_ALL}", parts[0])).expect("write top.toml");
    if let Ok(strict) = Policy::load(&top) {
        let allowed = decisions(&strict).iter().any(|e| *e != Effect::Deny);
        assert!(!allowed, "a deny-all rule did not deny everything");
    }
});
