"""The ``offline_gitd`` command line (DESIGN §7).

Each subcommand lives beside the code it drives, in a module exposing ``register(subparsers)``
that adds its parser and sets ``func(args) -> int``. Those modules import heavy libraries (JAX,
minari) inside their handlers, so ``offline_gitd --help`` answers at once.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from offline_gitd import __version__
from offline_gitd.errors import UsageError

# Order is the order shown by --help: the data flow of DESIGN §1, then the experiments.
COMMAND_MODULES: tuple[str, ...] = (
    "offline_gitd.data.command",
    "offline_gitd.learners.command",
    "offline_gitd.online.command",
    "offline_gitd.evaluate",
    "offline_gitd.sweeps.command",
    "offline_gitd.leaderboard.command",
    "offline_gitd.mdps.command",
    "offline_gitd.demo",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="offline_gitd",
        description=(
            "Gradient Iterated TD learning: fetch offline-RL datasets, train TD / TDRC / i-TD / "
            "Gi-TD critics offline (CQL) or online (DQN, SAC), and publish leaderboards."
        ),
    )
    parser.add_argument("--version", action="version", version=f"offline_gitd {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UsageError as err:
        print(f"offline_gitd: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("offline_gitd: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
