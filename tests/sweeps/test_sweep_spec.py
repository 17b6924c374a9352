"""Sweep specs : the shipped grids expand to the paper's runs, every run is a command
the CLI accepts, and every bad spec is refused before anything runs, in one line naming its key."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from offline_gitd.cli import build_parser, main
from offline_gitd.errors import ConfigError
from offline_gitd.sweeps.core import is_complete
from offline_gitd.sweeps.spec import expand, load_spec
from offline_gitd.sweeps.state import SweepPaths, write_state
from tests.support.runs import write_run  # noqa: E402

SWEEPS = Path(__file__).resolve().parents[2] / "sweeps"
SHIPPED = {
    "demo": 8,
    "gym_offline": 64,
    "atari_offline": 40,
    "atari_online": 40,
    "mujoco_online": 24,
    "minatar_offline": 25,
    "minatar_online": 24,
    "offline_baselines": 5,
    "offline_baselines_cpu": 5,
}


@pytest.mark.parametrize("name, runs", SHIPPED.items())
def test_shipped_specs_expand_to_commands_the_cli_accepts(name: str, runs: int) -> None:
    plans = expand(load_spec(SWEEPS / f"{name}.toml"))
    assert len(plans) == runs
    assert len({plan.name for plan in plans}) == runs
    parser = build_parser()
    for plan in plans:
        args = parser.parse_args([*plan.argv, "--out", "x"])
        assert args.func is not None
        for field, value in plan.fields.items():
            if field not in ("dataset", "env"):
                assert getattr(args, field) == value or str(getattr(args, field)) == str(value), (plan.name, field)


def test_gym_ablation_is_the_papers_grid_with_one_board_per_setting() -> None:
    plans = expand(load_spec(SWEEPS / "gym_offline.toml"))
    methods = {(p.fields["critic"], p.fields["K"], p.fields["beta"]) for p in plans}
    assert methods == {
        ("td", 1, 1.0),
        ("tdrc", 1, 1.0),
        ("itd", 5, 1.0),
        ("gitd", 5, 1.0),
        ("tdrc", 1, 0.01),
        ("gitd", 5, 0.01),
        ("itd", 50, 1.0),
        ("gitd", 50, 1.0),
    }
    assert {p.fields["seeds"] for p in plans} == {"0-9"}
    boards = {p.board for p in plans}
    assert boards == {f"board-data{f}-T{t}.csv" for f in ("0.1", "1") for t in (10, 1000)}
    for board in boards:  # a board never pools two settings
        assert len({(p.fields["T"], p.fields["fraction"]) for p in plans if p.board == board}) == 1


def test_reduced_gym_spec_is_the_ablations_grid_at_a_smaller_size() -> None:
    """tests/sweeps/specs/gym_offline_reduced.toml (the SLURM backend's whole-grid run) has the same runs
    and boards as the shipped ablation; only sizes (steps, seeds, epochs) differ."""
    full = expand(load_spec(SWEEPS / "gym_offline.toml"))
    reduced = expand(load_spec(Path(__file__).parent / "specs" / "gym_offline_reduced.toml"))
    assert [(p.name, p.board) for p in reduced] == [(p.name, p.board) for p in full]
    sizes = {"dataset", "seeds", "epochs", "steps_per_epoch", "eval_episodes", "horizon"}
    for small, paper in zip(reduced, full, strict=True):
        assert {k: v for k, v in small.fields.items() if k not in sizes} == {
            k: v for k, v in paper.fields.items() if k not in sizes
        }


def test_atari_specs_name_ten_games_and_four_critics() -> None:
    offline = expand(load_spec(SWEEPS / "atari_offline.toml"))
    online = expand(load_spec(SWEEPS / "atari_online.toml"))
    assert len({p.fields["dataset"] for p in offline}) == 10 == len({p.fields["env"] for p in online})
    assert {p.fields["critic"] for p in offline + online} == {"td", "tdrc", "itd", "gitd"}
    assert {p.fields["seeds"] for p in offline + online} == {"0-4"}


def test_the_minatar_online_grid_is_four_critics_on_five_games_plus_the_replay_ratio_pairs() -> None:
    """Five games x DQN, QRC, i-DQN, Gi-DQN (K = 5, beta = 1) at one update every 4 env steps, and
    DQN and Gi-DQN at one update per env step on two games (Breakout among them); 1M env steps,
    seeds 0-4 in one compiled run each, returns logged at least every 50,000 steps."""
    plans = expand(load_spec(SWEEPS / "minatar_online.toml"))
    cells = {(p.fields["env"], p.fields["critic"], p.fields["K"], float(p.fields["utd"])) for p in plans}
    games = {f"MinAtar/{g}-v1" for g in ("Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders")}
    methods = {("td", 1), ("tdrc", 1), ("itd", 5), ("gitd", 5)}
    assert {(env, critic, k) for env, critic, k, utd in cells if utd == 0.25} == {
        (env, critic, k) for env in games for critic, k in methods
    }
    pairs = {(env, critic, k) for env, critic, k, utd in cells if utd == 1.0}
    assert {critic for _, critic, _ in pairs} == {"td", "gitd"} and len(pairs) == 4
    assert "MinAtar/Breakout-v1" in {env for env, _, _ in pairs} and len({env for env, _, _ in pairs}) == 2
    for plan in plans:
        fields = plan.fields
        assert (fields["steps"], fields["seeds"], fields["loop"], fields["beta"]) == (1_000_000, "0-4", "compiled", 1.0)
        assert fields["log_every"] <= 50_000


def test_seeds_per_run_splits_the_vmapped_seeds(tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(
        'command = "online dqn"\n[resources]\nseeds_per_run = 2\n'
        '[fixed]\nenv = "CartPole-v1"\nseeds = "0-4"\n[grid]\ncritic = ["td", "gitd"]\n'
    )
    plans = expand(load_spec(spec))
    assert [p.name for p in plans] == [
        "td_seeds-0,1",
        "td_seeds-2,3",
        "td_seeds-4",
        "gitd_seeds-0,1",
        "gitd_seeds-2,3",
        "gitd_seeds-4",
    ]
    assert [p.fields["seeds"] for p in plans[:3]] == ["0,1", "2,3", "4"]


def test_seeds_per_run_on_the_command_line_overrides_the_spec(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--seeds-per-run N`` splits an unsplit spec's runs (and 0 joins a split spec's again); a
    negative count is a one-line usage error naming the flag, before anything runs."""
    spec = tmp_path / "s.toml"
    spec.write_text('command = "online dqn"\n[fixed]\nenv = "CartPole-v1"\nseeds = "0-4"\n[grid]\ncritic = ["td"]\n')
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "--out", str(out), "--seeds-per-run", "3", "--dry-run"]) == 0
    table = capsys.readouterr().out
    assert "seeds-0,1,2  new" in table and "--seeds 0,1,2" in table
    assert "seeds-3,4  " in table and "--seeds 3,4" in table and "2 runs" in table
    spec.write_text(spec.read_text().replace("[fixed]", "[resources]\nseeds_per_run = 2\n[fixed]"))
    assert main(["sweep", str(spec), "--out", str(out), "--seeds-per-run", "0", "--dry-run"]) == 0
    table = capsys.readouterr().out
    assert "--seeds 0-4" in table and "1 runs" in table and "seeds-0" not in table
    assert main(["sweep", str(spec), "--out", str(out), "--seeds-per-run", "-1", "--dry-run"]) == 2
    assert "--seeds-per-run must be >= 0" in capsys.readouterr().err
    assert not out.exists()


BASE = 'command = "online dqn"\n'
GRID = '[grid]\ncritic = ["td", "gitd"]\n'
FIXED = '[fixed]\nenv = "CartPole-v1"\n'


@pytest.mark.parametrize(
    "text, message",
    [
        ("command = 'train'\nnonsense = 1\n" + GRID, "unknown key 'nonsense'"),
        ("command = 'online ppo'\n" + GRID, "command must be one of"),
        (BASE + FIXED + "[grid]\n", "[grid] is empty"),
        (BASE + FIXED, "[grid] is missing"),
        (BASE + FIXED + "[grid]\ncritic = []\n", "[grid] critic: must be a non-empty list"),
        (
            BASE + FIXED + "[grid]\ncritc = ['td']\n",
            "[grid] critc #1: unknown field for 'online dqn'; did you mean 'critic'?",
        ),
        (BASE + FIXED + "lrr = 0.1\n" + GRID, "[fixed] lrr: unknown field for 'online dqn'; did you mean 'lr'?"),
        (BASE + FIXED + "[grid]\ncritic = ['td', 'qlearning']\n", "[grid] critic #2: 'qlearning' is not one of"),
        (BASE + FIXED + "lr = 'fast'\n" + GRID, "[fixed] lr: expected float, got 'fast'"),
        (BASE + FIXED + "steps = 1.5\n" + GRID, "[fixed] steps: expected int"),
        (BASE + FIXED + "utd = 'one'\n" + GRID, "[fixed] utd: expected a number or a fraction like 1/4"),
        (BASE + FIXED + "out = 'x'\n" + GRID, "[fixed] out: set by the sweep"),
        (BASE + FIXED + "critic = 'td'\n" + GRID, "[grid] critic: critic is also in [fixed]"),
        (BASE + FIXED + "[grid]\nm = [{ critic = 'td' }, { critic = 'td' }]\n", "two runs would both be named"),
        (BASE + FIXED + "[grid]\nm = [{ name = 'a' }]\n", "[grid] m #1: sets no field"),
        (BASE + FIXED + "[grid]\nm = [{ critic = 'td' }, 3]\n", "[grid] m: mix of tables and values"),
        (BASE + "[resources]\ncpus = -1\n" + FIXED + GRID, "[resources] cpus: must be a non-negative number"),
        (BASE + "[resources]\ngpu = 1\n" + FIXED + GRID, "[resources] gpu: unknown key; did you mean 'gpus'?"),
        (BASE + "[resources]\ngpus = 1.5\n" + FIXED + GRID, "[resources] gpus: a fraction must be below 1"),
        (BASE + "board = 'b-{lr}.csv'\n" + FIXED + GRID, "board 'b-{lr}.csv': {lr} is not set by [fixed] or [grid]"),
        (BASE + "board = 'board.txt'\n" + FIXED + GRID, "board must be a .csv file name"),
        (
            BASE + "[[collect]]\nenv = 'CartPole-v1'\nsteps = 10\nout = 'a/b-v0'\n" + FIXED + GRID,
            "records datasets for train",
        ),
        (
            "command = 'train'\n[[collect]]\nenv = 'CartPole-v1'\nout = 'a/b-v0'\n" + GRID,
            "[[collect]] #1: steps is required",
        ),
        (BASE + FIXED + "[grid]\nT = [10, 0]\n", "[grid] T"),
        (BASE + FIXED + "critic = = 1\n", "not valid TOML"),
        (BASE + "allow_mixed = 'yes'\n" + FIXED + GRID, "allow_mixed must be true or false, got 'yes'"),
    ],
)
def test_bad_specs_are_one_line_errors_naming_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        expand(load_spec(path))
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_cli_refuses_a_bad_spec_in_one_line_and_dry_run_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(BASE + FIXED + "[grid]\ncritic = ['tdd']\n")
    out = tmp_path / "sweep"
    assert main(["sweep", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "[grid] critic #1: 'tdd' is not one of" in err[0]
    assert main(["sweep", str(tmp_path / "missing.toml"), "--out", str(out)]) == 2
    assert "no such sweep spec" in capsys.readouterr().err

    assert main(["sweep", str(SWEEPS / "demo.toml"), "--out", str(out), "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "8 runs; nothing was run" in printed and "mountaincar_td " in printed
    assert "offline_gitd collect MountainCar-v0 --steps 3000" in printed
    assert not out.exists()


def test_a_run_is_complete_only_under_the_same_command(tmp_path: Path) -> None:
    plan = expand(load_spec(SWEEPS / "demo.toml"))[0]
    paths = SweepPaths(tmp_path)
    assert not is_complete(paths, plan)
    write_state(paths.state(plan.name), {"status": "done", "argv": list(plan.argv)})
    assert is_complete(paths, plan)
    write_state(paths.state(plan.name), {"status": "done", "argv": [*plan.argv[:-1], "1-3"]})
    assert not is_complete(paths, plan)  # the spec changed the run: due again
    write_state(paths.state(plan.name), {"status": "running", "argv": list(plan.argv)})
    assert not is_complete(paths, plan)


def test_sweep_submission_is_idempotent(tmp_path: Path) -> None:
    """The sweep submits with skip_existing: a run submitted twice (a crash between submitting
    and recording it) puts its rows on the board once; a grown run adds only its new rows."""
    from offline_gitd.leaderboard.submit import submit

    board = tmp_path / "board.csv"
    run = write_run(tmp_path / "a", env="Pong", algorithm="cql", critic="td", seed=0, steps=[0, 10], returns=[1.0, 2.0])
    assert submit([run], board, allow_new_env=True, skip_existing=True).added[run] == 2
    content = board.read_bytes()
    assert submit([run], board, allow_new_env=True, skip_existing=True).added[run] == 0
    assert board.read_bytes() == content
    changed = write_run(tmp_path / "a", env="Pong", algorithm="cql", critic="td", seed=0, steps=[10], returns=[9.0])
    with pytest.raises(Exception, match="run_id, seed and step"):
        submit([changed], board, allow_new_env=True)  # without it, a row that differs is still refused
    assert submit([changed], board, allow_new_env=True, skip_existing=True).added[changed] == 0
    assert board.read_bytes() == content
    grown = write_run(
        tmp_path / "a", env="Pong", algorithm="cql", critic="td", seed=0, steps=[0, 10, 20], returns=[1.0, 2.0, 3.0]
    )
    assert submit([grown], board, allow_new_env=True, skip_existing=True).added[grown] == 1
    with board.open() as handle:
        assert [row["step"] for row in csv.DictReader(handle)] == ["0", "10", "20"]


def test_allow_mixed_reaches_the_sweeps_submits(tmp_path: Path) -> None:
    path = tmp_path / "mixed.toml"
    path.write_text(BASE + "allow_mixed = true\n" + FIXED + GRID)
    assert load_spec(path).allow_mixed and not load_spec(SWEEPS / "demo.toml").allow_mixed


def test_a_spec_takes_the_flags_own_notation(tmp_path: Path) -> None:
    """``utd = "1/4"`` in a spec is ``--utd 1/4`` on the command line (the flag's own parser)."""
    spec = tmp_path / "s.toml"
    spec.write_text(BASE + FIXED + 'utd = "1/4"\n' + GRID)
    plans = expand(load_spec(spec))
    assert {p.fields["utd"] for p in plans} == {0.25}
    assert "--utd" in plans[0].argv and plans[0].argv[plans[0].argv.index("--utd") + 1] == "0.25"


def test_only_keeps_one_grid_entry_and_the_whole_grids_run_names() -> None:
    from offline_gitd.sweeps.core import needed_collect
    from offline_gitd.sweeps.spec import with_only

    spec = load_spec(SWEEPS / "minatar_offline.toml")
    whole = {plan.name: plan for plan in expand(spec)}
    part = expand(with_only(spec, ["game=breakout"]))
    assert [plan.name for plan in part] == [name for name in whole if name.startswith("breakout_")]
    assert all(plan == whole[plan.name] for plan in part)  # the same runs, named and configured alike
    assert [step.env for step in needed_collect(spec, part)] == ["MinAtar/Breakout-v1"]
    two = expand(with_only(spec, ["game=freeway", "method=bc"]))
    assert [plan.name for plan in two] == ["freeway_bc"]
    # a grid of plain values is selected by the value
    gym = load_spec(SWEEPS / "gym_offline.toml")
    axis, values = next((axis, values) for axis, values in gym.grid.items() if not isinstance(values[0], dict))
    chosen = expand(with_only(gym, [f"{axis}={values[0]}"]))
    assert 0 < len(chosen) < len(expand(gym))


@pytest.mark.parametrize(
    "selection, message",
    [
        ("game=breakot", r"axis game has no entry 'breakot'; did you mean 'breakout'\?"),
        ("gam=breakout", r"no axis 'gam'; did you mean 'game'\?"),
        ("breakout", r"expected AXIS=VALUE"),
    ],
)
def test_only_refuses_what_the_grid_does_not_hold(selection: str, message: str) -> None:
    from offline_gitd.sweeps.spec import with_only

    with pytest.raises(ConfigError, match=message):
        with_only(load_spec(SWEEPS / "minatar_offline.toml"), [selection])
