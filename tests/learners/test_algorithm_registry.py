"""Offline algorithms as records: the package's four, malformed records and plug-ins refused, and a
toy learner added as one module plus one record (docs/adding-a-learner.md).

The toy learner (tests/learners/toy_learner.py) enters as a plug-in does, through an entry point
of the ``offline_gitd.algorithms`` group (here a real :class:`importlib.metadata.EntryPoint` handed
to the registry in place of the installed distributions' list), and then is an ``--algo`` like any
other: listed by ``train --help`` without its module being imported, accepted by config
validation and sweep specs, refused on actions it does not take, trained end to end on a small
Minari dataset through the command line, reloaded, evaluated, and kept out of ``--init-from``.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import re
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

import offline_gitd
from offline_gitd import algorithm_registry
from offline_gitd.algorithm_registry import (
    BUILTIN,
    AlgorithmSpec,
    algorithm_names,
    algorithm_spec,
    register_algorithm,
    unregister_algorithm,
)
from offline_gitd.cli import main
from offline_gitd.errors import ConfigError
from offline_gitd.offline.config import OfflineConfig
from offline_gitd.online.origin import offline_record
from offline_gitd.sweeps.spec import expand, load_spec
from tests.minari_fixtures import record_into_new_root

TOY_MODULE = "tests.learners.toy_learner"
# The one record the toy learner needs: discrete actions, no critic, the domain's lr and batch.
TOY = AlgorithmSpec(
    "toy",
    f"{TOY_MODULE}:build_toy_family",
    "a linear softmax policy fit to the data's actions",
    action_kinds=("discrete",),
    default_critic=None,
)
CARTPOLE = "tests/cartpole/random-v0"
PAGE = Path(__file__).resolve().parents[2] / "docs" / "adding-a-learner.md"
QUIET = ["--no-progress", "--no-tensorboard"]


def entry_point(name: str, value: str) -> EntryPoint:
    return EntryPoint(name=name, value=value, group=algorithm_registry.ENTRY_POINT_GROUP)


@pytest.fixture
def installed(monkeypatch):
    """``installed(*points)``: the entry points the registry sees, as if installed; reset after."""

    def install(*points: EntryPoint) -> None:
        monkeypatch.setattr(
            algorithm_registry,
            "entry_points",
            lambda group: [p for p in points if p.group == group],
        )
        algorithm_registry._plugins.cache_clear()

    yield install
    algorithm_registry._plugins.cache_clear()


def help_text(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main([*argv, "--help"])
    return " ".join(out.getvalue().split())


def test_the_packages_algorithms_are_four_records() -> None:
    records = {spec.name: spec for spec in BUILTIN}
    assert list(records) == ["cql", "bc", "td3bc", "iql"] == list(algorithm_names()[:4])  # plug-ins come after
    assert {name: spec.action_kinds for name, spec in records.items()} == {
        "cql": ("discrete", "continuous"),
        "bc": ("discrete", "continuous"),
        "td3bc": ("continuous",),
        "iql": ("continuous",),
    }
    assert {name: spec.default_critic for name, spec in records.items()} == {
        "cql": "gitd",
        "bc": None,
        "td3bc": "gitd",
        "iql": "td",
    }
    assert [name for name, spec in records.items() if spec.continues_online] == ["cql"]
    assert records["td3bc"].fields == ("bc_alpha", "policy_noise", "noise_clip", "policy_delay")
    for spec in BUILTIN:  # each builder exists where its record says
        assert callable(spec.load_family()), spec.name


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(name="a b"), "an algorithm's name is letters, digits, '-' and '_'"),
        (dict(family="tests.learners.toy_learner"), "family must be 'module:function'"),
        (dict(action_kinds=("tabular",)), "action_kinds must be among discrete, continuous"),
        (dict(action_kinds=()), "action_kinds must be among discrete, continuous"),
        (dict(default_critic="none"), "an algorithm that trains no critic has default_critic None"),
        (dict(defaults={"mujoco": {"lr": 1e-3}}), "defaults are per domain (atari, gym, minatar, continuous)"),
    ],
)
def test_a_malformed_record_is_refused_in_one_line(fields, message) -> None:
    values = dict(name="toy", family=TOY.family, summary=TOY.summary, action_kinds=("discrete",))
    with pytest.raises(ConfigError) as err:
        AlgorithmSpec(**{**values, **fields})
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_docs_page_shows_this_module_and_this_record() -> None:
    """docs/adding-a-learner.md's example is the learner this file trains, verbatim."""
    module_block, record_block = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)[:2]
    shown = module_block.removeprefix("# toy_learner.py\n")
    assert shown.startswith("from __future__") and shown in Path(__file__).with_name("toy_learner.py").read_text()
    record: dict = {}
    exec(record_block, record)  # the page's record, as a reader would paste it
    assert record["TOY"] == dataclasses.replace(TOY, family="toy_learner:build_toy_family")


def test_an_unknown_algorithm_is_refused_with_the_closest_names() -> None:
    with pytest.raises(ConfigError, match=r"unknown algorithm 'td3b'; choose one of cql, bc, td3bc, iql; did you mean"):
        algorithm_spec("td3b")
    with pytest.raises(ConfigError, match="unknown algorithm 'idl'"):
        OfflineConfig(dataset="minari:x", out="run", algo="idl").resolve("gym")


def test_an_algorithm_registered_in_process_is_an_algo_until_removed() -> None:
    register_algorithm(TOY)
    try:
        assert algorithm_names()[-1] == "toy"
        with pytest.raises(ConfigError, match="an algorithm named 'toy' is already registered"):
            register_algorithm(TOY)
        assert OfflineConfig(dataset="minari:x", out="run", algo="toy").resolve("minatar").critic == "none"
    finally:
        unregister_algorithm("toy")
    assert "toy" not in algorithm_names()


@pytest.mark.parametrize(
    "value, message",
    [
        ("tests.learners.test_algorithm_registry:CARTPOLE", "is a str, not an offline_gitd AlgorithmSpec"),
        ("tests.learners.test_algorithm_registry:MISSING", "failed to load: AttributeError"),
        ("tests.learners.no_such_module:TOY", "failed to load: ModuleNotFoundError"),
    ],
)
def test_a_broken_plugin_is_refused_in_one_line_naming_it(installed, value, message) -> None:
    installed(entry_point("toy", value))
    with pytest.raises(ConfigError) as err:
        algorithm_names()
    assert f"algorithm plug-in 'toy' ({value})" in str(err.value) and message in str(err.value)


def test_a_plugin_named_unlike_its_entry_point_or_like_a_builtin_is_refused(installed) -> None:
    installed(entry_point("toy2", "tests.learners.test_algorithm_registry:TOY"))
    with pytest.raises(ConfigError, match="names its algorithm 'toy': the entry point's name must match"):
        algorithm_names()
    installed(entry_point("bc", "tests.learners.test_algorithm_registry:SHADOW_BC"))
    with pytest.raises(ConfigError, match="two algorithms are named 'bc'"):
        algorithm_names()


SHADOW_BC = AlgorithmSpec("bc", TOY.family, "another bc", default_critic=None)


def test_a_plugin_is_listed_and_validated_without_importing_its_learner(installed, tmp_path) -> None:
    installed(entry_point("toy", "tests.learners.test_algorithm_registry:TOY"))
    sys.modules.pop(TOY_MODULE, None)
    assert "{cql,bc,td3bc,iql,toy}" in help_text("train")
    resolved = OfflineConfig(dataset="minari:x", out="run", algo="toy").resolve("gym")
    assert (resolved.critic, resolved.cql_alpha, resolved.board_identity()) == ("none", None, ("none", 1, 0.0))
    assert resolved.algorithm_name("discrete") == "toy"
    for fields, message in (
        (dict(cql_alpha=1.0), "--cql-alpha is for --algo cql, not --algo toy"),
        (dict(critic="td"), "--algo toy trains no critic: drop --critic td"),
    ):
        with pytest.raises(ConfigError, match=message):
            OfflineConfig(dataset="minari:x", out="run", algo="toy", **fields).resolve("gym")
    with pytest.raises(ConfigError, match=r"--algo toy is for discrete actions; this dataset's are continuous \(use"):
        OfflineConfig(dataset="minari:x", out="run", algo="toy").resolve("continuous")
    with pytest.raises(ConfigError, match=r"this dataset's are discrete \(use cql, bc or toy\)"):
        OfflineConfig(dataset="minari:x", out="run", algo="td3bc").resolve("gym")
    spec = tmp_path / "toy.toml"
    spec.write_text(f'command = "train"\n[fixed]\ndataset = "minari:{CARTPOLE}"\n[grid]\nalgo = ["bc", "toy"]\n')
    assert sorted(plan.fields["algo"] for plan in expand(load_spec(spec))) == ["bc", "toy"]
    assert TOY_MODULE not in sys.modules  # listing, validating and planning imported no learner


@pytest.fixture(scope="module")
def minari_root(tmp_path_factory) -> Path:
    return record_into_new_root(tmp_path_factory.mktemp("minari"), CARTPOLE, "CartPole-v1", steps=400)


@pytest.mark.e2e
def test_a_toy_learner_trains_end_to_end_from_one_module_and_one_record(
    installed, minari_root, tmp_path, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(minari_root))
    installed(entry_point("toy", "tests.learners.test_algorithm_registry:TOY"))
    out, board = tmp_path / "toy", tmp_path / "board.csv"
    small = ["--epochs", "1", "--steps-per-epoch", "20", "--updates-per-call", "10", "--batch-size", "16"]
    small += ["--lr", "0.1", "--eval-episodes", "1", "--seeds", "0-1", *QUIET]
    argv = ["train", "--dataset", f"minari:{CARTPOLE}", "--algo", "toy", "--out", str(out), *small]
    assert main(argv) == 0
    with (out / "metrics.csv").open(newline="") as handle:
        metrics = list(csv.DictReader(handle))
    assert len(metrics) == 2 and all(0.0 <= float(row["toy_accuracy"]) <= 1.0 for row in metrics)  # the toy's step ran
    assert main(["leaderboard", "submit", str(out), "--board", str(board), "--allow-new-env"]) == 0
    with board.open(newline="") as handle:
        rows = {(row["algorithm"], row["critic"], row["K"]) for row in csv.DictReader(handle)}
    assert rows == {("toy", "none", "1")}
    run = offline_gitd.load_run(out)  # rebuilt from its config through the record
    assert run.config.algo == "toy" and run.evaluate(episodes=1, seed=1).shape == (1,)
    with pytest.raises(ConfigError, match="an --algo toy run; online dqn and sac start from a cql run"):
        offline_record(out)
