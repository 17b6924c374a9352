"""``collect``'s options are written once, as :class:`CollectRequest`'s fields: its flags, the keys of
``collect --config FILE`` and of a sweep's ``[[collect]]`` tables, and the request all come from them."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from offline_gitd.errors import ConfigError
from offline_gitd.online import command
from offline_gitd.online.config import CollectRequest, collect_key
from offline_gitd.sweeps.spec import COLLECT_KEYS as SWEEP_KEYS
from offline_gitd.sweeps.spec import CollectStep


def collect_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="collect")
    subparsers = parser.add_subparsers()
    command.register(subparsers)
    return subparsers.choices["collect"]


def test_flags_file_keys_and_sweep_keys_are_the_request_fields() -> None:
    fields = dataclasses.fields(CollectRequest)
    dests = {action.dest for action in collect_parser()._actions}
    assert {field.name for field in fields} <= dests  # every field is an argument
    file_keys = [collect_key(field) for field in fields if field.name != "overwrite"]
    assert list(command.COLLECT_KEYS) == file_keys
    assert list(SWEEP_KEYS) == [key for key in file_keys if key not in ("data_dir", "run_dir")]
    assert command.COLLECT_KEYS["utd"] == (int, float, str) and command.COLLECT_KEYS["seed"] is int


def test_a_sweep_collect_step_is_parsed_by_collect_into_its_options() -> None:
    options = (("policy", "random"), ("critic", "gitd"), ("seed", 3), ("horizon", 50), ("checkpoint_every", 10))
    options += (("epsilon_steps", 7), ("utd", 0.25), ("reference_episodes", 20), ("reference_epsilon", 0.01))
    assert {key for key, _ in options} | {"env", "steps", "out"} == set(SWEEP_KEYS)
    step = CollectStep("CartPole-v1", 100, "tests/x-v0", options)
    args = collect_parser().parse_args(step.argv("/data")[1:])
    assert command._collect_options(args) == {
        "env": "CartPole-v1",
        "steps": 100,
        "out": "tests/x-v0",
        "data_dir": "/data",
        **dict(options),
    }


def test_config_file_then_flags_then_the_request_defaults(tmp_path) -> None:
    path = tmp_path / "collect.toml"
    path.write_text('env = "CartPole-v1"\nsteps = 10\nout = "tests/y-v0"\nseed = 4\nutd = "1/4"\n')
    args = collect_parser().parse_args(["--config", str(path), "--seed", "5"])
    options = command._collect_options(args)
    assert options == {
        "env": "CartPole-v1",
        "steps": 10,
        "out": "tests/y-v0",
        "seed": 5,
        "utd": 0.25,
        "critic": "td",
        "reference_episodes": 100,
        "reference_epsilon": 0.001,
    }
    # no --out: the dataset id is made from the env and the policy
    options = command._collect_options(collect_parser().parse_args(["CartPole-v1", "--steps", "3"]))
    assert options["out"] == "offline_gitd/CartPole-v1/behaviour-v0"
    options = command._collect_options(
        collect_parser().parse_args(["CartPole-v1", "--steps", "3", "--policy", "random"])
    )
    assert options["out"] == "offline_gitd/CartPole-v1/random-v0"
    with pytest.raises(ConfigError, match="collect needs --steps"):
        command._collect_options(collect_parser().parse_args(["CartPole-v1"]))
    path.write_text("steps = 1.5\n")
    with pytest.raises(ConfigError, match="steps: expected int, got 1.5"):
        command._collect_options(collect_parser().parse_args(["--config", str(path)]))
