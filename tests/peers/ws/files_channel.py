"""Every files-channel message type against a real fsgate, with Python `websockets`.

Usage: files_channel.py base64|deny   (the policy's [limits] binary mode)
The workspace holds hello.txt ("hello\\n"), sub/inner.txt, .env and blob.bin (binary),
and the policy limits messages to 65536 bytes.
"""

import asyncio
import base64
import json
import sys

import websockets

from wsclient import Client, connect, done

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
NOT_FOUND, REFUSED, LIMIT = -32002, -32003, -32004

BLOB = bytes(range(256)) * 4  # NUL bytes and invalid UTF-8


async def listing_and_reading(c):
    entries = (await c.ok("list", path="/"))["entries"]
    by_name = {e["name"]: e for e in entries}
    assert set(by_name) >= {"hello.txt", "sub", "blob.bin"}, entries
    assert ".env" not in by_name, "a secret must not be listed"
    hello = by_name["hello.txt"]
    assert hello == {**hello, "path": "/hello.txt", "type": "file", "size": 6}, hello
    assert isinstance(hello["modified"], str), hello
    assert by_name["sub"]["type"] == "directory" and by_name["sub"]["path"] == "/sub"
    sub = (await c.ok("list", path="/sub"))["entries"]
    assert [e["path"] for e in sub] == ["/sub/inner.txt"], sub
    # The root's listing is the default.
    assert (await c.ok("list"))["entries"] == entries

    assert await c.ok("read", path="/hello.txt") == {"content": "hello\n", "encoding": "utf-8"}
    b64 = await c.ok("read", path="/hello.txt", encoding="base64")
    assert b64 == {"content": base64.b64encode(b"hello\n").decode(), "encoding": "base64"}, b64

    st = await c.ok("stat", path="/hello.txt")
    assert st["path"] == "/hello.txt" and st["type"] == "file" and st["size"] == 6, st
    assert isinstance(st["modified"], str) and len(st["permissions"]) == 9, st
    assert (await c.ok("stat", path="/sub"))["type"] == "directory"


async def writing(c):
    text = "ünïcödé ✓\nline 2\n"
    assert await c.ok("write", path="/notes.txt", content=text) == {}
    assert (await c.ok("read", path="/notes.txt"))["content"] == text
    assert await c.ok("write", path="/notes.txt", content="replaced") == {}
    assert (await c.ok("read", path="/notes.txt"))["content"] == "replaced"
    # Parents are created.
    assert await c.ok("write", path="/new/dir/file.txt", content="deep") == {}
    assert (await c.ok("stat", path="/new/dir"))["type"] == "directory"


async def binary(c, mode):
    data = base64.b64encode(BLOB).decode()
    assert await c.ok("write", path="/out.bin", content=data, encoding="base64") == {}
    if mode == "base64":
        got = await c.ok("read", path="/out.bin")
        assert got["encoding"] == "base64", got
        assert base64.b64decode(got["content"]) == BLOB
        pre = await c.ok("read", path="/blob.bin")
        assert base64.b64decode(pre["content"]) == BLOB
    else:
        err = await c.fail("read", LIMIT, path="/out.bin")
        assert err["rule"] == "limits.binary", err
        err = await c.fail("read", LIMIT, path="/blob.bin", encoding="base64")
        assert err["rule"] == "limits.binary", err


async def mutating(c):
    assert await c.ok("mkdir", path="/made") == {}
    assert (await c.ok("stat", path="/made"))["type"] == "directory"
    assert await c.ok("mkdir", path="/a/b/c", recursive=True) == {}
    assert (await c.ok("stat", path="/a/b/c"))["type"] == "directory"
    err = await c.request("mkdir", path="/x/y")
    assert "error" in err, "mkdir without recursive must not create parents"

    assert await c.ok("rename", oldPath="/notes.txt", newPath="/made/renamed.txt") == {}
    await c.fail("read", NOT_FOUND, path="/notes.txt")
    assert (await c.ok("read", path="/made/renamed.txt"))["content"] == "replaced"

    assert await c.ok("delete", path="/made/renamed.txt") == {}
    await c.fail("stat", NOT_FOUND, path="/made/renamed.txt")
    await c.fail("delete", INVALID_PARAMS, path="/a")  # not empty, not recursive
    assert await c.ok("delete", path="/a", recursive=True) == {}
    await c.fail("stat", NOT_FOUND, path="/a")


async def errors(c):
    err = await c.fail("read", REFUSED, path="/.env")
    assert err["rule"].startswith("secrets:"), err
    assert isinstance(err["reason"], str) and err["reason"], err
    assert "SECRET" not in json.dumps(err), "no file content in a refusal"
    await c.fail("write", REFUSED, path="/.env", content="x")
    err = await c.fail("read", REFUSED, path="/../../etc/passwd")
    assert err["rule"] == "workspace-boundary", err
    await c.fail("read", NOT_FOUND, path="/missing.txt")
    await c.fail("frobnicate", METHOD_NOT_FOUND, path="/")
    await c.fail("read", INVALID_PARAMS)
    await c.fail("write", INVALID_PARAMS, path="/x.txt")
    await c.fail("write", INVALID_PARAMS, path="/x.txt", content="!!!", encoding="base64")
    await c.fail("read", INVALID_PARAMS, path="/hello.txt", encoding="latin-1")
    await c.fail("rename", INVALID_PARAMS, oldPath="/hello.txt")

    # requestId keeps its JSON type.
    resp = await c.request("stat", path="/hello.txt", requestId=42)
    assert resp["requestId"] == 42 and "data" in resp, resp

    # Messages that cannot be matched to a request still get a clear error.
    for raw, code in [
        ("not json", PARSE_ERROR),
        ("[1,2]", INVALID_REQUEST),
        (json.dumps({"channel": "terminal", "type": "read", "requestId": "t1"}), INVALID_REQUEST),
        (json.dumps({"channel": "files", "type": "read", "path": "/hello.txt"}), INVALID_PARAMS),
    ]:
        before = len(c.others)
        await c.ws.send(raw)
        for _ in range(100):
            if len(c.others) > before:
                break
            await asyncio.sleep(0.05)
        got = c.others[before]
        assert got["error"]["code"] == code, (raw, got)
    assert c.others[-2]["requestId"] == "t1", "the id is echoed even for a wrong channel"

    await c.ws.send(b'{"channel":"files","type":"list","requestId":"bin"}')
    for _ in range(100):
        if any(m.get("error", {}).get("code") == INVALID_REQUEST and "binary" in m["error"]["message"] for m in c.others):
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError(f"no error for a binary frame: {c.others}")


async def pipelined(c):
    # 40 requests sent before any answer is read; all answered, matched by requestId.
    replies = await asyncio.gather(*[c.ok("read", path="/hello.txt") for _ in range(40)])
    assert all(r["content"] == "hello\n" for r in replies)


async def oversized():
    ws = await connect()
    await ws.send(json.dumps({"channel": "files", "type": "write", "requestId": "big",
                              "path": "/big.txt", "content": "x" * 70000}))
    first = json.loads(await asyncio.wait_for(ws.recv(), 10))
    while first.get("type") in ("change", "overflow"):  # events from the earlier writes
        first = json.loads(await asyncio.wait_for(ws.recv(), 10))
    assert first["error"]["code"] == LIMIT, first
    assert "65536" in first["error"]["message"], first
    try:
        while True:
            msg = json.loads(await asyncio.wait_for(ws.recv(), 10))
            assert msg.get("type") in ("change", "overflow"), f"connection should be closed: {msg}"
    except websockets.ConnectionClosed as e:
        assert e.rcvd is not None and e.rcvd.code == 1009, e
    # A message just under the limit is fine.
    c = await Client.open()
    assert await c.ok("write", path="/fits.txt", content="y" * 60000) == {}
    await c.close()
    return first["error"]["message"]


async def main(mode):
    c = await Client.open()
    await listing_and_reading(c)
    await writing(c)
    await binary(c, mode)
    await mutating(c)
    await errors(c)
    await pipelined(c)
    assert not c.events or all(e["type"] == "change" for e in c.events)
    await c.close()
    limit_message = await oversized()
    done({"mode": mode, "limit_message": limit_message})


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "base64"))
