#!/usr/bin/env python3
"""Peak memory of the gateway when a client stops reading (issue 10, point 3).

For each door (stdio ACP, stdio MCP, one WebSocket connection) and each scenario, starts
`fsgate serve` with its built-in default policy on a scratch workspace and reports the
server's peak RSS (VmHWM):

  a  the client pipelines 2,000 reads of a 1 MiB file, reads nothing for 3 s, then drains
     (every answer must arrive);
  b  the client sends 500 reads of a 10 MiB file of control characters (about six times
     larger once JSON-escaped) and never reads;
  c  (ACP) grep with maxResults 100000 over 40 files of 4 KiB lines, once, then 16 at once.

Usage: benches/memory.py [FSGATE_BINARY]  (default target/release/fsgate). The WebSocket
part needs the `websockets` package (./scripts/install-peers.sh puts it in
.peers/tools); run this script with that venv's python to include it.
"""
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

BIN = sys.argv[1] if len(sys.argv) > 1 else "target/release/fsgate"


def hwm(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM"):
                return int(line.split()[1]) // 1024
    return -1


def spawn(ws, extra, stderr=subprocess.DEVNULL):
    st = tempfile.mkdtemp(prefix="fsgate-mem-state-")
    return subprocess.Popen(
        [BIN, "serve", "--workspace", ws, "--audit-log", st + "/audit.jsonl",
         "--backup-dir", st + "/backups"] + extra,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)


def workspace(size, fill):
    ws = tempfile.mkdtemp(prefix="fsgate-mem-ws-")
    with open(os.path.join(ws, "f.txt"), "wb") as f:
        f.write(fill * size)
    return ws


def stdio(door, name, size, fill, n, drain):
    ws = workspace(size, fill)
    p = spawn(ws, ["--transport", door])
    send = lambda m: p.stdin.write((json.dumps(m) + "\n").encode())
    if door == "mcp":
        send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "memory", "version": "1"}}})
        p.stdin.flush()
        p.stdout.readline()
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def request(i):
        if door == "mcp":
            return {"jsonrpc": "2.0", "id": i, "method": "tools/call",
                    "params": {"name": "read_text_file", "arguments": {"path": "f.txt"}}}
        return {"jsonrpc": "2.0", "id": i, "method": "fs/read_text_file",
                "params": {"sessionId": "s", "path": os.path.join(ws, "f.txt")}}

    def writer():
        try:
            for i in range(n):
                send(request(i))
            p.stdin.flush()
        except BrokenPipeError:
            pass

    threading.Thread(target=writer, daemon=True).start()
    time.sleep(3)
    stalled = hwm(p.pid)
    got = 0
    while drain and got < n and p.stdout.readline():
        got += 1
    peak = hwm(p.pid)
    p.kill()
    p.wait()
    report(door, name, stalled, peak, got, n if drain else 0)


def report(door, name, stalled, peak, got, want):
    answered = "all %d answered" % got if want and got == want else (
        "ANSWERED %d OF %d" % (got, want) if want else "never read")
    print("%-4s %s: peak RSS %d MiB while stalled, %d MiB overall; %s" % (
        door, name, stalled, peak, answered))


async def ws_scenario(name, size, fill, n, drain):
    import websockets
    ws = workspace(size, fill)
    p = spawn(ws, ["--transport", "ws", "--listen", "0"], stderr=subprocess.PIPE)
    token = url = None
    while not (token and url):
        line = p.stderr.readline().decode()
        token = token or (re.search(r"ws token: (\w+)", line) or [None, None])[1]
        url = url or (re.search(r"(ws://\S+)", line) or [None, None])[1]
    async with websockets.connect(url + "?token=" + token, max_size=None, max_queue=1) as c:
        c.transport.pause_reading()
        for i in range(n):
            await c.send(json.dumps({"channel": "files", "type": "read",
                                     "requestId": i, "path": "/f.txt"}))
        await asyncio.sleep(3)
        stalled = hwm(p.pid)
        got = 0
        if drain:
            c.transport.resume_reading()
            while got < n:
                m = json.loads(await asyncio.wait_for(c.recv(), 60))
                got += m.get("type") == "read"
        peak = hwm(p.pid)
    p.kill()
    p.wait()
    report("ws", name, stalled, peak, got, n if drain else 0)


def grep():
    ws = tempfile.mkdtemp(prefix="fsgate-mem-ws-")
    line = "needle " + "y" * 4090 + "\n"
    for i in range(40):
        with open(os.path.join(ws, "f%02d.txt" % i), "w") as f:
            f.write(line * 2500)
    p = spawn(ws, [])
    for conc in (1, 16):
        for i in range(conc):
            p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": "_fsgate/grep",
                                       "params": {"sessionId": "s", "pattern": "needle",
                                                  "maxResults": 100000}}) + "\n").encode())
        p.stdin.flush()
        sizes = [len(p.stdout.readline()) for _ in range(conc)]
        print("acp  c: grep x%d at once: answers of %d MiB (truncated at the limit), peak RSS %d MiB"
              % (conc, max(sizes) >> 20, hwm(p.pid)))
    p.kill()
    p.wait()


A = ("a: 2,000 x 1 MiB, stall 3 s, drain", 1 << 20, b"x", 2000, True)
B = ("b: 500 x 10 MiB of control characters, never read", 10 << 20, b"\x01", 500, False)
for door in ("acp", "mcp"):
    for s in (A, B):
        stdio(door, *s)
try:
    import websockets  # noqa: F401
    for s in (A, B):
        asyncio.run(ws_scenario(*s))
except ImportError:
    print("ws   skipped: no `websockets` package (use .peers/tools/bin/python)")
grep()
