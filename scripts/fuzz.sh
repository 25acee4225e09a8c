#!/usr/bin/env bash
# Runs the cargo-fuzz targets in fuzz/, one after the other, each for SECONDS seconds
# (default 60) on one core, and prints libFuzzer's final statistics for each.
#
#   scripts/fuzz.sh              every target, 60 s each
#   scripts/fuzz.sh 600          every target, 10 minutes each
#   scripts/fuzz.sh 600 acp_line one target
#   scripts/fuzz.sh list         the targets
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`). Crashes land in fuzz/artifacts/<target>/;
# the corpus grows in fuzz/corpus/<target>/ (only seed-* and regress-* files are kept in
# git). Extra libFuzzer flags can be given in FUZZ_ARGS.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

# cargo fuzz passes nightly-only flags (-Zsanitizer=address, ...) to rustc. Where only a
# stable toolchain exists, RUSTC_BOOTSTRAP=1 lets stable rustc accept them.
export RUSTC_BOOTSTRAP=1
# Two known false leak reports, of threads that start or end during a check (see
# fuzz/lsan-suppressions.txt), and nothing else.
export LSAN_OPTIONS="suppressions=$PWD/lsan-suppressions.txt${LSAN_OPTIONS:+:$LSAN_OPTIONS}"

targets() { cargo fuzz list; }

if [[ "${1:-}" == list ]]; then
    targets
    exit 0
fi
secs="${1:-60}"
shift || true
if [[ $# -gt 0 ]]; then
    selected=("$@")
else
    mapfile -t selected < <(targets)
fi

# Debug assertions on: integer overflow panics instead of wrapping silently.
cargo fuzz build --debug-assertions
status=0
for t in "${selected[@]}"; do
    mkdir -p "corpus/$t"
    echo "== $t (${secs}s)"
    # One process, one core (no -jobs: libFuzzer would move the output into fuzz-N.log).
    # -rss_limit_mb: a run that holds more than this is a leak or a blow-up (a failure).
    # -timeout: one input slower than this is a hang (a failure).
    if ! cargo fuzz run --debug-assertions "$t" "corpus/$t" -- \
        -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 ${FUZZ_ARGS:-} 2>&1 | tee "/tmp/fsgate-fuzz-$t.log" |
        grep -E '^(stat::|==[0-9]+==|SUMMARY|artifact_prefix|Test unit written|Done )'; then
        :
    fi
    if grep -qE 'Test unit written|SUMMARY: ' "/tmp/fsgate-fuzz-$t.log"; then
        echo "!! $t failed: see /tmp/fsgate-fuzz-$t.log and fuzz/artifacts/$t/"
        status=1
    fi
done
exit $status
