"""The paper's offline Gym ablation, full protocol (docs/reproducing.md#offline-gym-ablation-lunarlander-mountaincar): the sweep
``sweeps/gym_offline.toml`` on Ray, then the report of the paper's claims.

Run by hand; the sweep is resumable, so an interrupted benchmark continues where it stopped:

    .venv/bin/python -m benchmarks.gym_offline --out runs/gym_offline             # sweep + report
    .venv/bin/python -m benchmarks.gym_offline --out runs/gym_offline --report    # tables only
    .venv/bin/python -m benchmarks.gym_offline --out runs/gym_offline --address HEAD:6379  # on a cluster
    .venv/bin/python -m benchmarks.gym_offline --raw --data-dir D --out runs/gym_offline   # raw returns
    .venv/bin/python -m benchmarks.gym_offline --claims        # the claims tables of the committed boards

This is ``offline_gitd sweep sweeps/gym_offline.toml --out OUT`` (the spec holds the protocol:
datasets, CQL settings, the 64 configurations, 10 seeds each) followed by the report: per (data
fraction, T) setting, every method's IQM AUC relative to CQL's with its 95% CI, from which the
paper's three claims read off directly: Gi-CQL above 1; beta = 1 above beta = 0.01; K = 50 costing
i-CQL more than Gi-CQL. ``--envs`` restricts the report to one env's runs.

``--raw`` reads the boards (default: the committed ``leaderboards/gym_offline/``) as raw final
returns instead: per board and env, each method's mean over seeds with a 95% bootstrap interval,
beside a uniformly random policy's return and the data's own return, both measured on the
datasets under ``--data-dir`` (leaderboards/gym_offline/README.md).

``--claims`` prints the report's table from the committed boards in ``--boards`` (no runs needed),
as ``leaderboard show`` reads them today: 10,000 bootstrap replications and the flagged-env rule
(an env whose CQL mean final return is within noise of zero is left out of the aggregate;
``--keep-flagged-envs`` keeps it). docs/reproducing.md's tables are this output, checked by
tests/test_published_numbers.py.
"""

from __future__ import annotations

import argparse
import itertools
from dataclasses import dataclass
from pathlib import Path

SPEC = Path(__file__).resolve().parent.parent / "sweeps" / "gym_offline.toml"
BOARDS = Path(__file__).resolve().parent.parent / "leaderboards" / "gym_offline"
ENVS = ("LunarLander-v3", "MountainCar-v0")
FRACTIONS = (0.1, 1.0)
PERIODS = (10, 1000)


@dataclass(frozen=True)
class RunSpec:
    """One configuration of the ablation, read back from the sweep's run plan."""

    name: str  # the run directory's name under OUT/runs
    env: str
    critic: str
    K: int
    beta: float
    T: int
    fraction: float

    @property
    def setting(self) -> str:
        return f"data{int(self.fraction * 100)}-T{self.T}"


def env_suffix(envs: tuple[str, ...]) -> str:
    """File-name tag of an env subset ("" for the full protocol): boards of a subset never
    overwrite the full protocol's."""
    return "" if set(envs) == set(ENVS) else "-" + "-".join(env.split("-")[0].lower() for env in envs)


def protocol_grid(envs: tuple[str, ...] = ENVS, spec_path: Path = SPEC) -> list[RunSpec]:
    """Every configuration of the spec's grid (64 for both envs), restricted to ``envs``."""
    from offline_gitd.sweeps.spec import expand, load_spec

    names = {env.split("-")[0].lower(): env for env in ENVS}
    grid = []
    for plan in expand(load_spec(spec_path)):
        fields = plan.fields
        env = names[fields["dataset"].split("/")[1]]  # minari:offline_gitd/<env>/dqn-...
        if env in envs:
            grid.append(
                RunSpec(plan.name, env, fields["critic"], fields["K"], fields["beta"], fields["T"], fields["fraction"])
            )
    return grid


def run_sweep(args: argparse.Namespace) -> int:
    import dataclasses

    from offline_gitd.sweeps.runner import SweepOptions
    from offline_gitd.sweeps.runner import run_sweep as run
    from offline_gitd.sweeps.spec import load_spec

    spec = load_spec(SPEC)
    if args.data_dir:
        spec = dataclasses.replace(spec, data_dir=args.data_dir)
    return run(spec, SweepOptions(out=args.out, address=args.address, max_parallel=args.max_parallel))


# Report columns: (heading, method key on a setting's board). Every cell is that method's IQM AUC
# relative to CQL's (1 = CQL, higher = better) with its 95% CI, so two cells of a row compare
# directly; ratios of these relative numbers would mean nothing where CQL's AUC is negative.
COLUMNS = (
    ("Gi-CQL", "cql:gitd:K=5,beta=1"),
    ("Gi-CQL beta 0.01", "cql:gitd:K=5,beta=0.01"),
    ("TDRC-CQL", "cql:tdrc:K=1,beta=1"),
    ("TDRC-CQL beta 0.01", "cql:tdrc:K=1,beta=0.01"),
    ("i-CQL", "cql:itd:K=5,beta=1"),
    ("i-CQL K 50", "cql:itd:K=50,beta=1"),
    ("Gi-CQL K 50", "cql:gitd:K=50,beta=1"),
)


def report(args: argparse.Namespace, grid: list[RunSpec]) -> str:
    """Per setting: a board, its summaries, and every method's IQM AUC relative to CQL as a
    markdown table (the paper's claims read across a row: Gi-CQL above 1; beta 1 above beta
    0.01; K = 50 costing i-CQL more than Gi-CQL)."""
    from offline_gitd.leaderboard.report import analyse
    from offline_gitd.leaderboard.submit import submit

    lines = [
        "| data | T | " + " | ".join(heading for heading, _ in COLUMNS) + " |",
        "| --- | --- | " + " | ".join("---" for _ in COLUMNS) + " |",
    ]
    for fraction, T in itertools.product(FRACTIONS, PERIODS):
        specs = [s for s in grid if s.fraction == fraction and s.T == T]
        run_dirs = [args.out / "runs" / s.name for s in specs if (args.out / "runs" / s.name / "results.csv").exists()]
        # The report's own boards (the sweep's boards pool both envs; a report may ask for one).
        if len(run_dirs) < len(specs):
            lines.append(f"| {fraction:.0%} | {T} | incomplete: {len(run_dirs)}/{len(specs)} runs |")
            continue
        board = args.out / "report" / f"board-{specs[0].setting}{env_suffix(args.envs)}.csv"
        board.parent.mkdir(parents=True, exist_ok=True)
        board.unlink(missing_ok=True)
        submit(run_dirs, board, allow_new_env=True)
        analysis = analyse(board, "cql:td", "baseline", args.reps, seed=0)
        auc = {summary.method: summary.auc for summary in analysis.summaries}
        cells = [
            f"{auc[key].value:.2f} [{auc[key].low:.2f}, {auc[key].high:.2f}]" if key in auc else "n/a"
            for _, key in COLUMNS
        ]
        lines.append(f"| {fraction:.0%} | {T} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


ENV_DATASETS = {"LunarLander-v3": "offline_gitd/lunarlander/*", "MountainCar-v0": "offline_gitd/mountaincar/*"}


def claims_from_boards(boards: Path, envs: tuple[str, ...], reps: int, keep_flagged: bool) -> str:
    """The report's table (every method's IQM AUC relative to CQL's, 95% CI) from the committed
    per-setting boards, read as ``leaderboard show --normalise baseline`` reads them. A setting
    whose every env is flagged (CQL's mean final return within noise of zero) has no aggregate
    without ``keep_flagged``: its row says so rather than printing a ratio to noise."""
    from offline_gitd.errors import UsageError
    from offline_gitd.leaderboard.show import load
    from offline_gitd.leaderboard.stats import summarise

    lines = [
        "| data | T | " + " | ".join(heading for heading, _ in COLUMNS) + " | envs |",
        "| --- | --- | " + " | ".join("---" for _ in COLUMNS) + " | --- |",
    ]
    patterns = tuple(ENV_DATASETS[env] for env in envs)
    for fraction, T in itertools.product(FRACTIONS, PERIODS):
        board = boards / f"board-data{int(fraction * 100)}-T{T}.csv"
        try:
            loaded = load(board, "cql:td", "baseline", patterns, (), keep_flagged)
        except UsageError:  # every env flagged: no aggregate to print
            flagged = ", ".join(envs)
            lines.append(
                f"| {fraction:.0%} | {T} | "
                + " | ".join("-" for _ in COLUMNS)
                + f" | none ({flagged} flagged: CQL's mean final return within noise of zero) |"
            )
            continue
        auc = {summary.method: summary.auc for summary in summarise(loaded.scored, loaded.baseline, reps, 0)}
        cells = [
            f"{auc[key].value:.2f} [{auc[key].low:.2f}, {auc[key].high:.2f}]" if key in auc else "n/a"
            for _, key in COLUMNS
        ]
        kept = sorted(set(loaded.scored["env"]))
        names = ", ".join(env for env, pattern in ENV_DATASETS.items() if any(e.startswith(pattern[:-1]) for e in kept))
        dropped = [
            env for env, pattern in ENV_DATASETS.items() if any(e.startswith(pattern[:-1]) for e in loaded.flagged)
        ]
        note = f" ({', '.join(dropped)} flagged, left out)" if dropped and not keep_flagged else ""
        lines.append(f"| {fraction:.0%} | {T} | " + " | ".join(cells) + f" | {names}{note} |")
    return "\n".join(lines)


# Raw-returns tables (leaderboards/gym_offline/README.md): the boards' method keys, in the order
# of the paper's grid, with the names the pages use.
METHODS = (
    ("CQL (td)", "td", 1, 1.0),
    ("TDRC-CQL", "tdrc", 1, 1.0),
    ("i-CQL K 5", "itd", 5, 1.0),
    ("Gi-CQL K 5", "gitd", 5, 1.0),
    ("TDRC-CQL beta 0.01", "tdrc", 1, 0.01),
    ("Gi-CQL K 5 beta 0.01", "gitd", 5, 0.01),
    ("i-CQL K 50", "itd", 50, 1.0),
    ("Gi-CQL K 50", "gitd", 50, 1.0),
)
DATASETS = {
    "LunarLander-v3": "offline_gitd/lunarlander/dqn-100000-v0",
    "MountainCar-v0": "offline_gitd/mountaincar/dqn-100000-v0",
}
LAST_EPISODES = 20  # the behaviour agent's last episodes: its return when collection ended


def bootstrap_mean(values, reps: int = 10_000, seed: int = 0) -> tuple[float, float, float]:
    """The mean of ``values`` (one per seed) and its 95% percentile-bootstrap interval over seeds."""
    import numpy as np

    values = np.asarray(values, np.float64)
    rng = np.random.default_rng(seed)
    means = values[rng.integers(len(values), size=(reps, len(values)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(values.mean()), float(low), float(high)


@dataclass(frozen=True)
class References:
    """What an env's scores are read against: a uniformly random policy and the data's own returns."""

    random: float  # mean return of uniformly random actions (evaluate with epsilon 1)
    random_episodes: int
    ref_min_score: float | None  # the random return ``collect`` wrote into the metadata
    data_all: float  # mean episode return over the whole dataset (the 100% boards' data)
    data_kept: float  # mean over the first 10% of its episodes (what ``--fraction 0.1`` keeps)
    data_last: float  # mean over its last LAST_EPISODES episodes
    episodes: int
    kept_episodes: int
    kept_steps: int
    goal_episodes: int  # episodes that ended in a termination (LunarLander: landed or crashed)


def dataset_references(dataset_id: str, data_dir: str | None, episodes: int = 1000, seed: int = 0) -> References:
    """An env's references from its recorded dataset (``offline_gitd collect``, the spec's
    ``[[collect]]``): the random return on the dataset's own evaluation env (same horizon), and
    the returns of the episodes in the data."""
    import math

    import minari
    import numpy as np

    from offline_gitd.data.paths import use_minari_root
    from offline_gitd.envs.make import evaluate

    use_minari_root(data_dir)
    dataset = minari.load_dataset(dataset_id)
    returns, lengths, terminated = [], [], []
    for episode in dataset.iterate_episodes():
        returns.append(float(np.sum(episode.rewards)))
        lengths.append(len(episode.rewards))
        terminated.append(bool(episode.terminations[-1]))
    kept = max(1, math.ceil(0.1 * len(returns) - 1e-9))  # as train --fraction 0.1 keeps episodes

    def make() -> object:
        return dataset.recover_environment(eval_env=True)

    random = evaluate(lambda obs: np.zeros(len(obs), np.int64), make, episodes, seed, epsilon=1.0)
    ref_min = dataset.storage.metadata.get("ref_min_score")
    return References(
        random=float(random.mean()),
        random_episodes=episodes,
        ref_min_score=None if ref_min is None else float(ref_min),
        data_all=float(np.mean(returns)),
        data_kept=float(np.mean(returns[:kept])),
        data_last=float(np.mean(returns[-LAST_EPISODES:])),
        episodes=len(returns),
        kept_episodes=kept,
        kept_steps=int(np.sum(lengths[:kept])),
        goal_episodes=int(np.sum(terminated)),
    )


def verdict(low: float, high: float, reference: float) -> str:
    """Where a method's interval lies against a reference return."""
    if low > reference:
        return "above"
    if high < reference:
        return "below"
    return "within"


def raw_tables(boards: Path, refs: dict[str, References]) -> str:
    """Per (data fraction, T) board and env: each method's mean final return over seeds with its
    95% bootstrap interval, against the random return and the return of the data it trained on."""
    import pandas as pd

    lines = []
    for fraction, T in itertools.product(FRACTIONS, PERIODS):
        board = pd.read_csv(boards / f"board-data{int(fraction * 100)}-T{T}.csv")
        lines += [f"### {fraction:.0%} of the data, T = {T}", ""]
        for env, dataset_id in DATASETS.items():
            rows = board[board.env == dataset_id]
            final = rows[rows.step == rows.step.max()]
            ref = refs[env]
            data = ref.data_kept if fraction < 1 else ref.data_all
            which = f"first {ref.kept_episodes} episodes" if fraction < 1 else f"all {ref.episodes} episodes"
            lines += [
                f"**{env}** (final step {int(rows.step.max()):,}; random {ref.random:.1f}, data {data:.1f})",
                "",
                "| method | seeds | final return, mean [95% CI] | vs random | vs data |",
                "| --- | --- | --- | --- | --- |",
            ]
            for name, critic, K, beta in METHODS:
                scores = final[(final.critic == critic) & (final.K == K) & (final.beta == beta)]["return"]
                if scores.empty:
                    lines.append(f"| {name} | 0 | n/a | | |")
                    continue
                mean, low, high = bootstrap_mean(scores.to_numpy())
                lines.append(
                    f"| {name} | {len(scores)} | {mean:.1f} [{low:.1f}, {high:.1f}] | "
                    f"{verdict(low, high, ref.random)} | {verdict(low, high, data)} |"
                )
            lines += [
                f"| *uniform random ({ref.random_episodes} episodes)* | | {ref.random:.1f} | | |",
                f"| *data: {which}* | | {data:.1f} | | |",
                f"| *data: last {LAST_EPISODES} episodes* | | {ref.data_last:.1f} | | |",
                "",
            ]
    return "\n".join(lines)


def references_table(refs: dict[str, References]) -> str:
    """The references of each env's dataset as a markdown table."""
    lines = [
        "| env | random (episodes) | collect's ref_min_score | data: all episodes | data: first 10% of episodes "
        "(steps) | data: last 20 episodes | episodes ending in a termination |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for env, ref in refs.items():
        ref_min = "n/a" if ref.ref_min_score is None else f"{ref.ref_min_score:.1f}"
        lines.append(
            f"| {env} | {ref.random:.1f} ({ref.random_episodes}) | {ref_min} | {ref.data_all:.1f} ({ref.episodes}) | "
            f"{ref.data_kept:.1f} ({ref.kept_episodes} episodes, {ref.kept_steps:,} steps) | {ref.data_last:.1f} | "
            f"{ref.goal_episodes} of {ref.episodes} |"
        )
    return "\n".join(lines)


def raw_report(args: argparse.Namespace) -> str:
    refs = {env: dataset_references(dataset_id, args.data_dir) for env, dataset_id in DATASETS.items()}
    return references_table(refs) + "\n\n" + raw_tables(args.boards, refs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("runs/gym_offline"), help="the sweep's folder")
    parser.add_argument("--data-dir", default=None, help="data root for the datasets (default: the package's)")
    parser.add_argument("--address", default=None, help="Ray cluster HOST:PORT (default: embedded local Ray)")
    parser.add_argument("--max-parallel", type=int, default=None, help="at most N runs at a time")
    parser.add_argument("--reps", type=int, default=2000, help="bootstrap replications")
    parser.add_argument("--report", action="store_true", help="only build the boards and print the table")
    parser.add_argument(
        "--raw",
        action="store_true",
        help="only the raw-returns tables of the boards in --boards, against random and the data (needs the datasets)",
    )
    parser.add_argument(
        "--claims",
        action="store_true",
        help="only the claims table from the committed boards in --boards (10,000 replications, as show)",
    )
    parser.add_argument(
        "--keep-flagged-envs",
        action="store_true",
        help="with --claims: keep envs whose CQL mean is within noise of zero (as show's flag)",
    )
    parser.add_argument(
        "--boards", type=Path, default=BOARDS, help="the per-setting boards --raw reads (default: the committed ones)"
    )
    parser.add_argument(
        "--envs", default=",".join(ENVS), help="comma-separated subset of the envs to report (default: both)"
    )
    args = parser.parse_args()
    args.envs = tuple(args.envs.split(","))
    unknown = set(args.envs) - set(ENVS)
    if unknown:
        parser.error(f"unknown env(s) {', '.join(sorted(unknown))}; choose from {', '.join(ENVS)}")
    if args.claims:
        print(claims_from_boards(args.boards, args.envs, 10_000, args.keep_flagged_envs))
        return
    if args.raw:
        text = raw_report(args)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "raw.md").write_text(text + "\n")
        print(text)
        print(f"raw.md in {args.out}")
        return
    if not args.report and run_sweep(args) != 0:
        print("some runs failed (above); the report covers the finished settings only")
    table = report(args, protocol_grid(args.envs))
    suffix = env_suffix(args.envs)
    (args.out / f"claims{suffix}.md").write_text(table + "\n")
    print(table)
    print(f"report boards in {args.out / 'report'}, claims{suffix}.md in {args.out}")


if __name__ == "__main__":
    main()
