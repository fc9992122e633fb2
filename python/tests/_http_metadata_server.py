"""A minimal HTTP metadata server (upstream's protocol), for the tests.

    python _http_metadata_server.py

Serves ``GET|PUT|DELETE /metadata?key=<key>`` on 127.0.0.1, an ephemeral port, and
prints ``{"port": N}`` on stdout once listening. Runs until stdin closes or it is
killed. It runs in its own process because upstream's engine holds the GIL while it
talks to the metadata server.
"""

import json
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STORE = {}
LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def _key(self):
        query = urllib.parse.urlparse(self.path).query
        keys = urllib.parse.parse_qs(query).get("key")
        return keys[0] if keys else None

    def _send(self, code, body=b""):
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802
        with LOCK:
            value = STORE.get(self._key() or "")
        if value is None:
            self._send(404, b"metadata not found")
        else:
            self._send(200, value)

    def do_PUT(self):  # noqa: N802
        key = self._key()
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if key is None:
            self._send(400, b"missing key")
            return
        with LOCK:
            STORE[key] = body
        self._send(200, b"metadata updated")

    def do_DELETE(self):  # noqa: N802
        with LOCK:
            found = STORE.pop(self._key() or "", None)
        if found is None:
            self._send(404, b"metadata not found")
        else:
            self._send(200, b"metadata deleted")

    def log_message(self, *args):
        pass


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdout.write(json.dumps({"port": server.server_address[1]}) + "\n")
    sys.stdout.flush()
    sys.stdin.read()  # until the parent closes stdin or exits
    server.shutdown()


if __name__ == "__main__":
    main()
