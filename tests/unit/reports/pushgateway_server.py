"""A real Prometheus Pushgateway for the export tests: Debian's `prometheus-pushgateway`
package (which scripts/install-cpu installs), started on a free loopback port for one test
module and stopped at its end. Nights are pushed to it and read back from its /metrics, as
Prometheus scrapes them."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest

__all__ = ["pushgateway", "scrape"]

BINARY = "prometheus-pushgateway"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def scrape(url: str) -> str:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        return response.read().decode()


def _wait_ready(url: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{BINARY} exited with {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{BINARY} not ready at {url} within 30 s")


@pytest.fixture(scope="module")
def pushgateway():
    """The base URL of a running Pushgateway that holds nothing yet."""
    binary = shutil.which(BINARY)
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail(f"{BINARY} is not installed; scripts/install-cpu installs it")
        pytest.skip(f"{BINARY} is not installed (apt-get install {BINARY}, or run "
                    "scripts/install-cpu)")
    url = f"http://127.0.0.1:{_free_port()}"
    # --persistence.file=: in memory only (Debian's build defaults to a file in /var/lib, which
    # would carry one run's groups into the next).
    process = subprocess.Popen([binary, f"--web.listen-address={url[7:]}", "--persistence.file="],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_ready(url, process)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)
