"""A custom `[ws] ignore` list replaces the default one: `generated` is silent, and
`node_modules` (no longer listed) is reported."""

import asyncio
import os

from wsclient import WORKSPACE, Client, change, done


def put(rel):
    path = os.path.join(WORKSPACE, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("x")


async def main():
    c = await Client.open()
    put("generated/out.js")
    put("src/generated/deep.js")
    put("node_modules/pkg/index.js")
    await c.wait_event(change("create", "/node_modules/pkg/index.js", "file"))
    put("sentinel.txt")
    await c.wait_event(change("create", "/sentinel.txt"))
    await asyncio.sleep(0.3)
    seen = [e["path"] for e in c.events]
    assert not [p for p in seen if "generated" in p], seen
    await c.close()
    done({"seen": sorted(seen)})


if __name__ == "__main__":
    asyncio.run(main())
