"""A test agent built on the Python ACP SDK (PyPI `agent-client-protocol`).

fsgate's interop tests (tests/acp_proxy.rs) run it behind `fsgate acp`. It has no
model: each line of a `session/prompt` text is a command, carried out through the
client connection the SDK hands the agent, and each outcome is reported back to the
editor as one `agent_message_chunk` whose text is JSON:
`{"cmd": LINE, "ok": RESULT}` or `{"cmd": LINE, "error": {"code", "message", "data"}}`.

Commands (PATH is absolute; JSON is a JSON value):
  caps                      the clientCapabilities received in initialize
  read PATH [LINE [LIMIT]]  fs/read_text_file (`-` leaves LINE out)
  write PATH TEXT           fs/write_text_file; TEXT is the rest of the line, or a
                            JSON string literal if it starts with `"`
  ext NAME JSON             ext_method(NAME, JSON + sessionId), e.g. `ext fsgate/ls {...}`
  session SID               use SID as the sessionId of the commands that follow
  permission                session/request_permission; reports the outcome
  terminal                  terminal/create (`echo hi`)
  open PATH                 open PATH directly with the OS, bypassing ACP
  env NAME                  whether NAME is set in the agent's environment (never the value)
  signal PID                kill(PID, 0): may the agent signal that process?
  ppid                      the agent's ppid, pid, session id and process group id
  unix PATH                 connect() to the pathname Unix stream socket PATH
  tty                       open /dev/tty (the controlling terminal, if any)
  tcp HOST PORT             a TCP connect to HOST:PORT
  tiocsti                   TIOCSTI of one byte on fds 0, 1, 2 and on an opened /dev/tty
  parallel N PATH           N fs/read_text_file of PATH at once
  exit CODE                 report, then exit the process with CODE

With FSGATE_PEER_INIT_PROBE=PATH in the environment, the agent sends
fs/read_text_file(PATH) (its request id 0) while handling `initialize` (the editor's
request id 0) and returns the outcome in the initialize result's `_meta.probe`.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import socket
import sys
import termios
from typing import Any

from acp import (
    PROTOCOL_VERSION,
    Agent,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    RequestError,
    run_agent,
    text_block,
    update_agent_message,
)
from acp.interfaces import Client
from acp.schema import PermissionOption, ToolCallUpdate


def dump(value: Any) -> Any:
    """A JSON-ready form of an SDK result (pydantic model, dict, None)."""
    if value is None:
        return None
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value


def error_of(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, RequestError):
        return {"code": exc.code, "message": str(exc), "data": exc.data}
    return {"code": None, "message": f"{type(exc).__name__}: {exc}", "data": None}


def os_outcome(key: str, action: Any) -> dict[str, Any]:
    """Runs `action`; `{key: True, "errno": None}` or `{key: False, "errno": N}`."""
    try:
        action()
        return {key: True, "errno": None}
    except OSError as exc:
        return {key: False, "errno": exc.errno, "strerror": exc.strerror}


def unix_connect(path: str) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(path)


def tcp_connect(host: str, port: int) -> None:
    with socket.create_connection((host, port), timeout=5):
        pass


def open_tty() -> None:
    os.close(os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY))


def tiocsti(fd: int) -> dict[str, Any]:
    return os_outcome("ok", lambda: fcntl.ioctl(fd, termios.TIOCSTI, b"#"))


def tiocsti_all() -> dict[str, Any]:
    """TIOCSTI on the standard fds and on /dev/tty (if it opens at all)."""
    out: dict[str, Any] = {str(fd): tiocsti(fd) for fd in (0, 1, 2)}
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError as exc:
        out["tty"] = {"ok": False, "errno": exc.errno, "strerror": exc.strerror}
        return out
    try:
        out["tty"] = tiocsti(fd)
    finally:
        os.close(fd)
    return out


def text_arg(rest: str) -> str:
    return json.loads(rest) if rest.startswith('"') else rest


class TestAgent(Agent):
    """Carries out the commands in each prompt through the client connection."""

    def __init__(self) -> None:
        self._conn: Client | None = None
        self._caps: Any = None
        self._sessions = 0

    def on_connect(self, conn: Client) -> None:
        self._conn = conn

    @property
    def conn(self) -> Client:
        assert self._conn is not None, "no client connection"
        return self._conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None, **kwargs: Any) -> InitializeResponse:
        self._caps = dump(client_capabilities)
        meta: dict[str, Any] = {"clientCapabilities": self._caps}
        probe = os.environ.get("FSGATE_PEER_INIT_PROBE")
        if probe:
            try:
                meta["probe"] = {"ok": dump(await self.conn.read_text_file(session_id="init-probe", path=probe))}
            except Exception as exc:  # reported, not raised: the test reads it
                meta["probe"] = {"error": error_of(exc)}
        return InitializeResponse(protocol_version=PROTOCOL_VERSION, field_meta=meta)

    async def new_session(self, cwd: str, mcp_servers: Any = None, **kwargs: Any) -> NewSessionResponse:
        self._sessions += 1
        return NewSessionResponse(session_id=f"py-session-{self._sessions}")

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        text = "\n".join(getattr(block, "text", "") for block in prompt)
        sid = session_id
        for line in (ln.strip() for ln in text.splitlines()):
            if not line:
                continue
            word, _, rest = line.partition(" ")
            if word == "session":
                sid = rest.strip()
                continue
            report: dict[str, Any] = {"cmd": line}
            try:
                report["ok"] = await self.run(word, rest.strip(), sid)
            except Exception as exc:
                report["error"] = error_of(exc)
            await self.conn.session_update(session_id, update_agent_message(text_block(json.dumps(report))))
            if word == "exit":
                sys.stdout.flush()
                os._exit(int(rest))
        return PromptResponse(stop_reason="end_turn")

    async def run(self, word: str, rest: str, sid: str) -> Any:
        if word == "caps":
            return self._caps
        if word == "read":
            parts = rest.split()
            line = int(parts[1]) if len(parts) > 1 and parts[1] != "-" else None
            limit = int(parts[2]) if len(parts) > 2 else None
            return dump(await self.conn.read_text_file(session_id=sid, path=parts[0], line=line, limit=limit))
        if word == "write":
            path, _, content = rest.partition(" ")
            return dump(await self.conn.write_text_file(session_id=sid, path=path, content=text_arg(content)))
        if word == "ext":
            name, _, params = rest.partition(" ")
            body = json.loads(params) if params else {}
            body.setdefault("sessionId", sid)
            return dump(await self.conn.ext_method(name, body))
        if word == "permission":
            options = [
                PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
                PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
            ]
            call = ToolCallUpdate(tool_call_id="call-1", title="test permission")
            return dump(await self.conn.request_permission(session_id=sid, tool_call=call, options=options))
        if word == "terminal":
            return dump(await self.conn.create_terminal(session_id=sid, command="echo", args=["hi"]))
        if word == "open":
            try:
                with open(rest, "rb") as f:
                    return {"opened": True, "bytes": len(f.read())}
            except OSError as exc:
                return {"opened": False, "errno": exc.errno, "strerror": exc.strerror, "type": type(exc).__name__}
        if word == "env":
            return {"set": rest in os.environ}
        if word == "signal":
            return os_outcome("ok", lambda: os.kill(int(rest), 0))
        if word == "ppid":
            return {"ppid": os.getppid(), "pid": os.getpid(), "sid": os.getsid(0), "pgid": os.getpgid(0)}
        if word == "unix":
            return os_outcome("connected", lambda: unix_connect(rest))
        if word == "tty":
            return os_outcome("opened", open_tty)
        if word == "tcp":
            host, _, port = rest.partition(" ")
            return os_outcome("connected", lambda: tcp_connect(host, int(port)))
        if word == "tiocsti":
            return tiocsti_all()
        if word == "parallel":
            count, _, path = rest.partition(" ")
            results = await asyncio.gather(
                *(self.conn.read_text_file(session_id=sid, path=path) for _ in range(int(count)))
            )
            return [dump(r) for r in results]
        if word == "exit":
            return {"exiting": int(rest)}
        raise ValueError(f"unknown command {word!r}")


def main() -> None:
    asyncio.run(run_agent(TestAgent()))


if __name__ == "__main__":
    main()
