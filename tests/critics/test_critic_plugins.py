"""Critics as plug-ins: the registry's records, and a third-party critic installed by pip.

The plug-in is a real distribution built here (its own PEP 517 backend, so nothing is fetched) and
installed with ``pip install --no-deps --target`` into a throwaway directory that only the runs of
this test put on their path: the shared environment is never changed. Its critic, iterated TD
with the Huber loss of Nature DQN's clipped error, then trains through the command line.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from offline_gitd.commands import build_parser
from offline_gitd.critic_registry import (
    CriticSpec,
    critic_names,
    critic_spec,
    register_critic,
    unregister_critic,
)
from offline_gitd.critics import CriticConfig, CriticInputs
from offline_gitd.errors import ConfigError, UsageError
from offline_gitd.offline.config import OfflineConfig
from tests.support.argv import online_cartpole

REPO = Path(__file__).resolve().parents[2]

BACKEND = '''
"""A PEP 517 backend that zips the package as it stands: a wheel without setuptools or wheel."""
import base64, hashlib, pathlib, zipfile

NAME, VERSION = "gitd_huber_critic", "0.1.0"
DIST = f"{NAME}-{VERSION}.dist-info"
FILES = {
    f"{DIST}/METADATA": f"Metadata-Version: 2.1\\nName: {NAME}\\nVersion: {VERSION}\\n",
    f"{DIST}/WHEEL": "Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
    f"{DIST}/entry_points.txt": pathlib.Path("entry_points.txt").read_text(),
}


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = {str(p): p.read_text() for p in pathlib.Path(NAME).glob("*.py")} | FILES
    record = []
    name = f"{NAME}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(pathlib.Path(wheel_directory) / name, "w") as wheel:
        for path, text in files.items():
            digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
            record.append(f"{path},sha256={digest},{len(text.encode())}")
            wheel.writestr(path, text)
        wheel.writestr(f"{DIST}/RECORD", "\\n".join([*record, f"{DIST}/RECORD,,"]) + "\\n")
    return name
'''

SPEC = """
from offline_gitd.critic_registry import CriticSpec

HUBER = CriticSpec(
    "huber",
    "gitd_huber_critic.loss:huber_loss",
    "iterated TD with the Huber loss (Nature DQN's clipped error)",
    targets="iterated",
    default_K=3,
    max_K=None,
)
"""

LOSS = '''
import jax
import jax.numpy as jnp


def huber_loss(x):
    """i-TD's targets, Huber(1) instead of half the squared error."""
    previous = x.v_next_frozen[None]
    if x.v_next_stale is not None:
        previous = jnp.concatenate([previous, x.v_next_stale[:-1]], axis=0)
    delta = jax.lax.stop_gradient(x.reward + x.discount * previous) - x.q_sa
    small = jnp.abs(delta) <= 1.0
    per_head = jnp.where(small, 0.5 * jnp.square(delta), jnp.abs(delta) - 0.5)
    return per_head.reshape(-1, delta.shape[-1]).sum(axis=0), delta
'''


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory) -> Path:
    """The plug-in built and pip-installed into a throwaway directory (removed with tmp_path)."""
    source = tmp_path_factory.mktemp("plugin_source")
    (source / "gitd_huber_critic").mkdir()
    (source / "gitd_huber_critic" / "__init__.py").write_text("")
    (source / "gitd_huber_critic" / "spec.py").write_text(SPEC)
    (source / "gitd_huber_critic" / "loss.py").write_text(LOSS)
    (source / "backend.py").write_text(BACKEND)
    (source / "entry_points.txt").write_text("[offline_gitd.critics]\nhuber = gitd_huber_critic.spec:HUBER\n")
    (source / "pyproject.toml").write_text(
        textwrap.dedent(
            """
            [build-system]
            requires = []
            build-backend = "backend"
            backend-path = ["."]

            [project]
            name = "gitd_huber_critic"
            version = "0.1.0"

            [project.entry-points."offline_gitd.critics"]
            huber = "gitd_huber_critic.spec:HUBER"
            """
        )
    )
    site = tmp_path_factory.mktemp("plugin_site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index"]
        + ["--target", str(site), str(source)],
        check=True,
        capture_output=True,
    )
    assert (site / "gitd_huber_critic-0.1.0.dist-info" / "entry_points.txt").exists()
    return site


def _env(site: Path | None) -> dict[str, str]:
    paths = [str(REPO), *([str(site)] if site else [])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "JAX_PLATFORMS": "cpu"}


def _python(code: str, site: Path | None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env=_env(site), capture_output=True, text=True)


def test_installed_critic_is_listed_and_its_loss_is_the_plugins(plugin_site: Path) -> None:
    probe = """
import json, sys
import numpy as np, jax.numpy as jnp
from offline_gitd.critic_registry import critic_names, critic_spec
from offline_gitd.critics import CriticInputs
spec = critic_spec("huber")
rng = np.random.default_rng(0)
q = jnp.asarray(rng.normal(size=(3, 8)) * 3, jnp.float32)
x = CriticInputs(q, None, jnp.asarray(rng.normal(size=8), jnp.float32), None,
                 jnp.asarray(rng.normal(size=(3, 8)), jnp.float32),
                 jnp.asarray(rng.normal(size=8), jnp.float32), jnp.full(8, 0.9, jnp.float32))
per_sample, delta = spec.load_loss()(x)
print(json.dumps({"names": list(critic_names()), "K": spec.default_K, "loss": np.asarray(per_sample).tolist(),
                  "q": np.asarray(q).tolist(), "v0": np.asarray(x.v_next_frozen).tolist(),
                  "stale": np.asarray(x.v_next_stale).tolist(), "r": np.asarray(x.reward).tolist()}))
"""
    out = _python(probe, plugin_site)
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["names"] == ["td", "tdrc", "itd", "gitd", "huber"] and found["K"] == 3
    # Independently: i-TD's targets, Huber(1) of each head's error, summed over heads.
    q, r = np.asarray(found["q"]), np.asarray(found["r"])
    previous = np.stack([found["v0"], *np.asarray(found["stale"])[:-1]])
    delta = np.abs(r + 0.9 * previous - q)
    expected = np.where(delta <= 1, 0.5 * delta**2, delta - 0.5).sum(axis=0)
    np.testing.assert_allclose(found["loss"], expected, rtol=1e-5)
    assert np.any(delta > 1)  # the Huber branch is exercised: not i-TD's loss in disguise
    # Without the plug-in on the path the critic does not exist.
    absent = _python("from offline_gitd.critic_registry import critic_names; print(critic_names())", None)
    assert "huber" not in absent.stdout


@pytest.mark.e2e
def test_installed_critic_trains_through_the_cli(plugin_site: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    argv = online_cartpole(
        "--out",
        str(out),
        "--no-progress",
        "--no-tensorboard",
        critic="huber",
        steps=200,
        seeds=0,
        mlp_hidden="16,16",
        batch_size=16,
        initial_samples=100,
        log_every=100,
        checkpoint_every=200,
        T=20,
    )
    done = subprocess.run(
        [sys.executable, "-m", "offline_gitd.cli", *argv], env=_env(plugin_site), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    config = json.loads((out / "config.json").read_text())["config"]
    assert config["critic"] == "huber" and config["K"] == 3  # the plug-in's own default K
    with (out / "metrics.csv").open() as f:
        metrics = list(csv.DictReader(f))
    assert "bellman_error_3" in metrics[0] and np.isfinite(float(metrics[-1]["loss"]))
    with (out / "results.csv").open() as f:
        assert {row["critic"] for row in csv.DictReader(f)} == {"huber"}
    help_text = subprocess.run(
        [sys.executable, "-m", "offline_gitd.cli", "train", "--help"],
        env=_env(plugin_site),
        capture_output=True,
        text=True,
    ).stdout
    assert "huber" in help_text


# ----------------------------------------------------------------------------- in-process records

LOUD = CriticSpec("loud", "offline_gitd.critics.td:td_loss", "TD under another name", layouts=("independent",))


@pytest.fixture
def registered():
    register_critic(LOUD)
    yield LOUD
    unregister_critic(LOUD.name)


def test_a_registered_critic_reaches_config_cli_and_sweeps(registered: CriticSpec, tmp_path: Path) -> None:
    assert critic_names()[-1] == "loud"
    args = build_parser().parse_args(["train", "--dataset", "minari:x/y-v0", "--critic", "loud", "--out", "o"])
    assert args.critic == "loud"
    cfg = CriticConfig(kind="loud", heads="independent")
    assert cfg.K == 1 and cfg.num_h == 0 and cfg.uses_target_network
    with pytest.raises(ConfigError, match="supports the head layouts independent, not 'shared_linear'"):
        CriticConfig(kind="loud")
    from offline_gitd.sweeps.spec import load_spec

    spec = tmp_path / "s.toml"
    spec.write_text('command = "train"\n[fixed]\ndataset = "minari:x/y-v0"\nheads = "independent"\n')
    spec.write_text(spec.read_text() + '[grid]\ncritic = ["td", "loud"]\n')
    assert len(load_spec(spec).grid["critic"]) == 2


def test_unknown_critics_are_refused_in_one_line() -> None:
    with pytest.raises(UsageError, match="invalid choice: 'loud'"):
        build_parser().parse_args(["train", "--critic", "loud"])
    with pytest.raises(ConfigError, match="unknown critic kind 'loud'; choose one of td, tdrc, itd, gitd"):
        critic_spec("loud")


def test_critic_defaults_fill_over_the_domain_table() -> None:
    """TDRC's record keeps its heads shared on MuJoCo, where the others get independent networks."""
    tdrc = OfflineConfig(dataset="minari:x", out="o", critic="tdrc").resolve("continuous")
    gitd = OfflineConfig(dataset="minari:x", out="o", critic="gitd").resolve("continuous")
    assert (tdrc.heads, gitd.heads) == ("shared_linear", "independent")
    given = OfflineConfig(dataset="minari:x", out="o", critic="tdrc", heads="independent").resolve("continuous")
    assert given.heads == "independent"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"loss": "no_colon"}, "loss must be 'module:attribute'"),
        ({"targets": "sometimes"}, "targets must be one of"),
        ({"h_heads": "two"}, "h_heads must be one of"),
        ({"default_K": 3}, r"default_K 3 must be in \[1, max_K = 1\]"),
        ({"layouts": ("diagonal",)}, "layouts must be among"),
        ({"defaults": {"gym": {"lr": 1.0}}}, "defaults\\['gym'\\] may set heads, T, tau, not 'lr'"),
    ],
)
def test_bad_records_are_refused(kwargs: dict, message: str) -> None:
    values = {"name": "bad", "loss": "m:f", "summary": "s", **kwargs}
    with pytest.raises(ConfigError, match=message):
        CriticSpec(**values)


def test_a_name_is_registered_once(registered: CriticSpec) -> None:
    with pytest.raises(ConfigError, match="already registered"):
        register_critic(LOUD)
    with pytest.raises(ConfigError, match="already registered"):
        register_critic(CriticSpec("td", "m:f", "another td"))


def test_loss_import_failures_name_the_critic() -> None:
    spec = CriticSpec("ghost", "offline_gitd.critics.td:no_such_loss", "missing")
    with pytest.raises(ConfigError, match="critic 'ghost': cannot import its loss"):
        spec.load_loss()


def test_builtin_records_match_the_losses_they_name() -> None:
    """The four records resolve to the modules' functions (a typo in a string would not import)."""
    from offline_gitd.critics import gitd, itd, td, tdrc

    assert [critic_spec(n).load_loss() for n in ("td", "tdrc", "itd", "gitd")] == [
        td.td_loss,
        tdrc.tdrc_loss,
        itd.itd_loss,
        gitd.gitd_loss,
    ]
    x = CriticInputs(jnp.ones((1, 2)), None, jnp.zeros(2), None, None, jnp.ones(2), jnp.ones(2))
    assert np.allclose(critic_spec("td").load_loss()(x)[0], 0.0)
