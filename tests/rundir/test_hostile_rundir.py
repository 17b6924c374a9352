"""A run directory from someone else is data, never code (docs/bounds.md#run-directories-are-data).

Real run directories, made by tiny real runs, are tampered with the ways a hostile or careless
sender could: a pickle that writes a marker file when loaded (where the host state was, or inside
a sealed archive whose digest is recomputed, since anyone can), links to files outside the run,
absurd sizes in the metadata. Every reader (``evaluate``, ``load_run``, ``train --resume``,
``online --resume``, ``leaderboard submit``) must answer in one line and the marker must never
appear.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest

import offline_gitd
from offline_gitd.cli import main
from offline_gitd.errors import UsageError
from offline_gitd.online.config import OnlineConfig
from offline_gitd.online.host_state import read_host_state
from offline_gitd.online.train import resolve_config, resume_config
from offline_gitd.online.train import train as train_online
from offline_gitd.rundir.seals import (
    DamagedFile,
    read_sealed_arrays,
    write_sealed_arrays,
    write_sealed_pickle,
)
from tests.minari_fixtures import record_random_dataset
from tests.offline.test_offline import small_config

DATASET = "tests/cartpole/hostile-v0"


class Plant:
    """Unpickling this writes ``marker``: the stand-in for any code a pickle can run."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').write('ran')",))


@pytest.fixture(scope="module", autouse=True)
def compilation_cache(jax_compilation_cache):
    yield


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """One online and one offline run directory, each from a tiny real run."""
    root = tmp_path_factory.mktemp("hostile")
    cfg = OnlineConfig(
        algo="dqn", env="CartPole-v1", loop="python", critic="td", steps=100, seeds="0", mlp_hidden="8", batch_size=8,
        initial_samples=50, log_every=50, checkpoint_every=50, out=str(root / "online"),
    )  # fmt: skip
    train_online(cfg, progress=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MINARI_DATASETS_PATH", str(root / "minari"))
        record_random_dataset(DATASET, "CartPole-v1", steps=300)
        from offline_gitd.offline.train import train

        offline = small_config(
            f"minari:{DATASET}", root / "offline", K=2, mlp_hidden="8", epochs=1, steps_per_epoch=10,
            eval_episodes=1, seeds="0", updates_per_call=10,
        )  # fmt: skip
        train(offline, progress=False)
    return root


@pytest.fixture
def runs(made, tmp_path, monkeypatch) -> Path:
    """Fresh copies of both runs (each test tampers with its own), and a marker path outside them."""
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(made / "minari"))
    for name in ("online", "offline"):
        shutil.copytree(made / name, tmp_path / name, symlinks=True)
    return tmp_path


def one_line_error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("offline_gitd: error: "), err
    return err


def online_resume(run: Path, *extra: str) -> list[str]:
    return ["online", "dqn", "--out", str(run), "--resume", "--steps", "150", "--no-progress", *extra]


def offline_resume(run: Path) -> list[str]:
    return ["train", "--out", str(run), "--resume", "--epochs", "2", "--no-progress"]


# -- pickles -----------------------------------------------------------------------------------


@pytest.mark.parametrize("sealed", [True, False])
def test_a_planted_pickle_is_refused_and_never_loaded(runs, capsys, sealed) -> None:
    marker = runs / "marker"
    states = runs / "online" / "host_state"
    for archive in states.glob("*.npz"):
        archive.unlink()
        planted = archive.with_suffix(".pkl")
        if sealed:
            write_sealed_pickle(planted, Plant(marker))
        else:
            planted.write_bytes(pickle.dumps(Plant(marker)))
    err = one_line_error(capsys, online_resume(runs / "online"))
    assert "is a pickle" in err and "--trust-pickles" in err
    assert not marker.exists()


def test_trust_pickles_needs_resume(runs, capsys) -> None:
    err = one_line_error(
        capsys,
        ["online", "dqn", "--env", "CartPole-v1", "--loop", "python", "--out", str(runs / "new"), "--trust-pickles"],
    )
    assert "--trust-pickles only applies to --resume" in err


def test_an_older_runs_pickle_resumes_when_trusted(runs, capsys) -> None:
    """A genuine host state of an older version (sealed pickle of the slots): resumed with
    --trust-pickles, exactly where the archive would have resumed."""
    run = runs / "online"
    cfg, info = resolve_config(resume_config(run))
    for archive in sorted((run / "host_state").glob("*.npz")):
        write_sealed_pickle(archive.with_suffix(".pkl"), read_host_state(archive, cfg, info))
        archive.unlink()
    assert main(online_resume(run, "--trust-pickles")) == 0
    assert sorted(p.name for p in (run / "host_state").iterdir()) == [
        "100.pkl",
        "150.npz",
    ]  # the pair before is kept as it was


def _tamper_archive(path: Path, change) -> None:
    """Rewrite a sealed host-state archive through ``change(arrays, meta)`` and seal it again:
    a digest is no proof of origin, so the reader's checks must hold without it."""
    arrays, meta = read_sealed_arrays(path)
    change(arrays, meta)
    write_sealed_arrays(path, arrays, meta)


def test_a_sealed_archive_holding_a_pickled_object_array_is_refused(runs, capsys) -> None:
    marker = runs / "marker"
    objects = np.empty(1, object)
    objects[0] = Plant(marker)
    for archive in (runs / "online" / "host_state").glob("*.npz"):
        with pytest.raises(ValueError, match="plain"):  # the writer never makes one
            _tamper_archive(archive, lambda arrays, meta: arrays.update({"s0.obs_now": objects}))
        _seal_members(archive, {"meta.json": np.frombuffer(b'{"updates": 0}', np.uint8), "s0.obs_now": objects})
    err = one_line_error(capsys, online_resume(runs / "online"))
    assert "holds Python objects" in err and "no intact checkpoint" in err
    assert not marker.exists()


def test_a_huge_shape_in_an_archive_header_is_refused_without_allocating(runs, capsys) -> None:
    huge = _npy_header_claiming(np.float32, (10**13,)) + bytes(16)
    for archive in (runs / "online" / "host_state").glob("*.npz"):
        _seal_members(archive, {"meta.json": np.frombuffer(b"{}", np.uint8), "s0.obs": huge})
    err = one_line_error(capsys, online_resume(runs / "online"))
    assert "claims shape (10000000000000,)" in err


def test_values_that_do_not_fit_the_run_are_refused(runs, capsys) -> None:
    def wrong(arrays, meta):
        meta["slots"][0]["seed"] = 7
        arrays["s0.obs"] = arrays["s0.obs"][:, :2]

    for archive in (runs / "online" / "host_state").glob("*.npz"):
        _tamper_archive(archive, wrong)
    err = one_line_error(capsys, online_resume(runs / "online"))
    assert "does not hold this run's host state" in err


def _seal_members(path: Path, members: dict[str, np.ndarray | bytes]) -> None:
    """An npz archive of ``members`` (arrays saved as numpy would, pickles allowed; bytes as
    given) behind a correct digest line: what a hostile sender can always make."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for name, value in members.items():
            if isinstance(value, np.ndarray):
                npy = io.BytesIO()
                np.save(npy, value, allow_pickle=True)
                value = npy.getvalue()
            z.writestr(name + ".npy", value)
    payload = buffer.getvalue()
    path.write_bytes(b"offline_gitd-sha256 " + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)


def _npy_header_claiming(dtype, shape) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": shape}
    )
    return buffer.getvalue()


# -- links outside the run ---------------------------------------------------------------------


def _link_out(run: Path, name: str, outside: Path) -> None:
    (run / name).unlink(missing_ok=True)
    (run / name).symlink_to(outside)


READERS = {
    "evaluate": lambda run: ["evaluate", str(run / "offline"), "--episodes", "1"],
    "train --resume": lambda run: offline_resume(run / "offline"),
    "online --resume": lambda run: online_resume(run / "online"),
    "leaderboard submit": lambda run: ["leaderboard", "submit", str(run / "offline"), "--board", str(run / "b.csv")],
}


@pytest.mark.parametrize("reader", list(READERS))
def test_a_link_outside_the_run_is_refused(runs, capsys, reader) -> None:
    secret = runs / "secret.txt"
    secret.write_text("not for the board\n")
    for name in ("online", "offline"):
        _link_out(runs / name, "results.csv", secret)
    err = one_line_error(capsys, READERS[reader](runs))
    assert "results.csv is a link to" in err and "outside the directory" in err
    assert not (runs / "b.csv").exists()


def test_a_checkpoint_file_linked_to_a_device_is_refused_by_load_run(runs) -> None:
    step = next(p for p in (runs / "offline" / "checkpoints").iterdir() if p.name.isdigit())
    victim = next(p for p in step.rglob("*") if p.is_file())
    victim.unlink()
    victim.symlink_to("/dev/zero")
    with pytest.raises(UsageError, match="is a link to /dev/zero, outside the directory"):
        offline_gitd.load_run(runs / "offline")


def test_a_fifo_in_the_run_is_refused(runs, capsys) -> None:
    os.mkfifo(runs / "offline" / "metrics.csv.fifo")
    err = one_line_error(capsys, READERS["evaluate"](runs))
    assert "is not a regular file" in err


# -- absurd sizes ------------------------------------------------------------------------------


def _set_config(run: Path, **fields) -> None:
    record = json.loads((run / "config.json").read_text())
    record["config"].update(fields)
    (run / "config.json").write_text(json.dumps(record))


@pytest.mark.parametrize("reader", ["evaluate", "train --resume", "online --resume", "load_run"])
def test_a_config_claiming_a_billion_seeds_is_one_line(runs, capsys, reader) -> None:
    for name in ("online", "offline"):
        _set_config(runs / name, seeds=f"0-{10**9}")
    if reader == "load_run":
        with pytest.raises(UsageError, match="--seeds lists more than"):
            offline_gitd.load_run(runs / "offline")
        return
    assert "--seeds lists more than" in one_line_error(capsys, READERS[reader](runs))


def test_a_config_with_unknown_or_mistyped_fields_is_one_line(runs, capsys) -> None:
    _set_config(runs / "offline", surprise=1)
    assert "does not know: 'surprise'" in one_line_error(capsys, READERS["evaluate"](runs))
    record = json.loads((runs / "online" / "config.json").read_text())
    record["config"] = ["not", "a", "config"]
    (runs / "online" / "config.json").write_text(json.dumps(record))
    assert "not a run's record" in one_line_error(capsys, READERS["online --resume"](runs))


def test_a_gigantic_config_is_refused_before_it_is_read(runs, capsys) -> None:
    with (runs / "offline" / "config.json").open("r+b") as f:
        f.truncate(1 << 30)  # sparse: a gigabyte claimed, nothing written
    assert "is too large for a config.json" in one_line_error(capsys, READERS["train --resume"](runs))


def test_the_archive_reader_refuses_damage_in_one_line(tmp_path) -> None:
    path = tmp_path / "1.npz"
    write_sealed_arrays(path, {"a": np.arange(3)}, {"n": 1})
    arrays, meta = read_sealed_arrays(path)
    assert meta == {"n": 1} and arrays["a"].tolist() == [0, 1, 2]
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(DamagedFile, match="fails its checksum"):
        read_sealed_arrays(path)
    path.write_bytes(b"PK\x03\x04 not sealed")
    with pytest.raises(DamagedFile, match="is not a sealed archive"):
        read_sealed_arrays(path)


# -- datasets ----------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["entry_point", "wrapper"])
def test_a_dataset_naming_foreign_code_for_its_env_is_refused(made, runs, monkeypatch, capsys, where) -> None:
    """A Minari dataset's env spec names the callable ``recover_environment`` imports and calls:
    one naming ``subprocess:getoutput`` would run a shell command at evaluation."""
    marker = runs / "marker"
    shutil.copytree(made / "minari", runs / "minari")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(runs / "minari"))
    path = runs / "minari" / DATASET / "data" / "metadata.json"
    metadata = json.loads(path.read_text())
    spec = json.loads(metadata["env_spec"])
    hostile = {"name": "Run", "entry_point": "subprocess:getoutput", "kwargs": {"cmd": f"touch {marker}"}}
    if where == "entry_point":
        spec.update(entry_point=hostile["entry_point"], kwargs=hostile["kwargs"])
    else:
        spec["additional_wrappers"] = [hostile]
    metadata["env_spec"] = json.dumps(spec)
    path.write_text(json.dumps(metadata))
    err = one_line_error(capsys, READERS["evaluate"](runs))
    assert "refusing to run" in err and "subprocess:getoutput" in err
    assert not marker.exists()
