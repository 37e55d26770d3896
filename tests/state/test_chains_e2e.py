"""``previous_response_id`` toward Anthropic and Chat upstreams through a real mitmdump, with the official
``openai`` SDK as the client: 5-turn chains with tool calls and reasoning, where the upstream receives
exactly what it receives when the client sends the conversation whole; GET, DELETE and ``input_items``;
404 for unknown, deleted and other keys' ids; the SQLite store surviving a restart."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from tests.e2e.conftest import Proxy
from tests.state.conversation import conversation

from dragoman.demo import FakeUpstream

openai = pytest.importorskip("openai")

TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }
]
TURNS = 5


@pytest.fixture(scope="module")
def upstream():
    with FakeUpstream(scenarios={"conversation": conversation}, scenario="conversation") as up:
        yield up


@pytest.fixture(scope="module")
def store_path(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("store") / "responses.sqlite3")


@pytest.fixture(scope="module", params=["anthropic", "openai-chat"])
def proxy(request, upstream, store_path, tmp_path_factory):
    p = Proxy(
        request.param, upstream, tmp_path_factory.mktemp("mitm"), ["--set", f"dragoman_responses_store={store_path}"]
    )
    yield p
    p.stop()


def client(proxy: Proxy, key: str = "client-key-a") -> Any:
    return openai.OpenAI(base_url=proxy.base_url("openai"), api_key=key, max_retries=0)


def create(c: Any, stream: bool, **kw: Any) -> Any:
    kw.setdefault("model", "claude-fake")
    kw.setdefault("tools", TOOLS)
    kw.setdefault("reasoning", {"effort": "medium", "summary": "auto"})
    if stream:
        with c.responses.stream(**kw) as s:
            for _ in s:
                pass
            return s.get_final_response()
    return c.responses.create(**kw)


def plain(obj: Any) -> Any:
    """A response as a dict without what the SDK's stream accumulator adds (``parsed_arguments``, ``parsed``)."""
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items() if k not in ("parsed_arguments", "parsed")}
    if isinstance(obj, list):
        return [plain(v) for v in obj]
    return obj


def next_input(resp: Any, n: int, nonce: str) -> list[dict[str, Any]]:
    calls = [o for o in resp.output if o.type == "function_call"]
    if calls:
        return [{"type": "function_call_output", "call_id": calls[0].call_id, "output": f"sunny {n}"}]
    return [{"role": "user", "content": f"and now? {nonce} {n}"}]


def bodies_since(upstream: FakeUpstream, start: int) -> list[dict[str, Any]]:
    with upstream.lock:
        return [r.body for r in upstream.requests[start:]]


def history(body: dict[str, Any]) -> Any:
    return {k: body.get(k) for k in ("messages", "system", "tools", "thinking", "reasoning_effort")}


def run_chain(c: Any, nonce: str) -> list[Any]:
    out = []
    prev = None
    inp: Any = f"weather in Paris? {nonce}"
    for n in range(TURNS):
        kw: dict[str, Any] = {"input": inp, "instructions": f"be brief {n}"}
        if prev is not None:
            kw["previous_response_id"] = prev.id
        resp = create(c, stream=n % 2 == 0, **kw)
        out.append(resp)
        prev = resp
        inp = next_input(resp, n, nonce)
    return out


def run_whole(c: Any, nonce: str) -> list[Any]:
    out = []
    items: list[Any] = [{"role": "user", "content": f"weather in Paris? {nonce}"}]
    for n in range(TURNS):
        resp = create(c, stream=n % 2 == 0, input=items, instructions=f"be brief {n}", store=False)
        out.append(resp)
        items = items + [o.model_dump(exclude_none=True) for o in resp.output] + next_input(resp, n, nonce)
    return out


def test_chain_sends_the_upstream_the_whole_history(proxy, upstream) -> None:
    c = client(proxy)
    nonce = uuid.uuid4().hex
    start = len(upstream.requests)
    chained = run_chain(c, nonce)
    chain_bodies = bodies_since(upstream, start)
    start = len(upstream.requests)
    whole = run_whole(c, nonce)
    whole_bodies = bodies_since(upstream, start)
    assert len(chain_bodies) == len(whole_bodies) == TURNS
    for n, (a, b) in enumerate(zip(chain_bodies, whole_bodies, strict=True)):
        assert history(a) == history(b), f"turn {n + 1}: the upstream got another history"
    # the conversation has tool calls, reasoning carried back (signed thinking / reasoning) and grows each turn
    kinds = [o.type for r in chained for o in r.output]
    assert "function_call" in kinds and "reasoning" in kinds and "message" in kinds
    sizes = [len(b.get("messages") or []) for b in chain_bodies]
    assert sizes == sorted(sizes) and sizes[-1] >= 2 * TURNS - 1
    if proxy.target == "anthropic":
        last = chain_bodies[-1]["messages"]
        signed = [
            p for m in last if isinstance(m.get("content"), list) for p in m["content"] if p.get("type") == "thinking"
        ]
        assert signed and all(p.get("signature", "").startswith("sig-") for p in signed)
    assert [r.id for r in chained] == [r.id for r in whole]  # same history, same answers
    assert chained[1].previous_response_id == chained[0].id and chained[0].store is True


def test_get_delete_and_input_items_with_the_sdk(proxy) -> None:
    c = client(proxy)
    first = create(c, stream=True, input=f"weather? {uuid.uuid4().hex}")
    second = create(c, stream=False, input=next_input(first, 0, "x"), previous_response_id=first.id)
    got = c.responses.retrieve(first.id)
    assert plain(got.model_dump()) == plain(first.model_dump())  # what response.completed carried
    assert plain(c.responses.retrieve(second.id).model_dump()) == plain(second.model_dump())
    items = list(c.responses.input_items.list(second.id))
    assert [i.type for i in items] == ["function_call_output"] and items[0].id
    page = c.responses.input_items.list(first.id, order="asc", limit=1)
    assert page.data[0].type == "message" and page.has_more is False
    deleted = c.responses.delete(first.id)
    assert deleted is None or getattr(deleted, "deleted", True)
    with pytest.raises(openai.NotFoundError):
        c.responses.retrieve(first.id)
    with pytest.raises(openai.NotFoundError) as e:  # the chain lost its first turn: it cannot be rebuilt
        create(c, stream=False, input="more", previous_response_id=second.id)
    assert second.id in str(e.value) and e.value.body["param"] == "previous_response_id"


def test_unknown_ids_and_other_keys_get_404(proxy) -> None:
    c = client(proxy)
    with pytest.raises(openai.NotFoundError):
        create(c, stream=True, input="hi", previous_response_id="resp_doesnotexist")
    with pytest.raises(openai.NotFoundError):
        c.responses.retrieve("resp_doesnotexist")
    mine = create(c, stream=False, input=f"hello {uuid.uuid4().hex}")
    other = client(proxy, key="client-key-b")
    with pytest.raises(openai.NotFoundError):
        other.responses.retrieve(mine.id)
    with pytest.raises(openai.NotFoundError):
        other.responses.delete(mine.id)
    with pytest.raises(openai.NotFoundError):
        create(other, stream=False, input="hi", previous_response_id=mine.id)
    assert c.responses.retrieve(mine.id).id == mine.id


def test_store_false_is_not_stored(proxy) -> None:
    c = client(proxy)
    resp = create(c, stream=True, input=f"hi {uuid.uuid4().hex}", store=False)
    assert resp.store is False
    with pytest.raises(openai.NotFoundError):
        c.responses.retrieve(resp.id)


def test_sqlite_store_survives_a_restart(upstream, store_path, tmp_path) -> None:
    p = Proxy("anthropic", upstream, tmp_path, ["--set", f"dragoman_responses_store={store_path}"])
    try:
        first = create(client(p), stream=True, input=f"weather? {uuid.uuid4().hex}")
    finally:
        p.stop()
    start = len(upstream.requests)
    p = Proxy("anthropic", upstream, tmp_path, ["--set", f"dragoman_responses_store={store_path}"])
    try:
        second = create(client(p), stream=True, input=next_input(first, 0, "x"), previous_response_id=first.id)
    finally:
        p.stop()
    assert second.status == "completed"
    sent = bodies_since(upstream, start)[0]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert json.dumps(sent).count("tool_result") == 1
