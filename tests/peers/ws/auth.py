"""Who may connect, checked with Python `websockets` against a real fsgate.

Without a token, with a wrong one, or from a foreign browser Origin the upgrade is
refused with an HTTP status and no WebSocket; the right token works in the header
(either case of `Bearer`) and in `?token=` (for browsers, which cannot set headers).
"""

import asyncio
import json

import websockets
from websockets.exceptions import InvalidStatus

from wsclient import TOKEN, URL, Client, connect, done


async def refused(status, **kw):
    try:
        ws = await websockets.connect(kw.pop("url", URL), **kw)
    except InvalidStatus as e:
        assert e.response.status_code == status, (kw, e.response.status_code, e.response.body)
        body = e.response.body.decode(errors="replace")
        assert TOKEN not in body
        return body.strip()
    await ws.close()
    raise AssertionError(f"connection with {kw} should be refused with {status}")


async def works(client):
    entries = (await client.ok("list", path="/"))["entries"]
    assert [e["name"] for e in entries] == ["readme.md"], entries
    await client.close()


async def main():
    reasons = {}
    reasons["no token"] = await refused(401)
    reasons["wrong token"] = await refused(401, additional_headers={"Authorization": "Bearer " + "0" * 64})
    reasons["token prefix"] = await refused(401, additional_headers={"Authorization": "Bearer " + TOKEN[:-1]})
    reasons["wrong query token"] = await refused(401, url=URL + "?token=nope")
    reasons["basic auth"] = await refused(401, additional_headers={"Authorization": "Basic " + TOKEN})
    good = {"Authorization": "Bearer " + TOKEN}
    reasons["foreign origin"] = await refused(403, additional_headers=good, origin="https://evil.example")
    reasons["null origin"] = await refused(403, additional_headers=good, origin="null")
    reasons["localhost page"] = await refused(403, additional_headers=good, origin="http://localhost:3000")
    # The token in the URL is refused too when the Origin is foreign.
    reasons["origin with query token"] = await refused(403, url=URL + "?token=" + TOKEN, origin="https://evil.example")

    await works(await Client.open())
    await works(Client(await websockets.connect(URL + "?token=" + TOKEN)))
    await works(Client(await websockets.connect(URL, additional_headers={"Authorization": "bearer " + TOKEN})))
    localhost_url = URL.replace("127.0.0.1", "localhost")
    await works(Client(await connect(url=localhost_url)))
    done({"reasons": reasons})


if __name__ == "__main__":
    asyncio.run(main())
