"""mitmdump startup with the addon: bad options exit 1 with a clear message; typos are warned about."""

from __future__ import annotations

import subprocess

import pytest

from listen_backlog import listen_backlog
from listen_backlog import somaxconn

from .conftest import SCRIPT
from .conftest import Proxy
from .conftest import free_port
from .conftest import mitmdump_bin

pytestmark = pytest.mark.e2e


def start(tmp_path, *sets: str) -> subprocess.CompletedProcess:
    argv = [
        mitmdump_bin(),
        "-s",
        str(SCRIPT),
        "--listen-host",
        "127.0.0.1",
        "-p",
        str(free_port()),
        "--set",
        f"confdir={tmp_path}",
    ]
    for s in sets:
        argv += ["--set", s]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)


@pytest.mark.parametrize(
    "sets, needle",
    [
        (
            ("dragoman_target=openai-chat", "dragoman_api_key=env:DRAGOMAN_SURELY_UNSET"),
            "DRAGOMAN_SURELY_UNSET is not set",
        ),
        (("dragoman_target=openai-chat", "dragoman_upstream=ftp://x"), "dragoman_upstream"),
        (("dragoman_target=vertex",), "dragoman_target"),
        (("dragoman_match=~q ((",), "dragoman_match"),
        (("dragoman_read_size=1k",), "dragoman_read_size"),
    ],
)
def test_bad_option_exits_with_message(tmp_path, sets, needle):
    r = start(tmp_path, *sets)
    assert r.returncode == 1
    assert needle in r.stdout + r.stderr


def test_typo_option_is_warned(fake, tmp_path):
    p = Proxy("openai-chat", fake, tmp_path, ["--set", "dragoman_tagret=anthropic"])
    try:
        import time

        for _ in range(50):
            if "dragoman_tagret" in p.log():
                break
            time.sleep(0.1)
        assert "unknown option dragoman_tagret" in p.log()
    finally:
        p.stop()


@pytest.mark.parametrize("sets, expected", [((), 4096), (("dragoman_listen_backlog=0",), 100)])
def test_mitmproxy_listens_with_a_backlog_for_bursts(fake, tmp_path, sets, expected):
    """500 clients connecting at once must not wait for SYN retries (issue 31): mitmproxy's own backlog is 100."""
    import time

    extra = [a for s in sets for a in ("--set", s)]
    p = Proxy("openai-chat", fake, tmp_path, extra)
    try:
        want = min(expected, somaxconn())
        got = None
        for _ in range(100):
            got = listen_backlog(p.port)
            if got == want:
                break
            time.sleep(0.1)
        assert got == want, p.log()
    finally:
        p.stop()
