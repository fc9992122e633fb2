"""HTTP metadata server for the Transfer Engine (upstream's
``mooncake.http_metadata_server``), on the standard library only.

    python -m mooncake.http_metadata_server --port 8080 [--host 0.0.0.0] [--log-level INFO]

Engines use it as ``http://<host>:<port>/metadata``. The protocol is upstream's: any
method on ``/metadata?key=<key>``; a missing key gets 400, ``GET`` returns the stored
bytes or 404, ``PUT`` stores the body (a key containing ``rpc_meta`` that already
exists gets 400), ``DELETE`` removes it or gets 404, other methods get 405. Replies are
``application/json``. :class:`KVBootstrapServer` runs it in a background thread.

(The ``mooncake_http_metadata_server`` command runs the native server instead, which
speaks the same protocol.)
"""

from __future__ import annotations

import argparse
import enum
import logging
import signal
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, List, Optional, Tuple

log = logging.getLogger("mooncake.http_metadata_server")


class KVPoll(enum.Enum):
    """Status of the server (:meth:`KVBootstrapServer.poll`)."""

    Failed = 0
    Bootstrapping = 1
    WaitingForInput = 2
    Transferring = 3
    Success = 4


class _Handler(BaseHTTPRequestHandler):
    """One request against the owning server's ``store``."""

    protocol_version = "HTTP/1.1"
    server: "_Server"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        log.debug("%s %s", self.address_string(), format % args)

    def _reply(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _handle(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        if url.path != "/metadata":
            self._reply(404, b"404: Not Found")
            return
        key = urllib.parse.parse_qs(url.query).get("key", [""])[0].strip()
        if not key:
            self._reply(400, b"metadata key is required")
            return
        owner = self.server.owner
        with owner.lock:
            status, text = owner._apply(self.command, key, body)
        self._reply(status, text)

    do_GET = do_PUT = do_DELETE = do_POST = do_PATCH = do_HEAD = do_OPTIONS = _handle


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: "KVBootstrapServer"


class KVBootstrapServer:
    """The metadata server: ``run()`` starts it in a background thread, ``close()``
    stops it, ``poll()`` says whether it is serving. ``store`` is the key -> bytes
    table."""

    def __init__(self, port: int, host: str = "0.0.0.0") -> None:
        self.port = port
        self.host = host
        self.store: Dict[str, bytes] = {}
        self.lock = threading.Lock()
        self.thread: Optional[threading.Thread] = None
        self._server: Optional[_Server] = None

    def _apply(self, method: str, key: str, body: bytes) -> Tuple[int, bytes]:
        if method == "GET":
            value = self.store.get(key)
            return (404, b"metadata not found") if value is None else (200, value)
        if method == "PUT":
            if "rpc_meta" in key and key in self.store:
                return 400, b"Duplicate rpc_meta key not allowed"
            self.store[key] = body
            return 200, b"metadata updated"
        if method == "DELETE":
            if self.store.pop(key, None) is None:
                return 404, b"metadata not found"
            return 200, b"metadata deleted"
        return 405, b"Method not allowed"

    def run(self) -> threading.Thread:
        """Starts serving in a daemon thread and returns it. The port is bound when
        this returns (``port`` 0 picks a free one and ``port`` then holds it); if it
        cannot be, the error is logged and :meth:`poll` reports ``KVPoll.Failed``."""
        try:
            self._server = _Server((self.host, self.port), _Handler)
        except OSError as e:
            log.error("Server error: %s", e)
            self.thread = threading.Thread(target=lambda: None, daemon=True)
            self.thread.start()
            self.thread.join()
            return self.thread
        self._server.owner = self
        self.port = self._server.server_address[1]
        self.thread = threading.Thread(target=self._server.serve_forever, name="http-metadata", daemon=True)
        self.thread.start()
        log.info("HTTP Metadata Server started on %s:%s", self.host, self.port)
        return self.thread

    def close(self) -> None:
        """Stops the server and waits (up to 2 s) for its thread."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self.thread is not None and self.thread.is_alive():
            self.thread.join(timeout=2)

    def poll(self) -> KVPoll:
        """``KVPoll.Success`` while serving, else ``KVPoll.Failed``."""
        if self.thread is None or not self.thread.is_alive():
            return KVPoll.Failed
        return KVPoll.Success


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """The command line: ``--port`` (8080), ``--host`` (0.0.0.0), ``--log-level``."""
    parser = argparse.ArgumentParser(
        description="HTTP Metadata Server for Mooncake",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--port", type=int, default=8080, help="Port to listen on")
    parser.add_argument("--host", type=str, default="0.0.0.0", help="Host to bind to")
    parser.add_argument(
        "--log-level",
        type=str,
        choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
        default="INFO",
        help="Logging level",
    )
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    """Serves until SIGINT or SIGTERM."""
    args = parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, args.log_level),
        format="%(asctime)s - %(name)s - %(levelname)s - %(message)s",
    )
    server = KVBootstrapServer(port=args.port, host=args.host)
    server.run()

    def stop(signum: int, frame: object) -> None:
        log.info("Shutting down...")
        server.close()
        sys.exit(0)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    sys.exit(main())
