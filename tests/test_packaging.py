"""The package installs as a wheel (not only editable from a checkout) with every data file it
reads, and its dependencies are ranges while the tested versions are pinned in constraints.txt."""

from __future__ import annotations

import csv
import fnmatch
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from offline_gitd.leaderboard.schema import COLUMNS

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "offline_gitd"


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_every_data_file_of_the_package_is_declared_package_data() -> None:
    declared = _pyproject()["tool"]["setuptools"]["package-data"]
    data_files = [
        path
        for path in PACKAGE.rglob("*")
        if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts
    ]
    assert data_files, "the package reads reference tables and a registry"
    for path in data_files:
        package = ".".join(path.parent.relative_to(REPO).parts)
        owners = [(name, globs) for name, globs in declared.items() if package.startswith(name)]
        assert any(
            fnmatch.fnmatch(path.relative_to(REPO / name.replace(".", "/")).as_posix(), glob)
            for name, globs in owners
            for glob in globs
        ), f"{path.relative_to(REPO)} is not package data: a wheel would not ship it"


def test_dependencies_are_ranges_and_constraints_pin_them() -> None:
    dependencies = _pyproject()["project"]["dependencies"]
    assert not [d for d in dependencies if "==" in d], "exact pins belong in constraints.txt"
    pins = dict(line.split("==", 1) for line in (REPO / "constraints.txt").read_text().splitlines() if "==" in line)
    pins = {name.lower().replace("_", "-"): version for name, version in pins.items()}
    for requirement in dependencies:
        name = re.split(r"[\[<>=~!]", requirement, maxsplit=1)[0].lower()
        assert name in pins, f"{name} has no exact version in constraints.txt"
    assert pins["ray"] == "2.60.0" and "ray>=2.60,<3" in dependencies


def _board(path: Path, suite: str, env: str) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, COLUMNS)
        writer.writeheader()
        for critic, gain in (("td", 1.0), ("gitd", 2.0)):
            for seed in range(2):
                writer.writerow(
                    dict(
                        suite=suite, env=env, algorithm="cql", critic=critic, K=1, beta=0.0, seed=seed, step=100,
                        **{"return": 1000.0 * gain + seed}, run_id=f"{critic}-{seed}", config_hash="c",
                        package_version="0.1.0", created_at="2026-01-01T00:00:00+00:00", method_config="defaults",
                    )
                )  # fmt: skip
    return path


@pytest.mark.slow
def test_wheel_in_a_fresh_venv_reads_its_data_files(tmp_path: Path) -> None:
    """Build the wheel from the working tree, install it with the pinned constraints into a new
    venv (no access to the checkout), and run a command needing each data file."""
    source = tmp_path / "source"
    tracked = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split("\n")
    for name in filter(None, tracked):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, source], check=True)
    (wheel,) = dist.glob("offline_gitd-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "-c", REPO / "constraints.txt", wheel], check=True, timeout=1800
    )
    work = tmp_path / "elsewhere"  # not the checkout: nothing can be read from it
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"JAX_PLATFORMS": "cpu"}

    def run(*argv: str) -> str:
        done = subprocess.run(
            [venv / "bin" / "offline_gitd", *argv], cwd=work, env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    located = subprocess.run(
        [python, "-c", "import offline_gitd; print(offline_gitd.__file__)"], cwd=work, env=env, capture_output=True
    )
    assert str(venv) in located.stdout.decode()
    atari = _board(work / "atari.csv", "atari", "Pong")
    assert "IQM final (human)" in run("leaderboard", "show", "--board", str(atari), "--normalise", "human")
    d4rl = _board(work / "d4rl.csv", "minari", "mujoco/halfcheetah/medium-v0")
    assert "IQM final (d4rl)" in run("leaderboard", "show", "--board", str(d4rl), "--normalise", "d4rl")
    assert "Pong" in run("datasets", "info", "rlu-atari:Pong/1", "--data-dir", str(work / "data"))
