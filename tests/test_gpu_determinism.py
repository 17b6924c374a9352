"""XLA's deterministic GPU options, and one CPU device per core, are asked for before JAX starts,
unless the user chose otherwise (offline_gitd/xla_start.py, docs/bounds.md#determinism,
docs/offline.md#seeds)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from offline_gitd import xla_start
from offline_gitd.errors import UsageError
from offline_gitd.xla_start import (
    CHOICE,
    DETERMINISTIC_GPU_FLAGS,
    DEVICE_COUNT_FLAG,
    OPT_OUT,
    request_cpu_devices,
    request_deterministic_gpu,
    usable_cores,
)


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
    # a user who chose nothing: an in-process sweep task earlier in this worker sets CHOICE for its run
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", OPT_OUT, CHOICE, "JAX_NUM_CPU_DEVICES")}
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout.strip().splitlines()[-1])
    assert record["code"] == 0
    cores = usable_cores()  # and one CPU device per core (offline_gitd/xla_start.py)
    per_core = [f"{DEVICE_COUNT_FLAG}={cores}"] if cores > 1 else []
    assert record["flags"] == " ".join([*DETERMINISTIC_GPU_FLAGS, *per_core])
    assert record["device"]["xla_flags"] == record["flags"] and record["device"]["backend"] == "cpu"
    assert record["device"]["cpu_devices"] == cores


# One CPU device per core (offline_gitd/xla_start.py): asked for the same way, the user's choice kept.
@pytest.mark.parametrize(
    ("environ", "cores", "added"),
    [
        ({}, 2, 2),
        ({"XLA_FLAGS": "-x"}, 8, 8),
        ({CHOICE: "3"}, 2, 3),  # the user's count
        ({CHOICE: "1"}, 2, None),  # one device: JAX's default, nothing to add
        ({}, 1, None),  # one core: nothing to spread the seeds over
        ({"XLA_FLAGS": f"{DEVICE_COUNT_FLAG}=4"}, 2, None),  # the user's own flag
        ({"JAX_NUM_CPU_DEVICES": "4"}, 2, None),  # or JAX's own setting
    ],
)
def test_one_cpu_device_per_core_unless_the_user_chose(
    environ: dict[str, str], cores: int, added: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(xla_start, "usable_cores", lambda: cores)
    before = dict(environ)
    assert request_cpu_devices(environ) == added
    if added is None:
        assert environ == before
    else:
        assert environ["XLA_FLAGS"].split() == [*before.get("XLA_FLAGS", "").split(), f"{DEVICE_COUNT_FLAG}={added}"]


@pytest.mark.parametrize("choice", ["0", "two", "-1", "1.5"])
def test_a_bad_device_count_is_a_usage_error(choice: str) -> None:
    with pytest.raises(UsageError, match=CHOICE):
        request_cpu_devices({CHOICE: choice})
