"""Drives `fsgate serve --transport mcp` with the official MCP Python SDK (1.x, or 2.x in
its initialize-handshake session) against a
policy with an `ask` rule on ci/ (writes):

  --mode elicit: a client with an elicitation callback (it answers by the file name:
    allow_once for yes*, allow_always for always*, decline for no*) that sets the logging
    level to info and collects the log messages fsgate sends for each change;
  --mode plain: a client without elicitation (its ask is refused) that sets no level
    until the end, then sets it and makes one last change (`marker.txt`).

    python ask_v1.py --mode MODE --policy FILE [--log-wait SECONDS] --bin FSGATE --workspace DIR --state DIR

Prints one JSON summary line. Exits 77 with a "SKIPPED: ..." line when the SDK is not
importable.
"""

import argparse
import json
import os
import sys
from datetime import timedelta
from importlib import metadata

SKIP = 77

try:
    import anyio
    from mcp import ClientSession, StdioServerParameters, types
    from mcp.client.stdio import stdio_client
except ImportError as e:  # the Rust test turns this into a skip
    print(f"SKIPPED: MCP Python SDK not importable ({e}); run ./scripts/install-peers.sh")
    sys.exit(SKIP)


def attr(obj, snake, camel):
    """A field by its 2.x (snake_case) or 1.x (camelCase) name."""
    return getattr(obj, snake) if hasattr(obj, snake) else getattr(obj, camel)


def text(result):
    return "\n".join(c.text for c in result.content if getattr(c, "type", None) == "text")


class Peer:
    def __init__(self):
        self.asked = []
        self.logs = []

    async def elicit(self, _context, params):
        self.asked.append({"message": params.message,
                           "schema": attr(params, "requested_schema", "requestedSchema")})
        name = params.message.split("`")[1].rsplit("/", 1)[-1]
        if name.startswith("yes"):
            return types.ElicitResult(action="accept", content={"decision": "allow_once"})
        if name.startswith("always"):
            return types.ElicitResult(action="accept", content={"decision": "allow_always"})
        return types.ElicitResult(action="decline")

    async def log(self, params):
        self.logs.append({"level": params.level, "logger": params.logger, "data": params.data})

    async def wait_logs(self, pred, seconds):
        with anyio.move_on_after(seconds):
            while not pred(self.logs):
                await anyio.sleep(0.02)


async def main(a):
    params = StdioServerParameters(
        command=a.bin,
        args=["serve", "--transport", "mcp", "--workspace", a.workspace, "--policy", a.policy,
              "--audit-log", os.path.join(a.state, "audit", "audit.jsonl"),
              "--backup-dir", os.path.join(a.state, "backups")],
        cwd=a.state,
    )
    peer = Peer()
    callback = peer.elicit if a.mode == "elicit" else None
    summary = {"calls": {}}
    async with stdio_client(params) as (read, write):
        # 1.x takes a timedelta, 2.x seconds.
        wait = timedelta(seconds=60) if metadata.version("mcp").startswith("1.") else 60.0
        async with ClientSession(read, write, read_timeout_seconds=wait,
                                 elicitation_callback=callback, logging_callback=peer.log) as s:
            init = await s.initialize()
            summary["logging"] = init.capabilities.logging is not None

            async def write_file(rel, content, **kw):
                r = await s.call_tool("write_file", {"path": os.path.join(a.workspace, rel),
                                                     "content": content}, **kw)
                summary["calls"][rel] = {"error": bool(attr(r, "is_error", "isError")), "text": text(r)}

            if a.mode == "elicit":
                await s.set_logging_level("info")
            await write_file("notes.txt", "no question\n")
            await write_file("ci/yes.yml", "ok: 1\n")
            await write_file("ci/no.yml", "bad: 1\n")
            if a.mode == "elicit":
                async def progress(*_args):
                    pass

                # A progress token keeps this call off the direct path: the SDK's own.
                await write_file("ci/yes-sdk.yml", "s: 1\n", progress_callback=progress)
                await write_file("ci/no-sdk.yml", "s: 1\n", progress_callback=progress)
                await write_file("ci/always.yml", "a: 1\n")
                # Allowed for the session: not asked again.
                await write_file("ci/again.yml", "b: 1\n")
                await s.call_tool("rename", {"oldPath": os.path.join(a.workspace, "notes.txt"),
                                             "newPath": os.path.join(a.workspace, "notes2.txt")})
                await peer.wait_logs(lambda logs: any(l["data"].get("op") == "rename" for l in logs),
                                     a.log_wait)
            else:
                await s.set_logging_level("info")
                await write_file("marker.txt", "m\n")
                await peer.wait_logs(lambda logs: any("marker.txt" in l["data"].get("path", "") for l in logs),
                                     a.log_wait)
            summary["asked"] = peer.asked
            summary["logs"] = peer.logs
    print(json.dumps(summary))


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["elicit", "plain"], required=True)
    p.add_argument("--policy", required=True)
    p.add_argument("--bin", required=True)
    p.add_argument("--workspace", required=True)
    p.add_argument("--state", required=True)
    p.add_argument("--log-wait", type=float, default=20.0,
                   help="seconds to wait for the last change's log message")
    anyio.run(main, p.parse_args())
