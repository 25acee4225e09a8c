"""Drives `fsgate serve --transport mcp` with the official MCP Python SDK 2.x, or, with
`--url URL --token T`, a running `fsgate serve --transport http` (`Client` on the URL,
the token in its query).

    python client_v2.py --mode auto|legacy --bin FSGATE --workspace DIR --outside DIR --state DIR [--url URL --token T]

mode auto: the SDK probes `server/discover` and speaks the stateless 2026-07-28
revision; legacy: the 2025-era initialize handshake. Prints one JSON summary line.
Exits 77 with a "SKIPPED: ..." line when the SDK 2.x is not importable.
"""

import argparse
import json
import os
import sys
from importlib import metadata

SKIP = 77

try:
    import anyio
    from mcp import Client, StdioServerParameters
    from mcp.shared.exceptions import MCPError
except ImportError as e:  # the Rust test turns this into a skip
    print(f"SKIPPED: MCP Python SDK 2.x not importable ({e}); run ./scripts/install-peers.sh (.peers/mcp2)")
    sys.exit(SKIP)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scenario  # noqa: E402


async def main(a):
    params = StdioServerParameters(
        command=a.bin,
        args=["serve", "--transport", "mcp", "--workspace", a.workspace,
              "--audit-log", os.path.join(a.state, "audit", "audit.jsonl"),
              "--backup-dir", os.path.join(a.state, "backups")],
        cwd=a.state,
    )
    target = f"{a.url}?token={a.token}" if a.url else params
    async with Client(target, mode=a.mode, read_timeout_seconds=30) as c:
        async def list_tools():
            r = await c.list_tools()
            return [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in r.tools]

        async def call(name, args):
            try:
                r = await c.call_tool(name, args)
            except MCPError as e:
                raise scenario.ProtocolError(e.error.code, e.error.message)
            return r.model_dump(by_alias=True, mode="json", exclude_none=True)

        summary = await scenario.run(list_tools, call, a.workspace, a.outside)
        summary.update(sdk=metadata.version("mcp"), mode=a.mode, protocolVersion=c.protocol_version,
                       serverName=c.server_info.name if c.server_info else None)
    print(json.dumps(summary))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    for f in ("--bin", "--workspace", "--outside", "--state"):
        ap.add_argument(f, required=True)
    ap.add_argument("--mode", default="auto")
    ap.add_argument("--url")
    ap.add_argument("--token")
    args = ap.parse_args()
    if not metadata.version("mcp").startswith("2."):
        print(f"SKIPPED: this interpreter has mcp {metadata.version('mcp')}, not 2.x")
        sys.exit(SKIP)
    anyio.run(main, args)
