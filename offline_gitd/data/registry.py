"""The dataset registry (RL Unplugged Atari) and dataset ids.

``datasets/rlu_atari.json`` at the repository root is the human-facing source of truth. The
package ships an identical copy, ``offline_gitd/data/rlu_atari.json`` (package data), and loads it
with :mod:`importlib.resources`: that works the same from a checkout, an editable install and a
wheel, whereas ``[tool.setuptools.data-files]`` installs under ``sys.prefix`` where the code would
have to guess the path (and editable installs skip it). ``tests/data/test_registry.py`` fails when the
two copies differ.

Dataset ids name what a learner trains on:

* ``rlu-atari:{Game}/{run}`` or ``rlu-atari:{Game}/{run}:{checkpoints}``
  (``rlu-atari:Pong/1:0-4,7``)
* ``minari:{id}`` (``minari:mujoco/halfcheetah/medium-v0``)
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import quote

from offline_gitd.data.paths import rlu_shard_name
from offline_gitd.envs.d4rl import d4rl_hint
from offline_gitd.errors import UsageError

REGISTRY_RESOURCE = "rlu_atari.json"
RLU_PREFIX = "rlu-atari"
MINARI_PREFIX = "minari"
# Matched whole (fullmatch) and ASCII only: ``$`` would also accept a trailing newline, and ``\d``
# Arabic-Indic or fullwidth digits, which ``int`` reads but no shard name or Minari folder holds.
_MINARI_ID = re.compile(r"[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-]+)*-v[0-9]+")
_RUN = re.compile(r"[0-9]{1,9}")
_CHECKPOINT_ITEM = re.compile(r"([0-9]{1,9})(?:-([0-9]{1,9}))?")
# Checkpoint indices without a game to bound them: no registry game has this many shards, and a
# range is checked against the bound before it is expanded (``0-99999999999`` must not hang).
MAX_CHECKPOINTS = 10_000


@dataclass(frozen=True)
class RluLayout:
    """One folder layout of the bucket (``atari_episodes_ordered`` or ``atari``)."""

    name: str
    alias: str
    shard_is_checkpoint: bool
    description: str


@dataclass(frozen=True)
class RluRegistry:
    """The validated contents of ``rlu_atari.json``."""

    bucket: str
    base_url: str
    object_template: str
    url_template: str
    metadata_url_template: str
    runs: tuple[int, ...]
    default_layout: str
    layouts: Mapping[str, RluLayout]
    games: Mapping[str, Mapping[str, int]]
    # Base URLs of mirrors of the bucket, tried in order after ``base_url`` (docs/bounds.md#mirrors).
    mirrors: tuple[str, ...] = ()

    def sources(self, base_urls: Sequence[str] = ()) -> tuple[str, ...]:
        """The base URLs a fetch tries, in order: those given (``--base-url``, repeatable), else
        the bucket and then the registry's mirrors."""
        return tuple(url.rstrip("/") for url in base_urls) or (self.base_url, *self.mirrors)

    def resolve_layout(self, name: str | None) -> str:
        """Bucket folder name of a layout given by folder name or alias; None -> the default."""
        if name is None:
            return self.default_layout
        for layout in self.layouts.values():
            if name in (layout.name, layout.alias):
                return layout.name
        valid = ", ".join(f"{lay.alias} ({lay.name})" for lay in self.layouts.values())
        raise UsageError(f"unknown layout {name!r}; valid layouts: {valid}")

    def check_game(self, game: str) -> str:
        """Return ``game`` if the registry knows it, else a one-line error listing the games."""
        if game in self.games:
            return game
        close = difflib.get_close_matches(game, list(self.games), n=1, cutoff=0.6)
        folded = [g for g in self.games if g.lower() == game.lower()]
        hint = f" (did you mean {(folded or close)[0]}?)" if folded or close else ""
        raise UsageError(f"unknown game {game!r}{hint}; valid games: {', '.join(self.games)}")

    def check_run(self, run: int) -> int:
        """Return ``run`` if the bucket has it, else a one-line error listing the runs."""
        if run in self.runs:
            return run
        raise UsageError(f"unknown run {run}; valid runs: {', '.join(map(str, self.runs))}")

    def num_shards(self, game: str, layout: str | None = None) -> int:
        """Number of shards of one run of ``game`` in ``layout``."""
        return self.games[self.check_game(game)][self.resolve_layout(layout)]

    def object_name(self, game: str, run: int, shard: int, layout: str | None = None) -> str:
        """Object path in the bucket, e.g. ``atari_episodes_ordered/Pong/run_1-00003-of-00050``."""
        layout = self.resolve_layout(layout)
        return self.object_template.format(
            layout=layout, game=game, run=run, shard=shard, num_shards=self.num_shards(game, layout)
        )

    def shard_url(
        self,
        game: str,
        run: int,
        shard: int,
        layout: str | None = None,
        base_url: str | None = None,
    ) -> str:
        """Download URL of one shard; ``base_url`` points at a mirror of the bucket instead."""
        return self.url_template.format(
            base_url=(base_url or self.base_url).rstrip("/"),
            object=self.object_name(game, run, shard, layout),
        )

    def metadata_url(self, game: str, run: int, shard: int, layout: str | None = None) -> str:
        """GCS JSON API URL of one shard's metadata (size, md5Hash, crc32c)."""
        return self.metadata_url_template.format(
            bucket=self.bucket,
            object_escaped=quote(self.object_name(game, run, shard, layout), safe=""),
        )


@dataclass(frozen=True)
class RluAtariId:
    """``rlu-atari:{Game}/{run}[:{checkpoints}]``; ``checkpoints`` None means all of them."""

    game: str
    run: int
    checkpoints: tuple[int, ...] | None = None

    def __str__(self) -> str:
        base = f"{RLU_PREFIX}:{self.game}/{self.run}"
        return base if self.checkpoints is None else f"{base}:{format_checkpoints(self.checkpoints)}"


@dataclass(frozen=True)
class MinariId:
    """``minari:{id}``: a dataset id of the ``minari`` package."""

    dataset_id: str

    def __str__(self) -> str:
        return f"{MINARI_PREFIX}:{self.dataset_id}"


DatasetId = RluAtariId | MinariId


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(f"invalid RLU registry: {message}")


def registry_from_dict(raw: Mapping[str, Any]) -> RluRegistry:
    """Validate the parsed JSON and build the registry (pure; raises ValueError when malformed).

    A malformed packaged registry is a bug, not a user error, hence ValueError rather than
    UsageError. The object template must agree with ``paths.rlu_shard_name`` so the raw folder
    mirrors the bucket.
    """
    _require(raw.get("format_version") == 1, "format_version must be 1")
    for key in ("bucket", "base_url", "object_template", "url_template", "metadata_url_template"):
        _require(isinstance(raw.get(key), str) and raw[key], f"{key} must be a non-empty string")
    mirrors = raw.get("mirrors", [])
    _require(
        isinstance(mirrors, list)
        and all(isinstance(u, str) and u.startswith(("http://", "https://")) for u in mirrors),
        "mirrors must be a list of http(s) base URLs",
    )
    runs = raw.get("runs")
    _require(
        isinstance(runs, list) and runs and all(isinstance(r, int) and r > 0 for r in runs),
        "runs must be a list of positive integers",
    )
    layouts_raw = raw.get("layouts")
    _require(isinstance(layouts_raw, dict) and layouts_raw, "layouts must be a non-empty object")
    layouts = {
        name: RluLayout(
            name=name,
            alias=str(spec["alias"]),
            shard_is_checkpoint=bool(spec["shard_is_checkpoint"]),
            description=str(spec.get("description", "")),
        )
        for name, spec in layouts_raw.items()
    }
    _require(raw.get("default_layout") in layouts, "default_layout must name a layout")
    games_raw = raw.get("games")
    _require(isinstance(games_raw, dict) and games_raw, "games must be a non-empty object")
    for game, counts in games_raw.items():
        _require(
            isinstance(counts, dict) and set(counts) == set(layouts),
            f"game {game} must give a shard count for each layout {sorted(layouts)}",
        )
        _require(
            all(isinstance(n, int) and n > 0 for n in counts.values()),
            f"game {game}: shard counts must be positive integers",
        )
    registry = RluRegistry(
        bucket=raw["bucket"],
        base_url=raw["base_url"].rstrip("/"),
        object_template=raw["object_template"],
        url_template=raw["url_template"],
        metadata_url_template=raw["metadata_url_template"],
        runs=tuple(runs),
        default_layout=raw["default_layout"],
        layouts=layouts,
        games={game: dict(counts) for game, counts in games_raw.items()},
        mirrors=tuple(url.rstrip("/") for url in mirrors),
    )
    game = next(iter(registry.games))
    for layout in layouts:
        n = registry.num_shards(game, layout)
        expected = f"{layout}/{game}/{rlu_shard_name(runs[0], n - 1, n)}"
        _require(
            registry.object_name(game, runs[0], n - 1, layout) == expected,
            f"object_template does not render {expected!r} (paths.rlu_shard_name disagrees)",
        )
    return registry


@functools.cache
def load_rlu_registry() -> RluRegistry:
    """The packaged RL Unplugged Atari registry, parsed and validated once per process."""
    text = resources.files("offline_gitd.data").joinpath(REGISTRY_RESOURCE).read_text("utf-8")
    return registry_from_dict(json.loads(text))


def parse_checkpoints(text: str, num_checkpoints: int | None = None, owner: str = "") -> tuple[int, ...]:
    """Parse ``"0-4,7"`` into sorted unique checkpoint indices ``(0, 1, 2, 3, 4, 7)``.

    With ``num_checkpoints``, indices must lie in ``0..num_checkpoints-1``; ``owner`` (e.g.
    ``"Carnival"``) names whose checkpoints they are in the error message. Without it they lie
    below :data:`MAX_CHECKPOINTS`.
    """
    valid = f"valid: 0-{num_checkpoints - 1}" if num_checkpoints else "e.g. 0-4,7"
    spans: list[tuple[int, int]] = []
    for item in text.split(","):
        match = _CHECKPOINT_ITEM.fullmatch(item.strip())
        if not match:
            raise UsageError(f"bad checkpoint list {text!r}: expected comma-separated indices or ranges ({valid})")
        start = int(match.group(1))
        stop = int(match.group(2)) if match.group(2) is not None else start
        if stop < start:
            raise UsageError(f"bad checkpoint range {item.strip()!r}: end before start ({valid})")
        spans.append((start, stop))
    limit = MAX_CHECKPOINTS if num_checkpoints is None else num_checkpoints
    beyond = [max(start, limit) for start, stop in spans if stop >= limit]
    if beyond:
        where = f" for {owner}" if owner else ""
        bound = valid if num_checkpoints else f"below {limit}"
        raise UsageError(f"checkpoint {min(beyond)} out of range{where} ({bound})")
    return tuple(sorted({index for start, stop in spans for index in range(start, stop + 1)}))


def format_checkpoints(checkpoints: tuple[int, ...]) -> str:
    """Inverse of :func:`parse_checkpoints`: ``(0, 1, 2, 3, 4, 7)`` -> ``"0-4,7"``."""
    runs: list[list[int]] = []
    for index in sorted(set(checkpoints)):
        if runs and index == runs[-1][1] + 1:
            runs[-1][1] = index
        else:
            runs.append([index, index])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def parse_dataset_id(text: str, registry: RluRegistry | None = None) -> DatasetId:
    """Parse and validate a dataset id; a bad one is a one-line error naming the valid values."""
    prefix, sep, rest = text.partition(":")
    if prefix == MINARI_PREFIX and sep:
        if not _MINARI_ID.fullmatch(rest):
            raise UsageError(
                f"bad minari id {rest!r}: expected namespace/name-vN, e.g. minari:mujoco/halfcheetah/medium-v0"
                f"{d4rl_hint(rest)}"
            )
        return MinariId(rest)
    if prefix != RLU_PREFIX or not sep:
        raise UsageError(
            f"unknown dataset id {text!r}: expected "
            f"{RLU_PREFIX}:{{Game}}/{{run}}[:{{checkpoints}}] "
            f"(e.g. {RLU_PREFIX}:Pong/1:0-4,7) or {MINARI_PREFIX}:{{id}}{d4rl_hint(text)}"
        )
    registry = registry or load_rlu_registry()
    game_run, _, checkpoint_text = rest.partition(":")
    game, slash, run_text = game_run.partition("/")
    if not slash or not _RUN.fullmatch(run_text):
        raise UsageError(
            f"bad {RLU_PREFIX} id {text!r}: expected "
            f"{RLU_PREFIX}:{{Game}}/{{run}}[:{{checkpoints}}], "
            f"runs {', '.join(map(str, registry.runs))}"
        )
    registry.check_game(game)
    run = registry.check_run(int(run_text))
    checkpoints = parse_checkpoints(checkpoint_text, registry.num_shards(game), owner=game) if checkpoint_text else None
    return RluAtariId(game=game, run=run, checkpoints=checkpoints)
