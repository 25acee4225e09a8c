#!/usr/bin/env bash
# Builds fsgate, makes a small demo workspace, and serves it over ACP (JSON-RPC on
# stdio) with the built-in default policy: a few requests and the gateway's answers.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q --bin fsgate
BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/fsgate"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
WS="$TMP/workspace"; STATE="$TMP/state"
mkdir -p "$WS/src" "$STATE"
WS=$(cd "$WS" && pwd -P)
printf 'fn main() {\n    println!("hello from the workspace");\n}\n' > "$WS/src/main.rs"
printf 'API_KEY=do-not-leak\n' > "$WS/.env"

req() { printf '{"jsonrpc":"2.0","id":%s,"method":"%s","params":%s}\n' "$1" "$2" "$3"; }
{
  req 1 initialize '{"protocolVersion":1}'
  req 2 fs/read_text_file "{\"sessionId\":\"demo\",\"path\":\"$WS/src/main.rs\",\"line\":2,\"limit\":1}"
  req 3 fs/write_text_file "{\"sessionId\":\"demo\",\"path\":\"$WS/notes/todo.md\",\"content\":\"- try fsgate\\n\"}"
  req 4 fs/read_text_file "{\"sessionId\":\"demo\",\"path\":\"$WS/.env\"}"
  req 5 fs/read_text_file "{\"sessionId\":\"demo\",\"path\":\"$WS/../../etc/passwd\"}"
  req 6 _fsgate/ls "{\"sessionId\":\"demo\",\"path\":\"$WS\"}"
} > "$TMP/requests.jsonl"

echo "# fsgate serve --workspace $WS   (built-in default policy)"
"$BIN" serve --workspace "$WS" --audit-log "$STATE/audit.jsonl" --backup-dir "$STATE/backups" \
  < "$TMP/requests.jsonl" > "$TMP/responses.jsonl"
python3 - "$TMP/requests.jsonl" "$TMP/responses.jsonl" <<'PY'
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1])]
resps = {json.dumps(r.get("id")): r for r in map(json.loads, open(sys.argv[2]))}
for q in reqs:
    print("\n->", json.dumps(q))
    r = resps.get(json.dumps(q["id"]))
    print("<-", json.dumps(r.get("result") if "result" in r else {"error": r["error"]}, indent=None))
PY
echo
echo "# Files the agent changed: $(cd "$WS" && find notes -type f)"
