//! Not a criterion bench: `N` reads of a 4 KiB file through the gateway, for
//! `valgrind --tool=callgrind` (docs/profiling.md). Instructions per read are the
//! difference between two runs with different `N`, divided by the difference of `N`,
//! so set-up costs cancel out.
//!
//! Arguments: `[N] [none|never|always]` (default: 10 reads, `fsync = "never"`). Under
//! `cargo test --all-targets` it runs with the defaults.

mod common;

use fsgate_audit::FsyncMode;

fn main() {
    // cargo passes `--bench` under `cargo bench`; only bare words are ours.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let n: u64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(10);
    let mode = match args.get(1).map(String::as_str) {
        Some("none") => None,
        Some("always") => Some(FsyncMode::Always),
        _ => Some(FsyncMode::Never),
    };
    let (ws, file) = common::workspace();
    let state = tempfile::tempdir().expect("state dir");
    let gw = common::gateway(ws.path(), state.path(), mode);
    let ctx = common::ctx();
    let path = file.to_str().expect("utf-8 temp path");
    for _ in 0..n {
        std::hint::black_box(common::read_once(&gw, &ctx, path, 4096));
    }
    eprintln!("{n} reads through the gateway, audit {mode:?}");
}
