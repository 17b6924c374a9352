"""Sweep specs (docs/sweeps.md): a TOML file -> validated run plans, before anything runs.

A spec names a command family (``train``, ``online dqn``, ``online sac``), ``[fixed]`` config
fields shared by every run, and a ``[grid]`` whose lists are crossed. A grid axis is either a
config field with a list of values (``critic = ["td", "gitd"]``) or a named list of tables that
set several fields together (``method = [{critic = "itd", K = 5}, {critic = "gitd", K = 50}]``):
the paper's ablations are not full crosses (K = 50 only for i-TD and Gi-TD), so they need both.

Fields and values are checked against the command's own config dataclass (the single source of
flags, types, choices and ranges), so a spec accepts exactly what the command line
does; every refusal is one line naming the spec's key. Each plan is the command line a user
would type (``argv``): a sweep only expands, schedules and collects, it never re-implements
training (docs/sweeps.md).
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import math
import re
import string
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from offline_gitd.algorithm_registry import algorithm_specs
from offline_gitd.choices import did_you_mean
from offline_gitd.config.fields import MAX_SEEDS, coerce_value, config_fields, flag_of, parse_int_range
from offline_gitd.errors import ConfigError
from offline_gitd.online.command import COLLECT_KEYS as COLLECT_FILE_KEYS
from offline_gitd.online.command import type_names

COMMANDS: dict[str, tuple[str, ...]] = {
    "train": ("train",),
    "online dqn": ("online", "dqn"),
    "online sac": ("online", "sac"),
}
TOP_LEVEL = (
    "command",
    "board",
    "allow_new_env",
    "allow_mixed",
    "data_dir",
    "resources",
    "collect",
    "fixed",
    "grid",
)
# Set by the sweep itself, never by a spec: where each run goes, which algorithm the command is.
RESERVED = {"out": "run directories are named from the grid under --out", "data_dir": "use the top-level data_dir"}
# The keys of a [[collect]] table: those of `collect --config FILE` but where the dataset and the
# behaviour agent's run go, which the sweep decides (the top-level data_dir, its own run folders).
COLLECT_KEYS = {key: kind for key, kind in COLLECT_FILE_KEYS.items() if key not in ("data_dir", "run_dir")}
RESOURCE_KEYS = {"cpus": (int, float), "gpus": (int, float), "retries": int, "seeds_per_run": int}
# What a resumed run may change (docs/architecture.md#runs-are-self-contained): its length. A finished run with a longer length in
# the spec is resumed to that length.
LENGTH_FIELD = {"train": "epochs", "online dqn": "steps", "online sac": "steps"}
# Runs one spec may expand to: the paper's largest grid is 64 runs; a cross of a million (three
# axes of 100 values) would spend minutes validating before anything runs, so it is refused by its
# size before it is expanded.
MAX_RUNS = 10_000


@dataclasses.dataclass(frozen=True)
class Resources:
    """What Ray reserves for each run, and how often a run lost with its worker is retried."""

    cpus: float = 1.0
    gpus: float = 0.0
    retries: int = 3
    seeds_per_run: int = 0  # 0: all of a run's seeds in one vmapped program


@dataclasses.dataclass(frozen=True)
class CollectStep:
    """A dataset the grid trains on, recorded by ``offline_gitd collect`` before the grid starts."""

    env: str
    steps: int
    out: str
    options: tuple[tuple[str, Any], ...] = ()

    def argv(self, data_dir: str | None) -> list[str]:
        argv = ["collect", self.env, "--steps", str(self.steps), "--out", self.out, "--no-progress"]
        for key, value in self.options:
            argv += [f"--{key.replace('_', '-')}", str(value)]
        return argv + (["--data-dir", data_dir] if data_dir else [])


@dataclasses.dataclass(frozen=True)
class RunPlan:
    """One run of the grid: its name (its run directory's), its config fields and its command."""

    name: str
    fields: Mapping[str, Any]
    argv: tuple[str, ...]  # without --out / --resume, which depend on where the sweep writes
    length: int | None  # epochs or steps as the spec asks (None: the command's default)
    board: str  # the spec's board name with this run's fields filled in

    def command_line(self, run_dir: Path, resume: bool) -> list[str]:
        return [*self.argv, "--out", str(run_dir), "--no-progress", *(["--resume"] if resume else [])]


@dataclasses.dataclass(frozen=True)
class SweepSpec:
    path: Path
    command: str
    board: str
    allow_new_env: bool
    data_dir: str | None
    resources: Resources
    collect: tuple[CollectStep, ...]
    fixed: Mapping[str, Any]
    grid: Mapping[str, list[Any]]
    # ``--only AXIS=VALUE``: the runs of one grid entry per named axis; the rest of the grid still
    # names the runs, so a run is the same run (directory, config hash) with or without it.
    only: tuple[tuple[str, str], ...] = ()
    # ``--record-missing``: a [[collect]] dataset a manifest lists, which no mirror gave, is recorded
    # anew rather than failing (docs/sweeps.md#datasets-from-mirrors).
    record_missing: bool = False
    # ``leaderboard submit --allow-mixed`` for the sweep's submits (docs/leaderboard.md#one-board-one-kind-of-row)
    allow_mixed: bool = False

    @property
    def config_class(self) -> type:
        if self.command == "train":
            from offline_gitd.offline.config import OfflineConfig

            return OfflineConfig
        from offline_gitd.online.config import OnlineConfig

        return OnlineConfig


def load_spec(path: Path) -> SweepSpec:
    """Read and validate a spec; any problem is a :class:`ConfigError` naming the spec's key."""
    try:
        raw = tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such sweep spec") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, expected a sweep spec (.toml)") from None
    except (ValueError, UnicodeDecodeError) as err:
        # ValueError: TOMLDecodeError, and an integer literal past int()'s 4300 digits, which
        # tomllib lets through as it is.
        raise ConfigError(f"{path}: not valid TOML ({err})") from None
    where = str(path)
    unknown = sorted(set(raw) - set(TOP_LEVEL))
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {unknown[0]!r}{did_you_mean(unknown[0], TOP_LEVEL)} (known: {', '.join(TOP_LEVEL)})"
        )
    command = raw.get("command")
    if command not in COMMANDS:
        raise ConfigError(f"{where}: command must be one of {', '.join(map(repr, COMMANDS))}, got {command!r}")
    board = raw.get("board", "leaderboard.csv")
    check_board(f"{where}: board", board)
    allow_new_env = raw.get("allow_new_env", True)
    if not isinstance(allow_new_env, bool):
        raise ConfigError(f"{where}: allow_new_env must be true or false, got {allow_new_env!r}")
    allow_mixed = raw.get("allow_mixed", False)
    if not isinstance(allow_mixed, bool):
        raise ConfigError(f"{where}: allow_mixed must be true or false, got {allow_mixed!r}")
    data_dir = raw.get("data_dir")
    if data_dir is not None and not isinstance(data_dir, str):
        raise ConfigError(f"{where}: data_dir must be a path string, got {data_dir!r}")
    spec = SweepSpec(
        path=Path(path),
        command=command,
        board=board,
        allow_new_env=allow_new_env,
        allow_mixed=allow_mixed,
        data_dir=data_dir,
        resources=_resources(where, raw.get("resources", {})),
        collect=_collect_steps(where, command, raw.get("collect", [])),
        fixed=_table(where, "fixed", raw.get("fixed", {})),
        grid=_table(where, "grid", raw.get("grid")),
    )
    if not spec.grid:
        raise ConfigError(f"{where}: [grid] is empty: a sweep needs at least one field with a list of values")
    expand(spec)  # every run's config is validated before anything runs
    return spec


def check_board(where: str, board: Any) -> None:
    """A board is a ``.csv`` path whose ``{field}`` placeholders are bare field names."""
    if not isinstance(board, str) or not board.endswith(".csv"):
        raise ConfigError(f"{where} must be a .csv file name, got {board!r}")
    try:
        placeholders = [(name, spec, conversion) for _, name, spec, conversion in string.Formatter().parse(board)]
    except ValueError as err:
        raise ConfigError(f"{where} {board!r}: {err}") from None
    # Only bare {field}: values are filled in as slugs (strings), so a format spec ({T:d}) or a
    # conversion ({T!x}) would fail, or name another field ({T:{K}}), only once the grid expands.
    if any(
        name is not None and (not name.isidentifier() or spec or conversion) for name, spec, conversion in placeholders
    ):
        raise ConfigError(f"{where} {board!r}: a placeholder must be a field name, like {{T}}")


def with_board(spec: SweepSpec, board: Path) -> SweepSpec:
    """``spec`` with its board replaced by ``--board`` (a path from the current directory, made
    absolute, so it no longer depends on ``--out``): the way to point a sweep at the board
    committed in the repository (docs/sweeps.md#moving-a-sweep-to-another-machine)."""
    check_board("--board", str(board))
    replaced = dataclasses.replace(spec, board=str(board.absolute()))
    try:
        expand(replaced)  # the spec is valid: only a placeholder the grid does not set can fail
    except ConfigError as err:
        raise ConfigError(f"--board {board}: {str(err).rpartition(': ')[2]}") from None
    return replaced


def with_seeds_per_run(spec: SweepSpec, per_run: int) -> SweepSpec:
    """``spec`` with ``[resources] seeds_per_run`` replaced by ``--seeds-per-run`` (0: each run's seeds
    in one vmapped program). A seed's rows do not depend on the seeds beside it (its keys come from
    its own number, docs/sweeps.md#seeds-over-several-runs), so the board a sweep continues from is
    read the same way whichever split made its rows; only the runs' names change."""
    if per_run < 0:
        raise ConfigError(f"--seeds-per-run must be >= 0 (0: all of a run's seeds in one program), got {per_run}")
    replaced = dataclasses.replace(spec, resources=dataclasses.replace(spec.resources, seeds_per_run=per_run))
    expand(replaced)  # counted as the spec's own key is: a split past MAX_RUNS is refused here
    return replaced


def with_only(spec: SweepSpec, selections: Sequence[str]) -> SweepSpec:
    """``spec`` narrowed to the runs of the grid entries ``selections`` name (``game=breakout``:
    the entry named ``breakout``, or the value ``breakout``, of axis ``game``), for a sweep done a
    part at a time (docs/sweeps.md#a-part-of-a-grid): only the datasets those runs train on are
    recorded, and run names are those of the whole grid."""
    axes = dict(_axes(spec))
    only = []
    for text in selections:
        axis, sep, value = text.partition("=")
        if not sep or not axis or not value:
            raise ConfigError(f"--only {text!r}: expected AXIS=VALUE, e.g. game=breakout")
        if axis not in axes:
            raise ConfigError(f"--only {text}: the grid has no axis {axis!r}{did_you_mean(axis, axes)}")
        labels = [_only_label(label, fields, axis) for label, fields in axes[axis]]
        if value not in labels:
            raise ConfigError(
                f"--only {text}: axis {axis} has no entry {value!r}{did_you_mean(value, labels)} "
                f"(entries: {', '.join(labels)})"
            )
        only.append((axis, value))
    return dataclasses.replace(spec, only=tuple(only))


def _only_label(label: str | None, fields: Mapping[str, Any], axis: str) -> str:
    """What ``--only AXIS=VALUE`` matches a grid entry by: its name, or its one value."""
    return label if label is not None else _format(fields.get(axis, ""))


def _table(where: str, name: str, value: Any) -> dict[str, Any]:
    if value is None:
        raise ConfigError(f"{where}: [{name}] is missing")
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: {name} must be a table ([{name}])")
    return dict(value)


def _resources(where: str, raw: Any) -> Resources:
    table = _table(where, "resources", raw)
    for key, value in table.items():
        kinds = RESOURCE_KEYS.get(key)
        if kinds is None:
            raise ConfigError(
                f"{where}: [resources] {key}: unknown key{did_you_mean(key, RESOURCE_KEYS)} "
                f"(known: {', '.join(RESOURCE_KEYS)})"
            )
        # Compared, never converted: NaN fails both bounds, and an integer past float range
        # (gpus = 1 followed by 400 zeros) would overflow float().
        if isinstance(value, bool) or not isinstance(value, kinds) or not 0 <= value < 2**31:
            raise ConfigError(f"{where}: [resources] {key}: must be a non-negative number below 2**31, got {value!r}")
    resources = Resources(**table)
    if resources.cpus <= 0 and resources.gpus <= 0:
        raise ConfigError(f"{where}: [resources] a run must reserve some cpus or gpus")
    if resources.gpus > 1 and not float(resources.gpus).is_integer():
        raise ConfigError(f"{where}: [resources] gpus: a fraction must be below 1, got {resources.gpus}")
    return resources


def _collect_steps(where: str, command: str, raw: Any) -> tuple[CollectStep, ...]:
    if not isinstance(raw, list) or not all(isinstance(item, dict) for item in raw):
        raise ConfigError(f"{where}: collect must be a list of tables ([[collect]])")
    if raw and command != "train":
        raise ConfigError(f"{where}: [[collect]] records datasets for train; command is {command!r}")
    steps = []
    for i, item in enumerate(raw, start=1):
        key = f"[[collect]] #{i}"
        for name, value in item.items():
            kind = COLLECT_KEYS.get(name)
            if kind is None:
                raise ConfigError(
                    f"{where}: {key} {name}: unknown key{did_you_mean(name, COLLECT_KEYS)} "
                    f"(known: {', '.join(COLLECT_KEYS)})"
                )
            if isinstance(value, bool) or not isinstance(value, kind):
                raise ConfigError(f"{where}: {key} {name}: expected {type_names(kind)}, got {value!r}")
        missing = [name for name in ("env", "steps", "out") if name not in item]
        if missing:
            raise ConfigError(f"{where}: {key}: {missing[0]} is required")
        if item["steps"] < 1:
            raise ConfigError(f"{where}: {key} steps: must be >= 1, got {item['steps']}")
        options = tuple((k, v) for k, v in item.items() if k not in ("env", "steps", "out"))
        steps.append(CollectStep(item["env"], item["steps"], item["out"], options))
    return tuple(steps)


# ----------------------------------------------------------------------------- fields and values


def _check_field(where: str, key: str, spec: SweepSpec, name: str, value: Any) -> Any:
    fields = config_fields(spec.config_class)  # an algorithm's own parameters among them
    if name in RESERVED:
        raise ConfigError(f"{where}: {key}: set by the sweep ({RESERVED[name]}); remove it")
    if name not in fields or (name == "algo" and spec.command != "train"):
        raise ConfigError(f"{where}: {key}: unknown field for {spec.command!r}{did_you_mean(name, fields)}")
    field, kind = fields[name]
    return coerce_value(where, key, field, kind, value)


def _axes(spec: SweepSpec) -> list[tuple[str, list[tuple[str | None, dict[str, Any]]]]]:
    """Each grid axis as (name, [(label, {field: value})]); a label names a table entry."""
    where = str(spec.path)
    axes = []
    for axis, values in spec.grid.items():
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{where}: [grid] {axis}: must be a non-empty list of values")
        entries: list[tuple[str | None, dict[str, Any]]] = []
        if all(isinstance(v, dict) for v in values):
            for i, entry in enumerate(values, start=1):
                label = entry.get("name")
                if label is not None and not isinstance(label, str):
                    raise ConfigError(f"{where}: [grid] {axis} #{i} name: must be a string, got {label!r}")
                fields = {k: v for k, v in entry.items() if k != "name"}
                if not fields:
                    raise ConfigError(f"{where}: [grid] {axis} #{i}: sets no field")
                checked = {k: _check_field(where, f"[grid] {axis} #{i} {k}", spec, k, v) for k, v in fields.items()}
                entries.append((label, checked))
        elif any(isinstance(v, (dict, list)) for v in values):
            raise ConfigError(f"{where}: [grid] {axis}: mix of tables and values; use one or the other")
        else:
            for i, value in enumerate(values, start=1):
                entries.append((None, {axis: _check_field(where, f"[grid] {axis} #{i}", spec, axis, value)}))
        axes.append((axis, entries))
    return axes


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=-]+", "-", text).strip("-") or "x"


def _format(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _entry_label(label: str | None, fields: Mapping[str, Any], axis: str) -> str:
    if label is not None:
        return _slug(label)
    if list(fields) == [axis]:
        value = fields[axis]
        # A name reads by itself (td, atari-Pong); a number needs its field (T-10, lr-0.001).
        return _slug(value if isinstance(value, str) else f"{axis}-{_format(value)}")
    return _slug("-".join(f"{k}-{_format(v)}" for k, v in fields.items()))


def config_argv(spec: SweepSpec, fields: Mapping[str, Any]) -> list[str]:
    """The command line setting ``fields``, in the order the command's dataclass declares them
    (then its groups': an algorithm's own parameters)."""
    argv = list(COMMANDS[spec.command])
    for field, _ in config_fields(spec.config_class).values():
        if field.name not in fields:
            continue
        value, flag = fields[field.name], flag_of(field)
        if isinstance(value, bool):
            argv.append(flag if value else "--no-" + flag[2:])
        else:
            text = repr(value) if isinstance(value, float) else str(value)
            # a value that starts with "-" (a dataset or env name a user chose) would read as a flag
            argv += [f"{flag}={text}"] if text.startswith("-") else [flag, text]
    if spec.command == "train" and spec.data_dir:
        argv += ["--data-dir", spec.data_dir]
    return argv


def expand(spec: SweepSpec) -> list[RunPlan]:
    """The grid's crossed runs, each validated as its command would validate it; names unique."""
    where = str(spec.path)
    fixed = {k: _check_field(where, f"[fixed] {k}", spec, k, v) for k, v in spec.fixed.items()}
    axes = _axes(spec)
    for axis, entries in axes:
        for _, fields in entries:
            clash = sorted(set(fields) & set(fixed))
            if clash:
                raise ConfigError(f"{where}: [grid] {axis}: {clash[0]} is also in [fixed]; set it in one place")
    crossed = math.prod(len(entries) for _, entries in axes)
    if crossed > MAX_RUNS:
        raise ConfigError(f"{where}: [grid] crosses to {crossed} runs, more than {MAX_RUNS}; split the sweep")
    varying = [axis for axis, entries in axes if len(entries) > 1]
    plans: list[RunPlan] = []
    sources = {name: f"[fixed] {name}" for name in fixed}
    wanted = dict(spec.only)
    for combination in itertools.product(*(entries for _, entries in axes)):
        if any(
            axis in wanted and _only_label(label, entry, axis) != wanted[axis]
            for (axis, _), (label, entry) in zip(axes, combination, strict=True)
        ):
            continue
        fields = dict(fixed)
        parts = []
        for (axis, _), (label, entry) in zip(axes, combination, strict=True):
            sources.update({name: f"[grid] {axis}" for name in entry})
            overlap = sorted(set(entry) & set(fields) - set(fixed))
            if overlap:
                raise ConfigError(f"{where}: [grid] {axis}: {overlap[0]} is set by two grid axes")
            fields.update(entry)
            if axis in varying:
                parts.append(_entry_label(label, entry, axis))
        for seeds in _seed_groups(where, spec, fields):
            run_fields = dict(fields, **({"seeds": seeds} if seeds is not None else {}))
            name_parts = parts + ([f"seeds-{seeds}"] if seeds is not None and spec.resources.seeds_per_run else [])
            plans.append(_plan(spec, "_".join(name_parts) or "run", run_fields, sources))
            if len(plans) > MAX_RUNS:
                raise ConfigError(f"{where}: [grid] and seeds_per_run make more than {MAX_RUNS} runs; split the sweep")
    counts = collections.Counter(plan.name for plan in plans)
    duplicate = next((name for name, count in counts.items() if count > 1), None)
    if duplicate:
        raise ConfigError(f"{where}: two runs would both be named {duplicate!r}; give the grid's table entries a name")
    return plans


def _seed_groups(where: str, spec: SweepSpec, fields: Mapping[str, Any]) -> Sequence[str | None]:
    """All seeds in one run (the vmapped program), or groups of ``seeds_per_run`` when asked."""
    per_run = spec.resources.seeds_per_run
    if not per_run:
        return [None]
    # Counted before they are listed: a run holds at most MAX_SEEDS seeds, a sweep MAX_RUNS runs.
    seeds = parse_int_range(fields.get("seeds", "0"), f"{where}: seeds", MAX_RUNS * min(per_run, MAX_SEEDS))
    return [",".join(map(str, seeds[i : i + per_run])) for i in range(0, len(seeds), per_run)]


def _plan(spec: SweepSpec, name: str, fields: dict[str, Any], sources: Mapping[str, str]) -> RunPlan:
    """Build and validate one run's config exactly as the command would before resolving it; a
    refusal names the spec key that set the offending field."""
    cls = spec.config_class
    extra = {} if spec.command == "train" else {"algo": spec.command.split()[1]}
    try:
        # Resolving against a domain fills the defaults that validation needs (T, K); the real
        # domain is known only once the dataset or env is open, and any domain checks the values
        # the spec sets.
        config = cls(**{**fields, **extra, "out": name})
        config.resolve(_domain_guess(spec, fields))
    except ConfigError as err:
        flags = {flag_of(field): name for name, (field, _) in config_fields(cls).items()}
        named = [flags[flag] for flag in re.findall(r"--[a-zA-Z][\w-]*", str(err)) if flags.get(flag) in sources]
        # Messages name a field by its flag (--lr) or by itself (T must be ...).
        named += [word for word in re.findall(r"\b\w+\b", str(err)) if word in sources]
        key = sources[named[0]] if named else "the run's config"
        raise ConfigError(f"{spec.path}: {key} (run {name}): {err}") from None
    length_field = LENGTH_FIELD[spec.command]
    return RunPlan(
        name=name,
        fields=fields,
        argv=tuple(config_argv(spec, fields)),
        length=fields.get(length_field),
        board=board_name(spec, fields),
    )


def board_name(spec: SweepSpec, fields: Mapping[str, Any]) -> str:
    """The run's board: the spec's ``board`` with ``{field}`` placeholders filled from the run's
    fields, so that settings a board must not pool (the Gym ablation's T and data fraction) each
    get their own (``board = "board-T{T}-data{fraction}.csv"``)."""
    names = [name for _, name, _, _ in string.Formatter().parse(spec.board) if name is not None]
    missing = [name for name in names if name not in fields]
    if missing:
        raise ConfigError(f"{spec.path}: board {spec.board!r}: {{{missing[0]}}} is not set by [fixed] or [grid]")
    return spec.board.format(**{name: _slug(_format(fields[name])) for name in names})


def _domain_guess(spec: SweepSpec, fields: Mapping[str, Any]) -> str:
    algo = algorithm_specs().get(str(fields.get("algo")))
    if spec.command == "online sac" or (algo is not None and algo.action_kinds == ("continuous",)):
        return "continuous"
    where = str(fields.get("dataset" if spec.command == "train" else "env", ""))
    if where.startswith("MinAtar/"):
        return "minatar"
    return "atari" if where.startswith(("rlu-atari:", "atari:", "ALE/")) else "gym"
