"""The Dragoman content view in a real mitmweb, seen by a headless Chromium (issue 35, item 2).

mitmweb (from this venv) runs the addon in reverse mode in front of the demo fake upstream: an Anthropic
client, an openai-chat upstream whose streamed answer has thinking, text and a tool call, and
``dragoman_keep_answer=true``. ``mitmweb_view.mjs`` (Playwright, npm ``playwright-core``, driving
Debian's ``chromium``) selects the flow, opens its Response tab and returns the rendered text; the
screenshot is kept in the test's tmp dir (its path printed). Skips, saying what is missing, only where
Chromium, node or playwright-core is not installed (``.ci/run`` installs them).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mitmproxy.version import VERSION

from dragoman.demo import SIGNATURE
from dragoman.demo import THINKING_PIECES
from dragoman.demo import FakeUpstream
from dragoman.demo.answer import Answer
from dragoman.demo.answer import Call
from dragoman.demo.render import render
from dragoman.demo.wire import Reply
from dragoman.demo.wire import Request
from e2e.conftest import ROOT
from e2e.conftest import SCRIPT
from e2e.conftest import free_port
from e2e.conftest import wait_port

DRIVER = Path(__file__).with_name("mitmweb_view.mjs")
PASSWORD = "dragoman-browser-test"
TEXT = ("Checking", " the weather", " in Paris.")
CALL = Call("call_weather_1", "get_weather", ('{"city"', ': "Par', 'is"}'), item_id="fc_fake_0")


def _thinking_text_tool(request: Request) -> Reply:
    return render(request, Answer(thinking=THINKING_PIECES, signature=SIGNATURE, text=TEXT, calls=(CALL,)))


def _tools() -> tuple[str, str, str]:
    """node, chromium, playwright-core's folder; skips saying which is missing."""
    node = shutil.which("node")
    chromium = os.environ.get("DRAGOMAN_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    pw = Path(os.environ.get("DRAGOMAN_PLAYWRIGHT") or ROOT / ".cache/playwright/node_modules/playwright-core")
    missing = [
        what
        for what, ok in (
            ("node", node),
            ("chromium (apt-get install chromium)", chromium),
            (f"playwright-core in {pw} (npm install --prefix .cache/playwright playwright-core)", pw.is_dir()),
        )
        if not ok
    ]
    if missing:
        pytest.skip("browser test needs " + ", ".join(missing) + "; .ci/run installs them")
    return str(node), str(chromium), str(pw)


def _mitmweb(upstream: FakeUpstream, workdir: Path) -> tuple[subprocess.Popen, int, int, Path]:
    exe = Path(sys.executable).parent / "mitmweb"
    if not exe.exists():
        pytest.skip(f"no mitmweb next to {sys.executable}")
    port, web_port = free_port(), free_port()
    log = workdir / "mitmweb.log"
    auth = ["--set", f"web_password={PASSWORD}"] if tuple(map(int, VERSION.split(".")[:2])) >= (11, 1) else []
    argv = [
        str(exe), "-s", str(SCRIPT), "--mode", f"reverse:{upstream.url}",
        "--listen-host", "127.0.0.1", "-p", str(port),
        "--web-host", "127.0.0.1", "--web-port", str(web_port),
        "--set", "web_open_browser=false", *auth,
        "--set", f"confdir={workdir / 'confdir'}",
        "--set", "dragoman_target=openai-chat", "--set", f"dragoman_upstream={upstream.url}/v1",
        "--set", "dragoman_keep_answer=true",
    ]  # fmt: skip
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=str(workdir))
    try:
        wait_port(port, proc)
        wait_port(web_port, proc)
    except RuntimeError:
        proc.kill()
        raise RuntimeError("mitmweb failed to start:\n" + log.read_text(errors="replace")[-5000:]) from None
    return proc, port, web_port, log


def _send(port: int) -> bytes:
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "stream": True,
        "thinking": {"type": "enabled", "budget_tokens": 512},
        "tools": [{"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {}}}}],
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
    }
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    conn.request("POST", "/v1/messages", json.dumps(body), {"content-type": "application/json", "x-api-key": "k"})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    assert resp.status == 200, data[:500]
    return data


def test_mitmweb_shows_the_dragoman_view_of_a_translated_stream(tmp_path: Path) -> None:
    node, chromium, pw = _tools()
    with FakeUpstream(scenarios={"browser": _thinking_text_tool}, scenario="browser") as upstream:
        proc, port, web_port, log = _mitmweb(upstream, tmp_path)
        try:
            stream = _send(port)
            assert b"event: message_stop" in stream and b"get_weather" in stream
            shot = tmp_path / "mitmweb-view.png"
            url = f"http://127.0.0.1:{web_port}/?token={PASSWORD}"
            run = subprocess.run(
                [node, str(DRIVER), pw, chromium, url, "/chat/completions", str(shot)],
                capture_output=True,
                text=True,
                timeout=60,
            )
            print(f"screenshot: {shot}")
            assert run.returncode == 0, f"{run.stderr[-4000:]}\nmitmweb log:\n{log.read_text(errors='replace')[-3000:]}"
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    text = seen["response"]  # the Dragoman view, chosen automatically (the test never touches the view menu)
    assert "Dragoman: anthropic client -> openai-chat upstream" in text
    # both sides, in two columns: the upstream's stream and the client's, read back as it left
    assert "the answer on both sides" in text
    assert "upstream sent (openai-chat, " in text and "client got (anthropic, " in text
    assert text.count("Let me think about this.") == 2  # thinking
    assert text.count("Checking the weather in Paris.") == 2  # the assembled text
    assert text.count('get_weather {"city": "Paris"}') == 2 and text.count("call_weather_1") == 2
    assert re.search(r"stop\s+tool_use\s+\|\s+tool_use", text)
    assert "message_start.usage.input_tokens" in text  # a lossiness entry (estimated input tokens)
    assert "lossiness report (0)" not in text
    assert shot.stat().st_size > 10_000
    sent = seen["request"]
    assert "request as sent upstream (openai-chat)" in sent
    assert "1 turn(s), tools: get_weather" in sent and '"reasoning_effort"' in sent
