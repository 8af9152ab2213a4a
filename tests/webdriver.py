"""A real headless Chromium driven through Debian's chromedriver and the W3C WebDriver
protocol (plain JSON over HTTP, no driver library): type into the real page, click its
real button, read the DOM and the cookies the browser kept, run a line of script in the
page, size its viewport as a phone's, take its picture."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import HANG_S, ready

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"
"""The key a WebDriver element reference is sent under."""


def _tool(name: str, package: str) -> str:
    found = shutil.which(name)
    if found is None:
        if os.environ.get("HIVELITE_NEED_BROWSER"):
            pytest.fail(f"{name} is not installed (.ci/run installs Debian's {package})")
        pytest.skip(f"{name} is not installed (apt-get install {package})")
    return found


class Browser:
    """One WebDriver session."""

    def __init__(self, driver: str, session: str) -> None:
        self.driver, self.session = driver, session

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        answer = httpx.request(method, f"{self.driver}/session/{self.session}{path}",
                               json=body, timeout=HANG_S)
        value = answer.json()["value"]
        if answer.status_code >= 400:
            raise AssertionError(f"webdriver {method} {path}: {value}")
        return value

    def go(self, url: str) -> None:
        self._call("POST", "/url", {"url": url})

    def find(self, css: str) -> str:
        found = self._call("POST", "/element", {"using": "css selector", "value": css})
        return str(found[ELEMENT])

    def type(self, css: str, text: str) -> None:
        self._call("POST", f"/element/{self.find(css)}/value", {"text": text})

    def click(self, css: str) -> None:
        self._call("POST", f"/element/{self.find(css)}/click", {})

    def run(self, script: str, *args: Any) -> Any:
        """``script`` (a function body: ``return …``) run in the page."""
        return self._call("POST", "/execute/sync", {"script": script, "args": list(args)})

    def viewport(self, width: int, height: int, *, mobile: bool = False) -> None:
        """The page's viewport exactly ``width`` by ``height`` CSS pixels (a phone's with
        ``mobile``: its meta viewport honoured), through Chromium's DevTools."""
        self._call("POST", "/goog/cdp/execute", {
            "cmd": "Emulation.setDeviceMetricsOverride",
            "params": {"width": width, "height": height, "deviceScaleFactor": 1,
                       "mobile": mobile}})

    def screenshot(self, path: Path) -> None:
        path.write_bytes(base64.b64decode(self._call("GET", "/screenshot")))

    @property
    def url(self) -> str:
        return str(self._call("GET", "/url"))

    @property
    def source(self) -> str:
        return str(self._call("GET", "/source"))

    def cookies(self) -> dict[str, str]:
        return {c["name"]: c["value"] for c in self._call("GET", "/cookie")}

    def wait_for(self, check: Any) -> None:
        """Until ``check()`` holds on the page (``HANG_S`` at most: a hang guard)."""
        start = time.monotonic()
        while not check():
            if time.monotonic() - start > HANG_S:
                raise AssertionError(f"waited {HANG_S:.0f} s; the page is at {self.url}")
            time.sleep(0.05)


@contextmanager
def chromium(profile: Path) -> Iterator[Browser]:
    """A headless Chromium with a fresh profile, as a user's browser: nothing of the
    test's own in its requests."""
    binary = _tool("chromium", "chromium")
    driver_bin = _tool("chromedriver", "chromium-driver")
    from .test_serve import free_port

    port = free_port()
    log_path = profile.parent / f"chromedriver-{port}.log"
    log = log_path.open("w")
    driver = subprocess.Popen([driver_bin, f"--port={port}"], stdout=log,
                              stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    args = ["--headless=new", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--window-size=1280,800", f"--user-data-dir={profile}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.append("--no-sandbox")  # Chromium's sandbox refuses to run as root
    try:
        def driver_ready() -> bool:
            try:
                return bool(httpx.get(url + "/status", timeout=5).json()["value"]["ready"])
            except (httpx.TransportError, ValueError, KeyError):
                return False

        ready(driver_ready, "chromedriver", driver, log_path.read_text)
        made = httpx.post(url + "/session", timeout=HANG_S, json={"capabilities": {
            "alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
                "binary": binary, "args": args}}}}).json()["value"]
        browser = Browser(url, made["sessionId"])
        try:
            yield browser
        finally:
            httpx.delete(f"{url}/session/{browser.session}", timeout=HANG_S)
    finally:
        driver.terminate()
        driver.wait(timeout=HANG_S)
        log.close()


@contextmanager
def another_site(page: bytes) -> Iterator[str]:
    """A web server of another origin (127.0.0.1 on a port of its own) serving ``page`` at
    ``/``: what a page of another site can make a signed-in browser post. Yields its URL."""
    import http.server
    import socket
    import threading

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: object) -> None:
            pass  # no line a request on the tests' output

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        server.shutdown()
        server.server_close()
