"""Fetch one RL Unplugged Atari run's shards: plan them, download them in parallel, sum up.

Bad requests (unknown game, run, checkpoints, a mirror URL that is not http(s)) are one-line usage
errors before any download; each shard then goes through :func:`~offline_gitd.data.http_download.fetch_shard`
behind one progress display, and the run's lock file records what was verified (docs/datasets.md).
"""

from __future__ import annotations

import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from offline_gitd.data.http_download import STATUSES, Opener, RetryPolicy, ShardOutcome, ShardTask, fetch_shard
from offline_gitd.data.inventory import format_bytes
from offline_gitd.data.lock_book import LockBook, lock_path
from offline_gitd.data.paths import rlu_raw_dir
from offline_gitd.data.registry import RluRegistry, parse_checkpoints
from offline_gitd.errors import UsageError


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
    base_url: str | Sequence[str] | None = None,
) -> list[ShardTask]:
    """Validate the request and list the shards to fetch; bad input is a one-line UsageError.

    ``base_url`` is one mirror or an ordered list of them (``--base-url`` repeated); without it
    the bucket and then the registry's mirrors are tried, in order.

    In the episodes layout shard ``i`` is checkpoint ``i``; the transitions layout is not split by
    checkpoint, so ``checkpoints`` is refused there rather than silently mapped to shards.
    """
    registry.check_game(game)
    registry.check_run(run)
    given = [base_url] if isinstance(base_url, str) else list(base_url or ())
    for url in given:
        check_base_url(url)
    sources = registry.sources(given)
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
        url, *fallbacks = (registry.shard_url(game, run, shard, layout, source) for source in sources)
        name = registry.object_name(game, run, shard, layout).rsplit("/", 1)[-1]
        tasks.append(ShardTask(name=name, url=url, dest=directory / name, fallbacks=tuple(fallbacks)))
    return tasks


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
    base_url: str | Sequence[str] | None = None,
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
