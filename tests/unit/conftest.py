"""Fixtures that unit tests in more than one folder use."""

from __future__ import annotations

import pytest

from tests.unit.canned_server import CannedServer, serve


@pytest.fixture
def server():
    """canned_server.py's server on 127.0.0.1, for one test."""
    yield from serve(CannedServer())
