"""Every bad input: one line on stderr, a non-zero exit, nothing written, nothing hangs (docs/architecture.md#the-command-line-contract).

The table runs each command line in-process through ``offline_gitd.cli.main`` (one JAX import
for the whole file) inside a fresh folder holding the hostile files (a file where a folder is
expected, a board that is not UTF-8, a spec that is not TOML, ...), with the data and Minari roots
pointed inside it. Each case must be refused before any heavy work: a SIGALRM deadline turns a
hang into a failure. A few cases run as real processes, for the exit code and stderr of the
installed entry point, and for ``--debug``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import pytest

from offline_gitd import cli  # noqa: E402
from offline_gitd.cli import build_parser, main  # noqa: E402
from offline_gitd.leaderboard.schema import COLUMNS, read_rows  # noqa: E402
from offline_gitd.leaderboard.submit import submit  # noqa: E402
from offline_gitd.online.config import OnlineConfig  # noqa: E402
from offline_gitd.online.schedules import utd_fraction  # noqa: E402
from tests.support.runs import write_run  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
# Generous: each case must fail in well under a second once the libraries are imported; the
# first case of a command pays for importing JAX, gymnasium or minari on a busy 2-core machine.
DEADLINE_S = 60
# A file with no valid UTF-8 at its start (0xff never occurs in UTF-8).
NOT_UTF8 = bytes([0xFF, 0xFE, 0x00, 0x80]) + bytes(range(256)) * 4
BAD_GRID = """command = "online dqn"
[resources]
cpus = 1
[fixed]
env = "CartPole-v1"
[grid]
K = [5, 100000]
"""


@contextlib.contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Raise TimeoutError in the test if the block runs past ``seconds`` (a hang guard, not a timing)."""

    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"still running after {seconds} s: an input made the command hang")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def snapshot(root: Path) -> dict[str, tuple[int, int] | None]:
    """Every path under ``root`` with (size, mtime) for files: what "nothing changed" compares."""
    return {
        str(path.relative_to(root)): (path.stat().st_size, path.stat().st_mtime_ns) if path.is_file() else None
        for path in root.rglob("*")
    }


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cwd of hostile inputs; the data and Minari roots point inside it and do not exist yet."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OFFLINE_GITD_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    (tmp_path / "F").write_text("a file where a folder is expected\n")
    (tmp_path / "random.bin").write_bytes(NOT_UTF8)
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "bad.toml").write_text("this is = not [toml\n")
    (tmp_path / "grid.toml").write_text(BAD_GRID)
    (tmp_path / "typo.toml").write_text('lrr = 0.001\ncritic = "gitd"\n')
    (tmp_path / "typos.toml").write_text('criticc = "gitd"\nKK = 3\n')
    (tmp_path / "value.toml").write_text('critic = "gitdd"\n')
    (tmp_path / "folder").mkdir()
    (tmp_path / "utf16.csv").write_text("suite,env\n", encoding="utf-16")
    (tmp_path / "huge.csv").write_text(",".join(COLUMNS) + "\n" + '"' + "x" * 200_000 + '"\n')
    (tmp_path / "binrun").mkdir()
    (tmp_path / "binrun" / "results.csv").write_bytes(NOT_UTF8)
    run = write_run(
        tmp_path / "run", env="Pong", algorithm="cql", critic="td", seed=0, steps=[0, 10], returns=[-21.0, -5.0]
    )
    submit([run], tmp_path / "board.csv", allow_new_env=False)
    (tmp_path / "board.csv.lock").unlink()
    return tmp_path


LONG_SEEDS = "0-99999999999"
ON = ["online", "dqn", "--env", "CartPole-v1", "--out", "D"]
SAC = ["online", "sac", "--env", "Pendulum-v1", "--out", "D"]
TRAIN = ["train", "--dataset", "rlu-atari:Pong/1", "--out", "D"]
COLLECT = ["collect", "CartPole-v1", "--steps", "10", "--out", "offline_gitd/probe-v0"]
RLU = ["fetch", "rlu-atari", "--game", "Pong", "--run", "1"]
SHOW = ["leaderboard", "show", "--board"]

# (argv, a fragment the one line must hold: the reason, not just "error").
CASES: list[tuple[list[str], str]] = [
    # fetch
    ([*RLU, "--base-url", "notaurl"], "--base-url must be an http:// or https:// URL"),
    ([*RLU, "--base-url", "ftp://mirror/x"], "--base-url must be an http:// or https:// URL"),
    (["fetch", "rlu-atari", "--game", "Nope", "--run", "1"], "unknown game 'Nope'"),
    (["fetch", "rlu-atari", "--game", "Pong", "--run", "9"], "unknown run 9"),
    (["fetch", "rlu-atari", "--game", "Pong", "--run", "x"], "argument --run: invalid int value"),
    ([*RLU, "--checkpoints", "99"], "checkpoint 99 out of range"),
    ([*RLU, "--checkpoints", "x"], "bad checkpoint list 'x'"),
    ([*RLU, "--layout", "foo"], "unknown layout 'foo'"),
    ([*RLU, "--jobs", "0"], "--jobs must be in [1, 64]"),
    ([*RLU, "--jobs", "100000"], "--jobs must be in [1, 64]"),
    ([*RLU, "--retries", "0"], "--retries must be >= 1"),
    ([*RLU, "--timeout", "nan"], "--timeout must be"),
    ([*RLU, "--retry-delay", "inf"], "--retry-delay must be >= 0"),
    ([*RLU, "--data-dir", "F"], "--data-dir F: exists and is not a directory"),
    (["fetch", "minari", "badid"], "bad minari id 'badid'"),
    (["fetch"], "the following arguments are required: SOURCE"),
    # datasets
    (["datasets", "info", "bogus"], "unknown dataset id 'bogus'"),
    (["datasets", "info", "rlu-atari:Pong/9"], "unknown run 9"),
    (["datasets", "info", "minari:bad"], "bad minari id 'bad'"),
    (["datasets", "list", "--data-dir", "F"], "--data-dir F: F is a file, not a directory"),
    (["datasets", "nope"], "invalid choice: 'nope'"),
    # collect
    (["collect", "CartPole-v1", "--steps", "0", "--out", "offline_gitd/probe-v0"], "--steps must be >= 1"),
    ([*COLLECT, "--horizon", "0"], "--horizon must be >= 1"),
    ([*COLLECT, "--seed", "-1"], "--seed must be in [0, 2147483647]"),
    ([*COLLECT, "--critic", "foo"], "unknown --critic 'foo'"),
    ([*COLLECT, "--policy", "sac"], "CartPole-v1 has discrete actions"),
    (["collect", "NoSuchEnv-v0", "--steps", "10", "--out", "offline_gitd/probe-v0"], "unknown environment"),
    ([*COLLECT, "--run-dir", "F"], "--run-dir F: exists and is not a directory"),
    ([*COLLECT, "--data-dir", "F"], "--data-dir F: exists and is not a directory"),
    (["collect", "CartPole-v1", "--steps", "many", "--out", "x/y-v0"], "argument --steps: invalid int value"),
    # train
    ([*TRAIN, "--horizon", "0"], "--horizon must be >= 1 (an episode needs at least one step)"),
    ([*TRAIN, "--K", "100000"], "--K must be in [1, 100] (twice the paper's largest, 50)"),
    (["train", "--dataset", "rlu-atari:Pong/1", "--out", "F"], "--out F: exists and is not a directory"),
    (["train", "--dataset", "rlu-atari:Pong/1", "--out", "F/run"], "--out F/run: F is a file, not a directory"),
    ([*TRAIN, "--batch-size", "100000000"], "--batch-size must be in [1, 65536]"),
    ([*TRAIN, "--epochs", "0"], "--epochs must be >= 1"),
    ([*TRAIN, "--seeds", LONG_SEEDS], "--seeds lists more than 100 values"),
    ([*TRAIN, "--seeds", "4294967296"], "--seeds must be below 2**31"),
    ([*TRAIN, "--seeds", "5-1"], "--seeds must look like 0-4"),
    ([*TRAIN, "--mlp-hidden", "0"], "--mlp-hidden widths must be in [1, 65536]"),
    ([*TRAIN, "--n-step", "0"], "--n-step must be in [1, 1000]"),
    ([*TRAIN, "--n-step", "100000"], "--n-step must be in [1, 1000]"),
    ([*TRAIN, "--gamma", "1.5"], "--gamma must be in (0, 1]"),
    ([*TRAIN, "--lr", "nan"], "--lr must be > 0"),
    ([*TRAIN, "--fraction", "0"], "--fraction must be in (0, 1]"),
    ([*TRAIN, "--eval-epsilon", "2"], "--eval-epsilon must be in [0, 1]"),
    ([*TRAIN, "--critic", "td", "--K", "5"], "K must be 1"),
    ([*TRAIN, "--critic", "foo"], "argument --critic: invalid choice: 'foo'"),
    # a name outside a closed set is answered with the closest ones (docs/getting-started.md#the-command-line)
    ([*TRAIN, "--critic", "gitdd"], "argument --critic: invalid choice: 'gitdd'; did you mean 'gitd'"),
    ([*TRAIN, "--algo", "iqll"], "argument --algo: invalid choice: 'iqll'; did you mean 'iql'?"),
    ([*TRAIN, "--heads", "independant"], "invalid choice: 'independant'; did you mean 'independent'?"),
    ([*TRAIN, "--config", "typo.toml"], "--config typo.toml: unknown key 'lrr'; did you mean 'lr'?"),
    (
        [*TRAIN, "--config", "typos.toml"],
        "unknown keys 'KK', 'criticc'; did you mean 'K' for 'KK', 'critic' for 'criticc'?",
    ),
    (
        [*TRAIN, "--config", "value.toml"],
        "critic: 'gitdd' is not one of td, tdrc, itd, gitd, none; did you mean 'gitd'",
    ),
    (["train", "--dataset", "bogus", "--out", "D"], "unknown dataset id 'bogus'"),
    (["train", "--dataset", "minari:nope/none-v0", "--out", "D"], "no local Minari dataset 'nope/none-v0'"),
    (TRAIN, "fetch it first: offline_gitd fetch rlu-atari --game Pong --run 1 --checkpoints 0-49"),
    ([*TRAIN, "--data-dir", "F"], "--data-dir F: F is a file, not a directory"),
    (["train", "--resume", "--out", "F"], "--out F: exists and is not a directory"),
    (["train", "--resume", "--out", "folder"], "folder holds no config.json"),
    (["train", "--K", "x"], "argument --K: invalid int value: 'x'"),
    (["train", "--nosuchflag"], "unrecognized arguments: --nosuchflag"),
    # online dqn
    ([*ON, "--steps", "0"], "--steps must be >= 1"),
    ([*ON, "--utd", "1/4", "--steps", "0"], "--steps must be >= 1"),
    ([*ON, "--utd", "1/0"], "argument --utd: expected a number or a fraction like 1/4"),
    ([*ON, "--utd", "2.5"], "--utd must be an integer >= 1 or 1/n"),
    ([*ON, "--horizon", "0"], "--horizon must be >= 1"),
    ([*ON, "--K", "100000"], "--K must be in [1, 100] (twice the paper's largest, 50)"),
    ([*ON, "--seeds", LONG_SEEDS], "--seeds lists more than 100 values"),
    (["online", "dqn", "--env", "CartPole-v1", "--out", "F"], "--out F: exists and is not a directory"),
    (["online", "dqn", "--env", "NoSuchEnv-v0", "--out", "D"], "unknown environment 'NoSuchEnv-v0'"),
    # a misspelt game is offered by its Machado-protocol name alone, not gymnasium's Pong-v4 / ALE/Pong-v5
    (["online", "dqn", "--env", "Pongg", "--out", "D"], "unknown environment 'Pongg'; did you mean Pong?\n"),
    (["online", "ddqn", "--env", "CartPole-v1"], "argument ALGO: invalid choice: 'ddqn'; did you mean 'dqn'?"),
    (["online", "dqn", "--env", "Pendulum-v1", "--out", "D"], "Pendulum-v1 has continuous actions"),
    (["online", "dqn", "--env", "", "--out", "D"], "--env ENV_ID is required"),
    ([*ON, "--torso", "nature"], "CartPole-v1 has vector observations of shape (4,): use --torso mlp"),
    ([*ON, "--replay-size", "1"], "--replay-size must be >= 2"),
    ([*ON, "--checkpoint-every", "7", "--log-every", "5"], "must be a multiple of --log-every"),
    ([*ON, "--epsilon-start", "2"], "--epsilon-start must be in [0, 1]"),
    ([*ON, "--batch-size", "0"], "--batch-size must be in [1, 65536]"),
    (["online", "dqn", "--resume"], "--resume needs --out RUN_DIR"),
    # online sac
    (["online", "sac", "--env", "CartPole-v1", "--out", "D"], "CartPole-v1 has discrete actions"),
    ([*SAC, "--preset", "strong"], "--preset strong is the strong DQN baseline"),
    ([*SAC, "--tau", "2"], "tau must be in (0, 1]"),
    ([*SAC, "--steps", "0"], "--steps must be >= 1"),
    # a run that would make no update (docs/online.md#runs-that-would-not-train)
    ([*SAC, "--steps", "3000"], "online sac would make no update: --steps 3000 does not exceed its 5000 initial"),
    ([*ON, "--steps", "1000"], "online dqn would make no update: --steps 1000 does not exceed its 1000 initial"),
    (
        [*ON, "--steps", "1003", "--utd", "1/4"],
        "by an update's 4 steps (--utd 1/4); its first update comes at step 1004",
    ),
    (["online"], "the following arguments are required: ALGO"),
    (["online", "sac", "--env", "hopper-medium-v2", "--out", "D"], "is a D4RL id: its environment is Hopper-v5"),
    # mdp
    (["mdp", "star", "--K", "0"], "--K must be in [1, 10000]"),
    (["mdp", "star", "--K", "100000000"], "--K must be in [1, 10000]"),
    (["mdp", "star", "--steps", "0"], "--steps must be in [1, 1000000]"),
    (["mdp", "star", "--steps", "1000000000000"], "--steps must be in [1, 1000000]"),
    (["mdp", "star", "--lr", "inf"], "--lr must be a finite number > 0"),
    (["mdp", "star", "--json", "folder"], "--json folder: is a directory, expected a file name"),
    (["mdp", "star", "--plot", "F/x.png"], "--plot F/x.png: F is a file, not a directory"),
    (["mdp", "nope"], "argument problem: invalid choice: 'nope'"),
    (["mdp", "triangle", "--eps", "0"], "--eps must be -1 or 1"),
    (["mdp", "star", "--critics", "td,td"], "--critics lists a critic twice"),
    # leaderboard
    ([*SHOW, "random.bin"], "random.bin: not a UTF-8 CSV file"),
    ([*SHOW, "empty.csv"], "empty.csv:1: empty file"),
    ([*SHOW, "utf16.csv"], "utf16.csv: not a UTF-8 CSV file"),
    ([*SHOW, "huge.csv"], "huge.csv: not a CSV file (field larger than field limit"),
    ([*SHOW, "nothere.csv"], "nothere.csv: no such file"),
    ([*SHOW, "folder"], "folder: is a directory, expected a CSV file"),
    ([*SHOW, "board.csv", "--reps", "0"], "argument --reps: expected an integer in [1, 100000]"),
    ([*SHOW, "board.csv", "--reps", "1000000000"], "argument --reps: expected an integer in [1, 100000]"),
    ([*SHOW, "board.csv", "--seed", "-1"], "argument --seed: expected an integer in [0, 2**32)"),
    ([*SHOW, "board.csv", "--baseline", "dqn:td"], "baseline 'dqn:td' is not on the board"),
    (["leaderboard", "submit", "run", "--board", "random.bin"], "random.bin: not a UTF-8 CSV file"),
    (["leaderboard", "submit", "run", "--board", "folder"], "--board folder: is a directory"),
    (["leaderboard", "submit", "folder", "--board", "new.csv"], "results.csv: no such file"),
    (["leaderboard", "submit", "binrun", "--board", "board.csv"], "binrun/results.csv: not a UTF-8 CSV file"),
    (["leaderboard", "plot", "--board", "board.csv", "--out", "F"], "--out F: exists and is not a directory"),
    (["leaderboard", "plot", "--board", "random.bin", "--out", "figures"], "not a UTF-8 CSV file"),
    (["leaderboard", "html", "--board", "random.bin", "--out", "site"], "not a UTF-8 CSV file"),
    (["leaderboard", "html", "--board", "board.csv", "--out", "F/site"], "F is a file, not a directory"),
    (["leaderboard"], "the following arguments are required: SUBCOMMAND"),
    # demo
    (["demo", "--out", "F"], "--out F: exists and is not a directory"),
    (["demo", "--quick", "--out", "F/demo"], "--out F/demo: F is a file, not a directory"),
    (["demo", "--data-dir", "F"], "--data-dir F: exists and is not a directory"),
    # sweep
    (["sweep", "bad.toml", "--dry-run"], "bad.toml: not valid TOML"),
    (["sweep", "random.bin", "--dry-run"], "random.bin: not valid TOML"),
    (["sweep", "nothere.toml", "--dry-run"], "nothere.toml: no such sweep spec"),
    (["sweep", "folder", "--dry-run"], "folder: is a directory, expected a sweep spec"),
    (["sweep", "grid.toml", "--dry-run"], "[grid] K (run K-100000): --K must be in [1, 100]"),
    (["sweep", str(REPO / "sweeps" / "demo.toml"), "--max-parallel", "0"], "--max-parallel must be >= 1"),
    (["sweep", str(REPO / "sweeps" / "demo.toml"), "--out", "F"], "--out F: exists and is not a directory"),
    (["sweep", str(REPO / "sweeps" / "demo.toml"), "--out", "S", "--address", "bogus"], "--address must look like"),
    (["sweep", str(REPO / "sweeps" / "demo.toml"), "--out", "S", "--address", "127.0.0.1:1"], "no Ray cluster answers"),
    # the top level
    (["--nosuch"], "unrecognized arguments: --nosuch"),
    (["nocommand"], "invalid choice: 'nocommand'"),
    (["trian"], "argument COMMAND: invalid choice: 'trian'; did you mean 'train'?"),
    (["leaderboard", "shwo"], "invalid choice: 'shwo'; did you mean 'show'?"),
]


def test_the_table_covers_every_command() -> None:
    assert len(CASES) >= 60
    commands = {" ".join(argv[:2]) if argv[0] in ("online", "leaderboard") else argv[0] for argv, _ in CASES}
    expected = {"fetch", "datasets", "collect", "train", "online dqn", "online sac", "mdp", "demo", "sweep"}
    expected |= {f"leaderboard {sub}" for sub in ("show", "submit", "plot", "html")}
    assert expected <= commands


@pytest.mark.parametrize(("argv", "reason"), CASES, ids=[" ".join(argv) or "-" for argv, _ in CASES])
def test_bad_input_is_one_line_nonzero_and_writes_nothing(
    argv: list[str], reason: str, workspace: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(workspace)
    with deadline(DEADLINE_S):
        code = main(argv)
    err = capfd.readouterr().err
    assert code != 0
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert err.startswith("offline_gitd: error: ") and reason in err, err
    assert "Traceback" not in err
    assert snapshot(workspace) == before


def test_a_board_saved_with_a_byte_order_mark_reads(workspace: Path) -> None:
    """Spreadsheets save UTF-8 with a BOM; it is not part of the header."""
    marked = workspace / "marked.csv"
    marked.write_bytes(b"\xef\xbb\xbf" + (workspace / "board.csv").read_bytes())
    assert read_rows(marked) == read_rows(workspace / "board.csv")


def test_an_unexpected_exception_is_one_line_with_a_pointer_to_debug(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """The guard, for bugs no validation foresaw: the handler stands in for any failing code."""

    def broken(args: object) -> int:
        raise RuntimeError("deep failure\nwith a second line")

    monkeypatch.setattr("offline_gitd.mdps.command.handle", broken)
    assert main(["mdp", "star"]) == 1
    err = capfd.readouterr().err
    assert (
        err
        == "offline_gitd: error: RuntimeError: deep failure with a second line (run with --debug for the traceback)\n"
    )
    for argv in (["--debug", "mdp", "star"], ["mdp", "star", "--debug"]):
        with pytest.raises(RuntimeError, match="deep failure"):
            main(argv)


def test_long_messages_of_unexpected_errors_are_cut_to_one_short_line() -> None:
    text = "x" * 5000 + "\n" + "y"
    assert len(cli.one_line(text, cli.MAX_MESSAGE_CHARS)) == cli.MAX_MESSAGE_CHARS
    assert cli.one_line("a\n  b\tc") == "a b\tc"  # lines joined; spacing within a line kept
    assert cli.split_debug(["train", "--debug", "--", "--debug"]) == (["train", "--", "--debug"], True)


@pytest.mark.parametrize(("text", "fraction"), [("1/4", Fraction(1, 4)), ("0.25", Fraction(1, 4)), ("4", 4)])
def test_utd_takes_the_documented_fraction_notation(text: str, fraction: Fraction) -> None:
    """The docs and --help write --utd 1/4; argparse's float refused it."""
    args = build_parser().parse_args(["online", "dqn", "--env", "CartPole-v1", "--utd", text, "--out", "D"])
    assert utd_fraction(args.utd) == fraction
    resolved = OnlineConfig(env="CartPole-v1", out="D", utd=args.utd).resolve("gym")
    assert utd_fraction(resolved.utd) == fraction


def test_dollar_signs_in_names_are_drawn_as_text(workspace: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """A critic named like mathtext (from someone's results.csv) once killed plot and html."""
    runs = []
    for critic in ("td", "$\\foo{$"):
        for seed in range(2):
            returns = [-21.0 + step + seed + (critic != "td") for step in range(3)]
            runs.append(
                write_run(
                    workspace / "runs" / f"{len(runs)}",
                    env="Pong",
                    algorithm="cql",
                    critic=critic,
                    seed=seed,
                    steps=[0, 10, 20],
                    returns=returns,
                )
            )
    board = workspace / "dollar.csv"
    submit(runs, board, allow_new_env=False)
    common = ["--board", str(board), "--reps", "20"]
    assert main(["leaderboard", "plot", *common, "--out", "figures"]) == 0
    assert main(["leaderboard", "html", *common, "--out", "site"]) == 0
    assert (workspace / "figures" / "aggregate.png").read_bytes().startswith(b"\x89PNG")
    page = (workspace / "site" / "index.html").read_text()
    assert "cql:$\\foo{$" in page and "Traceback" not in capfd.readouterr().err


def _run_cli(args: list[str], cwd: Path, *, timeout: int = 180) -> subprocess.CompletedProcess[str]:
    """The real entry point in a fresh interpreter: exit code and stderr as a user sees them."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "offline_gitd.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["online", "dqn", "--env", "CartPole-v1", "--utd", "1/4", "--steps", "0", "--out", "D"],
        ["leaderboard", "show", "--board", "random.bin"],
        # ALE's emulator banner once stood two lines in front of the error.
        ["online", "dqn", "--env", "atari:Pong", "--K", "0", "--out", "D"],
    ],
    ids=["online-steps-0", "board-not-utf8", "atari-no-banner"],
)
def test_as_a_process_bad_input_exits_2_with_one_line(argv: list[str], workspace: Path) -> None:
    before = snapshot(workspace)
    result = _run_cli(argv, workspace)
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("offline_gitd: error: "), result.stderr
    assert snapshot(workspace) == before


def test_as_a_process_debug_shows_the_traceback(workspace: Path) -> None:
    result = _run_cli(["leaderboard", "show", "--board", "random.bin", "--debug"], workspace)
    assert result.returncode == 1
    assert "Traceback" in result.stderr and "not a UTF-8 CSV file" in result.stderr


WARNING_DRIVER = """
import sys, warnings
import offline_gitd.mdps.command as command
from offline_gitd.cli import main

def failing(args):
    warnings.warn("library noise before the failure")
    raise RuntimeError("the failure")

def succeeding(args):
    warnings.warn("library noise of a good run")
    return 0

command.handle = failing
main(["mdp", "star"])
print("--- now a good run ---", file=sys.stderr, flush=True)
command.handle = succeeding
sys.exit(main(["mdp", "star"]))
"""


def test_warnings_are_held_back_so_a_failure_stays_one_line(tmp_path: Path) -> None:
    """A library's warning printed before the error would make it two lines; after a good run it
    is still shown. Runs in a fresh interpreter, where warnings reach stderr as a user sees them."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, "-W", "default", "-c", WARNING_DRIVER],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    failed, succeeded = result.stderr.split("--- now a good run ---\n")
    assert failed == "offline_gitd: error: RuntimeError: the failure (run with --debug for the traceback)\n"
    assert "library noise of a good run" in succeeded and result.returncode == 0
