#!/usr/bin/env bash
# fsgate against the reference MCP filesystem server, one driver (benches/driver), one
# run: builds both in release, installs the reference server, ripgrep and fd into a
# temporary directory when needed, runs `fsgate-bench suite`, prints the table.
#
#   scripts/bench.sh            # full suite: 3 repetitions, medians (several minutes)
#   scripts/bench.sh --quick    # tiny counts, 1 repetition: proves it runs and checks
#   scripts/bench.sh --quick --only write_new,overwrite,write_new_serial,overwrite_serial
#                               # only those workloads
#   scripts/bench.sh --only view            # `fsgate run`'s view against the same
#                               # commands natively (benches/view.py, as root): git status,
#                               # grep -r, a 64 MiB read, unittest, cargo build, unpack, rm -rf, 8
#                               # processes at once, the gateway's RSS under `find`, the
#                               # audit bytes of a walk; --only view_grep,view_rm: those
#                               # (--quick: 2,000 files, 20,000 for find, 2 repetitions)
#                               # With libfuse3-dev installed, the read-only ones are also
#                               # timed through libfuse's passthrough example (FUSE alone).
#
# Run as root: each write workload (fsgate's, the reference's, their floors and the bare
# calls) then gets an ext4 filesystem made for it on a loop device (a sparse image on the
# work directory's disk, unmounted and deleted after). Otherwise the report says so and
# they run in fresh directories of the work disk, where one run's clean-up slows the
# next one's writes.
#
# The monorepo workloads (mono_*) run on $FSGATE_MONOREPO when set, a tree made by
# `fsgate-bench gen-monorepo --out DIR` (1,000,000 files; keep it under /tmp, out of
# any repository); otherwise on a small one the driver generates.
#
# BENCH_MASK_SHA=1 runs fsgate as on a CPU without SHA extensions: benches/cpu/mask_sha.c,
# preloaded into fsgate alone, hides SHA-NI from it (needs `cpuid_fault` in /proc/cpuinfo
# and a C compiler), so its SHA-256 takes the AVX or SSSE3 code; the report says so.
#
# The report also goes to $BENCH_OUT (default target/bench/): latest.md, latest.json.
# Exit status: 0 when every workload ran and every answer checked (targets met or not).
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=()
case "${1:-}" in
  --quick) MODE=(--quick); shift ;;
  ""|--only) ;;
  *) echo "usage: scripts/bench.sh [--quick] [--only W1,W2,...]" >&2; exit 2 ;;
esac
case "${1:-}" in
  --only) [ -n "${2:-}" ] || { echo "bench.sh: --only needs workload names" >&2; exit 2; }
          MODE+=(--only "$2"); shift 2 ;;
  "") ;;
  *) echo "usage: scripts/bench.sh [--quick] [--only W1,W2,...]" >&2; exit 2 ;;
esac

# The view's workloads need neither the reference server nor rg: run alone.
# (Matched on the whole line: `${MODE[*]#...}` would strip each word apart.)
ALL_MODE="${MODE[*]}"
if [ "$ALL_MODE" != "${ALL_MODE#*--only view}" ]; then
  cargo build --release -p fsgate --bin fsgate
  ONLY="${ALL_MODE##*--only }"
  SIZES=()
  [ "${MODE[0]}" = --quick ] && SIZES=(--files 2000 --find-files 20000 --reps 2)
  TARGET="${CARGO_TARGET_DIR:-$PWD/target}"
  OUT="${BENCH_OUT:-$TARGET/bench}"
  WORK=$(mktemp -d -t fsgate-view-bench.XXXXXX)
  trap 'rm -rf "$WORK"' EXIT
  mkdir -p "$OUT"
  # FUSE alone, for the read-only workloads: libfuse's own passthrough example server,
  # built from the source libfuse3-dev ships (apt-get install libfuse3-dev pkg-config).
  FLOOR=()
  FLOOR_SRC=/usr/share/doc/libfuse3-dev/examples/passthrough_ll.c
  if [ -f "$FLOOR_SRC" ] && pkg-config --exists fuse3 &&
    gcc -O2 -I"$(dirname "$FLOOR_SRC")" "$FLOOR_SRC" $(pkg-config --cflags --libs fuse3) \
      -o "$TARGET/passthrough_ll"; then
    FLOOR=(--fuse-floor "$TARGET/passthrough_ll")
  else
    echo "bench: no FUSE floor timed (apt-get install libfuse3-dev pkg-config for one)" >&2
  fi
  python3 benches/view.py --fsgate "$TARGET/release/fsgate" --work "$WORK" \
    --only "$ONLY" "${SIZES[@]}" "${FLOOR[@]}" --json "$OUT/view.json" --markdown "$OUT/view.md"
  exit
fi

REFERENCE="@modelcontextprotocol/server-filesystem@2026.8.31"
TARGET="${CARGO_TARGET_DIR:-$PWD/target}"
OUT="${BENCH_OUT:-$TARGET/bench}"
TMP=$(mktemp -d -t fsgate-bench.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$OUT"

cargo build --release -p fsgate --bin fsgate
cargo build --release -p fsgate-bench
FSGATE="$TARGET/release/fsgate"
DRIVER="$TARGET/release/fsgate-bench"
if [ "${BENCH_MASK_SHA:-0}" = 1 ]; then
  grep -qw cpuid_fault /proc/cpuinfo ||
    { echo "bench.sh: BENCH_MASK_SHA=1 needs a CPU with CPUID faulting (cpuid_fault)" >&2; exit 2; }
  cc -O2 -shared -fPIC -o "$TMP/mask_sha.so" benches/cpu/mask_sha.c
  cc -O2 -DMASK_SHA_CHECK -o "$TMP/sha_bit" benches/cpu/mask_sha.c
  [ "$(LD_PRELOAD="$TMP/mask_sha.so" "$TMP/sha_bit")" = 0 ] ||
    { echo "bench.sh: the SHA mask did not take effect" >&2; exit 2; }
  # exec keeps the PID, so the driver still measures fsgate itself.
  printf '#!/usr/bin/env bash\nLD_PRELOAD=%q exec %q "$@"\n' "$TMP/mask_sha.so" "$FSGATE" > "$TMP/fsgate-no-sha"
  chmod +x "$TMP/fsgate-no-sha"
  FSGATE="$TMP/fsgate-no-sha"
  echo "bench: fsgate runs with the CPU's SHA extensions hidden (SHA bit $("$TMP/sha_bit") on this CPU, 0 under the mask)" >&2
fi

command -v node >/dev/null || { echo "bench.sh: node (Node.js 20) is required" >&2; exit 2; }
case "$(node --version)" in
  v20.*) ;;
  *) echo "bench.sh: warning: node $(node --version), the reference figures assume Node 20" >&2 ;;
esac
npm install --silent --no-audit --no-fund --prefix "$TMP/ref" "$REFERENCE" >&2
# Run as `node dist/index.js`, not through npx: the measured PID is the server itself.
REF_JS="$TMP/ref/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
[ -f "$REF_JS" ] || { echo "bench.sh: $REF_JS missing after npm install" >&2; exit 2; }

RG=$(command -v rg || true)
if [ -z "$RG" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get install -y ripgrep >&2 || { apt-get update >&2 && apt-get install -y ripgrep >&2; }
    RG=$(command -v rg)
  else
    cargo install --quiet ripgrep --root "$TMP/rg"
    RG="$TMP/rg/bin/rg"
  fi
fi

# fd as rg: the Debian package (its binary is `fdfind`) or the crate.
FD=$(command -v fd || command -v fdfind || true)
if [ -z "$FD" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get install -y fd-find >&2 || { apt-get update >&2 && apt-get install -y fd-find >&2; }
    FD=$(command -v fdfind)
  else
    cargo install --quiet fd-find --root "$TMP/fd"
    FD="$TMP/fd/bin/fd"
  fi
fi
MONO=()
[ -n "${FSGATE_MONOREPO:-}" ] && MONO=(--monorepo "$FSGATE_MONOREPO")

"$DRIVER" suite "${MODE[@]}" "${MONO[@]}" \
  --fsgate "$FSGATE" \
  --reference "$REF_JS" \
  --node "$(command -v node)" \
  --rg "$RG" \
  --fd "$FD" \
  --work "$TMP/work" \
  --json "$OUT/latest.json" \
  --markdown "$OUT/latest.md"
if [ "${BENCH_MASK_SHA:-0}" = 1 ]; then
  printf '\nfsgate ran with the CPU'"'"'s SHA extensions hidden (BENCH_MASK_SHA=1, benches/cpu/mask_sha.c).\n' >> "$OUT/latest.md"
fi
