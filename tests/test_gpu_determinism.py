"""XLA's deterministic GPU options are asked for before JAX starts, unless the user chose otherwise
(offline_gitd/gpu_determinism.py, docs/bounds.md#determinism)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from offline_gitd.gpu_determinism import DETERMINISTIC_GPU_FLAGS, OPT_OUT, request_deterministic_gpu


def test_the_options_are_added_to_whatever_xla_flags_hold() -> None:
    environ = {"XLA_FLAGS": "--xla_backend_optimization_level=0"}
    assert request_deterministic_gpu(environ)
    assert environ["XLA_FLAGS"].split() == ["--xla_backend_optimization_level=0", *DETERMINISTIC_GPU_FLAGS]
    assert not request_deterministic_gpu(environ)  # once: the second call sees them
    assert environ["XLA_FLAGS"].split() == ["--xla_backend_optimization_level=0", *DETERMINISTIC_GPU_FLAGS]
    empty: dict[str, str] = {}
    assert request_deterministic_gpu(empty) and empty["XLA_FLAGS"] == " ".join(DETERMINISTIC_GPU_FLAGS)


@pytest.mark.parametrize(
    "environ",
    [
        {"XLA_FLAGS": "--xla_gpu_deterministic_ops=false"},  # the user's own choice, either way
        {"XLA_FLAGS": "--xla_gpu_deterministic_ops=true"},
        {OPT_OUT: "1"},
        {OPT_OUT: "yes", "XLA_FLAGS": "-x"},
    ],
)
def test_the_users_choice_stands(environ: dict[str, str]) -> None:
    before = dict(environ)
    assert not request_deterministic_gpu(environ)
    assert environ == before


def test_opt_out_zero_means_not_opted_out() -> None:
    environ = {OPT_OUT: "0"}
    assert request_deterministic_gpu(environ)


# A fresh process, as a user runs it: the CLI sets the options before anything starts JAX, and the
# run's provenance records the flags it ran with.
CHILD = """
import json, os, sys
from offline_gitd.cli import main
code = main(["mdp", "star", "--steps", "2", "--K", "2", "--critics", "td"])
import jax
jax.numpy.zeros(1).block_until_ready()
from offline_gitd.rundir.provenance import device
print(json.dumps({"code": code, "flags": os.environ.get("XLA_FLAGS"), "device": device()}))
"""


def test_the_cli_asks_before_jax_starts_and_provenance_records_it() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", OPT_OUT)}
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout.strip().splitlines()[-1])
    assert record["code"] == 0
    assert record["flags"] == " ".join(DETERMINISTIC_GPU_FLAGS)
    assert record["device"]["xla_flags"] == record["flags"] and record["device"]["backend"] == "cpu"
