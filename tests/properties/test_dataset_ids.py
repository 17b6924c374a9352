"""Dataset ids and checkpoint lists (``offline_gitd.data.registry``) on generated text: each is
a correct parse (it round-trips through ``str`` and names a registry game, run and checkpoints)
or a one-line :class:`UsageError`."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from offline_gitd.data.registry import (
    MAX_CHECKPOINTS,
    MinariId,
    RluAtariId,
    format_checkpoints,
    load_rlu_registry,
    parse_checkpoints,
    parse_dataset_id,
)
from offline_gitd.errors import UsageError
from tests.properties.checks import assert_one_line, share

REGISTRY = load_rlu_registry()
GAMES = sorted(REGISTRY.games)
# Text near the grammar: prefixes, separators, digits of other scripts, spaces and line ends.
PIECES = st.sampled_from(
    ["rlu-atari", "minari", ":", "/", "-", ",", "-v", " ", "\n", "\t", "Pong", "pong", "Breakout", "mujoco"]
    + ["halfcheetah", "medium", "0", "1", "5", "7", "49", "50", "99999999", "123456789012", "²", "١", "０", "_", "."]
)
NEAR_IDS = st.lists(PIECES, max_size=12).map("".join)
MINARI_NAME = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-"


def spans(bound: int) -> st.SearchStrategy[list[tuple[int, int]]]:
    """Index ranges ``(start, stop)`` with ``stop < bound``, unordered and possibly overlapping."""
    span = st.tuples(st.integers(0, bound - 1), st.integers(0, 5)).map(lambda s: (s[0], min(bound - 1, s[0] + s[1])))
    return st.lists(span, min_size=1, max_size=6)


def written(items: list[tuple[int, int]], pad: str) -> str:
    return ",".join(f"{pad}{a}{pad}" if a == b else f"{pad}{a}-{b}{pad}" for a, b in items)


def check_parsed(text: str, parsed: RluAtariId | MinariId) -> None:
    """What a successful parse must satisfy whatever the text was."""
    assert parse_dataset_id(str(parsed)) == parsed
    if isinstance(parsed, MinariId):
        assert str(parsed) == text and parsed.dataset_id.isascii() and parsed.dataset_id.isprintable()
        return
    assert parsed.game in REGISTRY.games and parsed.run in REGISTRY.runs
    assert text.startswith(f"rlu-atari:{parsed.game}/")
    if parsed.checkpoints is not None:
        assert list(parsed.checkpoints) == sorted(set(parsed.checkpoints))
        assert all(0 <= c < REGISTRY.num_shards(parsed.game) for c in parsed.checkpoints)


@share(0.3)
@given(
    game=st.sampled_from(GAMES),
    run=st.sampled_from(REGISTRY.runs),
    data=st.data(),
    pad=st.sampled_from(["", " "]),
)
def test_a_valid_rlu_id_parses_to_its_parts(game, run, data, pad) -> None:
    items = data.draw(st.none() | spans(REGISTRY.num_shards(game)))
    suffix = "" if items is None else ":" + written(items, pad)
    parsed = parse_dataset_id(f"rlu-atari:{game}/{run}{suffix}")
    expected = None if items is None else tuple(sorted({i for a, b in items for i in range(a, b + 1)}))
    assert parsed == RluAtariId(game, run, expected)
    assert parse_dataset_id(str(parsed)) == parsed


@share(0.3)
@given(
    parts=st.lists(st.text(MINARI_NAME, min_size=1, max_size=12), min_size=1, max_size=4),
    version=st.integers(0, 10**6),
)
def test_a_valid_minari_id_is_kept_as_written(parts, version) -> None:
    text = f"minari:{'/'.join(parts)}-v{version}"
    assert parse_dataset_id(text) == MinariId(text.removeprefix("minari:"))


@given(text=NEAR_IDS | st.text(max_size=40))
@example(text="rlu-atari:Pong/1:0-99999999")  # was a hang: the range was expanded before its bound was checked
@example(text="rlu-atari:Pong/²")  # was a ValueError traceback: str.isdigit accepts superscripts
@example(text="rlu-atari:Pong/١")  # was read as run 1: \d and isdigit take any script's digits
@example(text="rlu-atari:Pong/1:０")  # was read as checkpoint 0 (a fullwidth digit)
@example(text="minari:mujoco/halfcheetah/medium-v0\n")  # was accepted with its newline ($ matches before it)
@example(text="rlu-atari:Pong/" + "1" * 5000)  # int() refuses 5000 digits with a ValueError
def test_any_text_is_a_dataset_id_or_one_line(text: str) -> None:
    try:
        parsed = parse_dataset_id(text)
    except UsageError as error:
        assert_one_line(error)
    else:
        check_parsed(text, parsed)


@share(0.5)
@given(items=spans(MAX_CHECKPOINTS), pad=st.sampled_from(["", " ", "\t"]))
def test_checkpoint_lists_parse_to_their_union_and_format_back(items, pad) -> None:
    union = tuple(sorted({i for a, b in items for i in range(a, b + 1)}))
    parsed = parse_checkpoints(written(items, pad))
    assert parsed == union
    assert parse_checkpoints(format_checkpoints(parsed)) == parsed


@share(0.5)
@given(text=NEAR_IDS | st.text(max_size=30), bound=st.none() | st.integers(1, 100))
@example(text="0-99999999", bound=None)  # was a hang without a bound
@example(text="0-99999999", bound=50)  # was a hang with one
def test_any_checkpoint_text_is_a_list_or_one_line(text: str, bound: int | None) -> None:
    try:
        parsed = parse_checkpoints(text, bound, owner="Pong")
    except UsageError as error:
        assert_one_line(error)
    else:
        assert parsed and list(parsed) == sorted(set(parsed))
        assert all(0 <= i < (MAX_CHECKPOINTS if bound is None else bound) for i in parsed)
        assert parse_checkpoints(format_checkpoints(parsed), bound) == parsed
