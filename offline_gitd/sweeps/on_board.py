"""What a sweep's board already holds of each run, so that a sweep needs no run directory to know a
run is finished (docs/sweeps.md#moving-a-sweep-to-another-machine).

A sweep moved to another machine, or a cluster that lost its scratch space, has the board (committed
with the repository, or kept on a filesystem that survived) but no run directory and no dataset.
The board's rows carry each run's ``config_hash``: the hash of its resolved config, everything that
defines what it learns and nothing of where, how long or for which seeds it runs
(docs/architecture.md#a-run-is-a-function-of-its-config). The sweep computes that hash for each of
its runs without running it, exactly as the run will: the spec's fields filled with the defaults of
the domain its dataset or env belongs to, and the torso its observations call for. The domain and
the observations come from the dataset where it is local, from the env a ``[[collect]]`` entry
records it from where it is not, and from the env itself for an online run. A run whose hash, seeds
and evaluation points are all on its board is complete: it is not run, and a dataset only such runs
train on is not recorded.

Where the sweep cannot know the hash without running (a dataset neither local nor recorded by the
spec, an online run started ``--init-from`` an offline run), or the run writes no rows
(``--eval-episodes 0``), the board decides nothing and the run goes on as before.

Rows are matched on their identity, seed and step: the ``config_hash`` and the ``data_sha256``,
the content digest of the data an offline run trained on (docs/leaderboard.md#what-made-a-row). A
row with the same hash was produced by a run of the same resolved config on the same dataset id,
whichever run directory wrote it; the digest says whether on the same recording of it. Where the
dataset is local, only rows of its digest count, so a run trained on another recording under the
same name is trained again; rows that record no digest (boards written before it existed) count
for any, and the sweep says how many it took on that basis. Where the dataset is not here, the
digest cannot be compared and the hash alone decides, as for an online run (no data).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from offline_gitd.errors import UsageError
from offline_gitd.sweeps.spec import CollectStep, RunPlan, SweepSpec

CONFIG_FILE = "config.json"
# The run directory's name for the config a run records (``run_id``, ``config_hash``).
Profile = tuple[str, tuple[int, ...]]  # the domain whose defaults apply, one network input's shape
# config_hash -> data_sha256 ("" where not recorded) -> seed -> step -> run_id
BoardIndex = dict[str, dict[str, dict[int, dict[int, str]]]]


@dataclass(frozen=True)
class Expected:
    """The rows a finished run puts on its board: ``config_hash`` x ``seeds`` x ``points``.

    ``leading_gaps``: an online run writes a seed's row at a logging point only once that seed has
    finished an episode, so a seed's first points may hold no row; from its first row on, every
    point does (docs/leaderboard.md). An offline run evaluates every seed at every epoch.
    """

    config_hash: str
    seeds: tuple[int, ...]
    points: tuple[int, ...]
    leading_gaps: bool = False
    data_sha256: str | None = None  # the local dataset's digest; None: online, or the dataset is not here

    def lacking(self, steps: Mapping[int, str]) -> list[int]:
        """The points of one seed whose rows are not among ``steps`` (step -> run_id)."""
        needed = self.points
        if self.leading_gaps and steps:
            first = min(steps)
            needed = tuple(point for point in self.points if point >= first)
        return [point for point in needed if point not in steps]


@dataclass(frozen=True)
class Verdict:
    """What the board says of one run: complete, partly there, or nothing (or unknown)."""

    expected: Expected | None
    present: int = 0  # rows of the run on the board
    complete: bool = False
    conflict: str | None = None  # why training it again would split a seed's curve over two runs
    undigested: int = 0  # of ``present``, rows that record no data digest (taken on the hash alone)


def collected_dataset(spec: SweepSpec, plan: RunPlan) -> CollectStep | None:
    """The ``[[collect]]`` entry that records the dataset ``plan`` trains on, if any."""
    dataset = plan.fields.get("dataset")
    if spec.command != "train" or not isinstance(dataset, str):
        return None
    from offline_gitd.data.registry import MinariId, parse_dataset_id

    try:
        parsed = parse_dataset_id(dataset)
    except UsageError:
        return None
    if not isinstance(parsed, MinariId):
        return None
    return next((step for step in spec.collect if step.out == parsed.dataset_id), None)


def env_profile(env_id: str) -> Profile:
    """The domain and network input a dataset recorded from ``env_id`` gets: the rule
    ``offline_gitd.data.datasets.dataset_profile`` applies to the env a Minari dataset rebuilds
    (:func:`offline_gitd.envs.make.env_profile`), read from the env itself, so that no dataset is
    needed."""
    from offline_gitd.envs.make import env_profile as profile_of
    from offline_gitd.envs.make import make_env

    env = make_env(env_id, 0)
    try:
        profile = profile_of(env, env_id)
    finally:
        env.close()
    return profile.domain, profile.input_shape


@dataclass
class BoardCheck:
    """Each run's expected rows and each board's rows, computed once per sweep pass."""

    spec: SweepSpec
    profiles: dict[str, Profile | None] = field(default_factory=dict)
    envs: dict[tuple[str, str], Any] = field(default_factory=dict)
    expectations: dict[str, Expected | None] = field(default_factory=dict)
    digests: dict[str, str | None] = field(default_factory=dict)
    boards: dict[Path, BoardIndex] = field(default_factory=dict)

    # ----------------------------------------------------------------------------- the run's side

    def expected(self, plan: RunPlan) -> Expected | None:
        """The rows ``plan`` will put on its board, or ``None`` where that cannot be known
        without running it (see the module's docstring)."""
        if plan.name not in self.expectations:
            try:
                self.expectations[plan.name] = self._expected(plan)
            except UsageError:  # a dataset or env that cannot be read: the run will say why
                self.expectations[plan.name] = None
        return self.expectations[plan.name]

    def _expected(self, plan: RunPlan) -> Expected | None:
        from offline_gitd.networks import torso_for_shape

        cls = self.spec.config_class
        if self.spec.command == "train":
            config = cls(**{**plan.fields, "out": plan.name, "data_dir": self.spec.data_dir})
            profile = self._dataset_profile(plan, config.dataset)
            if profile is None:
                return None
            domain, shape = profile
            if config.torso is None:  # as offline_gitd.offline.train.resolve_config
                config = dataclasses.replace(config, torso=torso_for_shape(shape))
            resolved = config.resolve(domain)
            if not resolved.eval_episodes:
                return None
            points = tuple(epoch * resolved.steps_per_epoch for epoch in range(1, resolved.epochs + 1))
            digest = self.data_digest(config.dataset)
            return Expected(resolved.config_hash(), tuple(resolved.seed_list), points, data_sha256=digest)
        config = cls(**{**plan.fields, "algo": self.spec.command.split()[1], "out": plan.name})
        if config.init_from:  # its unset fields are taken from the offline run's own config
            return None
        key = (config.env, config.algo)
        if key not in self.envs:
            from offline_gitd.online.env_info import inspect_env

            self.envs[key] = inspect_env(*key)
        info = self.envs[key]
        if config.torso is None and info.images:  # as offline_gitd.online.train.resolve_config
            config = dataclasses.replace(config, torso=torso_for_shape(info.input_shape))
        resolved = config.resolve(info.domain)
        # Rows at every log point, every checkpoint and the last step (offline_gitd.online.loop).
        points = {*range(resolved.log_every, resolved.steps + 1, resolved.log_every), resolved.steps}
        points |= set(range(resolved.checkpoint_every, resolved.steps + 1, resolved.checkpoint_every))
        return Expected(resolved.config_hash(), tuple(resolved.seed_list), tuple(sorted(points)), leading_gaps=True)

    def data_digest(self, dataset: str) -> str | None:
        """The content digest of ``dataset`` where it is here (what the run will record), else
        ``None``; computed once per sweep pass, and kept in the dataset's directory (offline_gitd.data.digest)."""
        if dataset not in self.digests:
            from offline_gitd.data.datasets import open_dataset
            from offline_gitd.data.digest import dataset_digest

            try:
                self.digests[dataset] = dataset_digest(open_dataset(dataset, self.spec.data_dir))
            except UsageError:
                self.digests[dataset] = None
        return self.digests[dataset]

    def trained_on_other_data(self, plan: RunPlan, run_dir: Path) -> str | None:
        """Why a run done here no longer counts as done: the digest its run directory recorded is
        not that of the dataset now here under the same name; ``None`` when they agree or either
        is unknown."""
        dataset = plan.fields.get("dataset")
        if self.spec.command != "train" or not isinstance(dataset, str):
            return None
        recorded = _recorded(run_dir, "data_sha256")
        if not recorded:
            return None
        try:
            here = self.data_digest(dataset)
        except Exception:  # a dataset that cannot be read: the run itself will say why
            return None
        if here is None or here == recorded:
            return None
        return f"trained on data of digest {recorded[:12]}..., the dataset here has {here[:12]}..."

    def _dataset_profile(self, plan: RunPlan, dataset: str) -> Profile | None:
        """The dataset's own profile where it is local (what the run itself reads), else that of
        the env the spec's ``[[collect]]`` entry records it from; ``None`` when neither is known."""
        if dataset not in self.profiles:
            from offline_gitd.data.datasets import dataset_profile

            try:
                self.profiles[dataset] = dataset_profile(dataset, self.spec.data_dir)
            except UsageError:
                step = collected_dataset(self.spec, plan)
                self.profiles[dataset] = env_profile(step.env) if step is not None else None
        return self.profiles[dataset]

    # ------------------------------------------------------------------------------ the board's side

    def rows(self, board: Path) -> BoardIndex:
        """``config_hash -> data_sha256 -> seed -> step -> run_id`` of every row on ``board``
        (none if absent)."""
        if board not in self.boards:
            from offline_gitd.leaderboard.schema import read_rows

            index: BoardIndex = {}
            if board.exists():
                for _, row in read_rows(board):
                    by_data = index.setdefault(row.config_hash, {}).setdefault(row.data_sha256, {})
                    by_data.setdefault(row.seed, {})[row.step] = row.run_id
            self.boards[board] = index
        return self.boards[board]

    def forget(self, board: Path) -> None:
        """Read ``board`` again next time (rows were added to it)."""
        self.boards.pop(board, None)

    def verdict(self, plan: RunPlan, board: Path, run_dir: Path) -> Verdict:
        """Whether ``plan``'s rows are all on ``board``; a run partly there that cannot be trained
        again without splitting a seed's curve over two runs carries the reason in ``conflict``."""
        if not self.rows(board):  # no board yet: nothing to compute
            return Verdict(None)
        expected = self.expected(plan)
        if expected is None:
            return Verdict(None)
        seeds, undigested = _matching(self.rows(board).get(expected.config_hash, {}), expected)
        present = sum(len(steps) for seed, steps in seeds.items() if seed in expected.seeds)
        lacking = {seed: expected.lacking(seeds.get(seed, {})) for seed in expected.seeds}
        if not any(lacking.values()):
            return Verdict(expected, present, complete=True, undigested=undigested)
        # A seed with some points on the board and others not: trained again from scratch, its
        # missing points would go on the board under a new run id beside the old ones, and the
        # board's statistics would count that seed twice (each run's last point is a final
        # score, docs/leaderboard.md). Only the run that wrote them, resumed, may add to them.
        own = _run_id(run_dir)
        for seed, points in lacking.items():
            steps = seeds.get(seed, {})
            if points and steps and any(run_id != f"{own}-s{seed}" for run_id in steps.values()):
                return Verdict(
                    expected,
                    present,
                    conflict=(
                        f"seed {seed} is partly on the board ({len(steps)} of its points; steps "
                        f"{', '.join(map(str, points[:3]))}{' ...' if len(points) > 3 else ''} missing) and the run "
                        "that wrote it is not here to resume: trained again, the seed would count twice on the "
                        f"board; remove its rows (config_hash {expected.config_hash}) from the board to train "
                        "it again whole"
                    ),
                )
        return Verdict(expected, present, undigested=undigested)


def _matching(
    by_data: Mapping[str, dict[int, dict[int, str]]], expected: Expected
) -> tuple[dict[int, dict[int, str]], int]:
    """``seed -> step -> run_id`` of the rows of one config hash that count for ``expected``:
    those of its data digest and those that record none, or every row where the digest is not
    known here (see the module's docstring); and how many of the seeds' rows recorded no digest."""
    if expected.data_sha256 is None:
        wanted = list(by_data)
    else:
        wanted = [digest for digest in (expected.data_sha256, "") if digest in by_data]
    seeds: dict[int, dict[int, str]] = {}
    for digest in wanted:
        for seed, steps in by_data[digest].items():
            seeds.setdefault(seed, {}).update(steps)
    undigested = sum(len(steps) for seed, steps in by_data.get("", {}).items() if seed in expected.seeds)
    return seeds, (undigested if "" in wanted else 0)


def _recorded(run_dir: Path, key: str) -> str | None:
    """A value a run recorded in ``run_dir``'s config, if it holds a started run."""
    try:
        return json.loads((run_dir / CONFIG_FILE).read_text()).get(key)
    except (OSError, ValueError, AttributeError):
        return None


def _run_id(run_dir: Path) -> str | None:
    """The run id recorded in ``run_dir``'s config, if it holds a started run."""
    return _recorded(run_dir, "run_id")


def recorded_hash(run_dir: Path) -> str | None:
    """The config hash a finished run recorded (``config.json``)."""
    return _recorded(run_dir, "config_hash")
