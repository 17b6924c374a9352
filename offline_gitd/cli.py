"""The ``offline_gitd`` command line: one command run, every failure one line (docs/getting-started.md).

The commands themselves are :mod:`offline_gitd.commands`. Every failure ends as one line on stderr and a non-zero exit: bad flags and
:class:`UsageError` exit 2; anything else is a bug and exits 1 with its type and message and a
pointer to ``--debug``, which re-raises with the traceback instead.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence

from offline_gitd.commands import DEBUG_FLAG, build_parser
from offline_gitd.errors import UsageError
from offline_gitd.xla_start import prepare_xla

# A JAX or XLA message can run to pages: the one line keeps the head of an unexpected error's
# message (--debug shows all); our own UsageError messages are kept whole, but for the names they
# quote: a name longer than NAME_CHARS (a board's method may be 20 kB) is cut in its middle, its
# length said (docs/leaderboard.md#any-name-renders).
MAX_MESSAGE_CHARS = 400
NAME_CHARS = 200


def short_names(text: str, limit: int = NAME_CHARS) -> str:
    """``text`` with every run of more than ``limit`` non-blank characters cut in its middle."""
    import re

    def cut(match: re.Match[str]) -> str:
        word = match.group(0)
        marker = f"...({len(word)} chars)..."
        keep = (limit - len(marker)) // 2
        return word[:keep] + marker + word[-keep:]

    return re.sub(rf"\S{{{limit + 1},}}", cut, text)


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
        prepare_xla()  # before anything starts JAX (docs/bounds.md#determinism, docs/offline.md#seeds)
        return _run(args) if not debug else int(args.func(args) or 0)
    except UsageError as err:
        if debug:
            raise
        print(f"offline_gitd: error: {one_line(short_names(str(err)))}", file=sys.stderr)
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
