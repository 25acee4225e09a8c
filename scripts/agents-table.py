#!/usr/bin/env python3
"""Measures how many of nine file steps of a real coding agent reach fsgate (docs/agents.md).

Each agent (installed by scripts/install-peers.sh) runs behind `fsgate acp`, its model
replaced by tests/agents/model_stub.py on loopback. The scripted model asks, one prompt
each, to read a file, write a new one, edit one, overwrite one, list, grep, read `.env`,
`.env.local` and a file outside the workspace; it asks for fsgate's MCP tool first and the
agent's own tool when fsgate's is not offered. Per configuration it prints: steps decided
by fsgate (an audit record of the step's operation and path), files changed on disk with
no record, secrets the model was sent, and the agent's built-in file tools it was offered.

Usage: scripts/agents-table.py [--fsgate target/debug/fsgate] [--agents claude,gemini]
       [--configs default,default-confined,no-profile,no-profile-confined]
  default*     the default policy (run it with an older fsgate for the "before" figures)
  no-profile*  the default policy with [agent] profile = "none"
  *-confined   with --confine-agent
The editor lists no MCP server of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SECRETS = ["fsgate-dotenv-secret-4417", "fsgate-dotenv-local-secret-9921", "fsgate-outside-secret-3308"]
BUILTINS = {
    "claude": ["Read", "Write", "Edit", "MultiEdit", "NotebookEdit", "Glob", "Grep", "LS"],
    "gemini": ["read_file", "read_many_files", "write_file", "replace", "glob", "grep_search",
               "list_directory"],
}


def agent_command(agent: str, stub_url: str) -> tuple[list[str], dict[str, str]]:
    peers = REPO / ".peers"
    if agent == "claude":
        cmd = [str(peers / "claude-agent-acp/node_modules/.bin/claude-agent-acp")]
        env = {"ANTHROPIC_BASE_URL": stub_url, "ANTHROPIC_API_KEY": "sk-stub", "IS_SANDBOX": "1",
               "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
               "DISABLE_AUTOUPDATER": "1"}
    else:
        cmd = [str(peers / "gemini-cli/node_modules/.bin/gemini"), "--acp"]
        env = {"GOOGLE_GEMINI_BASE_URL": stub_url, "GEMINI_API_KEY": "stub",
               "GEMINI_CLI_TRUST_WORKSPACE": "true"}
    return cmd, env


def steps(ws: Path, out: Path) -> list[tuple[str, str, list[dict]]]:
    """(label, workspace-relative path of its record, wanted calls best first)."""
    a, b, new, env, local = (str(ws / n) for n in ["a.txt", "b.txt", "new.txt", ".env", ".env.local"])
    outside = str(out / "secret.txt")

    def read(p: str) -> list[dict]:
        return [{"mcp": "read_text_file", "args": {"path": p}},
                {"tool": "Read", "args": {"file_path": p}},
                {"tool": "read_file", "args": {"file_path": p, "absolute_path": p}}]

    def write(p: str, text: str) -> list[dict]:
        return [{"mcp": "write_text_file", "args": {"path": p, "content": text}},
                {"tool": "Write", "args": {"file_path": p, "content": text}},
                {"tool": "write_file", "args": {"file_path": p, "content": text}}]

    return [
        ("read", "a.txt", read(a)),
        ("write new", "new.txt", write(new, "fresh\n")),
        ("edit", "b.txt", [{"mcp": "edit_file", "args": {"path": b, "edits": [{"oldText": "one", "newText": "uno"}]}},
                           {"tool": "Edit", "args": {"file_path": b, "old_string": "one", "new_string": "uno"}},
                           {"tool": "replace", "args": {"file_path": b, "old_string": "one", "new_string": "uno",
                                                        "instruction": "edit"}}]),
        ("overwrite", "a.txt", write(a, "rewritten\n")),
        ("list", "", [{"mcp": "ls", "args": {"path": str(ws)}}, {"tool": "LS", "args": {"path": str(ws)}},
                      {"tool": "Glob", "args": {"pattern": "*", "path": str(ws)}},
                      {"tool": "list_directory", "args": {"dir_path": str(ws), "path": str(ws)}}]),
        ("grep", "", [{"mcp": "grep", "args": {"pattern": "two"}},
                      {"tool": "Grep", "args": {"pattern": "two", "path": str(ws)}},
                      {"tool": "grep_search", "args": {"pattern": "two", "dir_path": str(ws)}}]),
        ("read .env", ".env", read(env)),
        ("read .env.local", ".env.local", read(local)),
        ("read outside", None, read(outside)),
    ]


OPS = {"read": "read_text_file", "write new": "write_text_file", "edit": ("edit_text_file", "write_text_file"),
       "overwrite": "write_text_file", "list": ("ls", "glob"), "grep": "grep",
       "read .env": "read_text_file", "read .env.local": "read_text_file", "read outside": "read_text_file"}


class Editor:
    def __init__(self, cmd: list[str], env: dict[str, str], cwd: Path):
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, env=env, cwd=cwd, text=True)
        self.resp: dict[int, dict] = {}
        self.cv = threading.Condition()
        self.next = 0
        threading.Thread(target=self.read, daemon=True).start()

    def read(self) -> None:
        for line in self.p.stdout:
            try:
                m = json.loads(line)
            except ValueError:
                continue
            if "method" in m and "id" in m:  # the agent asks the editor
                if m["method"] == "session/request_permission":
                    opt = m["params"]["options"][0]["optionId"]
                    r = {"result": {"outcome": {"outcome": "selected", "optionId": opt}}}
                else:
                    r = {"error": {"code": -32601, "message": "not served"}}
                self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], **r}) + "\n")
                self.p.stdin.flush()
            elif "id" in m:
                with self.cv:
                    self.resp[m["id"]] = m
                    self.cv.notify_all()

    def call(self, method: str, params: dict, timeout: float = 120) -> dict | None:
        i = self.next
        self.next += 1
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n")
        self.p.stdin.flush()
        with self.cv:
            self.cv.wait_for(lambda: i in self.resp, timeout)
        return self.resp.get(i)

    def close(self) -> None:
        try:
            self.p.stdin.close()
            self.p.wait(10)
        except Exception:
            self.p.kill()


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def decided_records(state: Path) -> list[dict]:
    """The records of decided file operations (in the proxy's log, and in an editor MCP
    server's if there is one), in order."""
    records = []
    for name in ("audit.jsonl", "mcp-audit.jsonl"):
        f = state / name
        if f.exists():
            records += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return [r for r in records if r.get("kind") == "request" and r.get("decision") in ("allow", "deny")]


def measure(fsgate: str, agent: str, config: str) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="fsgate-table-"))
    ws, out, state, home = (tmp / n for n in ["ws", "out", "state", "home"])
    for d in (ws, out, state, home):
        d.mkdir()
    (ws / "a.txt").write_text("alpha\nbeta\n")
    (ws / "b.txt").write_text("one\ntwo\n")
    (ws / ".env").write_text(f"TOKEN={SECRETS[0]}\n")
    (ws / ".env.local").write_text(f"TOKEN={SECRETS[1]}\n")
    (out / "secret.txt").write_text(SECRETS[2])
    before = snapshot(ws)
    log = state / "model.jsonl"
    stub = subprocess.Popen([sys.executable, str(REPO / "tests/agents/model_stub.py"), "--log", str(log)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    port = int(stub.stdout.readline().split()[1])
    cmd, agent_env = agent_command(agent, f"http://127.0.0.1:{port}")
    env = dict(os.environ, HOME=str(home), **agent_env)
    env["PATH"] = f"{REPO}/.peers/node22/node_modules/.bin:" + env["PATH"]
    policy = (REPO / "policies/default.toml").read_text()
    if config.startswith("no-profile"):
        policy = policy.replace("\n[agent]\n", '\n[agent]\nprofile = "none"\n', 1)
    (state / "policy.toml").write_text(policy)
    full = [fsgate, "acp", "--workspace", str(ws), "--policy", str(state / "policy.toml"),
            "--audit-log", str(state / "audit.jsonl"), "--backup-dir", str(state / "backups")]
    if config.endswith("confined"):
        full.append("--confine-agent")
    ed = Editor(full + ["--"] + cmd, env, home)
    servers: list[dict] = []
    ed.call("initialize", {"protocolVersion": 1, "clientInfo": {"name": "table", "version": "0"},
                           "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}}})
    r = ed.call("session/new", {"cwd": str(ws), "mcpServers": servers})
    sid = (r or {}).get("result", {}).get("sessionId")
    the_steps = steps(ws, out)
    reached = []
    # Each step owns the records written while its prompt ran.
    seen_records = 0
    for label, path, want in the_steps if sid else []:
        ed.call("session/prompt", {"sessionId": sid, "prompt": [
            {"type": "text", "text": "FSGATE-STEP " + json.dumps({"want": want})}]}, timeout=90)
        time.sleep(0.2)
        window = decided_records(state)[seen_records:]
        seen_records += len(window)
        ops = OPS[label] if isinstance(OPS[label], tuple) else (OPS[label],)
        if any(r.get("op") in ops and (path is None and r.get("path") is None and r["decision"] == "deny"
                                       or path == "" or r.get("path") == path) for r in window):
            reached.append(label)
    ed.close()
    stub.stdin.close()
    stub.wait(5)
    decided = decided_records(state)
    after = snapshot(ws)
    changed = sorted({k for k in after if before.get(k) != after[k]} | {k for k in before if k not in after})
    written = {r.get("path") for r in decided if r.get("outcome") == "ok" and r["decision"] == "allow"
               and r.get("op") in ("write_text_file", "edit_text_file")}
    bodies = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    seen = sorted({s for s in SECRETS for b in bodies if s in b.get("body", "")})
    offered = sorted({t for b in bodies if b.get("kind") == "main" for t in b.get("tools", [])
                      if t in BUILTINS[agent]})
    return {"agent": agent, "config": config, "session": bool(sid), "reached": reached,
            "unrecorded": [c for c in changed if c not in written], "changed": changed,
            "secretsSeen": len(seen), "builtinsOffered": offered}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsgate", default=str(REPO / "target/debug/fsgate"))
    ap.add_argument("--agents", default="claude,gemini")
    ap.add_argument("--configs", default="default,default-confined,no-profile,no-profile-confined")
    args = ap.parse_args()
    for agent in args.agents.split(","):
        for config in args.configs.split(","):
            r = measure(args.fsgate, agent, config)
            print(json.dumps(r), flush=True)
            print(f"| {agent} | {config} | {len(r['reached'])} of 9 | {', '.join(r['unrecorded']) or '-'} | "
                  f"{r['secretsSeen']} | {', '.join(r['builtinsOffered']) or '-'} |", flush=True)


if __name__ == "__main__":
    main()
