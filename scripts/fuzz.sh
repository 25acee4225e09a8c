#!/usr/bin/env bash
# Runs the cargo-fuzz targets in fuzz/, one after the other at `nice -n 19`, each until
# RUNS executions (default 10,000,000) or one CPU-hour of its own, whichever comes first,
# and prints one table row per target as it finishes.
#
#   scripts/fuzz.sh                          every target, 10 M executions or 1 CPU-hour
#   scripts/fuzz.sh 1000000                  every target, 1 M executions (or 1 CPU-hour)
#   scripts/fuzz.sh 10000000 acp_line ...    only the targets named, in that order
#   scripts/fuzz.sh list                     the targets
#
# Environment: FUZZ_CPU_SECS (default 3600) caps each target's CPU time (user + system of
# the fuzzer process, read from /proc: on a shared machine wall time says little);
# FUZZ_ARGS adds libFuzzer flags (e.g. -max_total_time=20 for a short calibration);
# FUZZ_TOOLCHAIN picks the rustup toolchain (default nightly when installed).
# Needs cargo-fuzz (`cargo install cargo-fuzz --locked`). A crash, leak or hang stops
# its target and lands in fuzz/artifacts/<target>/; the corpus grows in
# fuzz/corpus/<target>/ (git keeps only seed-* and regress-*). The full log of a run is
# /tmp/fsgate-fuzz-<target>.log. Exits non-zero if any target found something.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

toolchain="${FUZZ_TOOLCHAIN:-}"
if [[ -z "$toolchain" ]] && rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    toolchain=nightly
fi
cargo=(cargo ${toolchain:+"+$toolchain"})
# Without nightly: cargo fuzz passes nightly-only flags (-Zsanitizer=address, ...) to
# rustc, which a stable rustc accepts under RUSTC_BOOTSTRAP=1.
[[ -n "$toolchain" ]] || export RUSTC_BOOTSTRAP=1
# Two known false leak reports, of threads that start or end during a check (see
# fuzz/lsan-suppressions.txt), and nothing else.
export LSAN_OPTIONS="suppressions=$PWD/lsan-suppressions.txt${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
# What `cargo fuzz run` sets for AddressSanitizer (the binaries are run directly here, so
# that the watcher below sees the fuzzer's own process).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_odr_violation=0"

if [[ "${1:-}" == list ]]; then
    "${cargo[@]}" fuzz list
    exit 0
fi
runs="${1:-10000000}"
shift || true
[[ "$runs" =~ ^[0-9]+$ ]] || { echo "usage: $0 [RUNS [TARGET...]] | list" >&2; exit 2; }
cpu_cap="${FUZZ_CPU_SECS:-3600}"
if [[ $# -gt 0 ]]; then
    selected=("$@")
else
    mapfile -t selected < <("${cargo[@]}" fuzz list)
fi

# Debug assertions on: integer overflow panics instead of wrapping silently.
nice -n 19 "${cargo[@]}" fuzz build --debug-assertions
host="$(rustc ${toolchain:+"+$toolchain"} -vV | sed -n 's/^host: //p')"
bins="${CARGO_TARGET_DIR:-$PWD/target}/$host/release"
tick="$(getconf CLK_TCK)"
row='%-18s %11s %8s %6s %8s %7s %6s %6s  %s\n'

# CPU seconds (user + system, all threads) of process $1 so far; empty once it is gone.
cpu_secs() {
    local stat
    stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 0
    # Fields after the ")" closing the command name: utime and stime are the 12th and 13th.
    awk -v t="$tick" '{ print int(($12 + $13) / t) }' <<<"${stat##*) }"
}

# How many inputs that stopped a run (crash, leak, hang, out of memory) are in dir $1.
findings() {
    find "$1" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
        -o -name 'oom-*' \) | wc -l
}

# Last value libFuzzer printed for `stat::NAME:` in log $2.
final_stat() { sed -n "s/^stat::$1: *//p" "$2" | tail -n 1; }

# Runs target $1 in the background, interrupts it (SIGINT: libFuzzer prints its final
# statistics) at the CPU cap, and prints its table row.
run_target() {
    local t="$1" log="/tmp/fsgate-fuzz-$1.log" art="artifacts/$1"
    mkdir -p "corpus/$t" "$art"
    local before start pid cpu=0 stop=runs
    before="$(findings "$art")"
    start="$(date +%s)"
    # -timeout: one input slower than this is a hang; -rss_limit_mb: a leak or a blow-up.
    nice -n 19 "$bins/$t" "-artifact_prefix=$art/" -runs="$runs" -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 ${FUZZ_ARGS:-} "corpus/$t" >"$log" 2>&1 &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        local now
        now="$(cpu_secs "$pid")"
        [[ -n "$now" ]] && cpu="$now"
        if ((cpu >= cpu_cap)); then
            stop=cpu
            kill -INT "$pid" 2>/dev/null || true
            break
        fi
        sleep 2
    done
    local rc=0
    wait "$pid" || rc=$?
    local secs=$(($(date +%s) - start))
    ((secs > 0)) || secs=1
    local execs found corpus cov
    execs="$(final_stat number_of_executed_units "$log")"
    execs="${execs:-0}"
    # Edges covered, from libFuzzer's last status line.
    cov="$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)"
    found=$(($(findings "$art") - before))
    corpus="$(find "corpus/$t" -type f | wc -l)"
    if ((found > 0)); then
        stop=found
    elif [[ "$stop" == runs && "$execs" -lt "$runs" ]]; then
        # Stopped early by an -max_total_time in FUZZ_ARGS (0), or it failed.
        ((rc == 0)) && stop=time || stop="exit $rc"
    fi
    printf "$row" "$t" "$execs" "$secs" "$cpu" "$((execs / secs))" "$found" "$corpus" \
        "${cov:--}" "$stop"
    if ((found > 0)); then
        echo "!! $t: see $log and fuzz/$art/"
        return 1
    fi
}

echo "# $(date -u '+%F %H:%M UTC') commit $(git rev-parse --short HEAD) runs=$runs cpu cap=${cpu_cap}s ${FUZZ_ARGS:-}"
printf "$row" target executions seconds cpu_s exec/s crashes corpus cov stop
status=0
for t in "${selected[@]}"; do
    run_target "$t" || status=1
done
exit $status
