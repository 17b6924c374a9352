"""``offline_gitd mdp star|hall|triangle``: the paper's Section 5 controlled-MDP experiments.

Defaults are the paper's settings for each process (docs/reproducing.md#controlled-mdps);
``--steps`` defaults to a horizon per process at which the paper's claims are visible
(:mod:`offline_gitd.mdps.processes`). JAX and matplotlib are imported inside the handler so
``--help`` answers at once.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from offline_gitd.errors import UsageError
from offline_gitd.output_paths import require_file_target

MDP_CHOICES = ("star", "hall", "triangle")
# Expected updates keep all K + 1 functions of the sequence on the device and update them every
# step; 10,000 is 33x the paper's K = 300 and still fits in memory on a laptop (1e8 asks 34 GB).
MAX_K = 10_000
# The paper's claims show within each process's default horizon (1000 to 5000 steps); 200x that
# is a long study, more is a run that only looks hung.
MAX_STEPS = 1_000_000
CRITIC_NAMES = ("td", "tdrc", "itd", "gitd")


def parse_critics(text: str) -> list[str]:
    """``"td,gitd"`` -> ``["td", "gitd"]``, in the given order, each known and listed once."""
    critics = [c.strip() for c in text.split(",") if c.strip()]
    if not critics:
        raise UsageError("--critics needs at least one of " + ",".join(CRITIC_NAMES))
    unknown = [c for c in critics if c not in CRITIC_NAMES]
    if unknown:
        raise UsageError(f"unknown critic {unknown[0]!r}; choose from {','.join(CRITIC_NAMES)}")
    if len(set(critics)) != len(critics):
        raise UsageError(f"--critics lists a critic twice: {text}")
    return critics


def parse_eps(text: str) -> float:
    """The triangle's orientation: -1 or +1 (``1`` and ``+1`` both accepted)."""
    try:
        eps = float(text)
    except ValueError:
        raise UsageError(f"--eps must be -1 or 1, got {text!r}") from None
    if eps not in (-1.0, 1.0):
        raise UsageError(f"--eps must be -1 or 1, got {text!r}")
    return eps


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "mdp",
        help="expected TD / TDRC / i-TD / Gi-TD updates on the star, hall or triangle MDP",
        description=(
            "Run the paper's controlled-MDP experiments (Section 5) with expected updates: reward "
            "0 so the true value is 0; log the value error of the last online function and the "
            "sum of Bellman errors of the sequence. Defaults: star lr 0.08 K 300 gamma 0.99; "
            "hall lr 0.08 K 300 gamma 0.9; triangle lr 0.002 K 10 gamma 0.99."
        ),
        epilog=(
            "examples:\n"
            "  offline_gitd mdp star --plot star.png\n"
            "  offline_gitd mdp triangle --critics td,gitd --K 10 --json triangle.json"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("problem", choices=MDP_CHOICES, help="which controlled MDP")
    parser.add_argument("--eps", default=None, help="triangle only: spiral orientation, -1 (default) or 1")
    parser.add_argument("--steps", type=int, default=None, help="update steps (default per MDP)")
    parser.add_argument("--lr", type=float, default=None, help="learning rate (default per MDP)")
    parser.add_argument("--K", type=int, default=None, help="i-TD / Gi-TD sequence length")
    parser.add_argument(
        "--critics",
        default=",".join(CRITIC_NAMES),
        help="comma-separated subset of td,tdrc,itd,gitd (default: all)",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the logged metrics here")
    parser.add_argument("--plot", type=Path, default=None, help="write a PNG figure here")
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    critics = parse_critics(args.critics)
    if args.eps is not None and args.problem != "triangle":
        raise UsageError("--eps applies to the triangle MDP only")
    eps = parse_eps(args.eps) if args.eps is not None else -1.0
    if args.steps is not None and not 1 <= args.steps <= MAX_STEPS:
        raise UsageError(f"--steps must be in [1, {MAX_STEPS}] (the defaults are 1000 to 5000), got {args.steps}")
    if args.lr is not None and not (math.isfinite(args.lr) and args.lr > 0):
        raise UsageError(f"--lr must be a finite number > 0, got {args.lr}")
    if args.K is not None and not 1 <= args.K <= MAX_K:
        raise UsageError(f"--K must be in [1, {MAX_K}] (the paper's largest is 300), got {args.K}")
    for flag, path in (("--json", args.json), ("--plot", args.plot)):
        if path is not None:
            require_file_target(path, flag)

    from offline_gitd.mdps import experiment as ex

    mdp = ex.build_mdp(args.problem, eps)
    result = ex.run_experiment(
        mdp,
        critics,
        steps=args.steps or mdp.default_steps,
        lr=args.lr or mdp.lr,
        K=args.K or mdp.K,
    )
    print(ex.SUMMARY_HEADER)
    print("\n".join(ex.summary_rows(result)))
    if args.json is not None:
        ex.write_json(result, args.json)
        print(f"wrote {args.json}")
    if args.plot is not None:
        ex.plot(result, args.plot)
        print(f"wrote {args.plot}")
    return 0
