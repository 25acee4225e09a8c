"""A raw-JSON fake ACP agent (no SDK): sends exactly the lines a test scripts.

Only for the cases the real SDK agents (agent.py, agent.mjs) cannot produce: chosen
ids (`0` and `"0"` at once), malformed or disguised `fs/*` messages. Standard library
only.

It answers `initialize` (with the clientCapabilities it received in `_meta`) and
`session/new` (sessionId "raw-session"). Each line of a `session/prompt` text is:
  a JSON value          written to stdout verbatim, as one line
  !wait IDS MS          wait up to MS ms for responses to the ids IDS (a JSON array)
  !exit CODE            exit at once with CODE
Then it reports every response it received, as one agent_message_chunk whose text is
`{"responses": {JSON-id-text: message}}`, and ends the turn.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

lock = threading.Condition()
responses: dict[str, dict] = {}
out_lock = threading.Lock()


def send(obj_or_line) -> None:
    line = obj_or_line if isinstance(obj_or_line, str) else json.dumps(obj_or_line)
    with out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def wait_for(ids: list, ms: int) -> None:
    keys = [json.dumps(i) for i in ids]
    deadline = time.monotonic() + ms / 1000
    with lock:
        while not all(k in responses for k in keys):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            lock.wait(left)


def run_prompt(req_id, params: dict) -> None:
    text = "\n".join(b.get("text", "") for b in params.get("prompt", []))
    for line in (ln.strip() for ln in text.splitlines()):
        if not line:
            continue
        if line.startswith("!wait "):
            ids, ms = line[len("!wait "):].rsplit(" ", 1)
            wait_for(json.loads(ids), int(ms))
        elif line.startswith("!exit "):
            os._exit(int(line.split()[1]))
        else:
            send(line)
    with lock:
        report = {"responses": dict(responses)}
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": json.dumps(report)}}
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": params.get("sessionId"), "update": chunk}})
    send({"jsonrpc": "2.0", "id": req_id, "result": {"stopReason": "end_turn"}})


def main() -> None:
    for raw in sys.stdin:
        try:
            msg = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(msg, dict):
            continue
        method = msg.get("method")
        if method is None and "id" in msg:
            with lock:
                responses[json.dumps(msg["id"])] = msg
                lock.notify_all()
        elif method == "initialize":
            caps = (msg.get("params") or {}).get("clientCapabilities")
            send({"jsonrpc": "2.0", "id": msg["id"], "result": {"protocolVersion": 1, "agentCapabilities": {}, "_meta": {"clientCapabilities": caps}}})
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": msg["id"], "result": {"sessionId": "raw-session"}})
        elif method == "session/load":
            send({"jsonrpc": "2.0", "id": msg["id"], "result": {}})
        elif method == "session/prompt":
            threading.Thread(target=run_prompt, args=(msg["id"], msg.get("params") or {}), daemon=True).start()
        elif "id" in msg:
            send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": f"method not found: {method}"}})


if __name__ == "__main__":
    main()
