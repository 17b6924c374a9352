"""What the package reads from a Minari dataset's ``metadata.json`` (``datasets list`` and
``datasets info``, and the counts the store is sized from), on a real recorded dataset whose
metadata is rewritten with generated values and bytes: each is a listing with one line per key
and a store of the episodes really there, or one line of :class:`UsageError`."""

from __future__ import annotations

import contextlib
import io
import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, example, given
from hypothesis import strategies as st

from offline_gitd.cli import main
from offline_gitd.data.minari_source import minari_store
from offline_gitd.errors import UsageError
from tests.minari_fixtures import record_into_new_root
from tests.properties.checks import assert_one_line, share

DATASET = "test/cartpole/random-v0"
STEPS = 60


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory):
    """A data root holding one real Minari dataset; MINARI_DATASETS_PATH (which the commands set)
    restored afterwards."""
    root = tmp_path_factory.mktemp("minari-data")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        record_into_new_root(root / "minari", DATASET, "CartPole-v1", STEPS)
    metadata = root / "minari" / DATASET / "data" / "metadata.json"
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MINARI_DATASETS_PATH", raising=False)
        yield root, metadata, json.loads(metadata.read_text())


# The module fixture is shared by every example on purpose: the dataset is recorded once, and each
# example rewrites its metadata before it reads (and restores it after).
SHARED_FIXTURE = (HealthCheck.function_scoped_fixture,)
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.sampled_from([0, -1, 10**12, 10**30])
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["line\nfetch: evil", "a\rb", "a\u2028b", "x" * 300, "{}", "not json"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3),
    max_leaves=6,
)


@st.composite
def rewritten(draw: st.DrawFn, original: dict[str, Any]) -> dict[str, Any]:
    """``original`` with some keys given other values, some dropped and some added."""
    metadata = dict(original)
    for key in draw(st.lists(st.sampled_from(sorted(original)), max_size=3, unique=True)):
        if draw(st.booleans()):
            metadata[key] = draw(JSON_VALUES)
        else:
            del metadata[key]
    metadata.update(draw(st.dictionaries(st.text(max_size=6), JSON_VALUES, max_size=2)))
    return metadata


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # minari warns about (and skips) a misconfigured dataset
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def check_listing(root: Path, metadata: dict[str, Any] | None) -> None:
    """``datasets info`` shows one line per metadata key, or says the dataset is not there (minari
    skips metadata it cannot read); ``datasets list`` lists it or none. Any refusal is one line."""
    code, out, err = run(["datasets", "info", f"minari:{DATASET}", "--data-dir", str(root)])
    if code:
        assert_one_line(UsageError(err.strip().removeprefix("offline_gitd: error: ")))
        event("refused")
        return
    lines = out.splitlines()
    assert lines[0] == f"minari:{DATASET}"
    if lines[1].startswith("  not in "):
        event("not listed")
        assert len(lines) == 3
    else:
        event("listed")
        assert metadata is not None and len(lines) == 2 + len(metadata)
    code, out, _ = run(["datasets", "list", "--data-dir", str(root)])
    assert code == 0 and ("minari:" + DATASET in out) == (not lines[1].startswith("  not in "))


@share(0.1, SHARED_FIXTURE)
@given(data=st.data())
@example(data=None)  # as recorded
def test_rewritten_metadata_is_listed_one_line_per_key(data_dir, data: st.DataObject | None) -> None:
    root, path, original = data_dir
    metadata = original if data is None else data.draw(rewritten(original))
    path.write_text(json.dumps(metadata))
    try:
        check_listing(root, metadata)
    finally:
        path.write_text(json.dumps(original))


@share(0.05, SHARED_FIXTURE)
@given(content=st.binary(max_size=60) | st.text(max_size=60).map(str.encode))
def test_any_metadata_bytes_are_listed_or_skipped(data_dir, content: bytes) -> None:
    root, path, original = data_dir
    path.write_bytes(content)
    try:
        check_listing(root, None)
    finally:
        path.write_text(json.dumps(original))


def test_a_value_with_line_breaks_stays_on_its_line(data_dir) -> None:
    """Was several lines: a value could print lines that read as the command's own ("fetch: ...")."""
    root, path, original = data_dir
    path.write_text(json.dumps(original | {"description": "one\nfetch: evil\u2028two"}))
    try:
        code, out, _ = run(["datasets", "info", f"minari:{DATASET}", "--data-dir", str(root)])
        assert code == 0 and "  description: one\\nfetch: evil\\u2028two" in out.splitlines()
    finally:
        path.write_text(json.dumps(original))


COUNTS = st.none() | st.integers(-(10**30), 10**30) | st.sampled_from([0, 1, STEPS - 1, 10**12]) | JSON_VALUES


@share(0.05, SHARED_FIXTURE)
@given(total_steps=COUNTS, dataset_size=COUNTS)
@example(total_steps=10**12, dataset_size=0.1)  # was a 14.6 TiB allocation (MemoryError)
@example(total_steps="x", dataset_size=0.1)  # was a ValueError from int("x")
def test_the_store_holds_the_episodes_really_there(data_dir, total_steps: Any, dataset_size: Any) -> None:
    """However many steps the metadata claims, the store is sized by the episodes themselves."""
    import minari

    root, path, original = data_dir
    path.write_text(json.dumps(original | {"total_steps": total_steps, "dataset_size": dataset_size}))
    try:
        with pytest.MonkeyPatch.context() as patch, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            patch.setenv("MINARI_DATASETS_PATH", str(root / "minari"))
            dataset = minari.load_dataset(DATASET)
            store = minari_store(dataset, range(original["total_episodes"]))
    finally:
        path.write_text(json.dumps(original))
    assert store.num_episodes == original["total_episodes"]
    assert store.num_rows == STEPS + original["total_episodes"]  # each episode's final observation


# Opening a Minari dataset for training (offline_gitd/data/datasets.py) with hostile metadata.
def open_for_training(root: Path, path: Path, original: dict[str, Any], changes: dict[str, Any]) -> None:
    from offline_gitd.data.datasets import open_offline_data
    from offline_gitd.offline.config import OfflineConfig
    from offline_gitd.offline.train import resolve_config

    path.write_text(json.dumps(original | changes))
    try:
        with pytest.MonkeyPatch.context(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cfg = OfflineConfig(dataset=f"minari:{DATASET}", out="x", data_dir=str(root))
            open_offline_data(resolve_config(cfg))
    finally:
        path.write_text(json.dumps(original))


def test_an_env_spec_entry_point_runs_nothing(data_dir, tmp_path: Path) -> None:
    """The env_spec in metadata.json names any importable callable, and rebuilding the env calls it:
    here ``subprocess.run(["touch", marker])``. An env_spec whose entry point (or an additional
    wrapper's) is not the one gymnasium's registry holds for that id is refused before anything runs."""
    root, path, original = data_dir
    marker = tmp_path / "ran"
    spec = json.loads(original["env_spec"]) | {
        "entry_point": "subprocess:run",
        "kwargs": {"args": ["touch", str(marker)]},
    }
    with pytest.raises(UsageError):
        open_for_training(root, path, original, {"env_spec": json.dumps(spec)})
    assert not marker.exists(), "opening the dataset ran a command named by its metadata"


def test_a_space_that_is_no_space_is_one_line(data_dir) -> None:
    """minari asserts on a space that is not a serialized space: still one line (the dataset is damaged)."""
    root, path, original = data_dir
    with pytest.raises(UsageError):
        open_for_training(root, path, original, {"observation_space": 5})


def test_an_absurd_episode_count_is_one_line(data_dir) -> None:
    """``minari.load_dataset`` builds ``arange(total_episodes)`` from the metadata: 10**12 is an
    8 TiB array; a count that is not the number of ``episode_*`` groups in ``data/main_data.hdf5`` is
    refused before minari reads it."""
    root, path, original = data_dir
    with pytest.raises(UsageError):
        open_for_training(root, path, original, {"total_episodes": 10**12})
