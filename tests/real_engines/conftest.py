"""Fixtures of the real-engine tier (selected with -m real_engine; see servers.py)."""

from __future__ import annotations

import pytest

from tests.real_engines.servers import sglang_server


@pytest.fixture(scope="session")
def ids_server(tmp_path_factory):
    """Real SGLang with --skip-tokenizer-init (token ids in and out, how production runs it), shared by the
    tier: a start costs tens of seconds to minutes on a CPU."""
    server = sglang_server(tmp_path_factory.mktemp("sglang-ids"), "--skip-tokenizer-init").start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def second_ids_server(tmp_path_factory):
    """A second server like `ids_server`, for the tests of several servers (affinity, the router)."""
    server = sglang_server(tmp_path_factory.mktemp("sglang-ids-2"), "--skip-tokenizer-init").start()
    yield server
    server.stop()
