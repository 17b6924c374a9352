"""Offline algorithms as records: the package's four, malformed records and plug-ins refused, and a
toy learner added as one module plus one record (docs/adding-a-learner.md).

The toy learner (tests/learners/toy_learner.py) enters as a plug-in does, through an entry point
of the ``offline_gitd.algorithms`` group (here a real :class:`importlib.metadata.EntryPoint` handed
to the registry in place of the installed distributions' list), and then is an ``--algo`` like any
other: listed by ``train --help`` without its module being imported, accepted by config
validation and sweep specs, refused on actions it does not take, trained end to end on a small
Minari dataset through the command line, reloaded, evaluated, and kept out of ``--init-from``.
Its record names its own hyperparameter (``ToyParams``: ``--toy-l2``), which goes from the flag
to ``config.json`` to the learner and through a resume, and is refused out of range.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import inspect
import io
import json
import re
import sys
from dataclasses import dataclass
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

import offline_gitd
from offline_gitd import algorithm_registry
from offline_gitd.algorithm_registry import (
    BUILTIN,
    AlgorithmSpec,
    IQLParams,
    TD3BCParams,
    algorithm_names,
    algorithm_spec,
    register_algorithm,
    unregister_algorithm,
)
from offline_gitd.cli import main
from offline_gitd.errors import ConfigError
from offline_gitd.offline.config import OfflineConfig
from offline_gitd.online.origin import offline_record
from offline_gitd.records import check_range, option
from offline_gitd.sweeps.spec import expand, load_spec
from tests.minari_fixtures import record_into_new_root

TOY_MODULE = "tests.learners.toy_learner"


@dataclass(frozen=True)
class ToyParams:
    """The toy learner's own hyperparameters: each field a train flag and a config key."""

    toy_l2: float = option(0.0, "L2 penalty on the policy's weights")

    def __post_init__(self) -> None:
        check_range("--toy-l2", self.toy_l2, 0.0)


# The one record the toy learner needs: discrete actions, no critic, the domain's lr and batch,
# and its own L2 penalty.
TOY = AlgorithmSpec(
    "toy",
    f"{TOY_MODULE}:build_toy_family",
    "a linear softmax policy fit to the data's actions",
    action_kinds=("discrete",),
    default_critic=None,
    params=ToyParams,
)


@dataclass(frozen=True)
class NoDefault:
    toy_steps: int


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
    assert {name: spec.params for name, spec in records.items()} == {
        "cql": None,
        "bc": None,
        "td3bc": TD3BCParams,
        "iql": IQLParams,
    }
    assert records["td3bc"].param_names == ("bc_alpha", "policy_noise", "noise_clip", "policy_delay")
    assert records["cql"].fields == ("cql_alpha",)  # a shared field: hashed unset since before the baselines
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
        (dict(params=ToyParams(0.5)), "params must be a dataclass (a class), got ToyParams(toy_l2=0.5)"),
        (dict(params=dict), "params must be a dataclass (a class)"),
        (dict(params=NoDefault), "params field 'toy_steps' needs a default (None: the domain's)"),
    ],
)
def test_a_malformed_record_is_refused_in_one_line(fields, message) -> None:
    values = dict(name="toy", family=TOY.family, summary=TOY.summary, action_kinds=("discrete",))
    with pytest.raises(ConfigError) as err:
        AlgorithmSpec(**{**values, **fields})
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_docs_page_shows_this_module_and_this_record() -> None:
    """docs/adding-a-learner.md's example is the learner this file trains, verbatim, and its
    record this file's: the same fields, its parameter class this one."""
    module_block, record_block = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)[:2]
    shown = module_block.removeprefix("# toy_learner.py\n")
    assert shown.startswith("from __future__") and shown in Path(__file__).with_name("toy_learner.py").read_text()
    assert inspect.getsource(ToyParams) in record_block
    record: dict = {}
    exec(record_block, record)  # the page's record, as a reader would paste it
    pasted = record["TOY"]
    assert pasted == dataclasses.replace(TOY, family="toy_learner:build_toy_family", params=pasted.params)
    assert pasted.params is record["ToyParams"] and pasted.param_names == TOY.param_names


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


@dataclass(frozen=True)
class SharedName:
    lr: float = option(0.1, "a parameter named as a shared field")


@dataclass(frozen=True)
class IQLName:
    expectile: float = option(0.5, "a parameter named as IQL's")


@pytest.mark.parametrize(
    "params, message",
    [
        (SharedName, "algorithm 'toy': its parameter 'lr' is a shared train config field; prefix it"),
        (IQLName, "algorithm 'toy': its parameter 'expectile' is also a parameter of algorithm 'iql'; prefix it"),
    ],
)
def test_a_parameter_named_as_a_flag_that_exists_is_refused_in_one_line(params, message, capsys) -> None:
    """An algorithm's parameters are flags and keys beside the shared ones and the other
    algorithms' own: a name taken twice would hand one flag two meanings."""
    register_algorithm(dataclasses.replace(TOY, params=params))
    try:
        with pytest.raises(ConfigError) as err:
            OfflineConfig(dataset="minari:x", out="run", algo="toy")
        assert message in str(err.value) and "\n" not in str(err.value)
        assert main(["train", "--help"]) == 2  # the parser is not built: one line, as any refusal
        assert message in capsys.readouterr().err
    finally:
        unregister_algorithm("toy")


def test_a_plugin_is_listed_and_validated_without_importing_its_learner(installed, tmp_path, capsys) -> None:
    installed(entry_point("toy", "tests.learners.test_algorithm_registry:TOY"))
    sys.modules.pop(TOY_MODULE, None)
    shown = help_text("train")
    assert "{cql,bc,td3bc,iql,toy}" in shown
    # its parameter under its own heading, after the other algorithms' own
    assert re.search(r"--algo toy: a linear softmax policy fit to the data's actions --toy-l2 TOY_L2 L2 penalty", shown)
    assert shown.index("--algo iql: IQL") < shown.index("--algo toy:") < shown.index("examples:")
    resolved = OfflineConfig(dataset="minari:x", out="run", algo="toy").resolve("gym")
    assert (resolved.critic, resolved.cql_alpha, resolved.board_identity()) == ("none", None, ("none", 1, 0.0))
    assert resolved.algorithm_name("discrete") == "toy"
    assert resolved.params == ToyParams(0.0) and resolved.to_dict()["toy_l2"] == 0.0
    for fields, message in (
        (dict(cql_alpha=1.0), "--cql-alpha is for --algo cql, not --algo toy"),
        (dict(critic="td"), "--algo toy trains no critic: drop --critic td"),
        (dict(expectile=0.7), "--expectile is for --algo iql, not --algo toy"),
        (dict(toy_l2=-1.0), "--toy-l2 must be >= 0.0, got -1.0"),
    ):
        with pytest.raises(ConfigError, match=message):
            OfflineConfig(dataset="minari:x", out="run", algo="toy", **fields).resolve("gym")
    with pytest.raises(ConfigError, match="--toy-l2 is for --algo toy, not --algo bc"):
        OfflineConfig(dataset="minari:x", out="run", algo="bc", toy_l2=0.5)
    train = ["train", "--dataset", f"minari:{CARTPOLE}", "--algo", "toy", "--out", str(tmp_path / "bad")]
    for value, message in (
        ("-1", "offline_gitd: error: --toy-l2 must be >= 0.0, got -1.0"),
        ("abc", "offline_gitd: error: argument --toy-l2: invalid float value: 'abc'"),
    ):
        assert main([*train, "--toy-l2", value]) == 2  # refused before any work, in one line
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(message), err
    assert not (tmp_path / "bad").exists()
    with pytest.raises(ConfigError, match=r"--algo toy is for discrete actions; this dataset's are continuous \(use"):
        OfflineConfig(dataset="minari:x", out="run", algo="toy").resolve("continuous")
    with pytest.raises(ConfigError, match=r"this dataset's are discrete \(use cql, bc or toy\)"):
        OfflineConfig(dataset="minari:x", out="run", algo="td3bc").resolve("gym")
    spec = tmp_path / "toy.toml"
    spec.write_text(f'command = "train"\n[fixed]\ndataset = "minari:{CARTPOLE}"\n[grid]\nalgo = ["bc", "toy"]\n')
    assert sorted(plan.fields["algo"] for plan in expand(load_spec(spec))) == ["bc", "toy"]
    # its parameter is a sweep key like any field: on the command line each run gets
    grid = f'command = "train"\n[fixed]\ndataset = "minari:{CARTPOLE}"\nalgo = "toy"\n[grid]\ntoy_l2 = [0.0, 0.5]\n'
    spec.write_text(grid)
    assert [plan.argv[-2:] for plan in expand(load_spec(spec))] == [("--toy-l2", "0.0"), ("--toy-l2", "0.5")]
    for value, message in (
        ("-1.0", r"\[grid\] toy_l2 \(run toy_l2--1\): --toy-l2 must be >= 0.0, got -1.0"),
        ('"x"', r"\[grid\] toy_l2 #2: expected float, got 'x'"),
    ):
        spec.write_text(grid.replace("0.5", value))
        with pytest.raises(ConfigError, match=message):
            load_spec(spec)
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
    assert main([*argv, "--toy-l2", "0.5"]) == 0
    with (out / "metrics.csv").open(newline="") as handle:
        metrics = list(csv.DictReader(handle))
    assert len(metrics) == 2 and all(0.0 <= float(row["toy_accuracy"]) <= 1.0 for row in metrics)  # the toy's step ran
    assert all(float(row["toy_penalty"]) > 0.0 for row in metrics)  # with its L2 penalty on
    assert json.loads((out / "config.json").read_text())["config"]["toy_l2"] == 0.5
    assert main(["leaderboard", "submit", str(out), "--board", str(board), "--allow-new-env"]) == 0
    with board.open(newline="") as handle:
        rows = {(row["algorithm"], row["critic"], row["K"]) for row in csv.DictReader(handle)}
    assert rows == {("toy", "none", "1")}
    run = offline_gitd.load_run(out)  # rebuilt from its config through the record
    assert run.config.algo == "toy" and run.evaluate(episodes=1, seed=1).shape == (1,)
    assert run.config.params == ToyParams(0.5) and run.agent().family.l2 == 0.5  # the learner's own value
    with pytest.raises(ConfigError, match="an --algo toy run; online dqn and sac start from a cql run"):
        offline_record(out)
    resume = ["train", "--out", str(out), "--resume", "--epochs", "2", *QUIET]
    capsys.readouterr()
    assert main([*resume, "--toy-l2", "0.1"]) == 2
    assert "--toy-l2 0.1 differs from the run's toy_l2 = 0.5" in capsys.readouterr().err
    assert main(resume) == 0  # resumed, its parameter kept
    assert json.loads((out / "config.json").read_text())["config"]["toy_l2"] == 0.5
    assert offline_gitd.load_run(out).checkpoints() == [1, 2]
