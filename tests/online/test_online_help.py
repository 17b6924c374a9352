"""``online sac --help`` shows SAC's flags and examples only; ``online dqn --help`` DQN's."""

from __future__ import annotations

import pytest

from offline_gitd.cli import main


def _help(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    return capsys.readouterr().out


def test_each_family_shows_its_own_flags_and_examples(capsys) -> None:
    sac = _help(capsys, "online", "sac")
    assert "--epsilon-start" not in sac and "--preset" not in sac and "online dqn" not in sac
    assert "online sac --env HalfCheetah-v5" in sac
    dqn = _help(capsys, "online", "dqn")
    assert "--epsilon-start" in dqn and "--preset" in dqn and "online sac" not in dqn


def test_sac_refuses_a_dqn_only_flag_in_one_line(tmp_path, capsys) -> None:
    out = tmp_path / "run"
    assert main(["online", "sac", "--env", "Pendulum-v1", "--epsilon-steps", "5", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--epsilon-steps sets DQN's epsilon-greedy exploration" in err
    assert not out.exists()
