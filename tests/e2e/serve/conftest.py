"""A real ``tamperbench serve`` subprocess on 127.0.0.1 over the embedded model, one per session.

WHY one: each start imports torch and loads the model in a new process (seconds, tens on a loaded
machine); the tests only read from it (the killed-server test puts its own proxy in front of it)."""

from __future__ import annotations

import os

import pytest
from serve_helpers import Server


KEY_ENV, KEY = "TB_SERVE_TEST_KEY", "s3cret-test-key"


@pytest.fixture(scope="session")
def server():
    """One server for the session, with an API key (so the key check is tested on it too)."""
    s = Server("--api-key-env", KEY_ENV, env={KEY_ENV: KEY})
    os.environ[KEY_ENV] = KEY
    yield s
    s.stop()
