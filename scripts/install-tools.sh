#!/usr/bin/env bash
# System tools the tests use: strace (kills the gateway at an exact syscall, to test
# crash recovery), chattr from e2fsprogs (makes the audit log immutable), a C++ compiler
# (libFuzzer, for checking the fuzz targets compile); ripgrep and
# fd, which the benchmark compares searches and globs with (scripts/bench.sh installs
# them itself when missing). Installed with apt-get when missing; a machine without
# them fails those tests rather than skipping them.
set -euo pipefail
missing=()
command -v strace >/dev/null 2>&1 || missing+=(strace)
command -v chattr >/dev/null 2>&1 || missing+=(e2fsprogs)
# A C++ compiler: the fuzz targets' libFuzzer is built from source, even to check them.
command -v c++ >/dev/null 2>&1 || missing+=(g++)
command -v rg >/dev/null 2>&1 || missing+=(ripgrep)
# Debian's fd-find installs the binary as `fdfind`.
command -v fd >/dev/null 2>&1 || command -v fdfind >/dev/null 2>&1 || missing+=(fd-find)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq "${missing[@]}"
  else
    echo "install-tools: please install: ${missing[*]}" >&2
  fi
fi
# The independent audit verifier (audit/verify.py) checks signatures with `cryptography`.
if ! python3 -c "import cryptography" >/dev/null 2>&1; then
  python3 -m pip install -q --disable-pip-version-check cryptography
fi
