"""Sweep specs (``offline_gitd.sweeps.spec``) from generated TOML, random bytes and mutated shipped
specs: each is a spec whose runs are commands the CLI parses back to the spec's fields, or a
one-line :class:`ConfigError`; a cross too large to expand is refused by its size, not run."""

from __future__ import annotations

import dataclasses
import json
import math
import tempfile
import typing
from pathlib import Path
from typing import Any

from hypothesis import event, example, given
from hypothesis import strategies as st

from offline_gitd.cli import build_parser
from offline_gitd.config.fields import base_type, field_choices
from offline_gitd.errors import ConfigError
from offline_gitd.offline.config import OfflineConfig
from offline_gitd.online.config import OnlineConfig
from offline_gitd.sweeps.spec import COMMANDS, RESOURCE_KEYS, expand, load_spec
from tests.properties.checks import assert_one_line, share

SWEEPS = Path(__file__).resolve().parents[2] / "sweeps"
SHIPPED = sorted(path.read_text() for path in SWEEPS.glob("*.toml"))
PARSER = build_parser()
FIELDS = sorted({f.name for cls in (OfflineConfig, OnlineConfig) for f in dataclasses.fields(cls)})

# Values a field may plausibly be given, and values no field takes.
STRINGS = st.sampled_from(
    ["td", "tdrc", "itd", "gitd", "cql", "dqn", "sac", "0-2", "0,3", "1/4", "64,64", "mlp", "nature", "scan"]
    + ["minari:a/b-v0", "rlu-atari:Pong/1:0-1", "CartPole-v1", "ALE/Pong-v5", "", " ", "{T}", "x\ny", "é"]
) | st.text(max_size=8)
SCALARS = (
    st.booleans()
    | st.integers(-3, 2000)
    | st.sampled_from([2**31, 2**63, 10**400])
    | st.floats(allow_nan=True, allow_infinity=True)
    | STRINGS
)


def toml_value(value: Any) -> str:
    """``value`` as a TOML value (inline tables and arrays nest)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else {math.inf: "inf", -math.inf: "-inf"}.get(value, repr(value))
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # JSON's escapes are TOML's basic-string escapes
    if isinstance(value, list):
        return "[" + ", ".join(map(toml_value, value)) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"


def toml_document(spec: dict[str, Any]) -> str:
    """A spec dict as TOML: top-level keys, then ``[tables]`` and ``[[arrays of tables]]``."""
    lines = [f"{json.dumps(k)} = {toml_value(v)}" for k, v in spec.items() if not isinstance(v, (dict, list))]
    for key, value in spec.items():
        if isinstance(value, dict):
            lines += [f"[{json.dumps(key)}]"] + [f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()]
        elif isinstance(value, list):
            for table in value:
                lines += [f"[[{json.dumps(key)}]]"] + [f"{json.dumps(k)} = {toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


FIELD_NAMES = st.sampled_from(FIELDS + ["name", "out", "data_dir", "nope"])
GRID_AXIS = st.lists(SCALARS, min_size=0, max_size=3) | st.lists(
    st.dictionaries(FIELD_NAMES, SCALARS, max_size=3), min_size=1, max_size=3
)
SPECS = st.fixed_dictionaries(
    {
        "command": st.sampled_from([*COMMANDS, "online", "sweep"]),
        "fixed": st.dictionaries(FIELD_NAMES, SCALARS, max_size=4),
        "grid": st.dictionaries(FIELD_NAMES, GRID_AXIS, min_size=1, max_size=3),
    },
    optional={
        "board": st.sampled_from(["board.csv", "b-{T}.csv", "b-{critic}-{seeds}.csv", "b{T!r}.csv", "b{T:d}.csv"])
        | st.sampled_from(["b{T:{K}}.csv", "{}.csv", "b.txt", "{0}.csv"]),
        "resources": st.dictionaries(st.sampled_from([*RESOURCE_KEYS, "memory"]), SCALARS, max_size=3),
        "allow_new_env": SCALARS,
        "collect": st.lists(
            st.dictionaries(st.sampled_from(["env", "steps", "out", "seed", "policy", "x"]), SCALARS, max_size=4),
            max_size=2,
        ),
    },
)


def typed_value(cls: type, name: str) -> st.SearchStrategy[Any]:
    """A value of field ``name``'s type, from its choices where it has them: specs that pass the
    first checks, so that expansion and the command lines are what is tested."""
    field = {f.name: f for f in dataclasses.fields(cls)}[name]
    kind = base_type(typing.get_type_hints(cls)[name])
    choices = field_choices(field)
    if choices:
        return st.sampled_from(tuple(choices))
    if kind is bool:
        return st.booleans()
    if kind is int:
        return st.integers(0, 60)
    if kind is float:
        return st.floats(0, 1.5) | st.sampled_from(["1/4", "2"])
    return st.sampled_from(["0", "0-2", "1,3", "64,64", "minari:a/b-v0", "CartPole-v1"])


@st.composite
def typed_specs(draw: st.DrawFn) -> dict[str, Any]:
    command = draw(st.sampled_from(list(COMMANDS)))
    cls = OfflineConfig if command == "train" else OnlineConfig
    names = sorted({f.name for f in dataclasses.fields(cls)} - {"out", "data_dir", "algo", "dataset", "env"})
    where = {"dataset": "minari:a/b-v0"} if command == "train" else {"env": "CartPole-v1"}
    fixed_names = draw(st.lists(st.sampled_from(names), max_size=3, unique=True))
    grid_names = draw(st.lists(st.sampled_from(names), min_size=1, max_size=2, unique=True))
    return {
        "command": command,
        "board": draw(st.sampled_from(["board.csv", "b-{seeds}.csv", "b-{%s}.csv" % grid_names[0]])),
        "resources": {"seeds_per_run": draw(st.integers(0, 3))},
        "fixed": where | {name: draw(typed_value(cls, name)) for name in fixed_names},
        "grid": {name: draw(st.lists(typed_value(cls, name), min_size=1, max_size=3)) for name in grid_names},
    }


def load_text(text: str | bytes) -> Any:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "spec.toml"
        path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
        return load_spec(path)


def check_spec_or_one_line(text: str | bytes) -> None:
    """``text`` is a spec whose every run the CLI parses back to its fields, or one line."""
    try:
        spec = load_text(text)
    except ConfigError as error:
        assert_one_line(error)
        event("refused")
        return
    plans = expand(spec)
    event("a spec")
    assert plans and len({plan.name for plan in plans}) == len(plans)
    if not spec.resources.seeds_per_run:
        assert len(plans) == math.prod(len(values) for values in spec.grid.values())
    for plan in plans:
        assert plan.board.endswith(".csv") and "/" not in plan.board.replace(spec.board, "")
        args = PARSER.parse_args([*plan.argv, "--out", "x"])
        for field, value in plan.fields.items():
            if field in ("dataset", "env"):
                continue
            parsed = getattr(args, field)
            assert parsed == value or str(parsed) == str(value), (plan.name, field, parsed, value)


@share(0.3)
@given(spec=SPECS)
@example(spec={"command": "train", "board": "b{critic!x}.csv", "fixed": {"dataset": "minari:a/b-v0"},
               "grid": {"critic": ["td", "gitd"]}})  # fmt: skip  # was a ValueError once the grid expanded
@example(spec={"command": "train", "board": "b{critic:{K}}.csv", "fixed": {"dataset": "minari:a/b-v0"},
               "grid": {"critic": ["td", "gitd"]}})  # fmt: skip  # was a KeyError
@example(spec={"command": "train", "fixed": {"dataset": "minari:a/b-v0", "lr": 10**400},
               "grid": {"critic": ["td", "gitd"]}})  # fmt: skip  # was an OverflowError (float of a huge int)
@example(spec={"command": "train", "resources": {"seeds_per_run": 1},
               "fixed": {"dataset": "minari:a/b-v0", "seeds": "0-999999999999"},
               "grid": {"critic": ["td", "gitd"]}})  # fmt: skip  # was a hang: every seed listed first
@example(spec={"command": "train", "fixed": {"dataset": "minari:a/b-v0", "critic": "gitd"},
               "grid": {"T": list(range(1, 101)), "lr": [i / 1000 for i in range(1, 101)],
                        "beta": [i / 100 for i in range(1, 101)]}})  # fmt: skip  # a million runs: refused by size
@example(spec={"command": "train", "resources": {"cpus": 0, "gpus": 10**400},
               "fixed": {"dataset": "minari:a/b-v0"}, "grid": {"critic": ["td"]}})  # fmt: skip  # was an OverflowError
@example(spec={"command": "train", "resources": {"cpus": math.nan},
               "fixed": {"dataset": "minari:a/b-v0"}, "grid": {"critic": ["td"]}})  # fmt: skip  # NaN cpus were accepted
def test_generated_specs_expand_to_cli_commands_or_one_line(spec: dict[str, Any]) -> None:
    check_spec_or_one_line(toml_document(spec))


@share(0.2)
@given(spec=typed_specs())
def test_typed_specs_expand_to_cli_commands_or_one_line(spec: dict[str, Any]) -> None:
    check_spec_or_one_line(toml_document(spec))


@share(0.3)
@given(data=st.binary(max_size=200) | st.text(max_size=200))
@example(data="seeds = 1" + "0" * 5000)  # was a ValueError from tomllib (int() of 5001 digits)
@example(
    data='command = "train"\n[fixed]\ndataset = "-minari:a/b-v0"\n[grid]\ncritic = ["td", "gitd"]\n'
)  # was an argparse error
def test_any_bytes_are_a_spec_or_one_line(data: str | bytes) -> None:
    check_spec_or_one_line(data)


@share(0.2)
@given(
    original=st.sampled_from(SHIPPED),
    edits=st.lists(
        st.tuples(
            st.floats(0, 1), st.integers(0, 6), st.sampled_from(["", "0", "9", "-", '"', "[", "]", "{", "x", "\n"])
        ),
        min_size=1,
        max_size=3,
    ),
)
def test_edited_shipped_specs_are_specs_or_one_line(original: str, edits: list[tuple[float, int, str]]) -> None:
    """A shipped spec with a few characters replaced: what a user's edit of one looks like."""
    text = original
    for where, length, insert in edits:
        at = int(where * len(text))
        text = text[:at] + insert + text[at + length :]
    check_spec_or_one_line(text)
