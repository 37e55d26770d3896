"""Chat wire models: corpus requests/bodies/chunks validate; orjson beats pydantic for chunks."""

from __future__ import annotations

import json
import time

import pytest

from corpus_loader import requests
from corpus_loader import samples
from dragoman.protocols.openai_chat import models as m
from dragoman.sse import SSEDecoder

CHAT_REQUESTS = requests("openai-chat")
STREAMS = samples("openai-chat", stream=True)
BODIES = samples("openai-chat", stream=False, ok=True)


@pytest.mark.parametrize("name,proto,body", CHAT_REQUESTS, ids=[r[0] for r in CHAT_REQUESTS])
def test_requests_validate(name, proto, body):
    req = m.REQUEST_ADAPTER.validate_python(body)
    assert req.model == body["model"] and len(req.messages) == len(body["messages"])
    assert [msg.role for msg in req.messages] == [msg["role"] for msg in body["messages"]]


@pytest.mark.parametrize("s", BODIES, ids=[s.name for s in BODIES])
def test_bodies_validate(s):
    obj = m.COMPLETION_ADAPTER.validate_json(s.body)
    assert obj.choices and obj.id == json.loads(s.body)["id"]


@pytest.mark.parametrize("s", STREAMS, ids=[s.name for s in STREAMS])
def test_chunks_validate(s):
    n = 0
    for ev in SSEDecoder().feed(s.body):
        if ev.data.startswith("[DONE]"):
            continue
        chunk = m.CHUNK_ADAPTER.validate_json(ev.data)
        assert chunk.model_extra is not None  # vendor fields are kept, not rejected
        n += 1
    assert n > 0


def test_unknown_role_rejected():
    with pytest.raises(Exception, match="robot"):
        m.REQUEST_ADAPTER.validate_python({"model": "x", "messages": [{"role": "robot"}]})


def test_chunk_parse_cost():
    """Why the stream decoder reads chunks with orjson instead of CHUNK_ADAPTER."""
    import orjson

    s = next(x for x in STREAMS if "plain-text-usage" in x.name)
    datas = [ev.data for ev in SSEDecoder().feed(s.body) if ev.data != "[DONE]"]

    def best(fn) -> float:
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            for d in datas:
                fn(d)
            times.append(time.perf_counter() - t0)
        return min(times)

    assert best(orjson.loads) < best(m.CHUNK_ADAPTER.validate_json)
