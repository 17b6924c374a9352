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


def _parser_at(path: tuple[str, ...]) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in path:
        parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
    return parser


def _is_leaf(parser: argparse.ArgumentParser) -> bool:
    return not any(isinstance(action, argparse._SubParsersAction) for action in parser._actions)


LEAVES = [path for path in COMMANDS if path and _is_leaf(_parser_at(path))]


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "offline_gitd")
def test_every_option_names_its_default_once_and_never_an_empty_one(path: tuple[str, ...]) -> None:
    """``(default: )`` says nothing, and a help text that states its own default must not get a
    second, different one appended (``--data-dir``'s read "... user cache dir) (default: domain default)")."""
    parser = _parser_at(path)
    formatter = parser._get_formatter()
    for action in parser._actions:
        if not action.help or action.help == argparse.SUPPRESS:
            continue
        text = formatter._expand_help(action)
        assert "(default: )" not in text, f"{' '.join(path)} {action.option_strings}: {text}"
        assert text.count("(default") <= 1, f"{' '.join(path)} {action.option_strings}: {text}"


def test_train_and_online_help_show_the_real_defaults(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    train = " ".join(capsys.readouterr().out.split())
    assert "--data-dir DATA_DIR data root (default $OFFLINE_GITD_DATA or the user cache dir) --config" in train
    assert "--out OUT run directory (config.json, metrics.csv, results.csv, checkpoints/) --critic" in train
    assert "--dataset DATASET rlu-atari:GAME/RUN[:CHECKPOINTS] or minari:DATASET_ID --algo" in train
    assert "--K K online Q-heads (1 for td/tdrc, paper: 5 for itd/gitd) (default: domain default)" in train
    with pytest.raises(SystemExit):
        main(["online", "dqn", "--help"])
    online = " ".join(capsys.readouterr().out.split())
    assert "(default: )" not in online and "HalfCheetah-v5 ... --per" in online


@pytest.mark.parametrize("path", LEAVES, ids=" ".join)
def test_every_command_has_a_description_and_an_example(path: tuple[str, ...], capsys) -> None:
    """What a command does beyond its one-line summary, and one command line to copy."""
    parser = _parser_at(path)
    assert parser.description, f"offline_gitd {' '.join(path)} --help has no description"
    with pytest.raises(SystemExit):
        main([*path, "--help"])
    help_text = capsys.readouterr().out
    examples = help_text.partition("\nexample")[2]
    assert f"offline_gitd {' '.join(path)}" in examples, f"offline_gitd {' '.join(path)} --help has no example"


@pytest.mark.parametrize(
    ("argv", "suggested"),
    [
        (["train", "--critic", "gitdd"], "did you mean 'gitd'"),
        (["train", "--algo", "td3+bc"], "did you mean 'td3bc'?"),
        (["online", "dqn", "--torso", "impla"], "did you mean 'impala'"),
        (["tarin"], "did you mean 'train'?"),
        (["datasets", "lst"], "did you mean 'list'?"),
        (["online", "sca"], "did you mean 'sac'?"),
    ],
)
def test_a_name_outside_a_closed_set_gets_the_closest_ones(argv: list[str], suggested: str, capsys) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert suggested in err and err.count("\n") == 1, err


def test_no_suggestion_when_nothing_is_close(capsys) -> None:
    assert main(["train", "--critic", "zzzzzz"]) == 2
    assert "did you mean" not in capsys.readouterr().err
