"""Eight clients at once, each pipelining requests, against a real fsgate.

Each client writes its own files, reads them back, lists and stats, all requests of a
round in flight together; every answer must match its request. Usage:
many_clients.py [CLIENTS] [ROUNDS]
"""

import asyncio
import sys
import time

from wsclient import Client, done


async def one_client(i, rounds):
    c = await Client.open()
    for r in range(rounds):
        names = [f"/c{i}/r{r}-f{k}.txt" for k in range(5)]
        await asyncio.gather(*[c.ok("write", path=n, content=f"{i}:{n}") for n in names])
        reads = await asyncio.gather(*[c.ok("read", path=n) for n in names])
        assert [x["content"] for x in reads] == [f"{i}:{n}" for n in names], reads
        listing, st = await asyncio.gather(c.ok("list", path=f"/c{i}"), c.ok("stat", path=names[0]))
        have = {e["path"] for e in listing["entries"]}
        assert set(names) <= have, (names, have)
        assert st["size"] == len(f"{i}:{names[0]}".encode()), st
    # Other clients' files are visible too: one workspace.
    await c.ok("read", path="/shared.txt")
    await c.close()
    return rounds * (5 + 5 + 2) + 1


async def main(clients, rounds):
    started = time.monotonic()
    counts = await asyncio.gather(*[one_client(i, rounds) for i in range(clients)])
    took = time.monotonic() - started
    done({"clients": clients, "requests": sum(counts), "seconds": round(took, 3)})


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    asyncio.run(main(n, rounds))
