"""``offline_gitd demo``: the embedded default run (DESIGN §7), CPU only, well under 3 minutes.

For now it runs the paper's Section 5 controlled-MDP experiments at their default settings (star,
hall, triangle with eps = -1 and +1), writes one JSON and one PNG per MDP into ``--out``, and prints
the final value error and sum of Bellman errors of every critic.
"""

from __future__ import annotations

import argparse
from pathlib import Path

# --quick divides every MDP's default number of steps by this (a smoke run of a few seconds).
QUICK_DIVISOR = 10


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="run the controlled-MDP experiments (star, hall, triangle) and write JSON + PNG",
        description=(
            "Run TD, TDRC, i-TD and Gi-TD on the paper's star, hall and triangle (eps -1 and +1) "
            "MDPs at their default settings; write <mdp>.json and <mdp>.png per MDP into --out."
        ),
    )
    parser.add_argument("--out", type=Path, default=Path("demo_out"), help="output folder")
    parser.add_argument(
        "--quick", action="store_true", help=f"1/{QUICK_DIVISOR} of the default steps (smoke run)"
    )
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from offline_gitd.mdps import experiment as ex
    from offline_gitd.mdps.expected_updates import CRITICS

    mdps = [ex.build_mdp("star"), ex.build_mdp("hall")]
    mdps += [ex.build_mdp("triangle", eps) for eps in (-1.0, 1.0)]
    rows, written = [], []
    for mdp in mdps:
        steps = max(1, mdp.default_steps // QUICK_DIVISOR) if args.quick else mdp.default_steps
        result = ex.run_experiment(mdp, list(CRITICS), steps=steps, lr=mdp.lr, K=mdp.K)
        stem = args.out / ex.label(mdp)
        ex.write_json(result, stem.with_suffix(".json"))
        ex.plot(result, stem.with_suffix(".png"))
        rows += ex.summary_rows(result)
        written += [stem.with_suffix(".json"), stem.with_suffix(".png")]
    print("final metrics (true value 0):")
    print(ex.SUMMARY_HEADER)
    print("\n".join(rows))
    print("wrote:")
    print("\n".join(f"  {path}" for path in written))
    return 0
