"""The commit facts a run records (docs/leaderboard.md#what-made-a-row): commit, dirty flag, the
digest of ``git diff HEAD``; a package outside a checkout records ``commit: null`` and why."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from offline_gitd.rundir.provenance import describe_commit, git_commit, row_facts
from offline_gitd.version import __version__

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git command")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def make_repo(repo: Path) -> None:
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "a.py").write_text("x = 1\n")
    git(repo, "add", "a.py")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")


def test_a_clean_and_a_dirty_checkout(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    make_repo(repo)
    head = git(repo, "rev-parse", "HEAD").strip()
    clean = git_commit.__wrapped__(repo)
    assert clean == {"commit": head, "dirty": False, "diff_sha256": None, "version": __version__, "reason": None}
    assert describe_commit(clean) == head[:7]
    (repo / "a.py").write_text("x = 2\n")
    (repo / "untracked.txt").write_text("not code\n")  # untracked files do not make a tree dirty
    dirty = git_commit.__wrapped__(repo)
    expected = hashlib.sha256(subprocess.run(["git", "-C", str(repo), "diff", "HEAD", "--binary"],
                                             capture_output=True, check=True).stdout).hexdigest()  # fmt: skip
    assert dirty["commit"] == head and dirty["dirty"] is True and dirty["diff_sha256"] == expected
    assert describe_commit(dirty) == f"{head[:7]}+dirty"
    (repo / "a.py").write_text("x = 3\n")  # another change on the same commit: another digest
    assert git_commit.__wrapped__(repo)["diff_sha256"] != expected


def test_outside_a_checkout_the_commit_is_null_with_a_reason(tmp_path: Path) -> None:
    found = git_commit.__wrapped__(tmp_path)
    assert found["commit"] is None and found["dirty"] is None and found["version"] == __version__
    assert found["reason"].startswith("not a git checkout")
    assert describe_commit(found).startswith("no commit (not a git checkout")
    facts = row_facts({"git": found, "device": {"backend": "cpu", "kind": "cpu"}})
    assert facts == {"commit": "", "dirty": "", "diff_sha256": "", "data_sha256": "", "device": "cpu"}


def test_row_facts_name_the_accelerator() -> None:
    made_by = {
        "git": {"commit": "f" * 40, "dirty": True, "diff_sha256": "d" * 64},
        "device": {"backend": "gpu", "kind": "NVIDIA H100 80GB HBM3"},
    }
    assert row_facts(made_by, "e" * 64) == {
        "commit": "f" * 40,
        "dirty": "true",
        "diff_sha256": "d" * 64,
        "data_sha256": "e" * 64,
        "device": "NVIDIA H100 80GB HBM3",
    }
