"""The paper's Section 5 controlled MDPs: claims at the paper's settings, formulas recomputed by
hand in numpy, and the ``mdp`` command.

The claim tests run each process at its default horizon with the paper's lr, K, gamma and initial
weights; nothing is tuned here. The formula tests do not use the update code's structure: they
write the expected updates and the triangle's geometry out in numpy.
"""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from offline_gitd.cli import main
from offline_gitd.mdps import processes
from offline_gitd.mdps.expected_updates import CRITICS, History, loss_fn, run


def run_defaults(mdp: processes.ControlledMDP) -> dict[str, History]:
    return {critic: run(mdp, critic, steps=mdp.default_steps, lr=mdp.lr, K=mdp.K, log_every=10) for critic in CRITICS}


@pytest.fixture(scope="module")
def star_runs() -> dict[str, History]:
    return run_defaults(processes.star())


@pytest.fixture(scope="module")
def hall_runs() -> dict[str, History]:
    return run_defaults(processes.hall())


@pytest.fixture(scope="module", params=[-1.0, 1.0], ids=["eps-1", "eps+1"])
def triangle_runs(request: pytest.FixtureRequest) -> tuple[float, dict[str, History]]:
    return request.param, run_defaults(processes.triangle(request.param))


# --- paper claims -------------------------------------------------------------------------------


def test_star_td_and_itd_diverge(star_runs: dict[str, History]) -> None:
    for critic in ("td", "itd"):
        ve = star_runs[critic].value_error
        assert np.isfinite(ve[-1]) and ve[-1] > 10 * ve[0], critic


def test_star_tdrc_and_gitd_converge(star_runs: dict[str, History]) -> None:
    for critic in ("tdrc", "gitd"):
        ve = star_runs[critic].value_error
        assert ve[-1] < ve[0], critic


def test_star_sum_of_bellman_errors_falls_for_gitd_rises_for_itd(star_runs) -> None:
    gitd, itd = star_runs["gitd"].sum_bellman_errors, star_runs["itd"].sum_bellman_errors
    assert gitd[-1] < gitd[0]
    assert itd[-1] > itd[0]


def test_hall_gitd_faster_than_tdrc_semi_gradient_fastest(hall_runs) -> None:
    final = {critic: h.value_error[-1] for critic, h in hall_runs.items()}
    assert final["gitd"] < final["tdrc"]
    assert max(final["td"], final["itd"]) < final["gitd"]


def test_triangle_claims(triangle_runs) -> None:
    eps, runs = triangle_runs
    final = {critic: h.value_error[-1] for critic, h in runs.items()}
    if eps == -1.0:
        itd_be, gitd_be = runs["itd"].sum_bellman_errors, runs["gitd"].sum_bellman_errors
        assert itd_be[-1] > itd_be[0]
        assert gitd_be[-1] < gitd_be[0]
        assert runs["itd"].value_error[-1] > runs["itd"].value_error[0]
        assert runs["gitd"].value_error[-1] < runs["gitd"].value_error[0]
        assert final["gitd"] < final["itd"]
        assert not np.isfinite(final["td"])  # semi-gradient TD spirals out until float64 overflows
    else:
        initial = runs["td"].value_error[0]
        assert all(value < initial for value in final.values())
        assert max(final["td"], final["itd"]) < final["gitd"] < final["tdrc"]


# --- formulas, recomputed by hand ---------------------------------------------------------------


def star_matrices() -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Phi, P, D and gamma of Baird's star, written out from Sutton & Barto's Figure 11.1."""
    phi = np.array(
        [
            [2, 0, 0, 0, 0, 0, 0, 1],
            [0, 2, 0, 0, 0, 0, 0, 1],
            [0, 0, 2, 0, 0, 0, 0, 1],
            [0, 0, 0, 2, 0, 0, 0, 1],
            [0, 0, 0, 0, 2, 0, 0, 1],
            [0, 0, 0, 0, 0, 2, 0, 1],
            [0, 0, 0, 0, 0, 0, 1, 2],
        ],
        dtype=float,
    )
    p = np.zeros((7, 7))
    p[:, 6] = 1.0
    return phi, p, np.eye(7) / 7, 0.99


def test_star_layout_matches_sutton_barto() -> None:
    mdp = processes.star()
    phi, p, d, gamma = star_matrices()
    np.testing.assert_array_equal(mdp.features, phi)
    np.testing.assert_array_equal(mdp.transition, p)
    np.testing.assert_allclose(np.diag(d), mdp.state_weights)
    assert mdp.gamma == gamma
    np.testing.assert_array_equal(mdp.init_weights, [0, 0, 0, 0, 0, 1, 0, 0])


def test_star_one_td_step_matches_numpy() -> None:
    mdp = processes.star()
    phi, p, d, gamma = star_matrices()
    w = mdp.init_weights
    expected = w + mdp.lr * phi.T @ d @ (gamma * p @ phi @ w - phi @ w)
    history = run(mdp, "td", steps=1, lr=mdp.lr, K=mdp.K, log_every=1)
    np.testing.assert_allclose(history.final_params, expected, rtol=1e-12)
    np.testing.assert_allclose(history.value_error[0], np.sqrt(4 / 7), rtol=1e-12)


def test_star_tdrc_gradient_is_residual_gradient() -> None:
    mdp = processes.star()
    phi, p, d, gamma = star_matrices()
    w = np.random.default_rng(0).normal(size=8)
    a = gamma * p @ phi - phi
    with jax.enable_x64(True):
        grad = np.asarray(jax.grad(loss_fn("tdrc", mdp))(w, w))
    np.testing.assert_allclose(grad, a.T @ d @ a @ w, rtol=1e-10)


def test_gitd_and_itd_gradients_for_k2_match_hand_derivation() -> None:
    mdp = processes.star()
    phi, p, d, gamma = star_matrices()
    rng = np.random.default_rng(1)
    w0, w1, w2 = rng.normal(size=(3, 8))
    # L = 1/2 ||g P Phi w0 - Phi w1||_D^2 + 1/2 ||g P Phi w1 - Phi w2||_D^2
    r1 = gamma * p @ phi @ w0 - phi @ w1
    r2 = gamma * p @ phi @ w1 - phi @ w2
    semi_w1, semi_w2 = -phi.T @ d @ r1, -phi.T @ d @ r2
    through_w1 = semi_w1 + (gamma * p @ phi).T @ d @ r2  # w1 also moves the target of V_2
    with jax.enable_x64(True):
        gitd = np.asarray(jax.grad(loss_fn("gitd", mdp))(np.stack([w1, w2]), w0))
        itd = np.asarray(jax.grad(loss_fn("itd", mdp))(np.stack([w1, w2]), w0))
    np.testing.assert_allclose(gitd, np.stack([through_w1, semi_w2]), rtol=1e-10)
    np.testing.assert_allclose(itd, np.stack([semi_w1, semi_w2]), rtol=1e-10)


def test_gitd_one_step_on_hall_matches_numpy() -> None:
    """All w_k start at w0, so only the last function's (frozen V_0) target differs from step 0."""
    mdp = processes.hall()
    n, gamma, lr, K = mdp.n_states, mdp.gamma, mdp.lr, 2
    shift = np.eye(n, k=1)  # state i -> i + 1, the last one -> terminal (value 0)
    d = np.eye(n) / n
    w = np.ones(n)
    r = gamma * shift @ w - w  # every residual T V_{k-1} - V_k at step 0
    expected = np.stack([w + lr * (d @ r - gamma * shift.T @ d @ r), w + lr * d @ r])
    history = run(mdp, "gitd", steps=1, lr=lr, K=K, log_every=1)
    np.testing.assert_allclose(history.final_params, expected, rtol=1e-12)


def rotate_about_ones(v: np.ndarray, degrees: float) -> np.ndarray:
    """Rodrigues' rotation of v (orthogonal to (1, 1, 1)) about (1, 1, 1), right-hand rule."""
    n = np.ones(3) / np.sqrt(3)
    t = np.deg2rad(degrees)
    return np.cos(t) * v + np.sin(t) * np.cross(n, v)


def test_triangle_bellman_halves_and_rotates_minus_60_degrees() -> None:
    mdp = processes.triangle(-1.0)
    rng = np.random.default_rng(2)
    for _ in range(5):
        v = rng.normal(size=3)
        v -= v.mean()  # the plane orthogonal to (1, 1, 1)
        p_v = mdp.transition @ v
        np.testing.assert_allclose(p_v, 0.5 * rotate_about_ones(v, -60.0), atol=1e-12)
        with jax.enable_x64(True):
            t_v = np.asarray(mdp.bellman(v))
        np.testing.assert_allclose(t_v, mdp.gamma * p_v, atol=1e-12)
    np.testing.assert_allclose(mdp.transition @ np.ones(3), np.ones(3))  # stochastic rows
    np.testing.assert_allclose(np.ones(3) @ mdp.transition, np.ones(3))  # uniform is stationary


@pytest.mark.parametrize("eps", [-1.0, 1.0])
def test_triangle_value_is_a_spiral_turning_with_eps(eps: float) -> None:
    mdp = processes.triangle(eps)
    n = np.ones(3) / np.sqrt(3)
    with jax.enable_x64(True):
        for w in (-3.0, 0.5, 14.0):
            v = np.asarray(mdp.value(np.array([w])))
            dv = np.asarray(jax.jacobian(mdp.value)(np.array([w])))[:, 0]
            assert abs(v.sum()) < 1e-9
            np.testing.assert_allclose(np.linalg.norm(v), np.sqrt(2) * np.exp(0.15 * w), rtol=1e-12)
            # angular velocity about (1, 1, 1): eps * 0.866 radians per unit of w
            turn = n @ np.cross(v, dv) / (v @ v)
            np.testing.assert_allclose(turn, eps * 0.866, rtol=1e-12)


@pytest.mark.parametrize("eps, direction", [(-1.0, 1.0), (1.0, -1.0)])
def test_triangle_td_pushes_w_up_the_spiral_only_for_eps_minus_1(eps, direction) -> None:
    """Tsitsiklis & Van Roy's mechanism: with eps = -1 the expected TD step increases w (so the
    spiral and the value error grow), with eps = +1 it decreases w."""
    mdp = processes.triangle(eps)
    w = np.array([14.0])
    with jax.enable_x64(True):
        step = -np.asarray(jax.grad(loss_fn("td", mdp))(w, w))[0]
    assert np.sign(step) == direction


def test_itd_last_function_equals_td_for_the_first_k_steps() -> None:
    mdp = processes.triangle(1.0)
    td = run(mdp, "td", steps=5, lr=mdp.lr, K=mdp.K, log_every=1)
    itd = run(mdp, "itd", steps=5, lr=mdp.lr, K=mdp.K, log_every=1)
    np.testing.assert_allclose(itd.final_params[-1], td.final_params, rtol=1e-12)
    assert not np.allclose(itd.final_params[0], td.final_params)  # V_1 chases the frozen T V_0


# --- command line -------------------------------------------------------------------------------


def test_mdp_command_writes_json_and_png(tmp_path, capsys) -> None:
    json_path, png_path = tmp_path / "s.json", tmp_path / "s.png"
    rc = main(["mdp", "star", "--steps", "50", "--json", str(json_path), "--plot", str(png_path)])
    assert rc == 0
    record = json.loads(json_path.read_text())
    assert record["mdp"] == "star"
    assert record["settings"]["lr"] == 0.08 and record["settings"]["K"] == 300
    assert record["steps"][0] == 0 and record["steps"][-1] == 50
    assert set(record["critics"]) == set(CRITICS)
    for metrics in record["critics"].values():
        assert set(metrics) == {"value_error", "sum_bellman_errors"}
        for values in metrics.values():
            assert len(values) == len(record["steps"])
            assert all(v is None or isinstance(v, float) for v in values)
    assert png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = capsys.readouterr().out
    assert str(json_path) in out and str(png_path) in out


def test_mdp_command_writes_null_for_overflow(tmp_path) -> None:
    path = tmp_path / "t.json"
    assert main(["mdp", "triangle", "--steps", "300", "--critics", "td", "--json", str(path)]) == 0
    values = json.loads(path.read_text())["critics"]["td"]["value_error"]
    assert values[0] is not None and values[-1] is None


@pytest.mark.parametrize(
    "argv",
    [
        ["mdp", "star", "--critics", "td,qlearning"],
        ["mdp", "star", "--critics", "td,td"],
        ["mdp", "triangle", "--eps", "0.5"],
        ["mdp", "star", "--eps", "1"],
        ["mdp", "hall", "--steps", "0"],
        ["mdp", "hall", "--lr", "-1"],
    ],
)
def test_mdp_command_bad_input_exits_2(argv, capsys) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("offline_gitd: error: ") and err.count("\n") == 1
