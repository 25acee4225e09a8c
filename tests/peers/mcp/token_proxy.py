"""A loopback HTTP forwarder that adds `Authorization: Bearer TOKEN` to every request.

The MCP conformance suite's client sends no credential of its own and builds some of its
requests without the URL's query, so it reaches `fsgate serve --transport http` through
this: the token travels as a header, as a real client sends it.

Usage: token_proxy.py UPSTREAM_PORT TOKEN; prints the port it listens on, then serves
until killed. Each response is read whole and passed on with its status and headers.
"""

import http.client
import http.server
import sys

UPSTREAM = int(sys.argv[1])
TOKEN = sys.argv[2]
HOP = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "content-length"}


class Forward(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def forward(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        headers["Authorization"] = f"Bearer {TOKEN}"
        up = http.client.HTTPConnection("127.0.0.1", UPSTREAM, timeout=30)
        up.request(self.command, self.path, body=body, headers=headers)
        resp = up.getresponse()
        data = resp.read()
        self.send_response(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in HOP:
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        up.close()

    do_GET = do_POST = do_DELETE = do_PUT = forward

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Forward)
print(server.server_address[1], flush=True)
server.serve_forever()
