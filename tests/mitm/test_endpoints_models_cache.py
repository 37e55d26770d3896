"""``GET /v1/models``: the upstream's list merged with the model map's names, each once, and kept
``dragoman_models_ttl`` seconds per upstream and credential (issue 30, item 3). An injected clock moves time."""

from __future__ import annotations

import json

import pytest
from mitmproxy import exceptions
from mitmproxy.test import taddons

from dragoman.mitm.endpoints import METADATA_KEY
from dragoman.mitm.endpoints import Endpoints
from dragoman.mitm.translate_addon import Translate

from .test_endpoints import ANTHROPIC_LIST
from .test_endpoints import make_flow
from .test_endpoints import respond

KEY_A = "sk-client-SECRET-A"
KEY_B = "sk-client-SECRET-B"
UPSTREAM = "http://u.example/v1"
DUPLICATED = {
    "object": "list",
    "data": [
        {"id": "gpt-a", "object": "model", "created": 1, "owned_by": "x"},
        {"id": "gpt-b", "object": "model", "created": 2, "owned_by": "x"},
        {"id": "gpt-a", "object": "model", "created": 3, "owned_by": "x"},
    ],
}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def addon():
    return Endpoints()


@pytest.fixture
def clock(addon):
    c = Clock()
    addon.models_cache.clock = c
    return c


@pytest.fixture
def tctx(addon):
    with taddons.context(addon, Translate()) as tctx:
        yield tctx


def ask(addon, key: str = KEY_A, path: str = "/v1/models"):
    f = make_flow("GET", f"https://api.anthropic.com{path}", headers={"x-api-key": key})
    addon.request(f)
    return f


def forwarded(addon, f, listing=DUPLICATED) -> list[str]:
    assert f.response is None, "expected the request to go upstream"
    respond(f, 200, listing)
    addon.response(f)
    return [m["id"] for m in json.loads(f.response.content)["data"]]


def answered(f) -> list[str]:
    assert f.response is not None and f.response.status_code == 200, "expected an answer from the cache"
    assert f.metadata[METADATA_KEY] == "models-cached"
    return [m["id"] for m in json.loads(f.response.content)["data"]]


def test_merged_with_aliases_and_deduplicated(tctx, addon, clock):
    tctx.configure(
        addon, dragoman_target="openai-chat", dragoman_upstream=UPSTREAM, dragoman_model_map=["claude-x=gpt-b", "m2"]
    )
    ids = forwarded(addon, ask(addon))
    assert ids == ["gpt-a", "gpt-b", "claude-x", "m2"]  # the upstream's duplicate gpt-a and the alias gpt-b once


def test_cached_until_the_ttl_expires(tctx, addon, clock):
    tctx.configure(addon, dragoman_target="openai-chat", dragoman_upstream=UPSTREAM, dragoman_model_map=["alias"])
    assert forwarded(addon, ask(addon)) == ["gpt-a", "gpt-b", "alias"]
    clock.now += 299.9
    f = ask(addon)
    assert answered(f) == ["gpt-a", "gpt-b", "alias"]
    # answered locally: the saved flow carries no credential, and nothing is waiting for an upstream answer
    assert "x-api-key" not in f.request.headers and "authorization" not in f.request.headers
    assert not addon.pending
    clock.now += 0.1  # 300 s: expired
    assert forwarded(addon, ask(addon), ANTHROPIC_LIST) == ["claude-a", "claude-b", "alias"]
    clock.now += 10
    assert answered(ask(addon)) == ["claude-a", "claude-b", "alias"]


def test_ttl_option(tctx, addon, clock):
    tctx.configure(addon, dragoman_target="openai-chat", dragoman_upstream=UPSTREAM, dragoman_models_ttl=5)
    forwarded(addon, ask(addon))
    clock.now += 4
    answered(ask(addon))
    clock.now += 1
    forwarded(addon, ask(addon))


def test_ttl_zero_always_asks_upstream(tctx, addon, clock):
    tctx.configure(addon, dragoman_target="openai-chat", dragoman_upstream=UPSTREAM, dragoman_models_ttl=0)
    for _ in range(3):
        forwarded(addon, ask(addon))
    assert len(addon.models_cache) == 0


def test_per_credential_and_per_query(tctx, addon, clock):
    tctx.configure(addon, dragoman_target="openai-chat", dragoman_upstream=UPSTREAM)
    forwarded(addon, ask(addon, KEY_A))
    forwarded(addon, ask(addon, KEY_B))  # another key may see another list
    forwarded(addon, ask(addon, KEY_A, "/v1/models?limit=1"))
    answered(ask(addon, KEY_A))
    answered(ask(addon, KEY_B))
    # the cache keeps a digest of the credential, never the credential
    assert all(KEY_A not in str(k) and KEY_B not in str(k) for k in addon.models_cache._entries)  # noqa: SLF001


def test_a_failed_list_is_not_cached(tctx, addon, clock):
    tctx.configure(addon, dragoman_target="openai-chat", dragoman_upstream=UPSTREAM, dragoman_model_map=["m1"])
    f = ask(addon)
    respond(f, 503, {"error": "busy"})
    addon.response(f)
    assert [m["id"] for m in json.loads(f.response.content)["data"]] == ["m1"]
    forwarded(addon, ask(addon))


def test_reconfiguring_the_upstream_empties_the_cache(tctx, addon, clock):
    tctx.configure(addon, dragoman_target="openai-chat", dragoman_upstream=UPSTREAM)
    forwarded(addon, ask(addon))
    tctx.configure(addon, dragoman_upstream="http://other.example/v1")
    forwarded(addon, ask(addon))


def test_negative_ttl_is_refused(tctx, addon):
    with pytest.raises(exceptions.OptionsError, match="dragoman_models_ttl"):
        tctx.options.update(dragoman_models_ttl=-1)
