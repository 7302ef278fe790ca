"""A small headless-Chromium driver over the DevTools protocol, for testing report pages.

:func:`find_chromium` locates the browser; :func:`open_page` starts it on a private profile,
loads one local file, and returns what the page did: console errors, uncaught exceptions,
dialogs (an ``alert`` would mean injected script ran), network requests, and the value of a
JavaScript probe. Everything is bounded by one deadline, talks only to 127.0.0.1, and the browser
(its whole process group) is always killed at the end.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import websocket

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
"""Executable names tried, in order."""

DEADLINE_S = 30.0
"""Time allowed for one page: start, load, probe and (optionally) screenshot."""


def find_chromium() -> str | None:
    """The first Chromium-like browser on PATH, or None."""
    for name in BROWSERS:
        if path := shutil.which(name):
            return path
    return None


@dataclass
class PageRun:
    """What happened while a page loaded.

    Attributes:
        errors: uncaught exceptions, console errors and warnings, and browser log errors.
        dialogs: messages of JavaScript dialogs (alert, confirm, prompt) the page opened.
        requests: URLs the page asked for (the page itself included).
        probe: the JSON value returned by the probe expression.
    """

    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    probe: Any = None


class _Session:
    """One DevTools websocket: commands in, events recorded, all under a deadline."""

    def __init__(self, url: str, deadline: float) -> None:
        self.deadline = deadline
        self.ws = websocket.create_connection(url, timeout=self._left(), suppress_origin=True)
        self.next_id = 0
        self.run = PageRun()

    def _left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"headless Chromium did not finish within {DEADLINE_S:.0f} s")
        return left

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send a command and wait for its result, recording the events that arrive meanwhile."""
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = self._receive()
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))

    def wait_for(self, event: str) -> None:
        """Record events until ``event`` arrives."""
        while self._receive().get("method") != event:
            pass

    def _receive(self) -> dict[str, Any]:
        self.ws.settimeout(self._left())
        message: dict[str, Any] = json.loads(self.ws.recv())
        self._record(message.get("method"), message.get("params", {}))
        return message

    def _record(self, method: str | None, params: dict[str, Any]) -> None:
        run = self.run
        if method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            run.errors.append(f"exception: {details.get('exception', {}).get('description')}"
                              f" ({details.get('text')})")
        elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "warning",
                                                                         "assert"):
            text = " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
            run.errors.append(f"console.{params['type']}: {text}")
        elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
            entry = params["entry"]
            run.errors.append(f"log {entry['level']}: {entry['text']} {entry.get('url', '')}")
        elif method == "Page.javascriptDialogOpening":
            run.dialogs.append(params["message"])
            self.ws.send(json.dumps({"id": -1, "method": "Page.handleJavaScriptDialog",
                                     "params": {"accept": False}}))
        elif method == "Network.requestWillBeSent":
            run.requests.append(params["request"]["url"])


def open_page(browser: str, page: Path, probe: str, *, width: int = 1280,
              screenshot: Path | None = None) -> PageRun:
    """Load ``page`` in headless Chromium and evaluate ``probe`` (a JS expression that
    returns a JSON string) once it has loaded; optionally save a full-page PNG screenshot."""
    deadline = time.monotonic() + DEADLINE_S
    with tempfile.TemporaryDirectory(prefix="hpcpolicy-chromium-") as profile, \
            _browser(browser, Path(profile), deadline) as ws_url:
        session = _Session(ws_url, deadline)
        try:
            for domain in ("Runtime", "Log", "Page", "Network"):
                session.call(f"{domain}.enable")
            session.call("Emulation.setDeviceMetricsOverride", width=width, height=900,
                         deviceScaleFactor=1, mobile=False)
            session.call("Page.navigate", url=page.resolve().as_uri())
            session.wait_for("Page.loadEventFired")
            result = session.call("Runtime.evaluate", expression=probe, returnByValue=True)
            if "exceptionDetails" in result:
                raise RuntimeError(f"probe failed: {result['exceptionDetails']}")
            session.run.probe = json.loads(result["result"]["value"])
            if screenshot is not None:
                _screenshot(session, screenshot)
        finally:
            session.ws.close()
        return session.run


def _screenshot(session: _Session, path: Path) -> None:
    """The whole page, top to bottom, as a PNG."""
    shot = session.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
    path.write_bytes(base64.b64decode(shot["data"]))


@contextlib.contextmanager
def _browser(executable: str, profile: Path, deadline: float) -> Iterator[str]:
    """Run headless Chromium on ``profile``; yield the page's DevTools websocket URL."""
    process = subprocess.Popen(
        [executable, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--remote-debugging-address=127.0.0.1",
         "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: the renderers die with it
    )
    try:
        port = _devtools_port(profile, process, deadline)
        yield _page_socket(port, deadline)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def _devtools_port(profile: Path, process: subprocess.Popen[bytes], deadline: float) -> int:
    """The port Chromium chose, from the ``DevToolsActivePort`` file it writes at start."""
    marker = profile / "DevToolsActivePort"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"headless Chromium exited at start (code {process.returncode})")
        with contextlib.suppress(FileNotFoundError, ValueError, IndexError):
            return int(marker.read_text().splitlines()[0])
        time.sleep(0.05)
    raise TimeoutError("headless Chromium did not open its DevTools port")


def _page_socket(port: int, deadline: float) -> str:
    """The websocket URL of the browser's first page target."""
    timeout = max(0.1, deadline - time.monotonic())
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
    with direct.open(f"http://127.0.0.1:{port}/json/list", timeout=timeout) as reply:
        targets = json.load(reply)
    return next(str(t["webSocketDebuggerUrl"]) for t in targets if t["type"] == "page")
