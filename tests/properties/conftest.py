"""A hang fails the test run instead of stalling it: a per-example deadline (the profiles in
tests/conftest.py) only judges examples that return, so a parser that never does would keep CI
waiting until its own limit. After ``HANG_SECONDS`` in one test the process prints every
thread's stack and exits."""

from __future__ import annotations

import faulthandler
import sys

import pytest

HANG_SECONDS = 180  # every test here takes seconds; the slowest about 15 on a loaded 2-core machine


@pytest.fixture(autouse=True)
def fail_on_hang():
    faulthandler.dump_traceback_later(HANG_SECONDS, exit=True, file=sys.stderr)
    yield
    faulthandler.cancel_dump_traceback_later()
