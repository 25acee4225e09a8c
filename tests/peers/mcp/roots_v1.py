"""Drives `fsgate serve --transport mcp` with the official MCP Python SDK 1.x as a client
that declares the `roots` capability (a `list_roots_callback`): its roots narrow the
session, and a `notifications/roots/list_changed` moves them.

    python roots_v1.py --bin FSGATE --workspace DIR --outside DIR --state DIR

Prints one JSON summary line. Exits 77 with a "SKIPPED: ..." line when the SDK 1.x is
not importable.
"""

import argparse
import json
import os
import sys
from datetime import timedelta

SKIP = 77

try:
    import anyio
    from mcp import ClientSession, StdioServerParameters, types
    from mcp.client.stdio import stdio_client
except ImportError as e:  # the Rust test turns this into a skip
    print(f"SKIPPED: MCP Python SDK 1.x not importable ({e}); run ./scripts/install-peers.sh (.peers/mcp1)")
    sys.exit(SKIP)


def text(result):
    return "\n".join(c.text for c in result.content if getattr(c, "type", None) == "text")


async def main(a):
    params = StdioServerParameters(
        command=a.bin,
        args=["serve", "--transport", "mcp", "--workspace", a.workspace,
              "--audit-log", os.path.join(a.state, "audit", "audit.jsonl"),
              "--backup-dir", os.path.join(a.state, "backups")],
        cwd=a.state,
    )
    roots = {"dirs": [os.path.join(a.workspace, "src"), a.outside]}

    async def list_roots(_context):
        return types.ListRootsResult(
            roots=[types.Root(uri=f"file://{d}") for d in roots["dirs"]])

    summary = {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=timedelta(seconds=30),
                                 list_roots_callback=list_roots) as s:
            await s.initialize()

            async def call(name, args):
                r = await s.call_tool(name, args)
                return {"error": bool(r.isError), "text": text(r)}

            summary["allowed"] = (await call("list_allowed_directories", {}))["text"]
            summary["inRoot"] = await call("read_text_file", {"path": os.path.join(a.workspace, "src/a.txt")})
            summary["outsideRoot"] = await call("read_text_file", {"path": os.path.join(a.workspace, "top.txt")})
            roots["dirs"] = [os.path.join(a.workspace, "docs")]
            await s.send_roots_list_changed()
            # Calls sent after the notification are served with the new roots.
            allowed = (await call("list_allowed_directories", {}))["text"]
            summary["allowedAfter"] = allowed
            summary["docs"] = await call("read_text_file", {"path": os.path.join(a.workspace, "docs/b.txt")})
            summary["srcAfter"] = await call("read_text_file", {"path": os.path.join(a.workspace, "src/a.txt")})
    print(json.dumps(summary))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    for flag in ("--bin", "--workspace", "--outside", "--state"):
        ap.add_argument(flag, required=True)
    anyio.run(main, ap.parse_args())
