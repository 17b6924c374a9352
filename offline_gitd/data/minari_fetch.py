"""Download a Minari dataset through ``minari.download_dataset``, failing at once without a network.

``minari.download_dataset`` retries for about 23 s before it fails when there is no network, so a
TCP probe of the remote it will use (proxy included) runs first (docs/datasets.md).
"""

from __future__ import annotations

import os
import socket
import threading
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlparse

from offline_gitd.errors import UsageError

MINARI_DEFAULT_REMOTE = "hf://farama-minari"
HF_DEFAULT_ENDPOINT = "https://huggingface.co"


def minari_endpoint(env: Mapping[str, str]) -> tuple[str, int]:
    """(host, port) that ``minari.download_dataset`` will connect to first, proxy included.

    The remote is ``MINARI_REMOTE`` (``hf://org`` -> ``HF_ENDPOINT``, ``gcp://bucket`` -> GCS); an
    ``https_proxy`` in the environment is where the connection really goes.
    """
    remote = env.get("MINARI_REMOTE", MINARI_DEFAULT_REMOTE)
    if remote.startswith("gcp://"):
        url = "https://storage.googleapis.com"
    else:
        url = env.get("HF_ENDPOINT", HF_DEFAULT_ENDPOINT)
    parsed = urlparse(url)
    proxies = {k.lower(): v for k, v in env.items() if k.lower() in ("https_proxy", "http_proxy")}
    proxy = proxies.get(f"{parsed.scheme}_proxy")
    if proxy and not urllib.request.proxy_bypass(parsed.hostname or ""):
        parsed = urlparse(proxy if "://" in proxy else f"http://{proxy}")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return parsed.hostname or "", port


def probe_tcp(host: str, port: int, timeout: float) -> str | None:
    """None if a TCP connection to ``host:port`` opens within ``timeout`` s, else why not.

    Runs in a daemon thread so a slow DNS lookup (which ignores socket timeouts) cannot hold
    the caller past ``timeout``.
    """
    result: list[str | None] = []

    def attempt() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            result.append(None)
        except OSError as err:
            result.append(f"{type(err).__name__}: {err}")

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(timeout)
    return result[0] if result else f"no answer within {timeout:g} s"


def fetch_minari(dataset_id: str, datasets_dir: Path, probe_timeout: float = 3.0) -> tuple[Path, bool]:
    """Download a Minari dataset into ``datasets_dir`` (``MINARI_DATASETS_PATH``).

    Returns the dataset's folder and whether it was downloaded now (False: already present).

    Without a network ``minari.download_dataset`` retries for ~23 s before failing, so a TCP probe of the remote (``probe_timeout`` s) runs first and turns "no
    network" into an error at once; everything ``minari`` raises becomes a one-line UsageError.
    A dataset already on disk is reported without touching the network.
    """
    local = datasets_dir / dataset_id
    if (local / "data").exists():
        return local, False
    host, port = minari_endpoint(os.environ)
    reason = probe_tcp(host, port, probe_timeout)
    if reason is not None:
        raise UsageError(
            f"cannot reach the Minari remote at {host}:{port} ({reason}); no network? "
            "(remote: MINARI_REMOTE / HF_ENDPOINT)"
        )
    os.environ["MINARI_DATASETS_PATH"] = str(datasets_dir)
    import minari

    try:
        minari.download_dataset(dataset_id)
    except Exception as err:  # minari and huggingface_hub raise many types; all end the command
        first_line = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise UsageError(f"minari could not download {dataset_id!r}: {first_line}") from err
    if not local.exists():
        raise UsageError(f"minari reported no error but {local} does not exist")
    return local, True
