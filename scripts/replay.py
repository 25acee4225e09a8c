#!/usr/bin/env python3
"""Replays one session against two fsgate builds and compares them.

    scripts/replay.py --before BIN_A --after BIN_B [--only DOOR,...] [--keep DIR] [--dump DIR]

For each binary, in a fresh workspace seeded the same way (text files, nested
directories, a `.env` secret, a PNG, a binary file, files over the read and message
limits) at the same path, the script drives the real binary through each door with the
same requests, one at a time (each answer awaited before the next request is sent):

- `mcp`: `serve --transport mcp` on stdio (the reference server's tools and fsgate's);
- `acp`: `serve` on stdio (`fs/*` and `_fsgate/*`);
- `ws`: `serve --transport ws`, the files channel (a WebSocket client written here);
- `http`: `serve --transport http`, MCP over Streamable HTTP (the `mcp` calls again);
- `hosted`: the MCP server `fsgate acp` hosts for an agent (this script, `--fake-agent`),
  over HTTP (the `mcp` calls again), and what the editor is told;
- each again as `DOOR+policy`: the built-in policy with `binary = "base64"` and a 1 MiB
  message limit, with binary and oversize reads.

It then compares, door by door, every answer and every audit record of the two runs
after normalising only what must differ from run to run: times (`ts`, `duration_us`,
ISO, backup-name and `get_file_info` times), the hash chain (`log`, `prev`, `hash`),
session ids (numbered in order of appearance), process ids, ports, the agent's cgroup,
a write's random temporary name, and the timing of directory syncs
(`details.entriesDurable`, `details.entryPending`). Exit status 1 if anything differs.
Standard library only.
"""


import argparse
import base64
import hashlib
import json
import os
import queue
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

TIMEOUT = 30.0
FIXED_TIME = 1_700_000_000  # mtime of every seeded file and directory

# ---------------------------------------------------------------- the workspace


def seed(ws):
    """The same files at the same path, with the same times, for every run."""
    files = {
        "README.md": "# Project\n\nA small workspace.\n",
        "notes.txt": "".join(f"line {i}\n" for i in range(1, 21)),
        "crlf.txt": "one\r\ntwo\r\nthree\r\n",
        ".env": "API_KEY=sk-live-0123456789abcdef\n",
        "src/main.py": "import util\n\nprint(util.greet('world'))\n",
        "src/util.py": "def greet(name):\n    return 'hello ' + name\n",
        "src/lib/deep/inner.py": "VALUE = 42  # TODO: tune\n",
        "src/lib/readme.txt": "nested readme\n",
        "docs/guide.md": "Guide\n=====\n\nTODO: write more.\n",
        "edit_me.txt": "alpha\nbeta\ngamma\ndelta\n",
        "edit_acp.txt": "alpha\nbeta\ngamma\n",
        "move_me.txt": "moving\n",
        "rm_me.txt": "remove me\n",
        "taken.txt": "already here\n",
    }
    for rel, text in files.items():
        p = os.path.join(ws, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w", newline="") as f:
            f.write(text)
    png = (b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR"
           + struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0) + b"\x90wS\xde"
           + bytes(range(256)) * 4)
    with open(os.path.join(ws, "image.png"), "wb") as f:
        f.write(png)
    with open(os.path.join(ws, "data.bin"), "wb") as f:
        f.write(b"\x00\x01\x02binary\x00" * 512)
    with open(os.path.join(ws, "big.log"), "w") as f:
        line = "x" * 99 + "\n"
        f.write(line * (11 * 1024 * 1024 // 100 + 1))  # over the 10 MiB read limit
    with open(os.path.join(ws, "ctrl.txt"), "w") as f:
        # 2.5 MiB that JSON escapes six-fold (\u0001): one copy fits the 24 MiB message
        # limit, the two copies of an MCP answer do not
        f.write("\x01" * (5 * 512 * 1024))
    with open(os.path.join(ws, "mid.txt"), "w") as f:
        f.write(("m" * 99 + "\n") * 6000)  # the policy pass: 600,000 bytes, one copy fits
    # its 1 MiB message limit, two do not
    with open(os.path.join(ws, "over.txt"), "w") as f:
        f.write(("o" * 99 + "\n") * 12000)  # over that limit in one copy
    with open(os.path.join(ws, "quarter.txt"), "w") as f:
        f.write(("q" * 99 + "\n") * 4000)  # two copies fit that limit
    os.makedirs(os.path.join(ws, "empty_dir"))
    for dirpath, dirnames, filenames in os.walk(ws, topdown=False):
        for name in filenames + dirnames:
            os.utime(os.path.join(dirpath, name), (FIXED_TIME, FIXED_TIME))
    os.utime(ws, (FIXED_TIME, FIXED_TIME))


# ---------------------------------------------------------------- the requests


def mcp_calls(ws):
    """(tool, arguments) in order; the same over stdio and HTTP."""
    a = lambda rel: os.path.join(ws, rel)  # noqa: E731
    return [
        ("read_text_file", {"path": a("notes.txt"), "head": 3}),
        ("read_text_file", {"path": a("notes.txt"), "tail": 2}),
        ("read_text_file", {"path": a("crlf.txt"), "tail": 1}),
        ("read_text_file", {"path": "notes.txt", "line": 5, "limit": 2}),
        ("read_file", {"path": a("README.md")}),
        ("read_multiple_files", {"paths": [a("README.md"), a(".env"), a("src/util.py")]}),
        ("read_media_file", {"path": a("image.png")}),
        ("read_media_file", {"path": a("data.bin")}),
        ("list_directory", {"path": ws}),
        ("list_directory_with_sizes", {"path": ws, "sortBy": "size"}),
        ("directory_tree", {"path": a("src")}),
        ("directory_tree", {"path": ws, "excludePatterns": ["big.log", "src/lib"]}),
        ("search_files", {"path": ws, "pattern": "**/*.py"}),
        ("search_files", {"path": ws, "pattern": "*.txt", "excludePatterns": ["rm_*"]}),
        ("get_file_info", {"path": a("notes.txt")}),
        ("get_file_info", {"path": a("src")}),
        ("list_allowed_directories", {}),
        ("write_file", {"path": a("new/dir/created.txt"), "content": "fresh\n"}),
        ("write_file", {"path": a("README.md"), "content": "# Project\n\nRewritten.\n"}),
        ("edit_file", {"path": a("edit_me.txt"), "dryRun": True,
                       "edits": [{"oldText": "beta", "newText": "BETA"}]}),
        ("edit_file", {"path": a("edit_me.txt"),
                       "edits": [{"oldText": "beta", "newText": "BETA"},
                                 {"oldText": "delta", "newText": "DELTA"}]}),
        ("edit_file", {"path": a("edit_me.txt"), "edits": [{"oldText": "nope", "newText": "x"}]}),
        ("edit_file", {"path": a("crlf.txt"), "oldText": "two", "newText": "TWO"}),
        ("create_directory", {"path": a("made/a/b")}),
        ("move_file", {"source": a("move_me.txt"), "destination": a("made/moved.txt")}),
        ("move_file", {"source": a("made/moved.txt"), "destination": a("taken.txt")}),
        # refusals: a secret, outside the workspace, binary and oversize reads
        ("read_text_file", {"path": a(".env")}),
        ("read_file", {"path": a(".env")}),
        ("get_file_info", {"path": a(".env")}),
        ("read_text_file", {"path": "../../etc/passwd"}),
        ("write_file", {"path": a(".env"), "content": "X=1\n"}),
        ("read_text_file", {"path": a("data.bin")}),
        ("read_text_file", {"path": a("big.log")}),
        ("read_text_file", {"path": a("big.log"), "head": 2}),
        ("read_text_file", {"path": a("big.log"), "line": 3, "limit": 1}),
        ("read_media_file", {"path": a("big.log")}),
        ("read_text_file", {"path": a("image.png")}),
        ("read_text_file", {"path": a("ctrl.txt")}),
        ("read_text_file", {"path": a("missing.txt")}),
        # fsgate's own tools
        ("ls", {"path": "src"}),
        ("stat", {"path": "image.png"}),
        ("glob", {"pattern": "**/*.md"}),
        ("grep", {"pattern": "TODO", "path": "/", "ignoreCase": True}),
        ("grep", {"pattern": "API_KEY"}),
        ("write_text_file", {"path": "own/w.txt", "content": "own\n"}),
        ("mkdir", {"path": "own/sub", "recursive": True}),
        ("rename", {"oldPath": "own/w.txt", "newPath": "own/sub/w2.txt"}),
        ("rm", {"path": "rm_me.txt"}),
        ("rm", {"path": "own", "recursive": True}),
        ("rm", {"path": ".env"}),
        ("no_such_tool", {}),
    ]


def acp_calls(ws):
    a = lambda rel: os.path.join(ws, rel)  # noqa: E731
    s = "replay-session"
    return [
        ("fs/read_text_file", {"sessionId": s, "path": a("notes.txt"), "line": 2, "limit": 3}),
        ("fs/read_text_file", {"sessionId": s, "path": a("crlf.txt")}),
        ("_fsgate/read_file", {"sessionId": s, "path": a("image.png")}),
        ("_fsgate/read_file", {"sessionId": s, "path": a("data.bin")}),
        ("_fsgate/ls", {"sessionId": s, "path": ws}),
        ("_fsgate/ls", {"sessionId": s, "path": a("src/lib")}),
        ("_fsgate/stat", {"sessionId": s, "path": a("notes.txt")}),
        ("_fsgate/glob", {"sessionId": s, "pattern": "**/*.py"}),
        ("_fsgate/grep", {"sessionId": s, "pattern": "todo", "ignoreCase": True}),
        ("_fsgate/grep", {"sessionId": s, "pattern": "greet", "path": a("src"),
                          "includeGlob": "*.py", "maxResults": 1}),
        ("fs/write_text_file", {"sessionId": s, "path": a("acp/new.txt"), "content": "acp\n"}),
        ("fs/write_text_file", {"sessionId": s, "path": a("notes.txt"), "content": "short\n"}),
        ("_fsgate/edit_text_file", {"sessionId": s, "path": a("edit_acp.txt"),
                                    "oldText": "beta", "newText": "BETA"}),
        ("_fsgate/edit_text_file", {"sessionId": s, "path": a("edit_acp.txt"),
                                    "oldText": "absent", "newText": "x"}),
        ("_fsgate/mkdir", {"sessionId": s, "path": a("acp/sub/deeper"), "recursive": True}),
        ("_fsgate/mkdir", {"sessionId": s, "path": a("nope/child")}),
        ("_fsgate/rename", {"sessionId": s, "oldPath": a("acp/new.txt"),
                            "newPath": a("acp/sub/renamed.txt")}),
        ("_fsgate/rm", {"sessionId": s, "path": a("rm_me.txt")}),
        ("_fsgate/rm", {"sessionId": s, "path": a("acp")}),
        ("_fsgate/rm", {"sessionId": s, "path": a("acp"), "recursive": True}),
        # refusals
        ("fs/read_text_file", {"sessionId": s, "path": a(".env")}),
        ("_fsgate/read_file", {"sessionId": s, "path": a(".env")}),
        ("fs/write_text_file", {"sessionId": s, "path": a(".env"), "content": "X=1\n"}),
        ("fs/read_text_file", {"sessionId": s, "path": "/etc/passwd"}),
        ("fs/read_text_file", {"sessionId": s, "path": a("data.bin")}),
        ("fs/read_text_file", {"sessionId": s, "path": a("big.log")}),
        ("fs/read_text_file", {"sessionId": s, "path": a("big.log"), "line": 2, "limit": 1}),
        ("_fsgate/read_file", {"sessionId": s, "path": a("big.log")}),
        ("fs/read_text_file", {"sessionId": s, "path": a("image.png")}),
        ("fs/read_text_file", {"sessionId": s, "path": a("missing.txt")}),
        ("fs/read_text_file", {"sessionId": s}),
        ("_fsgate/unknown", {"sessionId": s}),
    ]


POLICY_LIMITS = 'binary = "base64"\nmax_message_bytes = 1048576\n'


def policy_file(run):
    """The built-in policy with every binary file readable and a 1 MiB message limit."""
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "policies", "default.toml")) as f:
        text = f.read()
    if 'binary = "media"\n' not in text:
        raise RuntimeError("policies/default.toml no longer sets binary = \"media\"")
    path = os.path.join(run["dir"], "policy.toml")
    with open(path, "w") as f:
        f.write(text.replace('binary = "media"\n', POLICY_LIMITS))
    return path


def mcp_policy_calls(ws):
    a = lambda rel: os.path.join(ws, rel)  # noqa: E731
    return [
        ("read_text_file", {"path": a("data.bin")}),
        ("read_text_file", {"path": a("image.png")}),
        ("read_media_file", {"path": a("data.bin")}),
        ("read_text_file", {"path": a("mid.txt")}),
        ("read_text_file", {"path": a("mid.txt"), "head": 3}),
        ("read_text_file", {"path": a("over.txt")}),
        ("read_text_file", {"path": a("over.txt"), "line": 2, "limit": 2}),
        ("read_file", {"path": a("over.txt")}),
        ("read_media_file", {"path": a("over.txt")}),
        ("read_multiple_files", {"paths": [a("mid.txt"), a("over.txt")]}),
        ("read_text_file", {"path": a("quarter.txt")}),
    ]


def acp_policy_calls(ws):
    a = lambda rel: os.path.join(ws, rel)  # noqa: E731
    s = "replay-session"
    return [
        ("fs/read_text_file", {"sessionId": s, "path": a("data.bin")}),
        ("fs/read_text_file", {"sessionId": s, "path": a("image.png")}),
        ("_fsgate/read_file", {"sessionId": s, "path": a("data.bin")}),
        ("fs/read_text_file", {"sessionId": s, "path": a("mid.txt")}),
        ("fs/read_text_file", {"sessionId": s, "path": a("over.txt")}),
        ("_fsgate/read_file", {"sessionId": s, "path": a("over.txt")}),
    ]


def ws_policy_calls():
    return [
        {"type": "read", "path": "/data.bin"},
        {"type": "read", "path": "/mid.txt"},
        {"type": "read", "path": "/over.txt"},
        {"type": "read", "path": "/over.txt", "encoding": "base64"},
    ]


def ws_calls():
    return [
        {"type": "list", "path": "/"},
        {"type": "list", "path": "/src"},
        {"type": "read", "path": "/notes.txt"},
        {"type": "read", "path": "/image.png"},
        {"type": "read", "path": "/data.bin"},
        {"type": "read", "path": "/README.md", "encoding": "base64"},
        {"type": "stat", "path": "/src/lib/deep/inner.py"},
        {"type": "stat", "path": "/"},
        {"type": "write", "path": "/wsdir/a.txt", "content": "ws\n"},
        {"type": "write", "path": "/wsdir/b.bin", "content": "AAEC", "encoding": "base64"},
        {"type": "mkdir", "path": "/wsdir/sub"},
        {"type": "mkdir", "path": "/nope/child"},
        {"type": "mkdir", "path": "/wsdir/x/y", "recursive": True},
        {"type": "rename", "oldPath": "/wsdir/a.txt", "newPath": "/wsdir/sub/a2.txt"},
        {"type": "delete", "path": "/wsdir"},
        {"type": "delete", "path": "/wsdir", "recursive": True},
        {"type": "read", "path": "/.env"},
        {"type": "write", "path": "/.env", "content": "X=1\n"},
        {"type": "read", "path": "/../etc/passwd"},
        {"type": "read", "path": "/big.log"},
        {"type": "read", "path": "/missing.txt"},
        {"type": "frobnicate", "path": "/"},
        {"type": "read"},
        "not json",
    ]


# ---------------------------------------------------------------- processes


class Proc:
    """A running `fsgate`, its stdout lines in a queue and its stderr kept."""

    def __init__(self, argv, env):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=env)
        self.lines = queue.Queue()
        self.stderr = []
        self.err_lines = queue.Queue()
        threading.Thread(target=self._out, daemon=True).start()
        threading.Thread(target=self._err, daemon=True).start()

    def _out(self):
        for line in self.p.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _err(self):
        for line in self.p.stderr:
            text = line.decode("utf-8", "replace")
            self.stderr.append(text)
            self.err_lines.put(text)

    def wait_stderr(self, prefix):
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            try:
                line = self.err_lines.get(timeout=0.2)
            except queue.Empty:
                if self.p.poll() is not None:
                    break
                continue
            if line.startswith(prefix):
                return line[len(prefix):].strip()
        raise RuntimeError(f"no {prefix!r} on stderr: {''.join(self.stderr)}")

    def send(self, obj):
        data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        try:
            self.p.stdin.write(data + b"\n")
            self.p.stdin.flush()
        except OSError as e:  # the process is gone: its answers will say so
            self.stderr.append(f"(replay: could not send: {e})\n")

    def until(self, rid):
        """Every line up to and including the answer to `rid` (notifications too); no
        answer within TIMEOUT, or the output's end, is recorded as what came instead."""
        got = []
        deadline = time.monotonic() + TIMEOUT
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return got + [{"no answer": f"none within {TIMEOUT:.0f} s"}]
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                self.lines.put(None)
                return got + [{"no answer": "output closed", "stderr": "".join(self.stderr)}]
            msg = json.loads(line)
            got.append(msg)
            if msg.get("id") == rid and "method" not in msg:
                return got

    def end(self, close_stdin=True):
        if close_stdin:
            self.p.stdin.close()
        else:
            self.p.send_signal(signal.SIGTERM)
        try:
            rc = self.p.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = self.p.wait()
        rest = []
        while True:
            try:
                line = self.lines.get(timeout=2)
            except queue.Empty:
                break
            if line is None:
                break
            rest.append(json.loads(line))
        return rc, rest


def serve(binary, run, transport, extra=()):
    argv = [binary, "serve", "--workspace", run["ws"]]
    if run["policy"]:
        argv += ["--policy", policy_file(run)]
    argv += [
            "--audit-log", os.path.join(run["dir"], f"audit-{transport}", "audit.jsonl"),
            "--backup-dir", os.path.join(run["dir"], f"backups-{transport}")]
    if transport != "acp":
        argv += ["--transport", transport]
    argv += list(extra)
    env = dict(os.environ, XDG_STATE_HOME=os.path.join(run["dir"], "state"),
               RUST_LOG="off", HOME=os.path.join(run["dir"], "home"))
    return Proc(argv, env)


# ---------------------------------------------------------------- the doors


INIT_MCP = {"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "replay", "version": "1"}}


def drive_mcp(binary, run):
    gate = serve(binary, run, "mcp")
    out, rid = [], 0

    def ask(label, method, params):
        nonlocal rid
        rid += 1
        req = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        gate.send(req)
        out.append((label, req, gate.until(rid)))

    ask("initialize", "initialize", INIT_MCP)
    gate.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    ask("tools/list", "tools/list", {})
    for tool, args in (mcp_policy_calls if run["policy"] else mcp_calls)(run["ws"]):
        ask(f"tools/call {tool}", "tools/call", {"name": tool, "arguments": args})
    ask("ping", "ping", {})
    ask("prompts/list", "prompts/list", {})
    rc, rest = gate.end()
    out.append(("(after end of input)", None, rest + [{"exit": rc}]))
    return out


def drive_acp(binary, run):
    gate = serve(binary, run, "acp")
    out, rid = [], 0

    def ask(method, params):
        nonlocal rid
        rid += 1
        req = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        gate.send(req)
        out.append((method, req, gate.until(rid)))

    ask("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    for method, params in (acp_policy_calls if run["policy"] else acp_calls)(run["ws"]):
        ask(method, params)
    rid += 1
    gate.send(b"{not json")
    gate.send({"jsonrpc": "2.0", "id": rid, "method": "_fsgate/stat",
               "params": {"sessionId": "s2", "path": "README.md"}})
    out.append(("(invalid line, then _fsgate/stat)", None, gate.until(rid)))
    rc, rest = gate.end()
    out.append(("(after end of input)", None, rest + [{"exit": rc}]))
    return out


class WebSocket:
    """Just enough of RFC 6455 for the files channel: text frames, masked, one way each."""

    def __init__(self, host, port, path):
        self.sock = socket.create_connection((host, port), timeout=TIMEOUT)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
                           "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
                          .encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            if not chunk:
                raise RuntimeError(f"upgrade refused: {head!r}")
            head += chunk
        if not head.startswith(b"HTTP/1.1 101"):
            raise RuntimeError(f"upgrade refused: {head!r}")
        accept = base64.b64encode(hashlib.sha1(
            (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
        if accept not in head:
            raise RuntimeError("bad Sec-WebSocket-Accept")

    def _exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise RuntimeError("connection closed")
            buf += chunk
        return buf

    def send(self, text, opcode=1):
        data = text.encode()
        head = bytes([0x80 | opcode])
        n = len(data)
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def recv(self):
        message = b""
        while True:
            b0, b1 = self._exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._exact(8))[0]
            mask = self._exact(4) if b1 & 0x80 else None
            payload = self._exact(n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            opcode = b0 & 0x0F
            if opcode == 9:
                self._pong(payload)
                continue
            if opcode == 8:
                return None
            if opcode in (0, 1, 2):
                message += payload
                if b0 & 0x80:
                    return json.loads(message)

    def _pong(self, payload):
        mask = os.urandom(4)
        self.sock.sendall(bytes([0x8A, 0x80 | len(payload)]) + mask
                          + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def close(self):
        try:
            mask = os.urandom(4)
            self.sock.sendall(bytes([0x88, 0x82]) + mask
                              + bytes(b ^ mask[i % 4] for i, b in enumerate(b"\x03\xe8")))
        finally:
            self.sock.close()


def listening(gate, transport, scheme):
    token = gate.wait_stderr(f"fsgate: {transport} token: ")
    url = gate.wait_stderr(f"fsgate: {transport} listening on {scheme}://")
    hostport = url.split("/")[0]
    host, port = hostport.rsplit(":", 1)
    return token, host, int(port)


def drive_ws(binary, run):
    gate = serve(binary, run, "ws", ["--listen", "127.0.0.1:0"])
    token, host, port = listening(gate, "ws", "ws")
    ws = WebSocket(host, port, f"/?token={token}&permissions=off")
    out = []
    for i, call in enumerate((ws_policy_calls if run["policy"] else ws_calls)(), 1):
        if isinstance(call, str):
            ws.send(call)
            req = call
            want = lambda m: m.get("type") == "error"  # noqa: E731
        else:
            req = {"channel": "files", "requestId": i, **call}
            ws.send(json.dumps(req))
            want = lambda m, i=i: m.get("requestId") == i  # noqa: E731
        got = []
        while True:
            msg = ws.recv()
            if msg is None:
                raise RuntimeError("ws closed")
            if msg.get("type") == "change":  # pushed, debounced: timing, not replayed
                continue
            got.append(msg)
            if want(msg):
                break
        out.append((call if isinstance(call, str) else call["type"], req, got))
    ws.close()
    # a refused upgrade is recorded too
    try:
        WebSocket(host, port, "/?token=wrong")
    except RuntimeError as e:
        out.append(("upgrade with a wrong token", None, [str(e).split("\\r\\n")[0]]))
    rc, _ = gate.end(close_stdin=False)
    out.append(("(after SIGTERM)", None, [{"exit": rc}]))
    return out


def http_post(url, token, body, session=None):
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2025-06-18"}
    if session:
        headers["Mcp-Session-Id"] = session
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
            status, ctype = resp.status, resp.headers.get("Content-Type", "")
            sid = resp.headers.get("Mcp-Session-Id")
            raw = resp.read()
    except urllib.error.HTTPError as e:
        status, ctype, sid, raw = e.code, e.headers.get("Content-Type", ""), None, e.read()
    except (OSError, urllib.error.URLError) as e:  # no answer: that is the answer
        return None, None, [{"no answer": f"{type(e).__name__}: {e}"}]
    msgs = []
    if ctype.startswith("text/event-stream"):
        for line in raw.decode().splitlines():
            if line.startswith("data:") and line[5:].strip():
                msgs.append(json.loads(line[5:]))
    elif raw.strip():
        try:
            msgs.append(json.loads(raw))
        except ValueError:
            msgs.append(raw.decode("utf-8", "replace"))
    return status, sid, msgs


def drive_http(binary, run):
    gate = serve(binary, run, "http", ["--listen", "127.0.0.1:0"])
    token, host, port = listening(gate, "http", "http")
    url = f"http://{host}:{port}/mcp"
    out, rid, session = [], 0, None

    def ask(label, method, params):
        nonlocal rid, session
        rid += 1
        req = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        status, sid, msgs = http_post(url, token, req, session)
        session = session or sid
        out.append((label, req, [{"status": status}] + msgs))

    ask("initialize", "initialize", INIT_MCP)
    status, _, msgs = http_post(url, token, {"jsonrpc": "2.0",
                                             "method": "notifications/initialized"}, session)
    out.append(("notifications/initialized", None, [{"status": status}] + msgs))
    ask("tools/list", "tools/list", {})
    for tool, args in (mcp_policy_calls if run["policy"] else mcp_calls)(run["ws"]):
        ask(f"tools/call {tool}", "tools/call", {"name": tool, "arguments": args})
    rc, _ = gate.end(close_stdin=False)
    out.append(("(after SIGTERM)", None, [{"exit": rc}]))
    return out


def fake_agent(out_path):
    """An ACP agent that takes HTTP MCP servers and hands its session's to the replay:
    `fsgate acp` hosts one for every session the agent opens."""
    for line in sys.stdin:
        msg = json.loads(line)
        method, rid = msg.get("method"), msg.get("id")
        if method == "initialize":
            result = {"protocolVersion": 1, "authMethods": [],
                      "agentCapabilities": {"mcpCapabilities": {"http": True}}}
        elif method == "session/new":
            with open(out_path + ".tmp", "w") as f:
                json.dump(msg["params"], f)
            os.rename(out_path + ".tmp", out_path)
            result = {"sessionId": "replay-agent-session"}
        elif rid is not None and method is not None:
            print(json.dumps({"jsonrpc": "2.0", "id": rid,
                              "error": {"code": -32601, "message": "not here"}}), flush=True)
            continue
        else:
            continue
        print(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}), flush=True)


def hosted_server(out_path, gate):
    deadline = time.monotonic() + TIMEOUT
    while not os.path.exists(out_path):
        if time.monotonic() > deadline or gate.p.poll() is not None:
            raise RuntimeError(f"the agent got no session: {''.join(gate.stderr)}")
        time.sleep(0.05)
    with open(out_path) as f:
        servers = json.load(f)["mcpServers"]
    own = next(s for s in servers if s.get("name") == "fsgate")
    headers = {h["name"]: h["value"] for h in own.get("headers", [])}
    return own["url"], headers.get("Authorization", "").removeprefix("Bearer ")


def drive_hosted(binary, run):
    """`fsgate acp` hosting the fake agent: the MCP server it adds to the agent's session,
    over HTTP, with the `mcp` calls."""
    out_path = os.path.join(run["dir"], "agent-session.json")
    argv = [binary, "acp", "--workspace", run["ws"]]
    if run["policy"]:
        argv += ["--policy", policy_file(run)]
    argv += ["--audit-log", os.path.join(run["dir"], "audit-hosted", "audit.jsonl"),
             "--backup-dir", os.path.join(run["dir"], "backups-hosted"),
             "--", sys.executable, os.path.abspath(__file__), "--fake-agent", out_path]
    env = dict(os.environ, XDG_STATE_HOME=os.path.join(run["dir"], "state"),
               RUST_LOG="off", HOME=os.path.join(run["dir"], "home"))
    gate = Proc(argv, env)
    out = []
    gate.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": 1, "clientCapabilities": {}}})
    out.append(("editor: initialize", None, gate.until(1)))
    gate.send({"jsonrpc": "2.0", "id": 2, "method": "session/new",
               "params": {"cwd": run["ws"], "mcpServers": []}})
    out.append(("editor: session/new", None, gate.until(2)))
    url, token = hosted_server(out_path, gate)
    rid, session = 0, None

    def ask(label, method, params):
        nonlocal rid, session
        rid += 1
        req = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        status, sid, msgs = http_post(url, token, req, session)
        session = session or sid
        out.append((label, req, [{"status": status}] + msgs))

    ask("initialize", "initialize", INIT_MCP)
    http_post(url, token, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    ask("tools/list", "tools/list", {})
    for tool, args in (mcp_policy_calls if run["policy"] else mcp_calls)(run["ws"]):
        ask(f"tools/call {tool}", "tools/call", {"name": tool, "arguments": args})
    rc, rest = gate.end()
    out.append(("editor: what it was told, then the end", None, rest + [{"exit": rc}]))
    return out


# each door with the built-in policy, then with policy_file()'s
DRIVERS = {"mcp": drive_mcp, "acp": drive_acp, "ws": drive_ws, "http": drive_http,
           "hosted": drive_hosted}
DOORS = {**{d: (f, False) for d, f in DRIVERS.items()},
         **{f"{d}+policy": (f, True) for d, f in DRIVERS.items()}}

# ---------------------------------------------------------------- normalising

ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?")
PORT = re.compile(r"(port |127\.0\.0\.1:)\d+")  # a listener's or a client's port
COMPACT = re.compile(r"\d{8}T\d{6}(?:\.\d+)?Z")  # a backup's name
JS_DATE = re.compile(r"\w{3} \w{3} \d\d \d{4} \d\d:\d\d:\d\d GMT[+-]\d{4} \([^)]*\)")
RECORD_DROP = {"ts", "log", "prev", "hash", "duration_us"}
TIMING_DETAILS = {"entriesDurable", "entryPending"}


class Names:
    """Values that differ per run, numbered in order of appearance."""

    def __init__(self):
        self.seen = {}

    def __call__(self, kind, value):
        key = (kind, value)
        if key not in self.seen:
            self.seen[key] = f"<{kind}-{sum(1 for k in self.seen if k[0] == kind) + 1}>"
        return self.seen[key]


def norm_text(s, names, secrets):
    s = ISO.sub("<time>", s)
    s = COMPACT.sub("<time>", s)
    s = PORT.sub(r"\1<port>", s)
    s = JS_DATE.sub("<time>", s)
    for secret, kind in secrets:
        if secret in s:
            s = s.replace(secret, names(kind, secret))
    return s


def norm_value(v, names, secrets, key=None):
    if isinstance(v, dict):
        return {k: norm_value(x, names, secrets, k) for k, x in v.items()}
    if isinstance(v, list):
        return [norm_value(x, names, secrets) for x in v]
    if isinstance(v, str):
        if key in ("sessionId", "session", "provisionalSession"):
            return names("session", v)
        if key == "cgroup":  # the agent's cgroup, named by fsgate's pid and a random part
            return re.sub(r"-\d+-[0-9a-f]+$", "-<pid>-<random>", v)
        return norm_text(v, names, secrets)
    if key in ("pid", "port") and isinstance(v, int):
        return f"<{key}>"
    return v


def secrets_of(answers):
    """Session ids found in answers, to be numbered like the records' sessions."""
    found = []
    for _, _, msgs in answers:
        for m in msgs:
            text = json.dumps(m)
            for sid in re.findall(r'"sessionId": "([^"]+)"', text):
                found.append((sid, "session"))
    return found


def norm_record(rec, names):
    rec = {k: v for k, v in rec.items() if k not in RECORD_DROP}
    args = rec.get("args")
    if isinstance(args, dict) and "tempName" in args:
        rec["args"] = dict(args, tempName="<temp>")
    details = rec.get("details")
    if isinstance(details, dict):
        rec["details"] = {k: v for k, v in details.items() if k not in TIMING_DETAILS}
        if not rec["details"]:
            del rec["details"]
    rec = norm_value(rec, names, [])
    if "peer" in rec:
        rec["peer"] = re.sub(r"\d+", "N", rec["peer"])
    return rec


def read_records(path):
    records = []
    if os.path.isdir(path):
        for name in sorted(os.listdir(path)):
            if name.startswith("audit") and ".checkpoint" not in name and ".lock" not in name:
                with open(os.path.join(path, name)) as f:
                    records += [json.loads(line) for line in f if line.strip()]
    return sorted(records, key=lambda r: r["seq"])


# ---------------------------------------------------------------- one run, the comparison


def one_run(binary, base, doors):
    """Every door's answers and records from `binary`, in a fresh workspace at base/run."""
    results = {}
    for door in doors:
        driver, policy = DOORS[door]
        run = {"dir": os.path.join(base, "run"), "policy": policy}
        shutil.rmtree(run["dir"], ignore_errors=True)
        run["ws"] = os.path.join(run["dir"], "ws")
        os.makedirs(run["ws"])
        os.makedirs(os.path.join(run["dir"], "home"))
        seed(run["ws"])
        answers = driver(binary, run)
        names = Names()
        secrets = secrets_of(answers)
        norm_answers = [(label, req, [norm_value(m, names, secrets) for m in msgs])
                        for label, req, msgs in answers]
        audit = os.path.join(run["dir"], f"audit-{door.split('+')[0]}")
        records = [norm_record(r, names) for r in read_records(audit)]
        results[door] = (norm_answers, records)
    return results


def show(v):
    text = json.dumps(v, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= 4000 else text[:4000] + f"... ({len(text)} chars)"


def compare(before, after):
    totals = {"requests": 0, "answers_same": 0, "records": 0, "records_same": 0}
    diffs = []
    for door in before:
        ans_a, rec_a = before[door]
        ans_b, rec_b = after[door]
        for i in range(max(len(ans_a), len(ans_b))):
            totals["requests"] += 1
            a = ans_a[i] if i < len(ans_a) else None
            b = ans_b[i] if i < len(ans_b) else None
            if a is not None and b is not None and a[2] == b[2]:
                totals["answers_same"] += 1
                continue
            label = (a or b)[0]
            diffs.append((door, f"answer {i + 1} ({label})",
                          (a or b)[1], a and a[2], b and b[2]))
        for i in range(max(len(rec_a), len(rec_b))):
            totals["records"] += 1
            a = rec_a[i] if i < len(rec_a) else None
            b = rec_b[i] if i < len(rec_b) else None
            if a == b:
                totals["records_same"] += 1
                continue
            what = (a or b).get("op") or (a or b).get("kind")
            diffs.append((door, f"record {i + 1} ({what})", None, a, b))
    return totals, diffs


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--fake-agent":
        fake_agent(sys.argv[2])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="the fsgate binary before the change")
    ap.add_argument("--after", required=True, help="the fsgate binary after the change")
    ap.add_argument("--only", default=",".join(DOORS), help="doors, comma-separated")
    ap.add_argument("--keep", help="run in DIR and keep it (default: a temporary one)")
    ap.add_argument("--dump", help="write each run's normalised answers and records to "
                    "DIR/before.json and DIR/after.json")
    opts = ap.parse_args()
    doors = [d for d in opts.only.split(",") if d]
    for d in doors:
        if d not in DOORS:
            ap.error(f"unknown door {d!r}; known: {', '.join(DOORS)}")
    base = opts.keep or tempfile.mkdtemp(prefix="fsgate-replay-")
    os.makedirs(base, exist_ok=True)
    try:
        before = one_run(os.path.abspath(opts.before), base, doors)
        after = one_run(os.path.abspath(opts.after), base, doors)
    finally:
        if not opts.keep:
            shutil.rmtree(base, ignore_errors=True)
    if opts.dump:
        os.makedirs(opts.dump, exist_ok=True)
        for name, run in (("before", before), ("after", after)):
            with open(os.path.join(opts.dump, f"{name}.json"), "w") as f:
                json.dump(run, f, indent=1, ensure_ascii=False)
    totals, diffs = compare(before, after)
    for door in doors:
        print(f"{door}: {len(before[door][0])} exchanges, {len(before[door][1])} records "
              f"before; {len(after[door][0])} exchanges, {len(after[door][1])} records after")
    print(f"requests compared: {totals['requests']}")
    print(f"answers identical: {totals['answers_same']} of {totals['requests']}")
    print(f"records compared:  {totals['records']}")
    print(f"records identical: {totals['records_same']} of {totals['records']}")
    print(f"differences: {len(diffs)}")
    for door, where, req, a, b in diffs:
        print(f"\n--- {door}: {where}")
        if req is not None:
            print(f"request: {show(req)}")
        print(f"before:  {show(a)}")
        print(f"after:   {show(b)}")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
