#!/usr/bin/env bash
# The whole test suite: installs the real protocol peers (Python and TypeScript SDKs)
# into .peers/, then runs every Rust test (unit, property, integration against the real
# binary, interop with the peers) and lints and tests every shipped policy.
set -euo pipefail
cd "$(dirname "$0")/.."
# Every peer is required: install-peers.sh installs what is missing or fails, and a test
# whose peer (or Landlock) is missing fails instead of printing SKIPPED.
export FSGATE_REQUIRE_PEERS=1
./scripts/install-peers.sh
./scripts/install-tools.sh
cargo build --bin fsgate
# --no-fail-fast: a failing test binary does not hide the results of the others.
cargo test --all-targets --features test-bins --no-fail-fast
BIN="${CARGO_TARGET_DIR:-target}/debug/fsgate"
"$BIN" policy check policies/*.toml policies/examples/*.toml
"$BIN" policy test policies/*.toml policies/examples/*.toml
