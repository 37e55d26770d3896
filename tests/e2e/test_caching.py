"""Prompt caching across protocols through a real mitmdump (issue 36): a fake Anthropic upstream that caches as
documented (``bench/cache_fake.py``) sees breakpoints from Responses and Chat sessions, the clients see the
cache reads in their own usage fields, and an Anthropic client's own breakpoints arrive exactly as sent."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import caching  # noqa: E402
from cache_fake import CacheModel  # noqa: E402
from cache_fake import CachingAnthropic  # noqa: E402

pytestmark = pytest.mark.e2e


def _block(text: str, mark: dict | None = None) -> dict:
    b = {"type": "text", "text": text}
    if mark is not None:
        b["cache_control"] = mark
    return b


def test_the_fake_reads_only_marked_prefixes_within_their_ttl():
    now = [0.0]
    model = CacheModel(clock=lambda: now[0])
    big = "x" * 8000  # 2000 tokens: over the minimum cacheable prefix
    marked = {"system": [_block(big, {"type": "ephemeral"})], "messages": [{"role": "user", "content": "hi"}]}
    unmarked = {"system": [_block(big)], "messages": [{"role": "user", "content": "hi"}]}
    assert model.usage(unmarked)["cache_read_input_tokens"] == 0
    assert model.usage(unmarked)["cache_read_input_tokens"] == 0  # nothing marked: nothing cached
    first = model.usage(marked)
    assert first["cache_read_input_tokens"] == 0 and first["cache_creation_input_tokens"] >= 2000
    assert model.usage(marked)["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
    now[0] += 301  # past the default 5-minute TTL
    assert model.usage(marked)["cache_read_input_tokens"] == 0
    auto = {"cache_control": {"type": "ephemeral"}, **unmarked}
    model.usage(auto)
    assert model.usage(auto)["cache_read_input_tokens"] > 0  # automatic caching marks the last block
    five = {"system": [_block(str(i), {"type": "ephemeral"}) for i in range(5)], "messages": []}
    with pytest.raises(ValueError, match="maximum of 4"):
        model.usage(five)


@pytest.mark.parametrize("variant", ["off", "breakpoints", "auto"])
def test_sessions_through_mitmdump_read_from_cache(tmp_path, variant):
    rec = caching.run_variant(tmp_path, variant, None, turns=3)
    for session in ("codex", "chat"):
        r = rec[session]
        assert r["turns"] == 3
        if variant == "off":
            assert r["upstream_cache_read"] == 0 and r["client_cached_tokens"] == 0
            continue
        # turn 1 writes, turns 2 and 3 read the prefix the turn before covered
        assert r["per_turn_cached"][0] == 0 and all(c > 0 for c in r["per_turn_cached"][1:])
        assert r["client_cached_tokens"] == r["upstream_cache_read"]  # the client sees the reads in its own usage
        assert r["client_input_tokens"] == r["upstream_input_tokens"]
        assert r["upstream_cache_write"] > 0


def test_an_anthropic_clients_own_breakpoints_arrive_unchanged(tmp_path):
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 64,
        "system": [_block("s" * 5000, {"type": "ephemeral", "ttl": "1h"})],
        "messages": [{"role": "user", "content": [_block("hi", {"type": "ephemeral"})]}],
    }
    with CachingAnthropic() as up:
        routes = tmp_path / "routes.yaml"
        routes.write_text(
            f"upstreams:\n  - {{name: c, protocol: anthropic, base_url: 'http://127.0.0.1:{up.port}', cache: auto}}\n"
            "routes:\n  - {match: '*', to: c}\n"
        )
        proc = caching.start(tmp_path, "anthropic", up.port, {"dragoman_config": str(routes)}, {}, caching.SCRIPT)
        try:
            status, data = caching.post(proc.port, "/v1/messages", body)
            assert status == 200, data
            status, data = caching.post(proc.port, "/v1/messages", body)
        finally:
            proc.stop()
        assert up.bodies == [body, body]  # no request-level marker added, the client's own kept as sent
        assert json.loads(data)["usage"]["cache_read_input_tokens"] > 0
