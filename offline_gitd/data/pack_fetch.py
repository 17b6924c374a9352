"""``fetch minari ID --mirror URL``: the package's own datasets from mirrors of their packs
(docs/datasets.md#packs).

A manifest entry with a ``pack`` names the archive (file, size, SHA-256) and the entry's
``sha256`` the content it restores. The archive is downloaded with the RL Unplugged fetch's code
(:func:`~offline_gitd.data.http_download.fetch_shard`: ``Range`` resume into a ``.part``, retries
with back-off, a minimum rate, mirrors tried in order), checked against the manifest's size and
SHA-256 through a lock book seeded from the manifest, then restored by
:func:`~offline_gitd.data.minari_pack.restore_pack`, which checks the content digest before the
dataset takes its final name. ``file://`` mirrors (a shared disk, a folder a GPU machine was sent)
go through the same code, served by :func:`local_or_http_opener`.
"""

from __future__ import annotations

import email.message
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from offline_gitd.data.http_download import RetryPolicy, ShardTask, fetch_shard
from offline_gitd.data.lock_book import LockBook, LockEntry
from offline_gitd.data.manifest import read_manifest, read_manifest_document
from offline_gitd.data.minari_pack import Restored, restore_pack
from offline_gitd.errors import UsageError

PACKS_DIR = "minari_packs"  # under the data root: downloaded archives and their lock book
LOCK_NAME = "packs.lock.json"
MISSING_HINT = "a mirror keeps each pack as BASE/FILE, FILE the manifest entry's pack file"


def repository_manifests() -> list[Path]:
    """The manifests of a source checkout (``datasets/*.json`` beside the package); none in a
    wheel, where ``--manifest`` names one."""
    folder = Path(__file__).resolve().parents[2] / "datasets"
    return sorted(p for p in folder.glob("*.json") if _is_manifest(p)) if folder.is_dir() else []


def _is_manifest(path: Path) -> bool:
    try:
        read_manifest(path)
    except (ValueError, KeyError, TypeError, OSError):
        return False
    return True


@dataclass(frozen=True)
class Found:
    """A dataset's manifest entry, the manifest it came from and that manifest's mirrors."""

    entry: dict[str, Any]
    manifest: Path
    mirrors: tuple[str, ...]


def find_entry(dataset_id: str, manifests: Sequence[Path]) -> Found | None:
    """The first manifest entry for ``dataset_id`` among ``manifests`` (None: no manifest has it)."""
    for path in manifests:
        try:
            document = read_manifest_document(path)
        except (ValueError, OSError) as err:
            raise UsageError(f"--manifest {path}: {err}") from None
        for entry in document["datasets"]:
            if entry.get("id") == dataset_id:
                return Found(entry, path, tuple(document.get("mirrors") or ()))
    return None


def check_mirror(url: str) -> str:
    """A mirror is an http(s) URL with a host or a ``file://`` URL (trailing ``/`` dropped)."""
    parts = urllib.parse.urlparse(url)
    if parts.scheme in ("http", "https") and parts.netloc or parts.scheme == "file" and parts.path:
        return url.rstrip("/")
    raise UsageError(f"--mirror must be an http://, https:// or file:// URL, got {url!r}")


class _FileResponse:
    """A ``file://`` URL answered like an HTTP server that honours ``Range``: 200 with the whole
    file, or 206 from the requested offset with ``Content-Range``."""

    def __init__(self, path: Path, offset: int) -> None:
        self._file: IO[bytes] = path.open("rb")
        size = path.stat().st_size
        self._file.seek(offset)
        self.status = 206 if offset else 200
        self.headers = email.message.Message()
        self.headers["Content-Length"] = str(size - offset)
        if offset:
            self.headers["Content-Range"] = f"bytes {offset}-{size - 1}/{size}"

    def read(self, n: int = -1) -> bytes:
        return self._file.read(n)

    read1 = read

    def __enter__(self) -> _FileResponse:
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()


def local_or_http_opener(request: urllib.request.Request, timeout: float) -> Any:
    """``urllib.request.urlopen`` for http(s); ``file://`` URLs answered by :class:`_FileResponse`."""
    parts = urllib.parse.urlparse(request.full_url)
    if parts.scheme != "file":
        return urllib.request.urlopen(request, timeout=timeout)
    path = Path(urllib.request.url2pathname(parts.path))
    if not path.is_file():
        raise urllib.error.HTTPError(request.full_url, 404, "no such file", email.message.Message(), None)
    offset = 0
    range_header = request.get_header("Range") or ""
    if range_header.startswith("bytes="):
        offset = int(range_header.removeprefix("bytes=").split("-")[0])
        if offset >= path.stat().st_size:
            raise urllib.error.HTTPError(request.full_url, 416, "range not satisfiable", email.message.Message(), None)
    return _FileResponse(path, offset)


@dataclass(frozen=True)
class PackFetch:
    """What ``fetch minari`` did with a pack: where the archive and the dataset are, whether the
    archive was downloaded now, and the download's notes (a source refused, a local copy redone)."""

    archive: Path
    restored: Restored
    downloaded: bool
    download_seconds: float
    note: str


def fetch_pack(
    dataset_id: str,
    found: Found,
    mirrors: Sequence[str],
    root: Path,
    datasets_dir: Path,
    policy: RetryPolicy = RetryPolicy(),
    opener: Any = local_or_http_opener,
) -> PackFetch:
    """Download the pack of ``found.entry`` from ``mirrors`` (in order) into ``root/minari_packs``
    and restore it as ``datasets_dir/dataset_id``; any failure is one UsageError, the partial
    download kept for the next fetch and nothing under the dataset's final name."""
    from offline_gitd.data.rlu_fetch import _TqdmProgress

    pack = found.entry.get("pack")
    if not isinstance(pack, dict) or not {"file", "bytes", "sha256"} <= set(pack):
        raise UsageError(
            f"{found.manifest} lists {dataset_id} without a pack; pack it where it was recorded: "
            f"offline_gitd datasets pack minari:{dataset_id} --out DIR --manifest {found.manifest}"
        )
    sources = [check_mirror(url) for url in mirrors]
    if not sources:
        raise UsageError(
            f"no mirror for {dataset_id}: {found.manifest} lists none and no --mirror was given "
            "(no public copy of the package's packs exists yet; docs/datasets.md#packs)"
        )
    name = str(pack["file"])
    if "/" in name or name in ("", ".", ".."):
        raise UsageError(f"{found.manifest}: pack file {name!r} of {dataset_id} is not a plain file name")
    folder = root / PACKS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    book = LockBook(folder / LOCK_NAME, {"kind": "minari packs"})
    wanted = LockEntry(name, int(pack["bytes"]), str(pack["sha256"]), source=str(found.manifest))
    known = book.get(name)
    if known is None or (known.size, known.sha256) != (wanted.size, wanted.sha256):
        book.record(wanted)  # the manifest is the authority on what the pack must be
    urls = [f"{base}/{urllib.parse.quote(name)}" for base in sources]
    task = ShardTask(name, urls[0], folder / name, tuple(urls[1:]), missing_hint=MISSING_HINT)
    progress = _TqdmProgress(f"pack {name}", 1)
    start = time.perf_counter()
    try:
        outcome = fetch_shard(task, book, policy, progress, opener)
    finally:
        progress.close()
    seconds = time.perf_counter() - start
    if outcome.status == "failed":
        raise UsageError(f"could not fetch the pack of {dataset_id}: {outcome.message}")
    restored = restore_pack(task.dest, dataset_id, datasets_dir, found.entry)
    return PackFetch(task.dest, restored, outcome.status == "fetched", seconds, outcome.message)


def manifest_summary(found: Found) -> str:
    """One line naming the entry fetched: id, steps, content digest and the manifest."""
    entry = found.entry
    return f"{entry['id']}: {entry.get('steps')} steps, sha256 {str(entry.get('sha256'))[:16]} ({found.manifest})"
