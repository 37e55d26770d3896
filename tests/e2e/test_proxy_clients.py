"""The real Claude Code and Codex CLI through Dragoman in explicit-proxy mode, offline: no base URL, the
clients talk TLS to api.anthropic.com / api.openai.com with the environment ``python -m dragoman env``
prints, and Dragoman routes their turns to a local fake upstream of another protocol.

The clients come from tests/clients/npm_clients.py (installed once into the npm cache folder); the tests
skip when npm or the registry cannot be reached (``DRAGOMAN_REQUIRE_CLIENTS=1`` makes that a failure).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dragoman.cli import env_recipes as dragoman_env
from dragoman.demo import FakeUpstream

from .test_proxy_mode import RegularProxy

pytestmark = pytest.mark.e2e

CLIENTS_DIR = Path(__file__).resolve().parents[1] / "clients"


def _npm_clients():
    if str(CLIENTS_DIR) not in sys.path:
        sys.path.insert(0, str(CLIENTS_DIR))
    try:
        import npm_clients
    except ImportError as e:  # the real-client helpers are not there
        pytest.skip(f"tests/clients/npm_clients.py unavailable: {e}")
    return npm_clients


@pytest.fixture(scope="module")
def clients():
    nc = _npm_clients()
    try:
        return nc, nc.ensure_clients()
    except nc.ClientsUnavailable as e:
        msg = f"real CLI clients unavailable: {e}"
        if os.environ.get("DRAGOMAN_REQUIRE_CLIENTS", "").strip() not in ("", "0", "false", "no"):
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)


@pytest.fixture(scope="module")
def fake():
    with FakeUpstream() as up:
        yield up


@pytest.fixture(scope="module")
def proxy(tmp_path_factory, fake):
    p = RegularProxy(
        tmp_path_factory.mktemp("proxy-clients"), "dragoman_target=openai-chat", f"dragoman_upstream={fake.url}/v1"
    )
    yield p
    p.stop()


def recipe_env(client: str, proxy: RegularProxy) -> dict[str, str]:
    """The variables ``python -m dragoman env CLIENT --format dotenv`` prints for this proxy."""
    out = {}
    for line in dragoman_env.env_lines(client, str(proxy.ca), proxy.url, fmt="dotenv"):
        name, _, value = line.partition("=")
        out[name] = value
    return out


def run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL)


def test_claude_code_through_explicit_proxy(clients, proxy, fake, tmp_path):
    nc, installed = clients
    home = tmp_path / "home"
    home.mkdir()
    env = nc.base_env(home)
    env.update(recipe_env("claude-code", proxy))
    env.update({"ANTHROPIC_API_KEY": nc.API_KEY, "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1"})
    assert "ANTHROPIC_BASE_URL" not in env
    before = len(fake.requests)
    r = run([str(installed.claude), "-p", "say hello", "--output-format", "json"], env, tmp_path)
    detail = f"rc {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}\n--- mitmdump ---\n{proxy.log()}"
    assert r.returncode == 0, detail
    assert '"is_error":false' in r.stdout and "Hello from" in r.stdout, detail
    seen = fake.requests[before:]
    assert [q.path for q in seen] == ["/v1/chat/completions"], detail
    assert seen[0].headers["authorization"] == f"Bearer {nc.API_KEY}"


def test_codex_builtin_provider_through_explicit_proxy(clients, proxy, fake, tmp_path):
    nc, installed = clients
    codex_home = tmp_path / "codex"
    (codex_home / "home").mkdir(parents=True)
    (codex_home / "config.toml").write_text("check_for_update_on_startup = false\n")  # no custom provider
    env = nc.base_env(codex_home / "home")
    env.update(recipe_env("codex", proxy))
    env.update({"CODEX_HOME": str(codex_home), "OPENAI_API_KEY": nc.API_KEY})
    before = len(fake.requests)
    argv = [str(installed.codex), "exec", "--color", "never", "--skip-git-repo-check"]
    argv += ["--dangerously-bypass-approvals-and-sandbox", "-c", "analytics.enabled=false"]
    argv += ["--disable", "plugins", "--disable", "apps", "say hello"]
    r = run(argv, env, tmp_path)
    detail = f"rc {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}\n--- mitmdump ---\n{proxy.log()}"
    assert r.returncode == 0 and "Hello from" in r.stdout, detail
    assert "provider: openai" in r.stderr, detail  # the built-in provider, to api.openai.com
    seen = fake.requests[before:]
    assert [q.path for q in seen] == ["/v1/chat/completions"], detail
    # the built-in provider's Responses WebSocket is served (no 426, no fallback to HTTP streaming)
    assert "Responses WebSocket accepted" in proxy.log() and "refused (426)" not in proxy.log(), detail
