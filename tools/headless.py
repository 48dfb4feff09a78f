"""Drive headless Chromium over the DevTools protocol (stdlib only) to check and screenshot a report.

Used by the browser test and ``docs/make_screenshots.py``; not needed to write reports.  Chromium talks
CDP over a pipe (``--remote-debugging-pipe``: it reads commands from fd 3 and writes replies to fd 4, each
a JSON message ended by a NUL byte), so no websocket library or open port is involved.

    with Browser() as b:
        page = b.open("report.html")          # waits for the load event
        page.errors                           # uncaught exceptions, console.error, failed loads
        page.requests                         # every URL the page asked for
        page.eval("document.title")
        png = page.screenshot(width=1280)
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from graphroof.errors import ReportError

__all__ = ["find_chromium", "Browser", "Page", "CHROMIUM_FLAGS"]

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-extensions", "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio",
                  "--remote-debugging-pipe")


def find_chromium() -> str | None:
    """Path of a Chromium / Chrome binary (``$CHROMIUM`` first), or None."""
    env = os.environ.get("CHROMIUM")
    if env and Path(env).exists():
        return env
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


class Browser:
    """One headless Chromium process; use as a context manager."""

    def __init__(self, binary: str | None = None, timeout_s: float = 30.0):
        self.binary = binary or find_chromium()
        if not self.binary:
            raise ReportError("no Chromium found; install it (apt-get install chromium) or set $CHROMIUM")
        self.timeout_s = timeout_s
        self._id = 0
        self._buf = b""
        self._events: list[dict] = []
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> Browser:
        self._tmp = tempfile.TemporaryDirectory(prefix="graphroof-chromium-")
        cmd_r, self._cmd_w = os.pipe()    # we write commands, Chromium reads fd 3
        self._res_r, res_w = os.pipe()    # Chromium writes fd 4, we read

        def child_fds() -> None:  # in the child: the pipe ends become fds 3 and 4
            hi_r, hi_w = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10), fcntl.fcntl(res_w, fcntl.F_DUPFD, 10)
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        self.proc = subprocess.Popen(
            [self.binary, *CHROMIUM_FLAGS, f"--user-data-dir={self._tmp.name}", "about:blank"],
            preexec_fn=child_fds, close_fds=False, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(cmd_r)
        os.close(res_w)
        return self

    def __exit__(self, *exc) -> None:
        try:
            if self.proc and self.proc.poll() is None:
                try:
                    self.send("Browser.close")
                except Exception:  # noqa: BLE001 - best effort; we kill it below
                    pass
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        finally:
            for fd in (self._cmd_w, self._res_r):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._tmp.cleanup()

    # -- protocol ------------------------------------------------------------------------------------
    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ReportError("Chromium did not answer in time")
            ready, _, _ = select.select([self._res_r], [], [], left)
            if ready:
                chunk = os.read(self._res_r, 1 << 16)
                if not chunk:
                    raise ReportError("Chromium exited unexpectedly")
                self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout_s
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise ReportError(f"Chromium {method}: {reply['error'].get('message')}")
                return reply.get("result", {})
            self._events.append(reply)

    def wait_event(self, method: str, session: str | None = None) -> dict:
        deadline = time.monotonic() + self.timeout_s
        for i, ev in enumerate(self._events):
            if ev.get("method") == method and ev.get("sessionId") == session:
                return self._events.pop(i)
        while True:
            ev = self._read_message(deadline)
            if ev.get("method") == method and ev.get("sessionId") == session:
                return ev
            self._events.append(ev)

    def open(self, path_or_url: str | os.PathLike, width: int = 1280, height: int = 900) -> Page:
        url = str(path_or_url)
        if "://" not in url:
            url = Path(url).resolve().as_uri()
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session)
        self.send("Page.navigate", {"url": url}, session)
        self.wait_event("Page.loadEventFired", session)
        page.eval("1")  # let pending console events arrive
        return page


class Page:
    def __init__(self, browser: Browser, session: str):
        self.b, self.session = browser, session

    def _mine(self) -> list[dict]:
        return [e for e in self.b._events if e.get("sessionId") == self.session]

    @property
    def errors(self) -> list[str]:
        """Uncaught exceptions, ``console.error`` / ``console.assert`` calls and error log entries."""
        out = []
        for e in self._mine():
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                out.append(f"uncaught: {d.get('exception', {}).get('description') or d.get('text')}")
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console.error: " + " ".join(str(a.get("value", a.get("description", "")))
                                                        for a in p.get("args", [])))
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}".strip())
        return out

    @property
    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self._mine() if e.get("method") == "Network.requestWillBeSent"]

    def eval(self, expression: str) -> Any:
        r = self.b.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                             "awaitPromise": True}, self.session)
        if "exceptionDetails" in r:
            raise ReportError(f"script failed: {r['exceptionDetails'].get('exception', {}).get('description')}")
        return r.get("result", {}).get("value")

    def screenshot(self, width: int = 1280, full_page: bool = True, max_height: int = 20000) -> bytes:
        """PNG bytes of the page at *width* CSS pixels (the whole page when *full_page*)."""
        height = 900
        if full_page:
            height = min(int(self.eval("Math.ceil(document.documentElement.scrollHeight)")), max_height)
        self.b.send("Emulation.setDeviceMetricsOverride",
                    {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, self.session)
        data = self.b.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": full_page},
                           self.session)["data"]
        return base64.b64decode(data)
