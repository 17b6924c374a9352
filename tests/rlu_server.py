"""A loopback stand-in for ``storage.googleapis.com/rl_unplugged`` in tests.

Serves files from a folder with the headers GCS sends (``x-goog-hash``,
``x-goog-stored-content-length``, ``Accept-Ranges``), honours ``Range: bytes=N-[M]`` with 206 and
``Content-Range``, and can misbehave on request so the fetcher's recovery paths run for real:
drop the connection mid-body once, corrupt the body, answer an HTTP error once, ignore ranges,
stall after some bytes once or on every request, hang up after some bytes on every request,
trickle a few bytes at a time, or be down (every request refused).
It records every request it saw.
"""

from __future__ import annotations

import base64
import hashlib
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType

from offline_gitd.data.crc32c import crc32c

_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


@dataclass(frozen=True)
class SeenRequest:
    """One request as the server saw it."""

    method: str
    path: str
    range: str | None


@dataclass
class Misbehaviour:
    """What the server does wrong, keyed by URL path (``/prefix/layout/Game/run_1-...``)."""

    drop_once: set[str] = field(default_factory=set)
    corrupt: set[str] = field(default_factory=set)
    error_once: dict[str, int] = field(default_factory=dict)
    ignore_range: bool = False
    send_hashes: bool = True
    trickle: dict[str, tuple[int, float]] = field(default_factory=dict)  # path -> (bytes, every s)
    stall_once: dict[str, int] = field(default_factory=dict)  # path -> bytes sent before hanging
    stall_every: dict[str, int] = field(default_factory=dict)  # the same on every request, Range ones too
    drop_every: dict[str, int] = field(default_factory=dict)  # path -> bytes sent before hanging up, each time


def goog_hash(data: bytes) -> str:
    """The ``x-goog-hash`` value GCS sends for ``data``."""
    crc = base64.b64encode(crc32c(data).to_bytes(4, "big")).decode()
    md5 = base64.b64encode(hashlib.md5(data).digest()).decode()
    return f"crc32c={crc},md5={md5}"


class RluServer:
    """``with RluServer(root, prefix="/mirror") as server: server.base_url ...``.

    A file ``root/a/b`` is served at ``{base_url}/a/b``; anything else is a 404.
    """

    def __init__(self, root: Path, prefix: str = "/rl_unplugged") -> None:
        self.root = root
        self.prefix = prefix.rstrip("/")
        self.misbehave = Misbehaviour()
        self.requests: list[SeenRequest] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._closing = threading.Event()  # ends stalls and trickles when the server stops
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}{self.prefix}"

    def path_of(self, relative: str) -> str:
        """URL path of a file given relative to ``root``."""
        return f"{self.prefix}/{relative}"

    def gets(self, path: str | None = None) -> list[SeenRequest]:
        """GET requests seen, optionally for one URL path only."""
        with self._lock:
            return [r for r in self.requests if r.method == "GET" and path in (None, r.path)]

    def __enter__(self) -> RluServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                """Keep pytest output clean."""

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                range_header = self.headers.get("Range")
                with server._lock:
                    server.requests.append(SeenRequest("GET", self.path, range_header))
                    error = server.misbehave.error_once.pop(self.path, None)
                    drop = self.path in server.misbehave.drop_once
                    server.misbehave.drop_once.discard(self.path)
                    stall = server.misbehave.stall_once.pop(self.path, None)
                    if stall is None:
                        stall = server.misbehave.stall_every.get(self.path)
                    drop_after = server.misbehave.drop_every.get(self.path)
                    trickle = server.misbehave.trickle.get(self.path)
                if error is not None:
                    self.send_error(error)
                    return
                relative = self.path.removeprefix(server.prefix + "/")
                file = server.root / relative
                if not self.path.startswith(server.prefix + "/") or not file.is_file():
                    self.send_error(404)
                    return
                data = file.read_bytes()
                start, end, status = 0, len(data) - 1, 200
                match = _RANGE.match(range_header or "")
                if match and not server.misbehave.ignore_range:
                    start = int(match.group(1))
                    end = int(match.group(2)) if match.group(2) else len(data) - 1
                    if start >= len(data):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(data)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    status = 206
                body = data[start : end + 1]
                if self.path in server.misbehave.corrupt:
                    body = bytes([body[0] ^ 0xFF]) + body[1:]
                self.send_response(status)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("x-goog-stored-content-length", str(len(data)))
                if server.misbehave.send_hashes:
                    self.send_header("x-goog-hash", goog_hash(data))
                if status == 206:
                    self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
                self.end_headers()
                if drop:
                    # Half the body, then hang up: the client sees a short read.
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                if drop_after is not None:
                    self.wfile.write(body[:drop_after])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                if stall is not None:
                    # Some bytes, then silence with the connection open: the client's timeout fires.
                    self.wfile.write(body[:stall])
                    self.wfile.flush()
                    server._closing.wait(30)
                    self.close_connection = True
                    return
                if trickle is not None:
                    size, every = trickle
                    for start in range(0, len(body), size):
                        try:
                            self.wfile.write(body[start : start + size])
                            self.wfile.flush()
                        except OSError:  # the client gave up on us
                            return
                        if server._closing.wait(every):
                            return
                    return
                self.wfile.write(body)

        return Handler
