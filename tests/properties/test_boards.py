"""Boards and run directories' ``results.csv`` (``offline_gitd.leaderboard``) on generated rows,
random and mutated CSV bytes, and submits onto generated boards: each file reads back as the rows
written, or is one line of :class:`SchemaError` / :class:`UsageError` naming ``file:line``."""

from __future__ import annotations

import atexit
import csv
import io
import math
import shutil
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

from hypothesis import event, example, given
from hypothesis import strategies as st

from offline_gitd.errors import UsageError
from offline_gitd.leaderboard.reference import known_envs
from offline_gitd.leaderboard.schema import COLUMNS, LEGACY_COLUMNS, ResultRow, SchemaError, read_rows
from offline_gitd.leaderboard.submit import RESULTS_FILE, encode_rows, submit
from tests.properties.checks import assert_one_line, share

# Names are data: commas, quotes, line ends, pipes and formulas must all survive a board.
AWKWARD = st.sampled_from(list('aZ09,"\n\r\t |=+@-_.é/\\;'))
# A name has no spaces around it (the schema refuses those) and is never empty.
NAMES = st.text(AWKWARD | st.characters(codec="utf-8"), max_size=10).map(lambda s: s.strip() or "x")
OFFSETS = st.integers(-1439, 1439).map(lambda minutes: timezone(timedelta(minutes=minutes)))
STAMPS = st.builds(
    lambda when, tz, precision: when.replace(tzinfo=tz).isoformat(timespec=precision),
    st.datetimes(datetime(1970, 1, 2), datetime(2100, 1, 1)),
    OFFSETS,
    st.sampled_from(["seconds", "microseconds"]),
)
FINITE = st.floats(allow_nan=False, allow_infinity=False)
ROWS = st.builds(
    ResultRow,
    suite=NAMES,
    env=NAMES,
    algorithm=NAMES,
    critic=NAMES,
    K=st.integers(1, 10**6),
    beta=FINITE,
    seed=st.integers(0, 2**31),
    step=st.integers(0, 10**12),
    return_=FINITE,
    run_id=NAMES,
    config_hash=NAMES,
    package_version=NAMES,
    created_at=STAMPS,
    method_config=st.just("") | NAMES,
)


SCRATCH = Path(tempfile.mkdtemp(prefix="boards-"))  # one file rewritten per example; removed at exit
atexit.register(shutil.rmtree, SCRATCH, ignore_errors=True)


def read_bytes(data: bytes) -> list[tuple[int, ResultRow]]:
    path = SCRATCH / "board.csv"
    path.write_bytes(data)
    return read_rows(path)


def check_board_bytes(data: bytes) -> None:
    """``data`` is a board whose rows survive being written again, or one line."""
    try:
        rows = read_bytes(data)
    except SchemaError as error:
        assert_one_line(error)
        event("refused")
        return
    event("a board")
    again = [row for _, row in read_bytes(encode_rows([row for _, row in rows], header=True))]
    assert again == [row for _, row in rows]
    for _, row in rows:
        assert row.K >= 1 and row.seed >= 0 and row.step >= 0
        assert math.isfinite(row.beta) and math.isfinite(row.return_)
        assert datetime.fromisoformat(row.created_at).tzinfo is not None


@share(0.3)
@given(rows=st.lists(ROWS, max_size=4))
@example(
    rows=[ResultRow("gym", "a\rb", "cql", "td", 1, 0.0, 0, 0, 1.0, "r", "h", "0.1.0", "2026-01-01T00:00:00+00:00")]
)
def test_rows_written_to_a_board_read_back_the_same(rows: list[ResultRow]) -> None:
    """A carriage return inside a name was written unquoted (the csv module quotes only the line
    terminator's characters), so the board it went to no longer read."""
    assert [row for _, row in read_bytes(encode_rows(rows, header=True))] == rows


CELLS = {
    "K": st.sampled_from(["1", "0", "-1", "5", " 5", "1.5", "1e3", "١", "9" * 5000, ""]) | st.text(max_size=5),
    "beta": st.sampled_from(["0.0", "nan", "inf", "-1e400", "1e400", "1_0", "0x10", ""]) | st.text(max_size=5),
    "created_at": STAMPS
    | st.sampled_from(["2026-01-01", "2026-01-01T00:00:00", "2026-13-01T00:00:00+00:00", "now", ""]),
}


@share(0.5)
@given(cells=st.fixed_dictionaries({name: CELLS.get(name, NAMES | st.text(max_size=4)) for name in COLUMNS}))
def test_any_cells_are_a_row_or_one_line_naming_the_field(cells: dict[str, str]) -> None:
    cells = cells | {"seed": cells["K"], "step": cells["K"], "return": cells["beta"]}
    try:
        row = ResultRow.from_mapping(cells)
    except SchemaError as error:
        assert_one_line(error)
        assert str(error).startswith("field '")
    else:
        assert ResultRow.from_mapping(dict(zip(COLUMNS, row.to_record(), strict=True))) == row


@share(0.5)
@given(data=st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
@example(data=b'"suite\nenv",x\n')  # a header cell with a line end: the message quoted it over two lines
@example(data=b"\xef\xbb\xbf")  # a byte-order mark alone
def test_any_bytes_are_a_board_or_one_line(data: bytes) -> None:
    check_board_bytes(data)


@st.composite
def mutated_boards(draw: st.DrawFn) -> bytes:
    """A real board (current or legacy header, maybe a byte-order mark) with a few bytes flipped,
    inserted, deleted or cut off."""
    rows = draw(st.lists(ROWS, min_size=1, max_size=3))
    data = bytearray(encode_rows(rows, header=True))
    if draw(st.booleans()):
        data = data.replace(b",method_config\n", b"\n", 1)
        data = bytearray(b"".join(line.rsplit(b",", 1)[0] + b"\n" if i else line for i, line in enumerate(data.splitlines(keepends=True))))  # fmt: skip
    if draw(st.booleans()):
        data[:0] = b"\xef\xbb\xbf"
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(["flip", "digit", "insert", "delete", "truncate"]))
        if action == "flip" and at < len(data):
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif action == "digit" and at < len(data):
            data[at] = draw(st.integers(ord("0"), ord("9")))
        elif action == "insert":
            data[at:at] = draw(st.sampled_from([b",", b'"', b"\n", b"\r", b"\x00", b"\xff", b"9", b"-"]))
        elif action == "delete":
            del data[at : at + draw(st.integers(1, 3))]
        else:
            del data[at:]
    return bytes(data)


@share(0.3)
@given(data=mutated_boards())
def test_mutated_boards_are_boards_or_one_line(data: bytes) -> None:
    check_board_bytes(data)


ENVS = known_envs()
KNOWN_ROWS = st.builds(
    lambda row, suite, data: row.__class__(
        **{**row.__dict__, "suite": suite, "env": data.draw(st.sampled_from(sorted(ENVS[suite])))}
    ),  # fmt: skip
    ROWS,
    st.sampled_from(sorted(ENVS)),
    st.data(),
)


def legacy_board(rows: list[ResultRow]) -> bytes:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(LEGACY_COLUMNS)
    writer.writerows(row.to_record()[:-1] for row in rows)
    return buffer.getvalue().encode()


@share(0.2)
@given(
    board_rows=st.none() | st.lists(KNOWN_ROWS, max_size=3),
    legacy=st.booleans(),
    bom=st.booleans(),
    trailing_newline=st.booleans(),
    new_rows=st.lists(KNOWN_ROWS, min_size=1, max_size=3),
    cut=st.none() | st.integers(0, 400),
)
@example(
    board_rows=[],
    legacy=True,
    bom=True,
    trailing_newline=True,
    new_rows=[
        ResultRow("gym", "CartPole-v1", "cql", "td", 1, 0.0, 0, 0, 1.0, "r", "h", "0.1.0", "2026-01-01T00:00:00+00:00")
    ],
    cut=None,
)  # a legacy board saved by a spreadsheet (byte-order mark) was not upgraded: 14 cells under 13 columns
def test_a_submit_adds_its_rows_or_changes_nothing(board_rows, legacy, bom, trailing_newline, new_rows, cut) -> None:
    """Onto no board, a current or a legacy one (maybe with a byte-order mark, maybe without its
    last line end), a run's rows (maybe cut short) are added, and the board reads back as its old
    rows then the new ones (less those the board holds identically already: a submit made again is
    a no-op); or the submit is one line and the board is untouched."""
    with tempfile.TemporaryDirectory() as folder:
        board, run = Path(folder) / "board.csv", Path(folder) / "run"
        run.mkdir()
        if board_rows is not None:
            data = legacy_board(board_rows) if legacy else encode_rows(board_rows, header=True)
            data = (b"\xef\xbb\xbf" if bom else b"") + (data if trailing_newline else data.rstrip(b"\n"))
            board.write_bytes(data)
        results = encode_rows(new_rows, header=True)
        (run / RESULTS_FILE).write_bytes(results if cut is None else results[:cut])
        before = board.read_bytes() if board.exists() else None
        try:
            submit([run], board, allow_new_env=False)
        except UsageError as error:
            assert_one_line(error)
            assert (board.read_bytes() if board.exists() else None) == before
            event("refused")
            return
        event("submitted")
        old = [] if board_rows is None else [row.__class__(**{**row.__dict__, "method_config": "" if legacy else row.method_config}) for row in board_rows]  # fmt: skip
        # rows the run holds twice (every value but when each was written) go on the board once
        written, seen = [], set()
        for _, row in read_rows(run / RESULTS_FILE):
            content = tuple(value for name, value in row.__dict__.items() if name != "created_at")
            if content not in seen:
                seen.add(content)
                written.append(row)
        # a row identical to one already on the board (every cell) is there already: left out
        written = [row for row in written if row not in set(old)]
        assert [row for _, row in read_rows(board)] == old + written
