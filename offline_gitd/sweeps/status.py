"""The sweep's live view: one line per state change, and on a terminal a redrawn footer of counts.

Cluster jobs and CI read logs, not terminals (the rule for every command, docs/architecture.md#the-command-line-contract): when the stream
is not a TTY nothing is ever redrawn, each change is one plain line that carries the counts.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import TextIO

STATES = ("queued", "running", "done", "failed")


class StatusTable:
    """Each run's state (queued, running, done, failed) and the counts of each."""

    def __init__(self, names: list[str], stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self.tty = self.stream.isatty()
        self.state: dict[str, str] = dict.fromkeys(names, "queued")
        self.detail: dict[str, str] = {}
        self.started = time.monotonic()

    def counts(self) -> str:
        count = Counter(self.state.values())
        return " | ".join(f"{name} {count[name]}" for name in STATES)

    def set(self, name: str, state: str, detail: str = "") -> None:
        if self.state.get(name) == state and self.detail.get(name, "") == detail:
            return
        self.state[name] = state
        self.detail[name] = detail
        self.line(f"{state:<8} {name}{'  ' + detail if detail else ''}")

    def line(self, text: str) -> None:
        stamp = f"[{time.monotonic() - self.started:7.1f}s]"
        if self.tty:
            self.stream.write(f"\r\033[K{stamp} {text}\n{self.counts()}")
        else:
            self.stream.write(f"{stamp} {text}  ({self.counts()})\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\r\033[K")
            self.stream.flush()
