"""Fixtures for the real-client end-to-end tests (Claude Code and Codex CLI from npm, through mitmdump).

``npm_clients``  the pinned clients, installed once into the npm cache folder (skip when npm or the
                 registry is unreachable; ``DRAGOMAN_REQUIRE_CLIENTS=1`` turns the skip into a failure)
``agent``        the fake agent upstream (agent_upstream.py), one per session, reset for every test
``dragoman``     ``dragoman(target)`` -> a running ``mitmdump -s addon/dragoman.py --mode reverse:<agent>``
                 (the e2e suite's ``Proxy``), one per target and session
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
# the helper modules next to this file are imported by their bare names, with or without an __init__.py
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from agent_upstream import AgentUpstream  # noqa: E402
from npm_clients import ClientsUnavailable  # noqa: E402
from npm_clients import ensure_clients  # noqa: E402

E2E_CONFTEST = HERE.parent / "e2e" / "conftest.py"


def _load_e2e():
    """The e2e suite's fixtures module, loaded under its own name (its ``Proxy`` starts mitmdump)."""
    name = "dragoman_e2e_fixtures"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, E2E_CONFTEST)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "clients: end-to-end tests driving the real Claude Code / Codex CLI binaries from npm"
    )


def require_clients() -> bool:
    return os.environ.get("DRAGOMAN_REQUIRE_CLIENTS", "").strip() not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def npm_clients():
    try:
        return ensure_clients()
    except ClientsUnavailable as e:
        msg = f"real CLI clients unavailable: {e}"
        if require_clients():
            pytest.fail(msg + " (DRAGOMAN_REQUIRE_CLIENTS=1)", pytrace=False)
        pytest.skip(msg)


@pytest.fixture(scope="session")
def agent_upstream():
    with AgentUpstream() as up:
        yield up


@pytest.fixture
def agent(agent_upstream, tmp_path):
    """The session's agent upstream, reset (plain mode, empty log) and logging to ``tmp_path/upstream.jsonl``."""
    agent_upstream.reset(log_path=tmp_path / "upstream.jsonl")
    yield agent_upstream
    agent_upstream.reset()


@pytest.fixture(scope="session")
def e2e():
    """The e2e suite's fixtures module (``e2e.Proxy(target, upstream, workdir, extra_args)`` starts mitmdump)."""
    return _load_e2e()


@pytest.fixture(scope="session")
def dragoman(agent_upstream, tmp_path_factory):
    e2e = _load_e2e()
    started: dict[str, object] = {}
    workdir = tmp_path_factory.mktemp("clients-mitm")

    def get(target: str):
        if target not in started:
            started[target] = e2e.Proxy(target, agent_upstream, workdir)
        return started[target]

    yield get
    for p in started.values():
        p.stop()
