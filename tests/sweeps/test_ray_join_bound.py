"""``sweep --address`` refuses in seconds an address where no Ray head answers (docs/bounds.md).

``ray.init`` retries without end (over 5 minutes measured) when something accepts the TCP
connection but is not a Ray head; the probe asks for an HTTP/2 (gRPC) answer first. A real gRPC
server from ``grpcio`` (what a Ray head's GCS is) stands in for the head.
"""

from __future__ import annotations

import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from offline_gitd.errors import UsageError
from offline_gitd.sweeps.runner import JOIN_PROBE_SECONDS, check_ray_head


def test_a_silent_listener_is_refused_within_the_probe_time() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    accepted = []
    threading.Thread(target=lambda: accepted.append(listener.accept()), daemon=True).start()
    started = time.monotonic()
    with pytest.raises(UsageError, match="does not answer as a Ray head"):
        check_ray_head(f"127.0.0.1:{listener.getsockname()[1]}")
    assert time.monotonic() - started < JOIN_PROBE_SECONDS + 2
    listener.close()


def test_nothing_listening_is_refused() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
    with pytest.raises(UsageError, match="no Ray cluster answers"):
        check_ray_head(f"127.0.0.1:{port}")


def test_a_grpc_server_passes() -> None:
    server = grpc.server(ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        check_ray_head(f"127.0.0.1:{port}")
    finally:
        server.stop(None)
