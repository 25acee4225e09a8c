"""Drives `fsgate serve --transport mcp` with the official MCP Python SDK 1.x
(`ClientSession` over `stdio_client`, initialize handshake), or, with `--url URL
--token T`, a running `fsgate serve --transport http` (`streamablehttp_client`, the
token as `Authorization: Bearer`).

    python client_v1.py --bin FSGATE --workspace DIR --outside DIR --state DIR [--url URL --token T]

Prints one JSON summary line. Exits 77 with a "SKIPPED: ..." line when the SDK 1.x is
not importable.
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
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamablehttp_client
    from mcp.shared.exceptions import McpError
except ImportError as e:  # the Rust test turns this into a skip
    print(f"SKIPPED: MCP Python SDK 1.x not importable ({e}); run ./scripts/install-peers.sh (.peers/mcp1)")
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
    if a.url:
        transport = streamablehttp_client(a.url, headers={"Authorization": f"Bearer {a.token}"})
    else:
        transport = stdio_client(params)
    async with transport as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write, read_timeout_seconds=timedelta(seconds=30)) as s:
            init = await s.initialize()

            async def list_tools():
                r = await s.list_tools()
                return [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in r.tools]

            async def call(name, args):
                try:
                    r = await s.call_tool(name, args)
                except McpError as e:
                    raise scenario.ProtocolError(e.error.code, e.error.message)
                return r.model_dump(by_alias=True, mode="json", exclude_none=True)

            summary = await scenario.run(list_tools, call, a.workspace, a.outside)
            summary.update(sdk=metadata.version("mcp"), mode="legacy",
                           protocolVersion=init.protocolVersion, serverName=init.serverInfo.name)
    print(json.dumps(summary))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    for f in ("--bin", "--workspace", "--outside", "--state"):
        ap.add_argument(f, required=True)
    ap.add_argument("--url")
    ap.add_argument("--token")
    args = ap.parse_args()
    if not metadata.version("mcp").startswith("1."):
        print(f"SKIPPED: this interpreter has mcp {metadata.version('mcp')}, not 1.x")
        sys.exit(SKIP)
    anyio.run(main, args)
