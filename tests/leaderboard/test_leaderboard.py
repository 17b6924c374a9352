"""Leaderboard schema, reference scores, normalisations and statistics, on hand-computed cases."""

from __future__ import annotations

from pathlib import Path

import pytest

from offline_gitd.errors import UsageError  # noqa: E402
from offline_gitd.leaderboard.normalise import (  # noqa: E402
    normalise,
    resolve_baseline,
    to_frame,
)
from offline_gitd.leaderboard.reference import (  # noqa: E402
    MINARI_TO_D4RL,
    atari_scores,
    check_env,
    d4rl_scores,
    known_envs,
)
from offline_gitd.leaderboard.schema import (  # noqa: E402
    COLUMNS,
    ResultRow,
    SchemaError,
    read_rows,
)
from offline_gitd.leaderboard.stats import summarise  # noqa: E402
from tests.support.runs import result_record  # noqa: E402

RLU_GAMES = (
    "Alien Amidar Assault Asterix Atlantis BankHeist BattleZone BeamRider Boxing Breakout Carnival "
    "Centipede ChopperCommand CrazyClimber DemonAttack DoubleDunk Enduro FishingDerby Freeway "
    "Frostbite Gopher Gravitar Hero IceHockey Jamesbond Kangaroo Krull KungFuMaster MsPacman "
    "NameThisGame Phoenix Pong Pooyan Qbert Riverraid RoadRunner Robotank Seaquest SpaceInvaders "
    "StarGunner TimePilot UpNDown VideoPinball WizardOfWor YarsRevenge Zaxxon"
).split()


def row(**overrides: object) -> ResultRow:
    """A valid Pong row of cql:td with some fields changed (``value`` is the return)."""
    fields: dict[str, object] = dict(env="Pong", algorithm="cql", critic="td", seed=0, step=0, value=1.0)
    fields.update(overrides)
    return ResultRow.from_mapping(result_record(**fields))


# --- schema -------------------------------------------------------------------------------------


def test_row_parses_and_round_trips_exactly() -> None:
    parsed = row(value=0.1, beta=1e-2)
    assert (parsed.return_, parsed.beta, parsed.K) == (0.1, 0.01, 1)
    assert ResultRow.from_mapping(dict(zip(COLUMNS, parsed.to_record()))) == parsed


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("seed", "-1", "field 'seed': must be >= 0"),
        ("step", "ten", "field 'step': expected an integer"),
        ("value", "nan", "field 'return': must be finite"),
        ("value", "inf", "field 'return': must be finite"),
        ("beta", "", "field 'beta': expected a number"),
        ("K", "0", "field 'K': must be >= 1"),
        ("env", "", "field 'env': must not be empty"),
        ("created_at", "2026-01-01T00:00:00", "field 'created_at': needs a UTC offset"),
        ("created_at", "yesterday", "field 'created_at': expected an ISO 8601 time"),
    ],
)
def test_bad_value_is_refused_naming_its_field(field: str, value: str, message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        row(**{field: value})


def test_unknown_and_missing_fields_are_named() -> None:
    fields = result_record(env="Pong", algorithm="cql", critic="td", seed=0, step=0, value=1.0)
    with pytest.raises(SchemaError, match="unknown field\\(s\\): score"):
        ResultRow.from_mapping({**fields, "score": 1})
    del fields["config_hash"]
    with pytest.raises(SchemaError, match="missing field\\(s\\): config_hash"):
        ResultRow.from_mapping(fields)


def test_read_rows_reports_file_and_line(tmp_path: Path) -> None:
    good = ",".join(row().to_record())
    bad = good.replace(",0,0,1.0,", ",-3,0,1.0,")
    assert bad != good
    path = tmp_path / "results.csv"
    header = ",".join(COLUMNS)
    path.write_text(f"{header}\n{good}\n{bad}\n")
    with pytest.raises(SchemaError, match=f"{path}:3: field 'seed'"):
        read_rows(path)
    path.write_text(f"{header}\n{good}\n{good},extra\n")
    with pytest.raises(SchemaError, match=f"{path}:3: expected 19 cells, got 20"):
        read_rows(path)
    path.write_text(header.replace("return", "score") + "\n")
    with pytest.raises(SchemaError, match=f"{path}:1: header must be"):
        read_rows(path)


# --- reference data and registry -----------------------------------------------------------------


def test_atari_table_transcribes_dqn_zoo() -> None:
    table = atari_scores()
    assert len(table) == 59
    assert sum(None not in scores for scores in table.values()) == 57
    assert table["Pong"] == (-20.7, 14.6)
    assert table["MontezumaRevenge"] == (0.0, 4753.3)
    assert table["VideoPinball"] == (16256.9, 17667.9)
    assert table["Carnival"] == (None, None) and table["Pooyan"] == (None, None)
    assert set(RLU_GAMES) <= set(table)


def test_d4rl_table_transcribes_infos_py() -> None:
    table = d4rl_scores()
    assert table["hopper-medium-v2"] == (-20.272305, 3234.3)
    assert table["halfcheetah-medium-expert-v2"] == (-280.178953, 12135.0)
    assert table["door-human-v1"] == (-56.512833, 2880.5693087298737)
    assert table["antmaze-large-diverse-v2"] == (0.0, 1.0)
    assert set(MINARI_TO_D4RL.values()) <= set(table)


def test_registry_refuses_unknown_envs_unless_allowed() -> None:
    assert {"atari", "gym", "minatar", "mujoco", "minari", "d4rl"} == set(known_envs())
    check_env("gym", "LunarLander-v3", allow_new_env=False)
    check_env("minatar", "Breakout-v1", allow_new_env=False)
    check_env("mujoco", "HalfCheetah-v5", allow_new_env=False)
    check_env("minari", "mujoco/hopper/medium-v0", allow_new_env=False)
    with pytest.raises(UsageError, match="unknown atari env 'pong'.*--allow-new-env"):
        check_env("atari", "pong", allow_new_env=False)
    check_env("atari", "pong", allow_new_env=True)
    with pytest.raises(UsageError, match="unknown suite 'procgen'"):
        check_env("procgen", "coinrun", allow_new_env=True)


# --- normalisations --------------------------------------------------------------------------------


def test_human_and_d4rl_normalisations() -> None:
    frame = to_frame([row(value=-20.7), row(value=14.6, step=1), row(value=-3.05, step=2)])
    assert normalise(frame, "human", "cql:td")["score"].tolist() == pytest.approx([0.0, 1.0, 0.5])
    d4rl = to_frame(
        [
            row(suite="minari", env="mujoco/hopper/medium-v0", value=value, step=step)
            for step, value in enumerate([-20.272305, 3234.3, 1607.0139975])
        ]
    )
    assert normalise(d4rl, "d4rl", "cql:td")["score"].tolist() == pytest.approx([0, 100, 50])
    with pytest.raises(UsageError, match="no d4rl reference score for env\\(s\\): Pong"):
        normalise(frame, "d4rl", "cql:td")
    carnival = to_frame([row(env="Carnival")])
    with pytest.raises(UsageError, match="no human reference score for env\\(s\\): Carnival"):
        normalise(carnival, "human", "cql:td")


def test_baseline_normalisation_divides_by_baseline_mean_final_score() -> None:
    rows = [
        row(seed=0, step=0, value=1.0),
        row(seed=0, step=5, value=3.0),  # final 3
        row(seed=1, step=0, value=2.0),
        row(seed=1, step=5, value=5.0),  # final 5 -> mean 4
        row(critic="gitd", K=5, beta=1.0, seed=0, step=5, value=6.0),
    ]
    scored = normalise(to_frame(rows), "baseline", "cql:td")
    assert scored["score"].tolist() == pytest.approx([0.25, 0.75, 0.5, 1.25, 1.5])
    only_other_env = to_frame([*rows, row(critic="gitd", K=5, beta=1.0, env="Breakout")])
    with pytest.raises(UsageError, match="cql:td has no runs in env\\(s\\): Breakout"):
        normalise(only_other_env, "baseline", "cql:td")


def test_baseline_normalisation_keeps_order_when_the_baseline_is_negative() -> None:
    """MountainCar-like returns: baseline mean final -200; a better method (-150) must score above
    the baseline's 1 and a worse one (-300) below it, on the same relative scale."""
    rows = [
        row(env="MountainCar-v0", suite="gym", seed=0, step=5, value=-200.0),
        row(env="MountainCar-v0", suite="gym", critic="gitd", K=5, beta=1.0, seed=0, step=5, value=-150.0),
        row(env="MountainCar-v0", suite="gym", critic="itd", K=5, beta=1.0, seed=0, step=5, value=-300.0),
    ]
    scored = normalise(to_frame(rows), "baseline", "cql:td")
    assert scored["score"].tolist() == pytest.approx([1.0, 1.25, 0.5])


def test_method_key_shows_K_and_beta_only_when_they_vary() -> None:
    frame = to_frame(
        [
            row(critic="gitd", K=5, beta=1.0, seed=0),
            row(critic="gitd", K=50, beta=1.0, seed=1),
            row(critic="itd", K=5, seed=2),
        ]
    )
    assert frame["method"].tolist() == ["cql:gitd:K=5,beta=1", "cql:gitd:K=50,beta=1", "cql:itd"]
    assert resolve_baseline(frame, "cql:itd") == "cql:itd"
    with pytest.raises(UsageError, match="ambiguous"):
        resolve_baseline(frame, "cql:gitd")
    with pytest.raises(UsageError, match="not on the board"):
        resolve_baseline(frame, "cql:td")


# --- statistics ----------------------------------------------------------------------------------


def hand_computed_board() -> list[ResultRow]:
    """Two envs; in each the baseline's 4 runs end at 2 (Pong) / 20 (Breakout), mean = final.

    Baseline run: returns [0, 1, 2] x scale -> normalised [0, .5, 1], AUC 1.5.
    Method gitd, 8 runs per env: [0, 2, f] x scale with f in (2, 4, ..., 14, 100) -> normalised
    finals (1, 2, ..., 7, 50), AUCs (2, 3, ..., 8, 51).
    """
    rows = []
    for env, scale in (("Pong", 1.0), ("Breakout", 10.0)):
        for seed in range(4):
            rows += [
                row(env=env, seed=seed, step=step, value=value * scale)
                for step, value in zip((0, 10, 20), (0.0, 1.0, 2.0))
            ]
        for seed, final in enumerate((2, 4, 6, 8, 10, 12, 14, 100)):
            rows += [
                row(env=env, critic="gitd", K=5, beta=1.0, seed=seed, step=step, value=value * scale)
                for step, value in zip((0, 10, 20), (0.0, 2.0, float(final)))
            ]
    return rows


def test_iqm_auc_and_probability_of_improvement_match_hand_computation() -> None:
    scored = normalise(to_frame(hand_computed_board()), "baseline", "cql:td")
    summary = {item.method: item for item in summarise(scored, "cql:td", reps=300, seed=0)}
    gitd, td = summary["cql:gitd"], summary["cql:td"]
    # 16 finals (1,1,2,2,...,7,7,50,50): IQM drops 4 per tail, mean(3,3,4,4,5,5,6,6) = 4.5.
    assert gitd.iqm.value == pytest.approx(4.5)
    # AUCs (2,2,...,8,8,51,51): IQM 5.5; baseline IQM AUC 1.5.
    assert gitd.auc.value == pytest.approx(5.5 / 1.5)
    # Per env: 7 of 8 runs beat all 4 baseline runs, the run ending at 1 ties them (0.5).
    assert gitd.improvement.value == pytest.approx((7 * 4 + 0.5 * 4) / 32)
    assert (td.iqm.value, td.auc.value, td.improvement.value) == pytest.approx((1.0, 1.0, 0.5))
    assert (gitd.n_envs, gitd.n_seeds, gitd.n_runs) == (2, 8, 16)
    assert (td.n_envs, td.n_seeds, td.n_runs) == (2, 4, 8)
    for item in summary.values():
        for interval in (item.iqm, item.auc, item.improvement):
            assert interval.low <= interval.value <= interval.high
    assert gitd.iqm.low < gitd.iqm.high  # the bootstrap does resample


def test_bootstrap_is_reproducible_with_its_seed() -> None:
    scored = normalise(to_frame(hand_computed_board()), "baseline", "cql:td")
    first = summarise(scored, "cql:td", reps=100, seed=1)
    assert summarise(scored, "cql:td", reps=100, seed=1) == first
    assert summarise(scored, "cql:td", reps=100, seed=2) != first


def test_unequal_runs_per_env_are_refused() -> None:
    rows = [r for r in hand_computed_board() if not (r.critic == "gitd" and r.env == "Pong" and r.seed == 7)]
    scored = normalise(to_frame(rows), "baseline", "cql:td")
    with pytest.raises(UsageError, match="unequal numbers of runs per env"):
        summarise(scored, "cql:td", reps=10, seed=0)


def test_auc_relative_to_a_negative_baseline_auc_keeps_order_and_intervals() -> None:
    """LunarLander-like curves: every method starts far below the baseline's final score, so the
    baseline's IQM AUC is negative. The better method must still rank above the baseline, the
    worse one below, and every interval must run from low to high."""
    rows = []
    for seed in range(4):
        for critic, K, final in (("td", 1, -20.0), ("gitd", 5, 0.0), ("itd", 5, -60.0)):
            for step, value in ((0, -300.0 + seed), (5, final + seed)):
                rows.append(
                    row(
                        env="LunarLander-v3",
                        suite="gym",
                        critic=critic,
                        K=K,
                        beta=1.0,
                        seed=seed,
                        step=step,
                        value=value,
                    )
                )
    scored = normalise(to_frame(rows), "baseline", "cql:td")
    summary = {item.method: item for item in summarise(scored, "cql:td", reps=200, seed=0)}
    base_sum = scored[scored["method"] == "cql:td"].groupby("run")["score"].sum()
    assert base_sum.max() < 0  # the case this test is about
    td, gitd, itd = summary["cql:td"].auc, summary["cql:gitd"].auc, summary["cql:itd"].auc
    assert td.value == pytest.approx(1.0)
    assert itd.value < td.value < gitd.value
    for interval in (td, gitd, itd):
        assert interval.low <= interval.high
