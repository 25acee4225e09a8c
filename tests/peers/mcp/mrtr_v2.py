"""Drives `fsgate serve --transport mcp` (or, with `--url URL --token T`, a running
`fsgate serve --transport http`) with the official MCP Python SDK 2.x on the stateless
2026-07-28 revision, whose `Client` answers an `InputRequiredResult` by calling its
elicitation callback and retrying (multi round-trip requests).

    python mrtr_v2.py --bin FSGATE --workspace DIR --outside DIR --state DIR [--url URL --token T]

The policy (the caller's) makes writes under ci/ ask. The callback answers the form's
`decision` with allow_once for ci/yes.yml and reject_once for anything else, and notes
each message it was shown. Prints one JSON summary line. Exits 77 with a
"SKIPPED: ..." line when the SDK 2.x is not importable.
"""

import argparse
import json
import os
import sys
from importlib import metadata

SKIP = 77

try:
    from mcp import Client, StdioServerParameters
    from mcp import types
    import anyio
except ImportError as e:  # the Rust test turns this into a skip
    print(f"SKIPPED: MCP Python SDK 2.x not importable ({e}); run ./scripts/install-peers.sh (.peers/mcp2)")
    sys.exit(SKIP)


async def main(a):
    params = StdioServerParameters(
        command=a.bin,
        args=["serve", "--transport", "mcp", "--workspace", a.workspace, "--policy", a.policy,
              "--audit-log", os.path.join(a.state, "audit", "audit.jsonl"),
              "--backup-dir", os.path.join(a.state, "backups")],
        cwd=a.state,
    )
    target = f"{a.url}?token={a.token}" if a.url else params
    shown = []

    async def elicit(context, p):
        shown.append(p.message)
        decision = "allow_once" if "ci/yes.yml" in p.message else "reject_once"
        return types.ElicitResult(action="accept", content={"decision": decision})

    summary = {}
    async with Client(target, mode="auto", read_timeout_seconds=30, elicitation_callback=elicit) as c:
        for name in ("yes", "no"):
            r = await c.call_tool("write_text_file", {"path": f"ci/{name}.yml", "content": f"{name}\n"})
            summary[name] = r.model_dump(by_alias=True, mode="json", exclude_none=True)
        summary.update(shown=shown, sdk=metadata.version("mcp"), protocolVersion=c.protocol_version)
    print(json.dumps(summary))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    for f in ("--bin", "--workspace", "--outside", "--state", "--policy"):
        ap.add_argument(f, required=True)
    ap.add_argument("--url")
    ap.add_argument("--token")
    anyio.run(main, ap.parse_args())
