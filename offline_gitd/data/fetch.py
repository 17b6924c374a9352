"""Download RL Unplugged Atari shards (and Minari datasets) safely (DESIGN §4, "Fetch").

Shards are GB-sized and the bucket publishes no checksums, so every download is checked twice:
against what the server says (size from ``Content-Length`` / ``x-goog-stored-content-length``,
``x-goog-hash`` crc32c and md5 when sent) and, after the first verified download of a shard,
against the run's lock file ``run_{N}.lock.json`` (name, size, sha256) so later copies, mirrors
and local files can be checked without the server.

Invariants: bytes arrive in ``NAME.part`` (kept across failures, resumed with ``Range``); only a
verified file is renamed to its final name, so a final name always holds a whole, verified shard;
a bad download is deleted, never left in place. Only the standard library talks HTTP, so a mirror
needs nothing but a static file server that honours ``Range``.
"""

from __future__ import annotations

import base64
import binascii
import fcntl
import hashlib
import http.client
import json
import os
import re
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import urlparse

from offline_gitd import __version__
from offline_gitd.data.crc32c import crc32c
from offline_gitd.data.paths import rlu_raw_dir
from offline_gitd.data.registry import RluRegistry, parse_checkpoints
from offline_gitd.errors import UsageError

CHUNK_BYTES = 1 << 20
USER_AGENT = f"offline_gitd/{__version__} (+urllib)"
LOCK_FORMAT_VERSION = 1
# Byte counts a server sends: ASCII digits only (``\d`` and str.isdigit take "²" or "١", which
# int() refuses or reads as another number) and at most 20 of them (past 4300 int() refuses too).
_BYTES = r"([0-9]{1,20})"
_CONTENT_RANGE = re.compile(rf"bytes {_BYTES}-{_BYTES}/({_BYTES[1:-1]}|\*)")

Opener = Callable[..., Any]  # urllib.request.urlopen's shape: (request, timeout=...) -> response
Status = Literal["fetched", "skipped", "failed"]
STATUSES: tuple[Status, ...] = ("fetched", "skipped", "failed")


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try: back-off doubles from ``base_delay`` up to ``max_delay``.

    ``attempts`` counts consecutive attempts that made no progress; an attempt that received bytes
    resets the count, so a flaky link can still finish a GB file it resumes many times.
    """

    attempts: int = 5
    base_delay: float = 1.0
    max_delay: float = 60.0
    timeout: float = 60.0
    # A server that trickles bytes never hits the socket timeout: below ``min_rate`` bytes/s over
    # ``rate_window`` s an attempt is abandoned (its bytes kept) and counts as one without progress.
    min_rate: float = 1024.0
    rate_window: float = 60.0
    deadline: float | None = None  # seconds for one shard, all attempts together (None: no limit)

    def delay(self, failures: int) -> float:
        """Seconds to wait after the ``failures``-th consecutive failure (1-based)."""
        return min(self.max_delay, self.base_delay * 2 ** (failures - 1))


@dataclass(frozen=True)
class ShardTask:
    """One file to fetch: its bucket file name, URL and final path."""

    name: str
    url: str
    dest: Path

    @property
    def part(self) -> Path:
        """Where bytes accumulate until the file is verified."""
        return self.dest.with_name(self.dest.name + ".part")


@dataclass(frozen=True)
class ShardOutcome:
    """What happened to one shard; ``message`` says why when it failed or was repaired."""

    name: str
    status: Status
    size: int = 0
    message: str = ""


@dataclass(frozen=True)
class ServerChecks:
    """What the server promised about the whole object (None: it did not say)."""

    size: int | None = None
    crc32c: int | None = None
    md5: bytes | None = None


@dataclass(frozen=True)
class FileDigests:
    """Size and digests of a local file, computed in one pass."""

    size: int
    sha256: str
    crc32c: int
    md5: bytes


@dataclass(frozen=True)
class LockEntry:
    """One verified shard as recorded in the lock file."""

    name: str
    size: int
    sha256: str


@dataclass
class FetchSummary:
    """Outcomes of a fetch, in shard order, plus where things went."""

    outcomes: list[ShardOutcome]
    directory: Path
    lock_path: Path
    counts: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.counts = {s: sum(o.status == s for o in self.outcomes) for s in STATUSES}

    @property
    def failed(self) -> list[ShardOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]


class Progress(Protocol):
    """The bits of a progress bar the downloader drives (thread-safe by contract)."""

    def add_total(self, nbytes: int) -> None: ...

    def advance(self, nbytes: int) -> None: ...


class _TransientError(Exception):
    """A failure worth retrying (network, 5xx, short body); the ``.part`` file is kept."""


class _RestartError(Exception):
    """The ``.part`` file cannot be resumed (server ignored the range, object changed)."""


class _FatalError(Exception):
    """A failure retrying will not fix (404, 403, ...)."""


class _TooSlowError(_TransientError):
    """Bytes arrive, but too slowly to finish: retry, yet do not count the attempt as progress."""


# --------------------------------------------------------------------------- pure helpers


def parse_content_range(value: str | None) -> tuple[int, int, int | None] | None:
    """``"bytes 100-199/200"`` -> ``(100, 199, 200)``; ``None`` when absent or malformed."""
    match = _CONTENT_RANGE.fullmatch((value or "").strip())
    if not match:
        return None
    total = None if match.group(3) == "*" else int(match.group(3))
    return int(match.group(1)), int(match.group(2)), total


def _byte_count(value: str | None) -> int | None:
    """A header's byte count; ``None`` when absent or not one."""
    match = re.fullmatch(_BYTES, (value or "").strip())
    return int(match.group(1)) if match else None


def parse_goog_hash(values: Iterable[str]) -> tuple[int | None, bytes | None]:
    """crc32c (as int) and md5 (raw digest) from ``x-goog-hash`` header values.

    GCS sends either one header ``crc32c=<b64>,md5=<b64>`` or one header per hash; both work.
    Malformed entries are ignored (the size and lock checks still apply).
    """
    crc: int | None = None
    md5: bytes | None = None
    for value in values:
        for item in value.split(","):
            key, _, b64 = item.strip().partition("=")
            try:
                raw = base64.b64decode(b64, validate=True)
            except (binascii.Error, ValueError):
                continue
            if key == "crc32c" and len(raw) == 4:
                crc = int.from_bytes(raw, "big")
            elif key == "md5" and len(raw) == 16:
                md5 = raw
    return crc, md5


def server_checks(status: int, headers: Any) -> ServerChecks:
    """What a 200/206 response says about the whole object (size and hashes).

    For 206 the body is a slice, so the size comes from ``Content-Range``'s total; GCS also sends
    ``x-goog-stored-content-length`` and whole-object hashes on ranged answers.
    """
    size = _byte_count(headers.get("x-goog-stored-content-length"))
    if size is None and status == 206:
        content_range = parse_content_range(headers.get("Content-Range"))
        size = content_range[2] if content_range else None
    elif size is None:
        size = _byte_count(headers.get("Content-Length"))
    crc, md5 = parse_goog_hash(headers.get_all("x-goog-hash") or [])
    return ServerChecks(size=size, crc32c=crc, md5=md5)


def same_object(a: ServerChecks, b: ServerChecks) -> bool:
    """False when two responses describe different objects (a field both give differs)."""
    pairs = ((a.size, b.size), (a.crc32c, b.crc32c), (a.md5, b.md5))
    return all(x is None or y is None or x == y for x, y in pairs)


def verification_problems(
    digests: FileDigests, checks: ServerChecks, lock: LockEntry | None, lock_name: str
) -> list[str]:
    """Every way a downloaded file disagrees with the server or the lock file (empty: good)."""
    problems = []
    if checks.size is not None and digests.size != checks.size:
        problems.append(f"size {digests.size} != {checks.size} announced by the server")
    if checks.crc32c is not None and digests.crc32c != checks.crc32c:
        problems.append(f"crc32c {digests.crc32c:08x} != {checks.crc32c:08x} from x-goog-hash")
    if checks.md5 is not None and digests.md5 != checks.md5:
        problems.append(f"md5 {digests.md5.hex()} != {checks.md5.hex()} from x-goog-hash")
    if lock is not None and (digests.size, digests.sha256) != (lock.size, lock.sha256):
        problems.append(
            f"size/sha256 {digests.size}/{digests.sha256[:12]}... != "
            f"{lock.size}/{lock.sha256[:12]}... recorded in {lock_name} "
            "(remote changed? delete the lock entry to accept it)"
        )
    return problems


def check_base_url(base_url: str) -> None:
    """A mirror must be an http(s) URL with a host: anything else would fail per shard, after
    retries, with an error about the scheme or a socket rather than about ``--base-url``."""
    parts = urlparse(base_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"--base-url must be an http:// or https:// URL with a host, got {base_url!r}")


def plan_rlu_fetch(
    registry: RluRegistry,
    root: Path,
    game: str,
    run: int,
    checkpoints: str | None = None,
    layout: str | None = None,
    base_url: str | None = None,
) -> list[ShardTask]:
    """Validate the request and list the shards to fetch; bad input is a one-line UsageError.

    In the episodes layout shard ``i`` is checkpoint ``i``; the transitions layout is not split by
    checkpoint, so ``checkpoints`` is refused there rather than silently mapped to shards.
    """
    registry.check_game(game)
    registry.check_run(run)
    if base_url is not None:
        check_base_url(base_url)
    layout = registry.resolve_layout(layout)
    num_shards = registry.num_shards(game, layout)
    if checkpoints is None:
        shards: Sequence[int] = range(num_shards)
    elif registry.layouts[layout].shard_is_checkpoint:
        shards = parse_checkpoints(checkpoints, num_shards, owner=game)
    else:
        alias = registry.layouts[layout].alias
        raise UsageError(
            f"--checkpoints applies to the episodes layout only; the {alias} layout ({layout}) has "
            f"{num_shards} shards that are not split by checkpoint"
        )
    directory = rlu_raw_dir(root, layout, game)
    tasks = []
    for shard in shards:
        url = registry.shard_url(game, run, shard, layout, base_url)
        name = registry.object_name(game, run, shard, layout).rsplit("/", 1)[-1]
        tasks.append(ShardTask(name=name, url=url, dest=directory / name))
    return tasks


def lock_path(directory: Path, run: int) -> Path:
    """The lock file of one run's shards, beside them."""
    return directory / f"run_{run}.lock.json"


def format_bytes(nbytes: float) -> str:
    """Human-readable binary size: ``1536`` -> ``"1.5 KiB"``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(nbytes) < 1024 or unit == "GiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    raise AssertionError("unreachable")


# --------------------------------------------------------------------------- local files


def hash_file(path: Path, server_hashes: bool = True) -> FileDigests:
    """Size and sha256 of a file, plus crc32c and md5 when ``server_hashes``, in one read.

    Checking a present shard against the lock needs sha256 only; skipping md5 and crc32c there
    keeps re-running a fetch over a 50 GB run cheap.
    """
    sha256, md5, crc, size = hashlib.sha256(), hashlib.md5(), 0, 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK_BYTES * 4):
            sha256.update(chunk)
            if server_hashes:
                md5.update(chunk)
                crc = crc32c(chunk, crc)
            size += len(chunk)
    return FileDigests(size=size, sha256=sha256.hexdigest(), crc32c=crc, md5=md5.digest())


class LockBook:
    """The run's lock file, shared by the download threads; each update is written atomically."""

    def __init__(self, path: Path, header: Mapping[str, Any]) -> None:
        self.path = path
        self.header = dict(header)
        self.entries = read_lock(path)
        self._lock = threading.Lock()

    def get(self, name: str) -> LockEntry | None:
        """The entry as on disk now: another fetch process may have recorded it meanwhile."""
        with self._lock:
            self.entries.update(read_lock(self.path))
            return self.entries.get(name)

    def record(self, entry: LockEntry) -> None:
        """Add ``entry``, merged with what other processes wrote (read under the file lock).
        A write that fails (a full disk) is one line and leaves no temp file."""
        with self._lock, _file_lock(self.path.with_name(f".{self.path.name}.flock")):
            self.entries.update(read_lock(self.path))
            self.entries[entry.name] = entry
            payload = {
                "format_version": LOCK_FORMAT_VERSION,
                **self.header,
                "shards": [vars(e) for _, e in sorted(self.entries.items())],
            }
            tmp = self.path.with_name(self.path.name + ".tmp")
            try:
                tmp.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
                os.replace(tmp, self.path)
            except OSError as err:
                tmp.unlink(missing_ok=True)
                raise UsageError(
                    f"cannot write {self.path}: {err.strerror or err}; the verified shards are kept "
                    "and rerunning the fetch records them once there is room"
                ) from None


@contextmanager
def _file_lock(path: Path, stop: threading.Event | None = None, poll: float = 0.2) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (created if needed, never deleted: deleting it would let
    two processes lock two different files). With ``stop``, waiting gives up when it is set."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as err:
        raise UsageError(f"cannot create the lock file {path}: {err.strerror or err}") from None
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (fcntl.LOCK_NB if stop is not None else 0))
                break
            except BlockingIOError:
                if stop.wait(poll):  # type: ignore[union-attr]
                    raise _FatalError("interrupted while another fetch held this shard") from None
        yield
    finally:
        os.close(fd)


def read_lock(path: Path) -> dict[str, LockEntry]:
    """Entries of a lock file ({} when absent); a malformed one is a one-line error."""
    if not path.exists():
        return {}
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        entries = [LockEntry(name=str(e["name"]), size=int(e["size"]), sha256=str(e["sha256"])) for e in raw["shards"]]
        return {entry.name: entry for entry in entries}  # keyed by the name as read (str), as looked up
    except (ValueError, KeyError, TypeError) as err:
        raise UsageError(f"malformed lock file {path} ({err}); delete it to rebuild it") from err


# --------------------------------------------------------------------------- HTTP


def _open(task: ShardTask, offset: int, policy: RetryPolicy, opener: Opener) -> Any:
    """Send the GET (ranged when resuming) and sort failures into fatal / transient."""
    headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    try:
        return opener(urllib.request.Request(task.url, headers=headers), timeout=policy.timeout)
    except urllib.error.HTTPError as err:
        err.close()
        if err.code == 404:
            raise _FatalError(
                f"HTTP 404 for {task.url}: no such shard there; --base-url must mirror the bucket "
                "as BASE/{layout}/{Game}/run_{N}-{i:05d}-of-{n:05d}"
            ) from err
        if err.code == 416:
            raise _RestartError(f"server refused range bytes={offset}- (HTTP 416)") from err
        if err.code in (408, 429) or err.code >= 500:
            raise _TransientError(f"HTTP {err.code} {err.reason}") from err
        raise _FatalError(f"HTTP {err.code} {err.reason} for {task.url}") from err
    except (urllib.error.URLError, OSError, http.client.HTTPException) as err:
        raise _TransientError(f"{type(err).__name__}: {getattr(err, 'reason', err)}") from err


class _ShardDownload:
    """The retry loop of one shard, with what it has learned across attempts.

    ``known`` is the first response's view of the object, so a resumed response describing a
    different object (re-uploaded mid-download) forces a restart instead of splicing two versions.
    The progress bar shows this shard's size once known and its bytes on disk, including a
    ``.part`` left by an earlier run.
    """

    def __init__(
        self,
        task: ShardTask,
        policy: RetryPolicy,
        progress: Progress,
        opener: Opener,
        stop: threading.Event,
    ) -> None:
        self.task = task
        self.policy = policy
        self.progress = progress
        self.opener = opener
        self.stop = stop
        self.known: ServerChecks | None = None
        self.shown_total = 0
        self.shown_done = 0
        self.started = time.monotonic()

    def past_deadline(self) -> bool:
        return self.policy.deadline is not None and time.monotonic() - self.started > self.policy.deadline

    def _show(self, total: int, done: int) -> None:
        self.progress.add_total(total - self.shown_total)
        self.progress.advance(done - self.shown_done)
        self.shown_total, self.shown_done = total, done

    def transfer(self) -> ServerChecks:
        """One GET appending to the ``.part`` file; returns the server's view of the object.

        Raises ``_RestartError`` when the partial file cannot be continued, ``_TransientError``
        when the body ended early (the caller resumes), ``_FatalError`` when retrying cannot help.
        """
        if self.stop.is_set():
            raise _FatalError("interrupted")
        part = self.task.part
        offset = part.stat().st_size if part.exists() else 0
        with _open(self.task, offset, self.policy, self.opener) as response:
            status = response.status
            if status == 206:
                content_range = parse_content_range(response.headers.get("Content-Range"))
                if content_range is None or content_range[0] != offset:
                    raise _RestartError(f"206 with Content-Range {response.headers.get('Content-Range')!r}")
            elif status == 200:
                offset = 0  # the server sent the whole object: start the .part over
            else:
                raise _FatalError(f"unexpected HTTP {status} for {self.task.url}")
            checks = server_checks(status, response.headers)
            if self.known is not None and not same_object(self.known, checks):
                raise _RestartError("the object changed on the server since the download began")
            self.known = self.known or checks
            self._show(checks.size or 0, offset)
            received = 0
            # read1 returns what has arrived; read(n) would wait for n bytes and lose them on a stall
            read = getattr(response, "read1", response.read)
            rate = _RateCheck(self.policy)
            with open(part, "ab" if offset else "wb") as out:
                while not self.stop.is_set():
                    try:
                        chunk = read(CHUNK_BYTES)
                    except (OSError, http.client.HTTPException) as err:
                        raise _TransientError(f"connection lost after {offset + received} bytes: {err!r}") from err
                    if not chunk:
                        break
                    try:
                        out.write(chunk)
                        out.flush()  # on disk as it arrives: a resume after any failure keeps it
                    except OSError as err:  # disk full, permissions: retrying will not help
                        raise _FatalError(f"cannot write {part}: {err.strerror}") from err
                    received += len(chunk)
                    self._show(self.shown_total, self.shown_done + len(chunk))
                    rate.add(len(chunk))
                    if self.past_deadline():
                        raise _FatalError(f"not complete within --deadline {self.policy.deadline:g} s")
                out.flush()
                os.fsync(out.fileno())
        if self.stop.is_set():
            raise _FatalError("interrupted")
        if checks.size is not None and offset + received < checks.size:
            raise _TransientError(f"connection closed after {offset + received} of {checks.size} bytes")
        return checks

    def run(self, sleep: Callable[[float], None]) -> ServerChecks:
        """Retry ``transfer`` with back-off until the ``.part`` holds the whole object."""
        part = self.task.part
        failures = 0
        while True:
            before = part.stat().st_size if part.exists() else 0
            try:
                return self.transfer()
            except _RestartError as err:
                part.unlink(missing_ok=True)
                self.known = None
                self._show(self.shown_total, 0)
                failures, error = failures + 1, f"could not resume: {err}"
            except _TransientError as err:
                progressed = part.exists() and part.stat().st_size > before and not isinstance(err, _TooSlowError)
                failures, error = (1 if progressed else failures + 1), str(err)
            if failures >= self.policy.attempts:
                raise _FatalError(f"gave up after {failures} attempts: {error}")
            if self.past_deadline():
                raise _FatalError(f"not complete within --deadline {self.policy.deadline:g} s: {error}")
            sleep(self.policy.delay(failures))


class _RateCheck:
    """Bytes per ``rate_window`` seconds of one attempt; too few raises :class:`_TooSlowError`."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        self.window_start = time.monotonic()
        self.window_bytes = 0

    def add(self, nbytes: int) -> None:
        self.window_bytes += nbytes
        elapsed = time.monotonic() - self.window_start
        if elapsed < self.policy.rate_window:
            return
        rate = self.window_bytes / elapsed
        if rate < self.policy.min_rate:
            raise _TooSlowError(
                f"too slow: {rate:.0f} B/s over {elapsed:.0f} s, below --min-rate {self.policy.min_rate:g} B/s"
            )
        self.window_start, self.window_bytes = time.monotonic(), 0


def fetch_shard(
    task: ShardTask,
    book: LockBook,
    policy: RetryPolicy,
    progress: Progress,
    opener: Opener = urllib.request.urlopen,
    stop: threading.Event | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> ShardOutcome:
    """Make ``task.dest`` a verified copy of the shard, downloading only when needed.

    A per-shard file lock keeps two fetches into one data directory off the same ``.part``: the
    second waits, then finds the shard the first one verified.
    """
    stop = stop or threading.Event()
    task.dest.parent.mkdir(parents=True, exist_ok=True)
    locks = task.dest.parent / ".fetch-locks"
    locks.mkdir(exist_ok=True)
    try:
        with _file_lock(locks / task.name, stop):
            return _fetch_shard_locked(task, book, policy, progress, opener, stop, sleep)
    except _FatalError as err:
        return ShardOutcome(task.name, "failed", message=str(err))


def _fetch_shard_locked(
    task: ShardTask,
    book: LockBook,
    policy: RetryPolicy,
    progress: Progress,
    opener: Opener,
    stop: threading.Event,
    sleep: Callable[[float], None],
) -> ShardOutcome:
    lock_name = book.path.name
    repaired = ""
    entry = book.get(task.name)
    if task.dest.exists():
        digests = hash_file(task.dest, server_hashes=False)
        if entry is None:
            # Only verified files ever get a final name, so this one was verified when it arrived
            # (the lock was deleted since); record it rather than download it again.
            book.record(LockEntry(task.name, digests.size, digests.sha256))
            return ShardOutcome(task.name, "skipped", digests.size, f"added to {lock_name}")
        if (digests.size, digests.sha256) == (entry.size, entry.sha256):
            return ShardOutcome(task.name, "skipped", digests.size)
        task.dest.unlink()
        repaired = f"local copy did not match {lock_name}, deleted it and downloaded again; "

    download = _ShardDownload(task, policy, progress, opener, stop)
    try:
        checks = download.run(sleep)
    except _FatalError as err:
        return ShardOutcome(task.name, "failed", message=f"{repaired}{err}")
    digests = hash_file(task.part)
    problems = verification_problems(digests, checks, entry, lock_name)
    if problems:
        task.part.unlink()
        return ShardOutcome(
            task.name,
            "failed",
            message=f"{repaired}{'; '.join(problems)}: deleted the bad download, rerun to retry",
        )
    os.replace(task.part, task.dest)
    if entry is None:
        book.record(LockEntry(task.name, digests.size, digests.sha256))
    return ShardOutcome(task.name, "fetched", digests.size, repaired.rstrip("; "))


class _TqdmProgress:
    """One byte-counting progress display shared by all download threads (tqdm itself is not
    thread-safe): a tqdm bar on a terminal; in a log file (not a terminal) a plain line every
    ``PLAIN_EVERY_SECONDS`` and one per finished shard, never carriage-return frames."""

    PLAIN_EVERY_SECONDS = 30.0

    def __init__(self, description: str, num_shards: int) -> None:
        self._lock = threading.Lock()
        self._description = description
        self._num_shards = num_shards
        self._finished = 0
        self._total = self._done = 0
        self._last_line = time.monotonic()
        self._bar = None
        if sys.stderr.isatty():
            from tqdm import tqdm

            self._bar = tqdm(
                total=0,
                desc=description,
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                dynamic_ncols=True,
                file=sys.stderr,
            )

    def _plain_line(self) -> None:
        self._last_line = time.monotonic()
        print(
            f"{self._description}: {format_bytes(self._done)} of {format_bytes(self._total)} known so far, "
            f"{self._finished}/{self._num_shards} shards",
            file=sys.stderr,
            flush=True,
        )

    def add_total(self, nbytes: int) -> None:
        if nbytes:
            with self._lock:
                self._total += nbytes
                if self._bar is not None:
                    self._bar.total += nbytes
                    self._bar.refresh()

    def advance(self, nbytes: int) -> None:
        if nbytes:
            with self._lock:
                self._done += nbytes
                if self._bar is not None:
                    self._bar.update(nbytes)
                elif time.monotonic() - self._last_line >= self.PLAIN_EVERY_SECONDS:
                    self._plain_line()

    def finish_shard(self) -> None:
        """Count a shard as done; sizes are learned per download, so bytes alone mislead."""
        with self._lock:
            self._finished += 1
            if self._bar is not None:
                self._bar.set_postfix_str(f"{self._finished}/{self._num_shards} shards")
            else:
                self._plain_line()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def fetch_rlu_atari(
    registry: RluRegistry,
    root: Path,
    game: str,
    run: int,
    checkpoints: str | None = None,
    layout: str | None = None,
    base_url: str | None = None,
    jobs: int = 4,
    policy: RetryPolicy = RetryPolicy(),
    opener: Opener = urllib.request.urlopen,
) -> FetchSummary:
    """Fetch one run's shards in parallel threads behind one progress bar.

    Ctrl-C stops the threads at their next chunk and leaves ``.part`` files to resume from.
    """
    if jobs < 1:
        raise UsageError(f"--jobs must be >= 1, got {jobs}")
    tasks = plan_rlu_fetch(registry, root, game, run, checkpoints, layout, base_url)
    layout = registry.resolve_layout(layout)
    directory = rlu_raw_dir(root, layout, game)
    directory.mkdir(parents=True, exist_ok=True)
    book = LockBook(lock_path(directory, run), {"layout": layout, "game": game, "run": run})
    stop = threading.Event()
    progress = _TqdmProgress(f"{game} run {run}", len(tasks))
    pool = ThreadPoolExecutor(max_workers=min(jobs, len(tasks)))
    try:
        futures = [pool.submit(fetch_shard, task, book, policy, progress, opener, stop) for task in tasks]
        for future in futures:
            future.add_done_callback(lambda _: progress.finish_shard())
        outcomes = [future.result() for future in futures]
    except BaseException:
        stop.set()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        progress.close()
    return FetchSummary(outcomes=outcomes, directory=directory, lock_path=book.path)


def summary_lines(summary: FetchSummary) -> list[str]:
    """What the CLI prints after a fetch: problems and repairs, then totals and places."""
    lines = [f"failed   {o.name}: {o.message}" for o in summary.failed]
    lines += [f"note     {o.name}: {o.message}" for o in summary.outcomes if o.status != "failed" and o.message]
    fetched_bytes = sum(o.size for o in summary.outcomes if o.status == "fetched")
    counts = summary.counts
    lines.append(
        f"fetched {counts['fetched']} shard(s) ({format_bytes(fetched_bytes)}), "
        f"skipped {counts['skipped']} (present and verified against {summary.lock_path.name}), "
        f"failed {counts['failed']}"
    )
    lines.append(f"shards in {summary.directory}")
    lines.append(f"lock file {summary.lock_path}")
    return lines


# --------------------------------------------------------------------------- Minari

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

    Without a network ``minari.download_dataset`` retries for ~23 s before failing (REFERENCE.md,
    "Dependencies"), so a TCP probe of the remote (``probe_timeout`` s) runs first and turns "no
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


# --------------------------------------------------------------------------- local inventory

_SHARD_FILE = re.compile(r"^run_(\d+)-(\d{5})-of-(\d{5})(\.part)?$")


@dataclass(frozen=True)
class LocalShard:
    """A shard file found on disk: complete (``partial`` False) or an unfinished ``.part``."""

    run: int
    shard: int
    num_shards: int
    size: int
    partial: bool


def scan_local_shards(directory: Path) -> list[LocalShard]:
    """Shards and ``.part`` files in one game's raw folder, sorted by run and shard."""
    if not directory.is_dir():
        return []
    found = []
    for path in directory.iterdir():
        match = _SHARD_FILE.match(path.name)
        if match and path.is_file():
            run, shard, num_shards = (int(match.group(i)) for i in (1, 2, 3))
            found.append(LocalShard(run, shard, num_shards, path.stat().st_size, match.group(4) is not None))
    return sorted(found, key=lambda s: (s.run, s.shard, s.partial))


def directory_size(path: Path) -> int:
    """Total bytes of the files under ``path`` (0 when it does not exist)."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0
