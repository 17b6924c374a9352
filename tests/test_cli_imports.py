"""The command line answers at once: ``--help`` and bad input import nothing heavy.

Speed itself is measured by hand (``python -X importtime``, docs/benchmarks.md); what a test can
hold without timing anything is that no command's help, and no one-line refusal of bad input,
imports JAX, Ray, matplotlib, TensorFlow, minari or gymnasium.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("jax", "ray", "matplotlib", "tensorflow", "minari", "gymnasium", "flax", "optax", "orbax", "pandas")
COMMANDS = ("fetch", "datasets", "collect", "train", "online", "evaluate", "mdp", "sweep", "leaderboard", "demo")

PROBE = """
import contextlib, io, json, sys
from offline_gitd.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        code = main(sys.argv[1:])
    except SystemExit as exit_:
        code = exit_.code
print(json.dumps({"code": code, "heavy": sorted({m.split('.')[0] for m in sys.modules} & set(%r))}))
""" % (HEAVY,)


def imported_by(*argv: str) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("argv", [("--help",), *((c, "--help") for c in COMMANDS)], ids=lambda a: " ".join(a))
def test_help_imports_nothing_heavy(argv: tuple[str, ...]) -> None:
    result = imported_by(*argv)
    assert result["code"] == 0
    assert result["heavy"] == []


@pytest.mark.parametrize(
    "argv",
    [
        ("fetch", "rlu-atari", "--game", "Pongg", "--run", "1"),
        ("train", "--dataset", "nope:x", "--out", "/tmp/never-written"),
        ("online", "dqn", "--env", "CartPole-v1", "--out", "/tmp/never-written", "--seeds", "5-1"),
        ("leaderboard", "show", "--board", "/nonexistent/board.csv"),
        ("sweep", "/nonexistent/spec.toml"),
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_bad_input_is_refused_before_anything_heavy(argv: tuple[str, ...]) -> None:
    result = imported_by(*argv)
    assert result["code"] == 2
    assert result["heavy"] == []
