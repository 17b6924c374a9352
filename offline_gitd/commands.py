"""The ``offline_gitd`` commands: which modules add them, and the parser they make together.

Each command lives beside the code it drives, in a module exposing ``register(subparsers)`` that
adds its parser and sets ``func(args) -> int``. Those modules import heavy libraries (JAX, minari,
Ray) inside their handlers, so building the parser, and ``--help``, imports none of them. A sweep
runs its command lines through this same parser, in process.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any, NoReturn

from offline_gitd.choices import did_you_mean
from offline_gitd.errors import UsageError
from offline_gitd.version import __version__

DEBUG_FLAG = "--debug"


class ParseError(UsageError):
    """A command line argparse refuses: raised instead of argparse's usage-and-exit."""


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line (no usage block), so a bad flag reads like any other bad
    input. Subparsers inherit the class (``add_subparsers`` uses ``type(self)``)."""

    def error(self, message: str) -> NoReturn:
        raise ParseError(f"{message} (see: {self.prog} --help)")

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        """argparse's check that a value is one of its option's choices (a flag's, or the
        subcommands'), its refusal naming the closest ones: ``--critic gitdd`` suggests ``gitd``."""
        if action.choices is not None and value not in action.choices:
            hint = did_you_mean(str(value), map(str, action.choices))
            choices = ", ".join(map(repr, action.choices))
            raise argparse.ArgumentError(action, f"invalid choice: {value!r}{hint} (choose from {choices})")


# Order is the order shown by --help: the data flow (docs/architecture.md), then the experiments.
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
