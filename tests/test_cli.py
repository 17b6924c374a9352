"""The command line as a whole: every command and subcommand answers --help (docs/architecture.md#the-command-line-contract)."""

from __future__ import annotations

import argparse

import pytest

from offline_gitd.cli import build_parser, main


def _command_paths(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [prefix]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                paths += _command_paths(sub, prefix + (name,))
    return paths


COMMANDS = _command_paths(build_parser())


def test_the_contract_commands_exist() -> None:
    top = {path[0] for path in COMMANDS if path}
    assert {"fetch", "datasets", "train", "leaderboard", "mdp", "demo"} <= top


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "offline_gitd")
def test_every_command_explains_itself(path: tuple[str, ...], capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([*path, "--help"])
    assert exit_info.value.code == 0
    assert "usage: offline_gitd" in capsys.readouterr().out


def test_no_command_prints_help_and_fails(capsys) -> None:
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().out
