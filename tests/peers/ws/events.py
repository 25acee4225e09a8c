"""Pushed change events against a real fsgate, with Python `websockets`.

The workspace starts with src/, docs/ and src/existing.txt; the default policy is in
force (secrets hidden). Changes are made through the gateway (write, mkdir, rename,
delete requests) and from outside it (plain file operations on FSGATE_WORKSPACE).
"""

import asyncio
import os

from wsclient import URL, WORKSPACE, Client, change, done

IGNORED = ["node_modules", ".git", ".next", "dist", "build", "__pycache__"]


def ws_path(rel):
    return os.path.join(WORKSPACE, rel)


def put(rel, content="x"):
    os.makedirs(os.path.dirname(ws_path(rel)), exist_ok=True)
    with open(ws_path(rel), "w") as f:
        f.write(content)


def paths(client):
    return [e.get("path") for e in client.events if e["type"] == "change"]


async def through_the_gateway(a, b):
    await a.ok("write", path="/src/app.ts", content="v1")
    for c in (a, b):  # b, another connection, sees a's changes too
        await c.wait_event(change("create", "/src/app.ts", "file"))
    await a.ok("write", path="/src/existing.txt", content="replaced atomically")
    await a.wait_event(change("modify", "/src/existing.txt", "file"))
    await a.ok("mkdir", path="/src/lib")
    await a.wait_event(change("create", "/src/lib", "directory"))
    await a.ok("rename", oldPath="/src/app.ts", newPath="/src/lib/main.ts")
    await a.wait_event(change("delete", "/src/app.ts", "file"))
    await a.wait_event(change("create", "/src/lib/main.ts", "file"))
    await a.ok("delete", path="/src/lib", recursive=True)
    await a.wait_event(change("delete", "/src/lib", "directory"))
    await a.wait_event(change("delete", "/src/lib/main.ts", "file"))
    # An atomic replace is one event, not a create/delete of a temporary file.
    assert not [p for p in paths(a) if ".fsgate-tmp" in p], paths(a)
    creates = [e for e in a.events if e.get("path") == "/src/existing.txt"]
    assert [e["event"] for e in creates] == ["modify"], creates


async def from_outside(a):
    put("src/outside.txt", "one")
    await a.wait_event(change("create", "/src/outside.txt", "file"))
    with open(ws_path("src/outside.txt"), "a") as f:
        f.write(" two")
    await a.wait_event(change("modify", "/src/outside.txt", "file"))
    os.remove(ws_path("src/outside.txt"))
    await a.wait_event(change("delete", "/src/outside.txt", "file"))
    # A new tree made at once: the directories are watched as they appear, and what
    # was created inside before that is reported too.
    os.makedirs(ws_path("src/new/deeper"))
    put("src/new/deeper/leaf.txt", "leaf")
    await a.wait_event(change("create", "/src/new", "directory"))
    await a.wait_event(change("create", "/src/new/deeper", "directory"))
    await a.wait_event(change("create", "/src/new/deeper/leaf.txt", "file"))
    # ... and a file written later in it is seen through its new watch.
    put("src/new/deeper/later.txt", "later")
    await a.wait_event(change("create", "/src/new/deeper/later.txt", "file"))
    # A directory moved within the workspace is re-watched under its new name.
    os.rename(ws_path("src/new"), ws_path("src/moved"))
    await a.wait_event(change("delete", "/src/new", "directory"))
    await a.wait_event(change("create", "/src/moved", "directory"))
    put("src/moved/deeper/after-move.txt", "m")
    await a.wait_event(change("create", "/src/moved/deeper/after-move.txt", "file"))
    assert "/src/new/deeper/after-move.txt" not in paths(a), paths(a)


async def debounced(a):
    # A burst of writes to one file is one create (plus at most one modify if the
    # burst outlasts the maximum delay), not twenty events.
    for i in range(20):
        with open(ws_path("src/burst.log"), "a") as f:
            f.write(f"line {i}\n")
    await a.wait_event(change("create", "/src/burst.log", "file"))
    await asyncio.sleep(0.5)
    burst = [e["event"] for e in a.events if e.get("path") == "/src/burst.log"]
    assert burst[0] == "create" and len(burst) <= 2, burst
    return len(burst)


async def ignored_and_hidden(a):
    for d in IGNORED:
        put(f"{d}/pkg/index.js")
        put(f"src/{d}/nested.js")
    put(".env", "SECRET=1")
    put("src/.env.local", "SECRET=2")
    put(".ssh/id_rsa", "KEY")
    put("config/credentials.json", "{}")
    await a.fail("write", -32003, path="/.env", content="through the gateway")
    # A sentinel written last: once it is reported, the others would have been too.
    put("src/sentinel-1.txt")
    await a.wait_event(change("create", "/src/sentinel-1.txt"))
    await asyncio.sleep(0.3)
    seen = paths(a)
    for p in seen:
        parts = p.strip("/").split("/")
        assert not set(parts) & set(IGNORED), f"ignored path reported: {p}"
        assert ".env" not in p and ".ssh" not in p and "credentials" not in p, f"hidden path reported: {p}"
    assert "/config" in seen, "the visible parent of a hidden file is reported"


async def subscriptions(a, b, c):
    # b subscribed to /src with ?subscribe=; c to /docs with a message.
    put("docs/readme.md", "# docs")
    put("src/sentinel-2.txt")
    await c.wait_event(change("create", "/docs/readme.md"))
    await b.wait_event(change("create", "/src/sentinel-2.txt"))
    await a.wait_event(change("create", "/docs/readme.md"))
    await a.wait_event(change("create", "/src/sentinel-2.txt"))
    await asyncio.sleep(0.3)
    assert all(p.startswith("/src/") for p in paths(b)), paths(b)
    assert all(p == "/docs" or p.startswith("/docs/") for p in paths(c)), paths(c)
    # After unsubscribing, c gets nothing more.
    assert await c.ok("unsubscribe") == {}
    count = len(c.events)
    put("docs/again.md")
    await a.wait_event(change("create", "/docs/again.md"))
    await asyncio.sleep(0.3)
    assert len(c.events) == count, c.events[count:]
    # A subscription path that escapes the workspace is refused.
    await c.fail("subscribe", -32602, path="/../etc")


async def main():
    a = await Client.open()
    b = await Client.open(url=URL + "?subscribe=%2Fsrc")
    c = await Client.open()
    assert await c.ok("subscribe", path="/docs") == {"path": "/docs"}
    await through_the_gateway(a, b)
    await from_outside(a)
    burst = await debounced(a)
    await ignored_and_hidden(a)
    await subscriptions(a, b, c)
    summary = {"events_a": len(a.events), "events_b": len(b.events), "events_c": len(c.events), "burst": burst}
    for x in (a, b, c):
        await x.close()
    done(summary)


if __name__ == "__main__":
    asyncio.run(main())
