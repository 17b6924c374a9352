"""Damaged checkpoints and host states are detected by their checksums, reported in one line, and
resume falls back to the newest intact one; Ctrl-C during a save leaves no half-written step."""

from __future__ import annotations

import os
import pickle
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from offline_gitd.rundir.checkpoints import ORBAX_TMP_SUFFIX, Checkpoints
from offline_gitd.rundir.seals import (
    DamagedFile,
    deferred_interrupt,
    read_sealed_pickle,
    write_sealed_pickle,
)


def state_at(step: int) -> dict[str, np.ndarray]:
    return {"w": np.full((64, 64), float(step), np.float32), "b": {"c": np.arange(5, dtype=np.int32) + step}}


@pytest.fixture
def saved(tmp_path: Path) -> Checkpoints:
    checkpoints = Checkpoints(tmp_path)
    for step in (1, 2):
        checkpoints.save(step, state_at(step))
    return checkpoints


def data_files(checkpoints: Checkpoints, step: int) -> list[Path]:
    """orbax's array data files of a step (the ocdbt chunks), largest first."""
    files = [p for p in (checkpoints.path(step) / "default").rglob("d/*") if p.is_file()]
    return sorted(files, key=lambda p: p.stat().st_size, reverse=True)


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40
    path.write_bytes(bytes(data))


def empty_metadata(path: Path) -> None:
    (path / "default" / "_METADATA").write_bytes(b"")


def delete_item(path: Path) -> None:
    import shutil

    shutil.rmtree(path / "default")


DAMAGE = {
    "truncated data file": lambda c: truncate(data_files(c, 2)[0]),
    "flipped byte": lambda c: flip_byte(data_files(c, 2)[0]),
    "emptied _METADATA": lambda c: empty_metadata(c.path(2)),
    "deleted item dir": lambda c: delete_item(c.path(2)),
    "save never sealed": lambda c: c.digest_path(2).unlink(),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_newest_checkpoint_falls_back_in_one_line(saved: Checkpoints, damage: str, capsys) -> None:
    DAMAGE[damage](saved)
    reopened = Checkpoints(saved.directory.parent)
    step, state, _ = reopened.restore_newest_intact(state_at(0))
    assert step == 1
    np.testing.assert_array_equal(state["w"], state_at(1)["w"])
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "checkpoint 2 is damaged" in err[0] and "resuming from checkpoint 1" in err[0]
    # the damaged step is gone, so the resumed run can save epoch 2 again
    assert not reopened.path(2).exists() and reopened.latest() == 1
    reopened.save(2, state_at(2))
    assert reopened.restore_newest_intact(state_at(0))[0] == 2


def test_a_digest_outlives_no_step(saved: Checkpoints) -> None:
    """When a step goes (a keep-last-N policy, a user's rm), its digest goes at the next save."""
    import shutil

    shutil.rmtree(saved.path(1))
    saved.manager.reload()
    saved.save(3, state_at(3))
    assert sorted(p.name for p in saved.directory.glob("*.sha256")) == ["2.sha256", "3.sha256"]


def test_intact_checkpoints_restore_the_newest_silently(saved: Checkpoints, capsys) -> None:
    step, state, _ = Checkpoints(saved.directory.parent).restore_newest_intact(state_at(0))
    assert step == 2 and capsys.readouterr().err == ""
    np.testing.assert_array_equal(state["b"]["c"], state_at(2)["b"]["c"])


def test_no_intact_checkpoint_refuses_and_removes_nothing(saved: Checkpoints) -> None:
    for step in (1, 2):
        flip_byte(data_files(saved, step)[0])
    before = sorted(p.relative_to(saved.directory) for p in saved.directory.rglob("*"))
    with pytest.raises(DamagedFile, match="no intact checkpoint") as err:
        Checkpoints(saved.directory.parent).restore_newest_intact(state_at(0))
    assert "\n" not in str(err.value)
    assert sorted(p.relative_to(saved.directory) for p in saved.directory.rglob("*")) == before


def test_companion_damage_falls_back_to_the_previous_pair(saved: Checkpoints, tmp_path: Path, capsys) -> None:
    """The online loop's host state is part of a checkpoint: a torn one makes the step unusable."""
    for step in (1, 2):
        write_sealed_pickle(tmp_path / f"{step}.pkl", {"step": step})
    truncate(tmp_path / "2.pkl")
    step, _, host = saved.restore_newest_intact(state_at(0), lambda s: read_sealed_pickle(tmp_path / f"{s}.pkl"))
    assert (step, host) == (1, {"step": 1})
    assert "2.pkl fails its checksum" in capsys.readouterr().err


def test_sealed_pickle_detects_truncation_and_flips_and_reads_old_pickles(tmp_path: Path) -> None:
    path = tmp_path / "host.pkl"
    write_sealed_pickle(path, {"replay": np.arange(1000)})
    assert list(tmp_path.iterdir()) == [path]  # no temp file left
    np.testing.assert_array_equal(read_sealed_pickle(path)["replay"], np.arange(1000))
    for damage in (truncate, flip_byte):
        write_sealed_pickle(path, {"replay": np.arange(1000)})
        damage(path)
        with pytest.raises(DamagedFile, match="fails its checksum"):
            read_sealed_pickle(path)
    path.write_bytes(pickle.dumps({"old": 1}))  # a host state from before seals: read as it is
    assert read_sealed_pickle(path) == {"old": 1}
    path.write_bytes(pickle.dumps({"old": 1})[:-3])
    with pytest.raises(DamagedFile, match="cannot be unpickled"):
        read_sealed_pickle(path)


def run_python(script: str, *args: str):
    """``python -c script args`` with this checkout importable; its completed process."""
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(Path.cwd())}
    return subprocess.run([sys.executable, "-c", script, *args], env=env, capture_output=True, text=True, timeout=300)


def test_sealed_pickle_on_a_full_disk_is_one_line_and_no_temp(tmp_path: Path) -> None:
    """A real EFBIG (the file-size limit of a child process), as a full disk gives ENOSPC."""
    script = (
        "import resource, signal, sys\n"
        "from pathlib import Path\n"
        "from offline_gitd.rundir.seals import write_sealed_pickle\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
        "try:\n"
        "    write_sealed_pickle(Path(sys.argv[1]) / '100.pkl', bytes(100000))\n"
        "except Exception as err:\n"
        "    print(type(err).__name__, err)\n"
    )
    proc = run_python(script, str(tmp_path))
    assert proc.stdout.startswith("DiskFull cannot write") and "File too large" in proc.stdout, proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_unfinished_orbax_save_is_swept_on_resume_only(saved: Checkpoints) -> None:
    """A save killed mid-way (kill -9) leaves orbax's temp folder: the resuming run removes it;
    merely opening the checkpoints (a reader of a live run) must not."""
    leftover = saved.directory / f"3{ORBAX_TMP_SUFFIX}-1700000000"
    (leftover / "default").mkdir(parents=True)
    (leftover / "default" / "junk").write_bytes(b"x")
    reopened = Checkpoints(saved.directory.parent)
    assert leftover.exists() and reopened.latest() == 2
    assert reopened.restore_newest_intact(state_at(0))[0] == 2
    assert not leftover.exists()


def test_ctrl_c_during_a_save_waits_for_it_then_interrupts(tmp_path: Path) -> None:
    """A real SIGINT sent while orbax's temporary directory exists: the save completes and is
    sealed, then KeyboardInterrupt is raised; no temporary directory is left."""
    checkpoints = Checkpoints(tmp_path)
    big = {"w": np.random.default_rng(0).standard_normal((2048, 2048)).astype(np.float32)}  # 16 MiB
    sent = threading.Event()

    def interrupt_when_saving() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not sent.is_set():
            if any(checkpoints.directory.glob(f"*{ORBAX_TMP_SUFFIX}*")):
                signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
                sent.set()
            time.sleep(0.0005)

    watcher = threading.Thread(target=interrupt_when_saving, daemon=True)
    watcher.start()
    with pytest.raises(KeyboardInterrupt):
        checkpoints.save(1, big)
    sent.set()
    watcher.join()
    assert not list(checkpoints.directory.glob(f"*{ORBAX_TMP_SUFFIX}*"))
    restored = Checkpoints(tmp_path).restore_newest_intact({"w": np.zeros((2048, 2048), np.float32)})
    assert restored[0] == 1
    np.testing.assert_array_equal(restored[1]["w"], big["w"])


def test_a_second_ctrl_c_interrupts_a_deferred_block_at_once() -> None:
    reached = []
    with pytest.raises(KeyboardInterrupt):
        with deferred_interrupt():
            os.kill(os.getpid(), signal.SIGINT)
            reached.append("after the first")
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)  # the handler runs here, before the sleep returns
            reached.append("after the second")
    assert reached == ["after the first"]


def test_deferred_interrupt_restores_the_handler_and_reraises_once() -> None:
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        with deferred_interrupt():
            with deferred_interrupt():  # nested: the outer block holds the interrupt
                os.kill(os.getpid(), signal.SIGINT)
            assert True  # still running: nothing was raised inside
    assert signal.getsignal(signal.SIGINT) is before


# -- through the CLI: a real training run ----------------------------------------------------------

DATASET = "tests/cartpole/integrity-v0"


@pytest.fixture(scope="module")
def minari_root(tmp_path_factory) -> Path:
    from tests.minari_fixtures import record_into_new_root

    return record_into_new_root(tmp_path_factory.mktemp("minari"), DATASET, "CartPole-v1", 600)


def train_args(out: Path, epochs: int) -> list[str]:
    return [
        "train", "--dataset", f"minari:{DATASET}", "--critic", "gitd", "--K", "2", "--T", "10",
        "--mlp-hidden", "8", "--epochs", str(epochs), "--steps-per-epoch", "20", "--updates-per-call", "10",
        "--batch-size", "8", "--eval-episodes", "0", "--seeds", "0", "--out", str(out), "--no-progress",
    ]  # fmt: skip


def final_params(out: Path) -> list[np.ndarray]:
    """The newest checkpoint's arrays, read from the files as written (no template needed)."""
    checkpoints = Checkpoints(out)
    restored = checkpoints.restore_as_written(checkpoints.latest())
    import jax

    return [np.asarray(leaf) for leaf in jax.tree.leaves(restored)]


@pytest.mark.slow  # two real training runs: ~40 s on a shared 2-core machine
def test_flipped_checkpoint_is_recomputed_exactly_on_resume(minari_root, monkeypatch, tmp_path, capsys) -> None:
    from offline_gitd.cli import main

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(minari_root))
    out = tmp_path / "run"
    assert main(train_args(out, 2)) == 0
    straight = final_params(out)
    flip_byte(data_files(Checkpoints(out), 2)[0])
    capsys.readouterr()
    assert main(["train", "--out", str(out), "--resume", "--epochs", "2", "--no-progress"]) == 0
    warning = [line for line in capsys.readouterr().err.splitlines() if "damaged" in line]
    assert len(warning) == 1 and "resuming from checkpoint 1" in warning[0]
    for a, b in zip(final_params(out), straight, strict=True):
        np.testing.assert_array_equal(a, b)
    assert len((out / "metrics.csv").read_text().splitlines()) == 1 + 2  # header, epochs 1 and 2 once


def interrupt_while_saving(cli_args: list[str], out: Path, **env: str) -> tuple[int, str]:
    """Run ``offline_gitd CLI_ARGS`` in a subprocess, send SIGINT while orbax's temporary folder
    of a checkpoint is on disk; its exit code and stderr. Without the deferral it hung here."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "offline_gitd.cli", *cli_args],
        env={**os.environ, "PYTHONPATH": str(Path.cwd()), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline, saving = time.monotonic() + 180, False
        while not saving and proc.poll() is None and time.monotonic() < deadline:
            saving = any((out / "checkpoints").glob(f"*{ORBAX_TMP_SUFFIX}*"))
            time.sleep(0.0005)
        assert saving, "never saw a checkpoint being written"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err


@pytest.mark.slow  # a training subprocess and two runs: ~60 s on a shared 2-core machine
def test_ctrl_c_is_one_line_exit_130_and_resume_is_exact(minari_root, tmp_path) -> None:
    """SIGINT to a real ``offline_gitd train`` process while orbax writes a checkpoint (its
    temporary folder is seen on disk), the case that printed orbax tracebacks and left the folder."""
    out = tmp_path / "run"
    # 40 short epochs: 40 saves to catch in flight, and a resume may only extend a run (docs/runs.md#resume)
    returncode, err = interrupt_while_saving(train_args(out, 40), out, MINARI_DATASETS_PATH=str(minari_root))
    assert returncode == 130, err
    assert err.strip().splitlines() == [
        f"offline_gitd: interrupted; resume with: offline_gitd train --out {out} --resume"
    ]
    assert not list((out / "checkpoints").glob(f"*{ORBAX_TMP_SUFFIX}*"))
    done = Checkpoints(out).latest()
    assert done and not Checkpoints(out).problem(done)

    from offline_gitd.cli import main

    os.environ["MINARI_DATASETS_PATH"] = str(minari_root)
    try:
        assert main(["train", "--out", str(out), "--resume", "--no-progress"]) == 0
        assert main(train_args(tmp_path / "straight", 40)) == 0
    finally:
        del os.environ["MINARI_DATASETS_PATH"]
    for a, b in zip(final_params(out), final_params(tmp_path / "straight"), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow  # two online runs: ~1 min on a shared 2-core machine
def test_torn_online_host_state_falls_back_to_the_previous_pair(tmp_path, capsys) -> None:
    """A truncated ``host_state/<step>.npz`` (the replay and RNGs beside orbax's state): resume
    takes the previous checkpoint, whose host state was kept, and recomputes exactly."""
    from offline_gitd.online.config import OnlineConfig
    from offline_gitd.online.train import resume_config, train

    cfg = OnlineConfig(
        algo="dqn", env="CartPole-v1", loop="python", critic="gitd", K=2, T=20, steps=200, seeds="0", out=str(tmp_path / "run"),
        mlp_hidden="8", batch_size=8, initial_samples=50, log_every=50, checkpoint_every=100,
    )  # fmt: skip
    train(cfg, progress=False)
    out = tmp_path / "run"
    straight = final_params(out)
    assert sorted(p.name for p in (out / "host_state").iterdir()) == ["100.npz", "200.npz"]
    truncate(out / "host_state" / "200.npz")
    capsys.readouterr()
    train(resume_config(out), resume=True, progress=False)
    warning = [line for line in capsys.readouterr().err.splitlines() if "damaged" in line]
    assert len(warning) == 1 and "200.npz fails its checksum" in warning[0] and "checkpoint 100" in warning[0]
    for a, b in zip(final_params(out), straight, strict=True):
        np.testing.assert_array_equal(a, b)


FULL_DISK_SCRIPT = """
import resource, signal, sys
import numpy as np
from pathlib import Path
from offline_gitd.rundir.checkpoints import Checkpoints

checkpoints = Checkpoints(Path(sys.argv[1]))
checkpoints.save(1, {"w": np.zeros(10, np.float32)})
# A full disk without root: files may not grow past 20 kB; SIGXFSZ ignored, a write past it is
# the OSError EFBIG, which orbax reports as it would ENOSPC.
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))
try:
    checkpoints.save(2, {"w": np.arange(100000, dtype=np.float32)})
except Exception as err:
    print(type(err).__name__, err)
"""


def test_full_disk_during_a_save_is_one_line_and_leaves_the_earlier_checkpoints(tmp_path: Path) -> None:
    proc = run_python(FULL_DISK_SCRIPT, str(tmp_path))
    assert proc.stdout.strip().startswith("DiskFull cannot save checkpoint 2") and "File too large" in proc.stdout
    assert "\n" not in proc.stdout.strip() and proc.stderr == ""  # orbax's ~250 lines of logs held
    checkpoints = Checkpoints(tmp_path)
    assert not list(checkpoints.directory.glob(f"*{ORBAX_TMP_SUFFIX}*"))
    assert checkpoints.restore_newest_intact({"w": np.ones(10, np.float32)})[0] == 1


@pytest.mark.slow  # an online training subprocess and a resume: ~1 min on a shared 2-core machine
def test_ctrl_c_during_an_online_save_is_one_line_and_resumes(tmp_path) -> None:
    out = tmp_path / "run"
    args = [
        "online", "dqn", "--env", "CartPole-v1", "--loop", "python", "--critic", "td", "--steps", "2000", "--seeds", "0",
        "--mlp-hidden", "8", "--batch-size", "8", "--initial-samples", "50", "--log-every", "50",
        "--checkpoint-every", "50", "--out", str(out), "--no-progress",
    ]  # fmt: skip
    returncode, err = interrupt_while_saving(args, out)
    assert returncode == 130, err
    assert err.strip().splitlines() == [
        f"offline_gitd: interrupted; resume with: offline_gitd online dqn --out {out} --resume"
    ]
    assert not list((out / "checkpoints").glob(f"*{ORBAX_TMP_SUFFIX}*"))
    assert not list((out / "host_state").glob("*.tmp"))
    done = Checkpoints(out).latest()
    assert done and not Checkpoints(out).problem(done)

    from offline_gitd.cli import main

    # 40 saves to catch in flight; a resume may only extend a run (docs/runs.md#resume), so it runs to the end
    assert main(["online", "dqn", "--out", str(out), "--resume", "--no-progress"]) == 0
    assert Checkpoints(out).latest() == 2000
