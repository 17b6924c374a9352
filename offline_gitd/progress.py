"""Progress that reads well on a terminal and in a log file.

On a terminal a tqdm bar redraws itself in place. Anywhere else (CI, a cluster job's log, ``| tee``)
carriage-return frames turn into one unreadable line, so progress is a plain line every
``every_seconds`` or every ``every_fraction`` of the total, whichever comes first. ``--no-progress``
hides bars and progress lines only: summaries go through :meth:`Progress.write`, which always prints
(above the bar when there is one).
"""

from __future__ import annotations

import sys
import time
from typing import IO, Any

# Plain-line cadence when stdout is not a terminal.
EVERY_SECONDS = 30.0
EVERY_FRACTION = 0.1


def _is_terminal(stream: IO[str]) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Progress:
    """A progress counter: a tqdm bar on a terminal, plain lines elsewhere, nothing when disabled.

    ``update``, ``set_postfix`` and ``close`` follow tqdm's names so a loop reads the same either way.
    """

    def __init__(
        self,
        total: int,
        desc: str,
        *,
        unit: str = "step",
        initial: int = 0,
        enabled: bool = True,
        leave: bool = True,
        stream: IO[str] | None = None,
        every_seconds: float = EVERY_SECONDS,
        every_fraction: float = EVERY_FRACTION,
    ) -> None:
        self.total, self.desc, self.unit, self.n = total, desc, unit, initial
        self.stream = stream if stream is not None else sys.stdout
        self.enabled = enabled
        self.postfix = ""
        self.bar: Any = None
        if enabled and _is_terminal(self.stream):
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=initial, desc=desc, unit=unit, leave=leave, file=self.stream)
        self.every_seconds = every_seconds
        self.every_units = max(1, int(total * every_fraction))
        self.started = self.last_time = time.monotonic()
        self.start_n = self.last_n = initial

    @property
    def plain(self) -> bool:
        """True when progress goes out as plain lines (enabled, not a terminal)."""
        return self.enabled and self.bar is None

    def update(self, count: int = 1) -> None:
        self.n += count
        if self.bar is not None:
            self.bar.update(count)
        elif self.plain:
            now = time.monotonic()
            if (
                self.n - self.last_n >= self.every_units
                or now - self.last_time >= self.every_seconds
                or self.n >= self.total > self.last_n
            ):
                self._line(now)

    def set_postfix(self, **values: Any) -> None:
        self.postfix = ", ".join(f"{k} {v}" for k, v in values.items())
        if self.bar is not None:
            self.bar.set_postfix(**values)

    def _line(self, now: float) -> None:
        elapsed = now - self.started
        rate = (self.n - self.start_n) / elapsed if elapsed > 0 else 0.0
        percent = 100.0 * self.n / self.total if self.total else 100.0
        extra = f", {self.postfix}" if self.postfix else ""
        self.stream.write(
            f"{self.desc}: {self.n}/{self.total} {self.unit}s ({percent:.0f}%), {rate:.1f} {self.unit}/s{extra}\n"
        )
        self.stream.flush()
        self.last_time, self.last_n = now, self.n

    def write(self, message: str) -> None:
        """A summary line: printed whether or not progress is enabled, never torn by a bar."""
        if self.bar is not None:
            self.bar.write(message, file=self.stream)
        else:
            self.stream.write(message + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
