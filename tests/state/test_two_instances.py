"""Two Dragoman instances behind HAProxy (round robin) sharing one Redis response store, both started and
stopped here: a conversation whose turns land on different instances continues; killing the instance that
serves a stream loses only that stream (the client sees it cut, never a wrong answer), and the next turn
works on the other instance. Skipped, saying why, without ``haproxy`` or ``redis-server``."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from typing import Any

import pytest
from tests.e2e.conftest import Proxy
from tests.e2e.conftest import free_port
from tests.e2e.conftest import wait_port
from tests.ledger.conftest import redis_url  # noqa: F401 - the session's redis-server
from tests.state.conversation import conversation

from dragoman.demo import FakeUpstream

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

HAPROXY_CFG = """
global
    maxconn 200
defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    retries 2
    option redispatch
    option http-server-close
frontend dragoman
    bind 127.0.0.1:{port}
    default_backend instances
backend instances
    balance roundrobin
    http-response set-header x-served-by %s
    server a 127.0.0.1:{a} check inter 500ms fall 1 rise 1
    server b 127.0.0.1:{b} check inter 500ms fall 1 rise 1
"""


@pytest.fixture(scope="module")
def haproxy_bin() -> str:
    exe = shutil.which("haproxy")
    if exe is None:
        pytest.skip("haproxy is not installed (apt-get install -y haproxy): the two-instance test does not run")
    return exe


@pytest.fixture
def cluster(haproxy_bin, redis_url, tmp_path):  # noqa: F811 - the fixture imported above
    with FakeUpstream(scenarios={"conversation": conversation}, scenario="conversation", delay=0.05) as up:
        extra = ["--set", f"dragoman_responses_store={redis_url}"]
        (tmp_path / "a").mkdir()
        (tmp_path / "b").mkdir()
        a = Proxy("anthropic", up, tmp_path / "a", extra)
        b = Proxy("anthropic", up, tmp_path / "b", extra)
        port = free_port()
        cfg = tmp_path / "haproxy.cfg"
        cfg.write_text(HAPROXY_CFG.format(port=port, a=a.port, b=b.port))
        proc = subprocess.Popen(
            [haproxy_bin, "-f", str(cfg), "-db"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            wait_port(port, proc)
            time.sleep(1.2)  # both servers seen up by the health checks
            yield up, {"a": a, "b": b}, port
        finally:
            proc.terminate()
            proc.wait(timeout=10)
            a.stop()
            b.stop()


def create(c: Any, **kw: Any) -> tuple[Any, str]:
    kw.setdefault("model", "claude-fake")
    kw.setdefault("tools", [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}])
    raw = c.responses.with_raw_response.create(**kw)
    return raw.parse(), raw.headers.get("x-served-by", "")


def follow_up(resp: Any, n: int) -> list[dict[str, Any]]:
    calls = [o for o in resp.output if o.type == "function_call"]
    if calls:
        return [{"type": "function_call_output", "call_id": calls[0].call_id, "output": f"sunny {n}"}]
    return [{"role": "user", "content": f"and tomorrow? {n}"}]


def test_turns_on_different_instances_continue(cluster) -> None:
    up, _, port = cluster
    c = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="k", max_retries=0)
    served = []
    prev, inp = None, f"weather? {uuid.uuid4().hex}"
    for n in range(4):
        resp, who = create(c, input=inp, **({"previous_response_id": prev.id} if prev else {}))
        assert resp.status == "completed"
        served.append(who)
        prev, inp = resp, follow_up(resp, n)
    assert set(served) == {"a", "b"}, served  # round robin: the chain crossed instances
    with up.lock:
        last = up.requests[-1].body["messages"]
    assert [m["role"] for m in last] == ["user", "assistant", "user", "assistant", "user", "assistant", "user"]
    for who in ("a", "b"):  # each instance reads what the other stored
        got = httpx.get(f"http://127.0.0.1:{port}/v1/responses/{prev.id}", headers={"authorization": "Bearer k"})
        assert got.status_code == 200 and got.json()["id"] == prev.id, (who, got.text[:300])


def test_killing_an_instance_mid_stream_loses_only_that_stream(cluster) -> None:
    up, instances, port = cluster
    c = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="k", max_retries=0)
    first, _ = create(c, input=f"weather? {uuid.uuid4().hex}")
    body = {"model": "claude-fake", "stream": True, "previous_response_id": first.id, "input": follow_up(first, 0)}
    seen: list[str] = []
    cut = False
    with httpx.stream(
        "POST",
        f"http://127.0.0.1:{port}/v1/responses",
        json=body,
        headers={"authorization": "Bearer k"},
        timeout=30,
    ) as r:
        assert r.status_code == 200
        victim = instances[r.headers["x-served-by"]]
        try:
            for line in r.iter_lines():
                if line.startswith("data: "):
                    seen.append(json.loads(line[6:])["type"])
                    if len(seen) == 3:
                        victim.proc.kill()
        except (httpx.RemoteProtocolError, httpx.ReadError):
            cut = True
    assert len(seen) >= 3 and "response.completed" not in seen, seen  # a cut, never a made-up end
    assert cut or seen[-1] != "response.completed"
    victim.proc.wait(timeout=10)
    time.sleep(1.2)  # HAProxy's health check marks it down
    again, who = create(c, input=follow_up(first, 0), previous_response_id=first.id)
    assert again.status == "completed" and who != next(k for k, v in instances.items() if v is victim)
