"""Download one shard over HTTP(S) safely: ``Range`` resume, retry with back-off, a minimum rate,
and an ordered list of sources (the bucket, then its mirrors) tried in turn.

Invariants: bytes arrive in ``NAME.part`` (kept across failures, resumed with ``Range``); only a
file verified against the server and the run's lock file (:mod:`~offline_gitd.data.shard_verification`,
:mod:`~offline_gitd.data.lock_book`) is renamed to its final name, so a final name always holds a
whole, verified shard; a bad download is deleted, never left in place (docs/datasets.md). Only the
standard library talks HTTP, so a mirror needs nothing but a static file server that honours ``Range``.

Mirrors are trusted for nothing: the first source that answers fixes what the object is (its size
and hashes), a later source describing another object is refused before any of its bytes are kept,
and every finished file, wherever its bytes came from, is checked against those hashes and the lock
book; a source whose bytes fail is named in the one line that refuses it (docs/bounds.md#mirrors).
"""

from __future__ import annotations

import http.client
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from offline_gitd.data.lock_book import LockBook, LockEntry, file_lock, hash_file
from offline_gitd.data.shard_verification import (
    ServerChecks,
    parse_content_range,
    same_object,
    server_checks,
    verification_problems,
)
from offline_gitd.durable import LockWaitInterrupted, move_into_place
from offline_gitd.version import __version__

CHUNK_BYTES = 1 << 20
USER_AGENT = f"offline_gitd/{__version__} (+urllib)"

Opener = Callable[..., Any]  # urllib.request.urlopen's shape: (request, timeout=...) -> response
Status = Literal["fetched", "skipped", "failed"]
STATUSES: tuple[Status, ...] = ("fetched", "skipped", "failed")


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try: back-off doubles from ``base_delay`` up to ``max_delay``.

    ``attempts`` counts consecutive attempts that made no *real* progress. An attempt makes real
    progress when the bytes received since the last one that did, over the wall time since then
    (attempts, stalls and back-off included), reach ``min_rate``: a flaky link that delivers a
    burst and drops can still finish a GB file it resumes many times, while a server that sends a
    few bytes and stalls, again on every ``Range`` request, runs out of attempts. So every wait
    is bounded by default (docs/bounds.md#downloads): without real progress a shard gives up
    within :meth:`stall_bound` seconds (about 15 minutes with these defaults), keeping its ``.part``.
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

    def attempt_bound(self) -> float:
        """The longest one attempt can last: the connection and headers (one ``timeout``), a body
        kept alive by a trickle until the rate window closes, and one more silent read."""
        return self.timeout + self.rate_window + self.timeout

    def stall_bound(self) -> float:
        """Seconds after which a shard that makes no real progress has given up, at the latest:
        ``attempts`` attempts and the back-off between them (capped by ``deadline`` if set)."""
        bound = self.attempts * self.attempt_bound() + sum(self.delay(k) for k in range(1, self.attempts))
        return bound if self.deadline is None else min(bound, self.deadline + self.attempt_bound())


@dataclass(frozen=True)
class ShardTask:
    """One file to fetch: its bucket file name, URL, final path, and the mirrors' URLs of the
    same object, tried in order when the ones before fail."""

    name: str
    url: str
    dest: Path
    fallbacks: tuple[str, ...] = ()
    # What a 404 means: where a mirror must keep the file (RL Unplugged's bucket layout by default).
    missing_hint: str = "--base-url must mirror the bucket as BASE/{layout}/{Game}/run_{N}-{i:05d}-of-{n:05d}"

    @property
    def sources(self) -> tuple[str, ...]:
        return (self.url, *self.fallbacks)

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


class _OtherObjectError(_FatalError):
    """A source describes another object than the first source did: it is refused."""


class _TooSlowError(_TransientError):
    """Bytes arrive, but too slowly to finish: retry, yet do not count the attempt as progress."""


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
            raise _FatalError(f"HTTP 404 for {task.url}: no such file there; {task.missing_hint}") from err
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
        reference: ServerChecks | None = None,
        started: float | None = None,
    ) -> None:
        """``reference``: the first source's view of the object, when this is a later source;
        ``started``: when the shard's first source began (``deadline`` covers all sources)."""
        self.task = task
        self.reference = reference
        self.policy = policy
        self.progress = progress
        self.opener = opener
        self.stop = stop
        self.known: ServerChecks | None = reference
        self.shown_total = 0
        self.shown_done = 0
        self.started = started if started is not None else time.monotonic()
        # Real progress is judged from here: the last time an attempt was credited with it.
        self.credit_time = self.started
        self.credit_bytes = 0
        self.received_total = 0

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
            if self.reference is not None and not same_object(self.reference, checks):
                raise _OtherObjectError(f"it describes another object than the first source ({_describe(checks)})")
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
                    self.received_total += len(chunk)
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

    def real_progress(self) -> bool:
        """Whether the bytes since the last credited attempt, over the time since then, reach
        ``min_rate``; if so the credit moves to now. A few bytes per connection do not."""
        now = time.monotonic()
        got = self.received_total - self.credit_bytes
        if got <= 0 or got < self.policy.min_rate * (now - self.credit_time):
            return False
        self.credit_time, self.credit_bytes = now, self.received_total
        return True

    def run(self, sleep: Callable[[float], None]) -> ServerChecks:
        """Retry ``transfer`` with back-off until the ``.part`` holds the whole object."""
        part = self.task.part
        failures = 0
        while True:
            try:
                return self.transfer()
            except _RestartError as err:
                part.unlink(missing_ok=True)
                self.known = None
                self._show(self.shown_total, 0)
                failures, error = failures + 1, f"could not resume: {err}"
            except _TransientError as err:
                progressed = self.real_progress() and not isinstance(err, _TooSlowError)
                failures, error = (1 if progressed else failures + 1), str(err)
            if failures >= self.policy.attempts:
                raise _FatalError(
                    f"gave up after {failures} attempts without real progress (--min-rate "
                    f"{self.policy.min_rate:g} B/s): {error}; the partial download is kept for the next fetch"
                )
            if self.past_deadline():
                raise _FatalError(f"not complete within --deadline {self.policy.deadline:g} s: {error}")
            sleep(self.policy.delay(failures))


def _describe(checks: ServerChecks) -> str:
    size = "size unknown" if checks.size is None else f"{checks.size} bytes"
    return size + (f", md5 {checks.md5.hex()}" if checks.md5 is not None else "")


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
        with file_lock(locks / task.name, stop):
            return _fetch_shard_locked(task, book, policy, progress, opener, stop, sleep)
    except (_FatalError, LockWaitInterrupted) as err:
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

    refused: list[str] = []  # one reason per source that gave no verified copy, naming it
    reference: ServerChecks | None = None  # what the first source that answered says the object is
    started = time.monotonic()
    contributors = ["an earlier fetch"] if task.part.exists() and task.part.stat().st_size else []
    for url in task.sources:
        download = _ShardDownload(
            ShardTask(task.name, url, task.dest, missing_hint=task.missing_hint),
            policy,
            progress,
            opener,
            stop,
            reference,
            started,
        )
        try:
            checks = download.run(sleep)
        except _OtherObjectError as err:
            refused.append(f"refused {url}: {err}")
            continue
        except _FatalError as err:
            reference = reference or download.known
            if task.part.exists() and task.part.stat().st_size and url not in contributors:
                contributors.append(url)
            refused.append(f"{url}: {err}")
            if stop.is_set() or download.past_deadline():
                break
            continue
        contributors.append(url)
        reference = reference or checks
        digests = hash_file(task.part)
        problems = verification_problems(digests, reference, entry, lock_name)
        if checks is not reference:
            problems += verification_problems(digests, checks, None, lock_name)
        if problems:
            task.part.unlink()
            refused.append(
                f"refused the bytes of {', '.join(contributors)}: {'; '.join(problems)}: deleted the bad download"
            )
            contributors = []
            continue
        move_into_place(task.part, task.dest)  # the .part was fsynced as it was completed
        book.record(LockEntry(task.name, digests.size, digests.sha256, source=url))
        notes = [note for note in (repaired.rstrip("; "), *refused) if note]
        return ShardOutcome(task.name, "fetched", digests.size, "; ".join(notes))
    return ShardOutcome(task.name, "failed", message=f"{repaired}{'; '.join(refused)}, rerun to retry")
