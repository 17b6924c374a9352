"""The published numbers and the commands that make them (docs/reproducing.md#published-numbers).

A results table on a page (README.md, docs/, the board READMEs) sits between two HTML comments that
name the command printing it::

    <!-- generated: offline_gitd leaderboard show --board B --format markdown -->

    (the command's output, verbatim; or fenced in ``` where it is plain text)

    <!-- end generated -->

The command is an ``offline_gitd`` command line (run in-process through :func:`offline_gitd.cli.main`)
or ``python -m benchmarks.NAME ...`` (the script's ``main`` with those arguments). Both run from
the repository root on the committed boards, so the block is what a reader gets by running it.

``python -m tests.published`` rewrites every block from its command (after a board changes);
``tests/test_published_numbers.py`` fails on any block that differs from its command's output.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The pages whose numbers come from committed boards.
PAGES: tuple[str, ...] = (
    "README.md",
    "docs/getting-started.md",
    "docs/leaderboard.md",
    "docs/minatar.md",
    "docs/online.md",
    "docs/reproducing.md",
    "leaderboards/README.md",
    "leaderboards/gym_offline/README.md",
    "leaderboards/minatar_offline/README.md",
    "leaderboards/minatar_online/README.md",
    "leaderboards/minatar_pilot/README.md",
    "leaderboards/mujoco_offline/README.md",
)
# A body never reaches past its own block's markers, so a block added empty (before its first
# rewrite) is a block of its own instead of swallowing the next one up to that one's end.
BLOCK = re.compile(
    r"<!-- generated: (?P<command>.+?) -->\n\n(?P<body>(?:(?!<!-- (?:end )?generated)[\s\S])*?)\n*<!-- end generated -->"
)
FENCE = re.compile(r"\A```[a-z]*\n(?P<inner>.*)\n```\Z", re.DOTALL)


@dataclass(frozen=True)
class Block:
    """One generated block of a page: where it is, the command named beside it and what the page
    shows (inside its fence where it has one)."""

    page: str
    line: int
    command: str
    shown: str
    fenced: bool

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(page: str) -> list[Block]:
    """The generated blocks of ``page`` (a path relative to the repository root)."""
    text = (ROOT / page).read_text()
    found = []
    for match in BLOCK.finditer(text):
        body = match["body"]
        fence = FENCE.match(body)
        found.append(
            Block(
                page,
                text.count("\n", 0, match.start()) + 1,
                match["command"],
                fence["inner"] if fence else body,
                fence is not None,
            )
        )
    return found


def all_blocks() -> Iterator[Block]:
    for page in PAGES:
        yield from blocks(page)


@contextlib.contextmanager
def _at_root() -> Iterator[None]:
    import os

    before = os.getcwd()
    os.chdir(ROOT)
    try:
        yield
    finally:
        os.chdir(before)


@cache
def run(command: str) -> str:
    """What ``command`` prints on stdout, run in this process from the repository root, less its
    final newline. Raises where the command fails: a published number whose command fails is
    not reproducible."""
    argv = shlex.split(command)
    out = io.StringIO()
    with _at_root(), contextlib.redirect_stdout(out):
        if argv[0] == "offline_gitd":
            from offline_gitd.cli import main

            code = main(argv[1:])
            if code != 0:
                raise RuntimeError(f"{command!r} exited {code}")
        elif argv[:2] == ["python", "-m"] and argv[2].startswith("benchmarks."):
            module = importlib.import_module(argv[2])
            saved = sys.argv
            sys.argv = argv[2:]
            try:
                module.main()
            finally:
                sys.argv = saved
        else:
            raise ValueError(f"not a command this check runs: {command!r}")
    return out.getvalue().rstrip("\n")


def regenerate(page: str) -> bool:
    """Rewrite each generated block of ``page`` from its command; whether anything changed."""
    path = ROOT / page
    text = path.read_text()

    def fill(match: re.Match[str]) -> str:
        fence = FENCE.match(match["body"])
        output = run(match["command"])
        body = f"{match['body'].split(chr(10), 1)[0]}\n{output}\n```" if fence else output
        return f"<!-- generated: {match['command']} -->\n\n{body}\n\n<!-- end generated -->"

    new = BLOCK.sub(fill, text)
    if new != text:
        path.write_text(new)
    return new != text


if __name__ == "__main__":
    for name in PAGES:
        if regenerate(name):
            print(f"rewrote {name}")
