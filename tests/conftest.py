"""Shared test set-up: JAX on the CPU in float32, deterministic and quiet."""

import os
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# One persistent compilation cache for every test process (xdist workers and the CLI subprocesses
# they start inherit it): a program compiled once, with the same shapes, is not compiled again.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(Path(__file__).resolve().parents[1] / ".pytest_cache" / "jax"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


import pytest  # noqa: E402


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
