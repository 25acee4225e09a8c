#!/usr/bin/env python3
"""Figures for the MCP server `fsgate acp` hosts for its agent (docs/agents.md).

    python3 benches/hosted_mcp.py [--fsgate BIN] [--agent BIN] [--reads N] [--transports http,stdio,acp] [--no-memory]

Plays the editor of `fsgate acp -- fsgate-test-acp-agent` (built with
`cargo build --features test-bins`), the agent connecting to the hosted server as a
real one does (during session/new). Measures, from the agent's side, N reads of a
4 KiB file through `fs/read_text_file` and N through the hosted server, alternating so
that both meet the same load, over Streamable HTTP (`--mcp http`), over the
`fsgate mcp-connect` bridge (stdio) and over the ACP connection itself (`--mcp acp`, the
draft MCP-over-ACP transport); then the
resident memory of the fsgate process with 0, 1 and 4 sessions open, each connected to
the hosted server. Prints one JSON object. Standard library only.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Editor:
    """fsgate acp on our stdio: requests out, responses filed by id."""

    def __init__(self, fsgate, agent, ws, state):
        cmd = [fsgate, "acp", "--workspace", ws,
               "--audit-log", os.path.join(state, "audit.jsonl"),
               "--backup-dir", os.path.join(state, "backups"), "--"] + agent
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self.next = 0
        self.responses = {}
        self.lines = []
        self.cv = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            msg = json.loads(line)
            with self.cv:
                self.lines.append(msg)
                if "method" not in msg and "id" in msg:
                    self.responses[json.dumps(msg["id"])] = msg
                    self.cv.notify_all()

    def call(self, method, params, timeout=600):
        self.next += 1
        rid = self.next
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                                       "params": params}) + "\n")
        self.p.stdin.flush()
        with self.cv:
            ok = self.cv.wait_for(lambda: json.dumps(rid) in self.responses, timeout)
            if not ok:
                raise RuntimeError(f"no answer to {method}")
            msg = self.responses.pop(json.dumps(rid))
        if "error" in msg:
            raise RuntimeError(f"{method}: {msg['error']}")
        return msg["result"]

    def prompt(self, sid, text):
        start = len(self.lines)
        self.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})
        out = []
        for msg in self.lines[start:]:
            p = msg.get("params", {})
            if msg.get("method") == "session/update" and p.get("sessionId") == sid:
                out.append(json.loads(p["update"]["content"]["text"]))
        return out

    def rss_kib(self):
        with open(f"/proc/{self.p.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return None

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


def session(ed, ws):
    return ed.call("session/new", {"cwd": ws, "mcpServers": []})["sessionId"]


def reads(fsgate, agent, mcp, n):
    with tempfile.TemporaryDirectory() as ws, tempfile.TemporaryDirectory() as state:
        ws = os.path.realpath(ws)
        path = os.path.join(ws, "four.txt")
        with open(path, "w") as f:
            f.write(("0123456789abcdef" * 4 + "\n") * 62)
        args = [agent] + (["--mcp", mcp] if mcp in ("http", "acp") else [])
        ed = Editor(fsgate, args, ws, state)
        ed.call("initialize", {"protocolVersion": 1, "clientCapabilities":
                               {"fs": {"readTextFile": True, "writeTextFile": True}}})
        sid = session(ed, ws)
        # Warm both paths, then time them, alternating.
        ed.prompt(sid, f"bench {path} 20")
        out = ed.prompt(sid, f"bench {path} {n}")[0]
        ed.close()
        if "ok" not in out:
            raise RuntimeError(f"bench failed: {out}")
        r = out["ok"]
        return {"fs/read_text_file": r["fs"], f"hosted MCP over {mcp}": r["mcp"],
                "added (per pair)": r["added"]}


def memory(fsgate, agent):
    with tempfile.TemporaryDirectory() as ws, tempfile.TemporaryDirectory() as state:
        ws = os.path.realpath(ws)
        path = os.path.join(ws, "four.txt")
        with open(path, "w") as f:
            f.write("x" * 4096)
        ed = Editor(fsgate, [agent, "--mcp", "http"], ws, state)
        ed.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        time.sleep(0.5)
        out = {"sessions_0_kib": ed.rss_kib()}
        sids = []
        for count in (1, 4):
            while len(sids) < count:
                sid = session(ed, ws)
                ed.prompt(sid, f"bench {path} 50")
                sids.append(sid)
            time.sleep(0.5)
            out[f"sessions_{count}_kib"] = ed.rss_kib()
        ed.close()
        return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsgate", default=os.path.join(ROOT, "target/debug/fsgate"))
    ap.add_argument("--agent", default=os.path.join(ROOT, "target/debug/fsgate-test-acp-agent"))
    ap.add_argument("--reads", type=int, default=300)
    ap.add_argument("--transports", default="http,stdio,acp")
    ap.add_argument("--no-memory", action="store_true")
    a = ap.parse_args()
    for b in (a.fsgate, a.agent):
        if not os.path.exists(b):
            sys.exit(f"{b} is missing: cargo build --features test-bins")
    result = {"reads": a.reads, "binary": a.fsgate}
    for t in a.transports.split(","):
        result[t] = reads(a.fsgate, a.agent, t, a.reads)
    if not a.no_memory:
        result["memory"] = memory(a.fsgate, a.agent)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
