"""The ``offline_gitd`` command line (DESIGN §7).

Each subcommand lives beside the code it drives, in a module exposing ``register(subparsers)``
that adds its parser and sets ``func(args) -> int``. Those modules import heavy libraries (JAX,
minari) inside their handlers, so ``offline_gitd --help`` answers at once.

Every failure ends as one line on stderr and a non-zero exit (DESIGN §7): bad flags and
:class:`UsageError` exit 2; anything else is a bug and exits 1 with its type and message and a
pointer to ``--debug``, which re-raises with the traceback instead.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings
from collections.abc import Sequence
from typing import NoReturn

from offline_gitd import __version__
from offline_gitd.errors import UsageError

DEBUG_FLAG = "--debug"
# A JAX or XLA message can run to pages: the one line keeps the head of an unexpected error's
# message (--debug shows all); our own UsageError messages are kept whole.
MAX_MESSAGE_CHARS = 400


class ParseError(UsageError):
    """A command line argparse refuses: raised instead of argparse's usage-and-exit."""


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line (no usage block), so a bad flag reads like any other bad
    input. Subparsers inherit the class (``add_subparsers`` uses ``type(self)``)."""

    def error(self, message: str) -> NoReturn:
        raise ParseError(f"{message} (see: {self.prog} --help)")


def one_line(text: str, limit: int | None = None) -> str:
    """``text`` on one line (its lines joined by a space), cut to ``limit`` chars; spacing within a
    line is kept (hints separate a command from its comment by two spaces)."""
    flat = " ".join(line.strip() for line in text.splitlines() if line.strip())
    return flat if limit is None or len(flat) <= limit else flat[: limit - 3] + "..."


def split_debug(argv: Sequence[str]) -> tuple[list[str], bool]:
    """Remove ``--debug`` wherever it stands (before or after the subcommand, not after ``--``)."""
    args = list(argv)
    end = args.index("--") if "--" in args else len(args)
    kept = [a for a in args[:end] if a != DEBUG_FLAG] + args[end:]
    return kept, len(kept) != len(args)


# Order is the order shown by --help: the data flow of DESIGN §1, then the experiments.
COMMAND_MODULES: tuple[str, ...] = (
    "offline_gitd.data.command",
    "offline_gitd.offline.command",
    "offline_gitd.online.command",
    "offline_gitd.evaluate",
    "offline_gitd.sweeps.command",
    "offline_gitd.leaderboard.command",
    "offline_gitd.mdps.command",
    "offline_gitd.demo",
)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="offline_gitd",
        description=(
            "Gradient Iterated TD learning: fetch offline-RL datasets, train TD / TDRC / i-TD / "
            "Gi-TD critics offline (CQL) or online (DQN, SAC), and publish leaderboards."
        ),
    )
    parser.add_argument("--version", action="version", version=f"offline_gitd {__version__}")
    parser.add_argument(
        DEBUG_FLAG,
        action="store_true",
        help="on an error, show the full traceback instead of one line (also accepted after the command)",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def _run(args: argparse.Namespace) -> int:
    """Run the command holding back Python warnings from the libraries under it: shown once it has
    finished, dropped when it fails, so that a failure stays one line (``--debug`` shows them as
    they come)."""
    with warnings.catch_warnings(record=True) as caught:
        code = int(args.func(args) or 0)
    for item in caught:
        warnings.showwarning(item.message, item.category, item.filename, item.lineno, item.file, item.line)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; every failure is one line on stderr and a non-zero exit code."""
    args_list, debug = split_debug(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser()
        args = parser.parse_args(args_list)
        if getattr(args, "func", None) is None:
            parser.print_help()
            return 2
        args.argv = list(args_list)  # recorded in a run's provenance
        return _run(args) if not debug else int(args.func(args) or 0)
    except UsageError as err:
        if debug:
            raise
        print(f"offline_gitd: error: {one_line(str(err))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:  # a run's handler adds how to resume it
        print(f"offline_gitd: {str(err) or 'interrupted'}", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 - the guard: a bug still ends as one line
        if debug:
            raise
        detail = one_line(str(err), MAX_MESSAGE_CHARS)
        name = type(err).__name__
        print(
            f"offline_gitd: error: {name}{': ' + detail if detail else ''} (run with --debug for the traceback)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
