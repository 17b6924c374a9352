"""Shared test set-up: JAX on the CPU in float32, deterministic and quiet."""

import os
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# One persistent compilation cache for every test process (xdist workers and the CLI subprocesses
# they start inherit it): a program compiled once, with the same shapes, is not compiled again.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(Path(__file__).resolve().parents[1] / ".pytest_cache" / "jax"))
# Every program, however quick to compile: the suite compiles hundreds of small ones, each under JAX's
# default threshold of a second, again on every run.
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# XLA's code generator at -O0, through its classic fusion emitters: the suite compiles hundreds of
# programs and runs each for a few steps, so compiling is its cost. From an empty compilation cache
# on 2 cores, make test-fast took 2:34 instead of 4:22 and the default run 4:41 instead of 8:43; with
# a warm cache make test-fast was no slower (1:57 vs 2:08). The programs traced are the same; XLA only
# spends less effort turning them into machine code. `make test-slow` sets XLA_FLAGS empty, so the
# real-scale runs compile as users' runs do; any XLA_FLAGS you set wins.
os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false")
# Two CPU devices, as the command line asks for on a 2-core machine (offline_gitd/xla_start.py), with
# whatever other XLA_FLAGS are set (make test-slow's empty ones included): the offline runs of the suite
# spread their seeds over them as users' runs do. A device count of your own in XLA_FLAGS wins.
if "xla_force_host_platform_device_count" not in os.environ["XLA_FLAGS"]:
    os.environ["XLA_FLAGS"] = f"{os.environ['XLA_FLAGS']} --xla_force_host_platform_device_count=2".strip()


import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

# Property-based tests (tests/properties): hundreds of generated inputs per parser of outside
# input in the default run, a thousand in `make test-slow`'s pass over tests/properties ("thorough").
# "default" explores new inputs on every run (and remembers failures in .hypothesis/), so repeated
# runs keep covering new ground; "ci" draws the same inputs every time, so a CI run is reproducible;
# "quick" is for editing a parser. Each example has a deadline, so a parser that slows down fails (a
# hang that never returns is caught by tests/properties/conftest.py).
# Pick one with HYPOTHESIS_PROFILE=name; CI=true selects "ci".
_PROFILE = {
    "max_examples": 200,
    "deadline": 2000,  # ms: a shared 2-core machine; every parser here answers in milliseconds
    "suppress_health_check": (HealthCheck.too_slow,),
}
settings.register_profile("default", **_PROFILE)
# CI machines are shared and loaded: 2 s there could fail on the load rather than on a parser;
# 10 s still catches a parser gone slow.
settings.register_profile("ci", **{**_PROFILE, "deadline": 10_000}, derandomize=True, database=None, print_blob=True)
settings.register_profile("quick", **{**_PROFILE, "max_examples": 100})
settings.register_profile("thorough", **{**_PROFILE, "max_examples": 1000})
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "default"))


@pytest.fixture(scope="module")
def jax_compilation_cache(tmp_path_factory):
    """A persistent JAX compilation cache for one test module whose runs compile the same small
    programs (a run, its resume, a rerun), so they compile once; restored afterwards."""
    import jax

    names = (
        "jax_compilation_cache_dir",
        "jax_persistent_cache_min_compile_time_secs",
        "jax_persistent_cache_min_entry_size_bytes",
    )
    saved = {name: getattr(jax.config, name) for name in names}
    jax.config.update("jax_compilation_cache_dir", str(tmp_path_factory.mktemp("jax_cache")))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    yield
    for name, value in saved.items():
        jax.config.update(name, value)


# The longest tests first, clusters before end-to-end runs: on two workers they then overlap the
# rest of the run instead of running alone at its end. xdist hands files out in this order only with
# --no-loadscope-reorder (pyproject.toml's addopts); by default it sorts them by their number of tests.
LONG_MARKERS = ("slurm", "ray", "e2e")


def pytest_collection_modifyitems(config, items):
    def rank(item) -> int:
        return next((i for i, name in enumerate(LONG_MARKERS) if item.get_closest_marker(name)), len(LONG_MARKERS))

    items.sort(key=rank)
