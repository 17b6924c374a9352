"""Progress in log files: plain lines (never carriage returns) off a terminal, summaries always."""

from __future__ import annotations

import io

from offline_gitd.cli import main
from offline_gitd.progress import Progress
from tests.support.argv import online_cartpole


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_every_tenth_off_a_terminal() -> None:
    out = io.StringIO()
    bar = Progress(1000, "epoch 1/1", stream=out, every_seconds=1e9)
    for _ in range(100):
        bar.update(10)
    bar.set_postfix(loss="0.5")
    bar.close()
    text = out.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    assert len(lines) == 10
    assert lines[0].startswith("epoch 1/1: 100/1000 steps (10%)")
    assert lines[-1].startswith("epoch 1/1: 1000/1000 steps (100%)")


def test_plain_line_after_every_seconds_even_within_a_tenth() -> None:
    out = io.StringIO()
    bar = Progress(10**6, "run", stream=out, every_seconds=0.0)
    bar.update(1)
    bar.update(1)
    assert out.getvalue().splitlines()[-1].startswith("run: 2/1000000 steps (0%)")


def test_no_progress_hides_lines_but_not_summaries() -> None:
    out = io.StringIO()
    bar = Progress(10, "epoch", stream=out, enabled=False, every_seconds=0.0)
    bar.update(10)
    bar.write("epoch 1/1: loss 0.1")
    bar.close()
    assert out.getvalue() == "epoch 1/1: loss 0.1\n"


def test_a_terminal_gets_a_bar() -> None:
    out = _Terminal()
    bar = Progress(10, "epoch", stream=out)
    bar.update(10)
    bar.close()
    assert "\r" in out.getvalue()


def test_online_log_has_a_line_per_window_and_a_summary(tmp_path, capsys) -> None:
    argv = online_cartpole(
        critic="td", steps=200, mlp_hidden=8, batch_size=8, initial_samples=50, log_every=50, checkpoint_every=100
    )
    assert main([*argv, "--out", str(tmp_path / "run"), "--no-tensorboard"]) == 0
    text = capsys.readouterr().out
    assert "\r" not in text
    windows = [line for line in text.splitlines() if line.startswith("step ")]
    assert [line.split(":")[0] for line in windows] == [f"step {s}/200" for s in (50, 100, 150, 200)]
    assert any(line.startswith("dqn CartPole-v1: 200 env steps") and "wall time" in line for line in text.splitlines())
    assert any(line.startswith("dqn CartPole-v1: 200/200 steps (100%)") for line in text.splitlines())
