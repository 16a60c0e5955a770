"""`llmperf nightly` hands its pytest the store's URL through the environment, never on the
command line (where a password would sit in the process list all night): a night with a real
PostgreSQL store whose URL holds a password (the test server trusts local connections, so any
password is accepted): the plugin's store is that URL, the night publishes its page from it,
and the child's argv holds no password."""

from __future__ import annotations

import subprocess

from pytest_llmperf.cli import main

SUITE = """
import os

import pytest

from pytest_llmperf.plugin.hooks import SETTINGS_KEY

@pytest.mark.cpu
def test_one(pytestconfig):
    # The plugin's store is the one the environment named.
    assert pytestconfig.stash[SETTINGS_KEY].history == os.environ["LLMPERF_HISTORY"]
"""
PASSWORD = "s3cret-pw"


def test_the_store_url_reaches_pytest_by_the_environment_only(tmp_path, monkeypatch,
                                                             postgres_db):
    url = postgres_db.replace("://llmperf@", f"://llmperf:{PASSWORD}@", 1)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "test_night.py").write_text(SUITE)
    started = []
    real_popen = subprocess.Popen

    def popen(argv, **kwargs):
        started.append((argv, kwargs.get("env")))
        return real_popen(argv, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", popen)
    assert main(["nightly", "--marker", "cpu", "--store", url, "--out", "reports",
                 "--publish", "site", "--suites", "test_night.py", "--",
                 "-p", "no:cacheprovider"]) == 0
    [(argv, env)] = started
    assert not any(PASSWORD in word for word in argv), argv
    assert env["LLMPERF_HISTORY"] == url
    assert "<title>pytest-llmperf history</title>" in (tmp_path / "site/index.html").read_text()
