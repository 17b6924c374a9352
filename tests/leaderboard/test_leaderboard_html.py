"""The leaderboard page in a real headless Chromium (Debian's package; ``make chromium``).

Chromium is driven over the DevTools protocol on ``--remote-debugging-pipe`` (the browser reads
commands on fd 3 and writes replies on fd 4, NUL-separated JSON), which needs neither a network
port nor a websocket or WebDriver dependency. In CI (``CI=true``) a missing Chromium fails the
test, since the page would otherwise go untested; locally it skips with the reason.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from offline_gitd.cli import main  # noqa: E402
from tests.support.runs import write_run  # noqa: E402

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
TIMEOUT_S = 30.0


class Browser:
    """A headless Chromium and a blocking DevTools client over its debugging pipe."""

    def __init__(self, executable: str, profile: Path) -> None:
        to_browser_read, self._to_browser = os.pipe()
        self._from_browser, from_browser_write = os.pipe()

        def wire_pipes() -> None:
            os.dup2(to_browser_read, 3)
            os.dup2(from_browser_write, 4)

        self.process = subprocess.Popen(
            [
                executable,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-dev-shm-usage",
                f"--user-data-dir={profile}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=wire_pipes,
            pass_fds=(3, 4),  # kept open after preexec_fn wires them
            start_new_session=True,  # its own process group, so close() ends its helpers too
        )
        os.close(to_browser_read)
        os.close(from_browser_write)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session = ""

    def send(self, method: str, params: dict[str, Any] | None = None, session: bool = True) -> Any:
        """Send one command and wait for its reply; events that arrive meanwhile are kept."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._receive()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self.events.append(reply)

    def wait_for(self, method: str) -> dict[str, Any]:
        """Wait for an event (or take it if it already arrived)."""
        while True:
            for event in self.events:
                if event.get("method") == method:
                    self.events.remove(event)
                    return event
            self.events.append(self._receive())

    def _receive(self) -> dict[str, Any]:
        deadline = time.monotonic() + TIMEOUT_S
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._from_browser], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError(f"no message from chromium in {TIMEOUT_S:.0f} s")
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed its debugging pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        """A real mouse click (press and release) at the centre of the element."""
        x, y = self.evaluate(
            f"(() => {{ const r = document.querySelector({json.dumps(selector)})"
            ".getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1})

    def close(self) -> None:
        # Kill the whole group: Chromium's renderer and crashpad children outlive the main process
        # and keep writing the profile, which made removing it fail now and then.
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=TIMEOUT_S)
        os.close(self._to_browser)
        os.close(self._from_browser)


@pytest.fixture
def browser() -> Iterator[Browser]:
    if CHROMIUM is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("chromium not installed (CI=true): run `make chromium`")
        pytest.skip("chromium not installed")
    # A helper may still be exiting after the group kill: a leftover file must not fail the test.
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        driver = Browser(CHROMIUM, Path(profile))
        try:
            target = driver.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            driver.session = driver.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Page", "Runtime", "Log"):
                driver.send(f"{domain}.enable")
            yield driver
        finally:
            driver.close()


def console_errors(events: list[dict[str, Any]]) -> list[Any]:
    """Console errors, uncaught exceptions and browser log errors among the events."""
    errors = []
    for event in events:
        params = event.get("params", {})
        if event.get("method") == "Runtime.exceptionThrown":
            errors.append(params["exceptionDetails"])
        elif event.get("method") == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
            errors.append(params["args"])
        elif event.get("method") == "Log.entryAdded" and params["entry"]["level"] == "error":
            errors.append(params["entry"])
    return errors


def test_page_loads_cleanly_and_sorts_by_clicked_column(tmp_path: Path, browser: Browser) -> None:
    finals = {("cql", "td", 1, 0.0): 10.0, ("cql", "itd", 5, 0.0): 30.0, ("cql", "gitd", 5, 1.0): 20.0}
    runs = []
    for (algorithm, critic, K, beta), final in finals.items():
        for seed in range(3):
            runs.append(
                str(
                    write_run(
                        tmp_path / f"{critic}-{seed}",
                        env="Pong",
                        algorithm=algorithm,
                        critic=critic,
                        seed=seed,
                        steps=[0, 10, 20],
                        returns=[0.0, final / 2, final + seed],
                        K=K,
                        beta=beta,
                    )
                )
            )
    board = tmp_path / "board.csv"
    assert main(["leaderboard", "submit", *runs, "--board", str(board)]) == 0
    site = tmp_path / "site"
    assert main(["leaderboard", "html", "--board", str(board), "--out", str(site), "--reps", "50"]) == 0

    browser.send("Page.navigate", {"url": (site / "index.html").as_uri()})
    browser.wait_for("Page.loadEventFired")
    methods = "Array.from(document.querySelectorAll('#leaderboard tbody tr')).map(r => r.cells[0].textContent)"
    before = browser.evaluate(methods)
    assert sorted(before) == ["cql:gitd", "cql:itd", "cql:td"]  # one row per method
    assert browser.evaluate("document.querySelectorAll('img').length") == 4  # aggregate, per_env, intervals, profile
    assert browser.evaluate("Array.from(document.images).every(i => i.naturalWidth > 0)")

    browser.click("#leaderboard th:nth-child(2)")  # IQM final: first click sorts descending
    assert browser.evaluate(methods) == ["cql:itd", "cql:gitd", "cql:td"]
    browser.click("#leaderboard th:nth-child(2)")
    assert browser.evaluate(methods) == ["cql:td", "cql:gitd", "cql:itd"]
    browser.click("#leaderboard th:nth-child(1)")
    assert browser.evaluate(methods) == ["cql:td", "cql:itd", "cql:gitd"]
    assert console_errors(browser.events) == []
