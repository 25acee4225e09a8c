//! Policy TOML -> a compiled policy, as `fsgate policy check`/`test` and start-up load it: no
//! panic on any text, and a compiled policy decides a few fixed paths without panicking.
//! Texts naming a gitleaks config are skipped (that loader reads files: its own target).
#![no_main]

use fsgate_base::path::RelPath;
use fsgate_policy::lint::{LintOptions, lint_text};
use fsgate_policy::testrun::run_cases;
use fsgate_policy::Policy;
use fsgate_decide::{EntryKind, OpClass};
use libfuzzer_sys::fuzz_target;

const PATHS: [&str; 6] = [
    "",
    "src/main.rs",
    ".env",
    "a/b/.git/config",
    "docs/adr/x.md",
    "ü/ß",
];
const OPS: [OpClass; 4] = [
    OpClass::Read,
    OpClass::Write,
    OpClass::Delete,
    OpClass::List,
];

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if text.contains("gitleaks_config") {
        return;
    }
    // `fsgate policy check`: the linter loads and compiles, then runs its checks.
    let _ = lint_text(text, "fuzz.toml", None, None, &LintOptions::default());
    let Ok(policy) = Policy::from_toml(text, "fuzz") else {
        return;
    };
    // `fsgate policy test`: the file's own [[test]] cases.
    let _ = run_cases(&policy, text);
    for p in PATHS {
        let path = RelPath::parse_rooted(if p.is_empty() { "/" } else { p }).unwrap();
        for op in OPS {
            for kind in [EntryKind::File, EntryKind::Dir] {
                let d = policy.decide(op, &path, kind);
                let _ = d.allowed();
            }
            let _ = policy.can_ever(op);
        }
        if let Some(scanner) = policy.content_scanner() {
            let _ = scanner.scan_all(&path, b"AKIAIOSFODNN7EXAMPLE key = \"s3cr3t-v4lue-xyz\"");
        }
    }
});
