#!/usr/bin/env bash
# Installs the real protocol peers the interop tests drive, into .peers/ (gitignored):
# the Python ACP SDK, the MCP Python SDK 2.x and 1.x (separate venvs), Python tools
# (`websockets` for benches/memory.py; the WebSocket tests need no peer: their client
# is Rust), and the TypeScript ACP SDK. Idempotent: a peer already installed at the
# pinned version is kept. Versions are pinned as checked in ../shared/PEERS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
PEERS="$PWD/.peers"
mkdir -p "$PEERS"
PY=${PYTHON:-python3}

venv() { # venv NAME PACKAGES...
  local name=$1; shift
  local dir="$PEERS/$name" stamp="$PEERS/$name/.installed"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$*" ]; then return 0; fi
  rm -rf "$dir"
  "${VENV_PY:-$PY}" -m venv "$dir"
  "$dir/bin/pip" install -q --disable-pip-version-check "$@"
  echo "$*" > "$stamp"
}

venv acp 'agent-client-protocol==0.12.1'
venv mcp2 'mcp==2.3.0' 'websockets>=12'
venv mcp1 'mcp==1.30.0'
venv tools 'websockets>=12' 'cryptography>=41'

if command -v npm >/dev/null 2>&1; then
  node_dir="$PEERS/node"
  if [ ! -f "$node_dir/node_modules/@agentclientprotocol/sdk/package.json" ]; then
    mkdir -p "$node_dir"
    (cd "$node_dir" && [ -f package.json ] || echo '{"name":"fsgate-peers","private":true}' > package.json)
    (cd "$node_dir" && npm install --no-audit --no-fund -q '@agentclientprotocol/sdk@2.4.0')
  fi
fi
# fast-agent (optional third ACP peer) needs Python 3.12: on 3.11 pip silently picks a
# release without ACP. Skipped, not failed, when no Python 3.12 is found.
find_python312() {
  if [ -n "${PYTHON312:-}" ]; then echo "$PYTHON312"; return 0; fi
  if python3.12 --version >/dev/null 2>&1; then command -v python3.12; return 0; fi
  if command -v pyenv >/dev/null 2>&1; then
    for p in "$(pyenv root)"/versions/3.12*/bin/python3.12; do
      if [ -x "$p" ]; then echo "$p"; return 0; fi
    done
  fi
  return 1
}
if py312=$(find_python312); then
  VENV_PY="$py312" venv fast-agent 'fast-agent-mcp==0.10.46'
else
  echo "python3.12 not found: skipping fast-agent (its interop tests will print SKIPPED)" >&2
fi

echo "peers installed in $PEERS"
