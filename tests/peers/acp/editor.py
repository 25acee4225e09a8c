"""A test editor built on the Python ACP SDK (PyPI `agent-client-protocol`): the client
side of ACP, as Zed plays it, hosting `fsgate acp -- AGENT`.

fsgate's `ask` tests (tests/acp_proxy/ask.rs) run it. Usage: `editor.py CONFIG.json`,
where CONFIG holds:
  command   the command line to spawn (fsgate acp ... -- agent ...)
  cwd       the session's cwd (the workspace)
  prompts   a list of prompt texts (agent.py commands), sent in turn in one session
  answers   how to answer each session/request_permission in turn: "allow_once",
            "allow_always", "reject_once" (the option of that kind, found by kind as
            an editor does), "cancel" (outcome cancelled), "ignore" (never answer),
            "exit" (print what was seen so far and exit at once: the editor goes away
            while fsgate waits for the answer)

It prints one JSON object on stdout: `permissions` (the requests' params, as the SDK
parsed them), `updates` (every tool_call session update, as parsed), `reports` (the
agent's reports, see agent.py), `stopReasons`.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    Implementation,
    RequestPermissionResponse,
)


def dump(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value


class TestEditor:
    """Answers permission requests as told; keeps what fsgate and the agent showed."""

    def __init__(self, answers: list[str]) -> None:
        self.answers = list(answers)
        self.permissions: list[Any] = []
        self.updates: list[Any] = []
        self.reports: list[Any] = []

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any) -> RequestPermissionResponse:
        self.permissions.append({"sessionId": session_id, "toolCall": dump(tool_call), "options": [dump(o) for o in options]})
        answer = self.answers.pop(0) if self.answers else "reject_once"
        if answer == "ignore":
            await asyncio.sleep(3600)
        if answer == "exit":
            print(json.dumps(self.seen([])), flush=True)
            os._exit(0)
        if answer == "cancel":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        chosen = next(o for o in options if o.kind == answer)
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=chosen.option_id))

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        kind = getattr(update, "session_update", None)
        if kind == "tool_call":
            self.updates.append({"sessionId": session_id, "update": dump(update)})
        elif kind == "agent_message_chunk":
            text = getattr(update.content, "text", "")
            try:
                self.reports.append(json.loads(text))
            except ValueError:
                pass

    def on_connect(self, conn: Any) -> None:
        pass

    def seen(self, stops: list[Any]) -> dict[str, Any]:
        return {"permissions": self.permissions, "updates": self.updates, "reports": self.reports, "stopReasons": stops}


async def run(config: dict[str, Any]) -> dict[str, Any]:
    editor = TestEditor(config["answers"])
    cmd = config["command"]
    stops = []
    async with spawn_agent_process(editor, cmd[0], *cmd[1:], env=dict(os.environ), transport_kwargs={"stderr": sys.stderr.fileno()}) as (conn, _proc):
        caps = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=False)
        await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=caps, client_info=Implementation(name="fsgate-sdk-editor", version="0"))
        session = await conn.new_session(cwd=config["cwd"], mcp_servers=[])
        for text in config["prompts"]:
            resp = await conn.prompt(session_id=session.session_id, prompt=[text_block(text)])
            stops.append(resp.stop_reason)
    return editor.seen(stops)


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        config = json.load(f)
    result = asyncio.run(asyncio.wait_for(run(config), timeout=60))
    print(json.dumps(result), flush=True)
    # The ignored questions' handlers are still sleeping: leave without waiting for them.
    os._exit(0)


if __name__ == "__main__":
    main()
