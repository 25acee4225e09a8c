#!/usr/bin/env bash
# A guided tour of fsgate: builds it, serves a small demo workspace with the built-in
# default policy, sends an agent's requests one at a time and shows each answer, a
# refusal and its rule, the audit log, its verification (and what tampering does), and
# a backup restored. Everything is left in DIR (default: a new directory under $TMPDIR),
# named at the end. Usage: scripts/demo.sh [DIR]; FSGATE_BIN=path skips the build.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${FSGATE_BIN:-}" ]; then
  cargo build -q --bin fsgate
  FSGATE_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/fsgate"
fi
DIR="${1:-$(mktemp -d "${TMPDIR:-/tmp}/fsgate-demo.XXXXXX")}"
exec python3 scripts/demo.py "$FSGATE_BIN" "$DIR"
