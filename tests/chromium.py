"""Drive a real headless Chromium over the DevTools protocol (CDP), with no extra package.

Chromium's ``--remote-debugging-pipe`` reads NUL-terminated JSON commands on fd 3 and
writes responses and events on fd 4; this module speaks that protocol: open a page, wait
for it to load, evaluate JavaScript in it, read the values back. Used by the report test
(tests/test_report_browser.py) to look at ``report.html`` as a reader's browser lays it out.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

#: Chromium's executable names on Debian and elsewhere.
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    """Path of a Chromium on PATH, or None."""
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


class Chromium:
    """One headless Chromium with one page of a given window size."""

    def __init__(self, executable: str, profile_dir, width: int = 1280, height: int = 800):
        commands_read, self._commands = os.pipe()
        self._events, events_write = os.pipe()

        # Chromium reads commands on fd 3 and writes on fd 4: bash puts the pipes there.
        wire = f'exec "$0" "$@" 3<&{commands_read} 4>&{events_write}'
        self._process = subprocess.Popen(
            [
                "bash",
                "-c",
                wire,
                executable,
                "--headless",
                "--remote-debugging-pipe",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile_dir}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(commands_read, events_write),
        )
        os.close(commands_read)
        os.close(events_write)
        self._buffer = b""
        self._next_id = 0
        self._queued: list[dict] = []
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        self._session = self.send("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        self.send("Emulation.setDeviceMetricsOverride", session=True, width=width,
                  height=height, deviceScaleFactor=1, mobile=False)  # fmt: skip
        self.send("Page.enable", session=True)

    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._events, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed its DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method: str, session: bool = False, timeout: float = 60, **params):
        """Send one command and return its result (raises on a protocol error)."""
        self._next_id += 1
        command = {"id": self._next_id, "method": method, "params": params}
        if session:
            command["sessionId"] = self._session
        os.write(self._commands, json.dumps(command).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            message = self._read_message(deadline)
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self._queued.append(message)

    def wait_for_event(self, method: str, timeout: float = 60) -> dict:
        """The next event of this name (already received or still to come)."""
        for i, message in enumerate(self._queued):
            if message.get("method") == method:
                return self._queued.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            message = self._read_message(deadline)
            if message.get("method") == method:
                return message
            self._queued.append(message)

    def open(self, url: str) -> None:
        """Navigate and wait for the load event."""
        self._queued.clear()
        self.send("Page.navigate", session=True, url=url)
        self.wait_for_event("Page.loadEventFired")

    def evaluate(self, expression: str):
        """Evaluate JavaScript in the page (promises awaited), return its JSON value."""
        result = self.send("Runtime.evaluate", session=True, expression=expression,
                           awaitPromise=True, returnByValue=True)  # fmt: skip
        if "exceptionDetails" in result:
            raise RuntimeError(f"JavaScript error: {result['exceptionDetails']}")
        return result["result"].get("value")

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        os.close(self._commands)
        os.close(self._events)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
