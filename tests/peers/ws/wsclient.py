"""Shared helpers for the WebSocket files-channel peer scripts.

The Rust test that runs a script passes the server in the environment:
FSGATE_WS_URL (ws://127.0.0.1:PORT/), FSGATE_WS_TOKEN and FSGATE_WORKSPACE (the
workspace directory, for changes made from outside the gateway). A script exits 0 and
prints one final line `OK {json summary}` on success; any failed check raises, which
exits non-zero with a traceback on stderr.
"""

import asyncio
import itertools
import json
import os

import websockets

URL = os.environ["FSGATE_WS_URL"]
TOKEN = os.environ["FSGATE_WS_TOKEN"]
WORKSPACE = os.environ.get("FSGATE_WORKSPACE", "")

# Longest wait for one response or event.
TIMEOUT = 10.0

_ids = itertools.count(1)


def auth_headers(token=None):
    return {"Authorization": f"Bearer {TOKEN if token is None else token}"}


async def connect(url=None, token=None, **kw):
    """A connection authenticated with the bearer header; no incoming size limit."""
    kw.setdefault("max_size", None)
    return await websockets.connect(url or URL, additional_headers=auth_headers(token), **kw)


class Client:
    """One connection: requests matched by requestId, events collected on the side."""

    def __init__(self, ws):
        self.ws = ws
        self.pending = {}
        self.events = []
        self.others = []
        self.event_arrived = asyncio.Event()
        self.reader = asyncio.create_task(self._read())

    @classmethod
    async def open(cls, url=None, token=None, **kw):
        return cls(await connect(url, token, **kw))

    async def _read(self):
        try:
            async for raw in self.ws:
                msg = json.loads(raw)
                assert msg.get("channel") == "files", msg
                rid = msg.get("requestId")
                if rid is not None and rid in self.pending:
                    self.pending.pop(rid).set_result(msg)
                elif msg.get("type") in ("change", "overflow"):
                    assert "requestId" not in msg, msg
                    self.events.append(msg)
                    self.event_arrived.set()
                else:
                    self.others.append(msg)
        except websockets.ConnectionClosed:
            pass
        finally:
            for fut in self.pending.values():
                if not fut.done():
                    fut.set_exception(ConnectionError("connection closed"))

    async def request(self, kind, **fields):
        """Sends one request and returns the whole response message."""
        rid = fields.pop("requestId", None) or f"r{next(_ids)}"
        fut = asyncio.get_running_loop().create_future()
        self.pending[rid] = fut
        await self.ws.send(json.dumps({"channel": "files", "type": kind, "requestId": rid, **fields}))
        resp = await asyncio.wait_for(fut, TIMEOUT)
        assert resp["type"] == kind, resp
        assert resp["requestId"] == rid, resp
        assert ("data" in resp) != ("error" in resp), resp
        return resp

    async def ok(self, kind, **fields):
        """A request that must succeed: returns its `data`."""
        resp = await self.request(kind, **fields)
        assert "data" in resp, f"{kind} {fields.get('path', '')}: {resp}"
        return resp["data"]

    async def fail(self, kind, code, **fields):
        """A request that must fail with `code`: returns its `error`."""
        resp = await self.request(kind, **fields)
        assert "error" in resp, f"{kind} should fail: {resp}"
        assert resp["error"]["code"] == code, resp
        assert isinstance(resp["error"]["message"], str) and resp["error"]["message"], resp
        return resp["error"]

    async def wait_event(self, pred, timeout=TIMEOUT):
        """The first collected event matching `pred`, waiting for it if need be."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            for ev in self.events:
                if pred(ev):
                    return ev
            left = deadline - loop.time()
            if left <= 0:
                raise AssertionError(f"no matching event within {timeout}s; got {self.events}")
            self.event_arrived.clear()
            try:
                await asyncio.wait_for(self.event_arrived.wait(), left)
            except asyncio.TimeoutError:
                pass

    async def close(self):
        await self.ws.close()
        await self.reader


def change(event, path, file_type=None):
    """A predicate for a `change` event."""
    def pred(ev):
        return (
            ev.get("type") == "change"
            and ev.get("event") == event
            and ev.get("path") == path
            and (file_type is None or ev.get("fileType") == file_type)
        )
    return pred


def done(summary):
    print("OK " + json.dumps(summary, sort_keys=True), flush=True)
