#!/usr/bin/env bash
# The whole test suite: installs the real protocol peers (Python and TypeScript SDKs)
# into .peers/, then runs every Rust test (unit, property, integration against the real
# binary, interop with the peers), lints and tests every shipped policy, and builds the
# crates' documentation with warnings as errors, and checks that the fuzz targets compile.
set -euo pipefail
cd "$(dirname "$0")/.."
# Every peer is required: install-peers.sh installs what is missing or fails, and a test
# whose peer (or Landlock) is missing fails instead of printing SKIPPED.
export FSGATE_REQUIRE_PEERS=1
# A cold run takes about 6 GB (build output, fuzz build, peers): say so up front when
# the disk has less, since running out shows up as a linker crash.
free_kb=$(df -Pk . | awk 'NR == 2 {print $4}')
if [ "${free_kb:-0}" -lt 6000000 ]; then
  echo "test.sh: only $((free_kb / 1024)) MiB free here; a run from a clean checkout needs about 6 GB" >&2
fi
# CI builds once, from a clean checkout: incremental state would only take disk.
if [ "${CI:-}" = true ]; then export CARGO_INCREMENTAL=0; fi
# The gateways the tests start keep what they put in the default state directory (a
# workspace's state when no option names one, `fsgate asks`'s sockets) in one of this
# run's own, removed at the end, not in your ~/.local/state.
state_home="$(mktemp -d "${TMPDIR:-/tmp}/fsgate-test-state.XXXXXX")"
trap 'chmod -R u+rwx "$state_home" 2>/dev/null; rm -rf "$state_home"' EXIT
export XDG_STATE_HOME="$state_home"
./scripts/install-peers.sh
./scripts/install-tools.sh
cargo build --bin fsgate
# --no-fail-fast, and every step runs even after one fails: a failure does not hide the
# results of the rest. The layer crates' unit tests build apart from the fsgate binary,
# so a test-only feature one of them enables never reaches the binary the integration
# tests drive.
failed=0
cargo test --workspace --exclude fsgate --exclude fsgate-bench --all-targets --no-fail-fast || failed=1
cargo test --all-targets --features test-bins --no-fail-fast || failed=1
# The benchmark driver's own unit tests (the integration tests drive it through fsgate's).
cargo test -p fsgate-bench --lib --no-fail-fast || failed=1
BIN="${CARGO_TARGET_DIR:-target}/debug/fsgate"
"$BIN" policy check policies/*.toml policies/examples/*.toml || failed=1
"$BIN" policy test policies/*.toml policies/examples/*.toml || failed=1
# The crates' documentation builds with no broken link and none to a private item.
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet || failed=1
# The fuzz targets, a crate of their own outside the workspace, still compile against it.
cargo check --manifest-path fuzz/Cargo.toml --bins --quiet || failed=1
exit "$failed"
