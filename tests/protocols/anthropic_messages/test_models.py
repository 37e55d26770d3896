from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from corpus_loader import requests
from corpus_loader import samples
from dragoman.protocols.anthropic_messages import models as m

from .helpers import DATA
from .helpers import sse_events

CORPUS_REQUESTS = [(n, r) for n, _, r in requests("anthropic") if "max_tokens" in r]
CC_REQUESTS = sorted(DATA.glob("*.body.json"))
JSON_BODIES = samples("anthropic", stream=False, ok=True)
STREAMS = samples("anthropic", stream=True)


@pytest.mark.parametrize("name,body", CORPUS_REQUESTS, ids=[n for n, _ in CORPUS_REQUESTS])
def test_request_round_trip_corpus(name, body):
    wire = m.REQUEST_ADAPTER.validate_python(body)
    assert wire.model_dump(mode="json", exclude_unset=True) == body


@pytest.mark.parametrize("path", CC_REQUESTS, ids=[p.name for p in CC_REQUESTS])
def test_request_round_trip_claude_code(path):
    body = json.loads(path.read_bytes())
    wire = m.REQUEST_ADAPTER.validate_python(body)
    assert wire.model_dump(mode="json", exclude_unset=True) == body
    assert [msg.role for msg in wire.messages] == [msg["role"] for msg in body["messages"]]


@pytest.mark.parametrize("sample", JSON_BODIES, ids=[s.name for s in JSON_BODIES])
def test_message_round_trip(sample):
    body = json.loads(sample.body)
    wire = m.MESSAGE_ADAPTER.validate_python(body)
    assert wire.model_dump(mode="json", exclude_unset=True) == body


@pytest.mark.parametrize("sample", STREAMS, ids=[s.name for s in STREAMS])
def test_every_stream_event_parses_to_its_model(sample):
    known = {
        "message_start": m.MessageStartEvent,
        "content_block_start": m.ContentBlockStartEvent,
        "content_block_delta": m.ContentBlockDeltaEvent,
        "content_block_stop": m.ContentBlockStopEvent,
        "message_delta": m.MessageDeltaEvent,
        "message_stop": m.MessageStopEvent,
        "ping": m.PingEvent,
    }
    for _, obj in sse_events(sample.body):
        ev = m.EVENT_ADAPTER.validate_json(json.dumps(obj))
        assert type(ev) is known[obj["type"]]
        assert ev.model_dump(mode="json", exclude_unset=True) == obj


def test_trailing_whitespace_padding_is_tolerated():
    ev = m.EVENT_ADAPTER.validate_json('{"type":"message_stop" }        ')
    assert type(ev) is m.MessageStopEvent


def test_unknown_types_select_the_generic_models():
    ev = m.EVENT_ADAPTER.validate_json('{"type":"brand_new_event","x":1}')
    assert type(ev) is m.OtherEvent and ev.type == "brand_new_event"
    ev = m.EVENT_ADAPTER.validate_json(
        '{"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"s","name":"web_search","input":{}}}'
    )
    assert type(ev.content_block) is m.OtherBlock
    ev = m.EVENT_ADAPTER.validate_json(
        '{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{}}}'
    )
    assert type(ev.delta) is m.OtherDelta and ev.delta.type == "citations_delta"


def test_known_types_are_validated():
    with pytest.raises(ValidationError):
        m.EVENT_ADAPTER.validate_json('{"type":"content_block_delta","index":0,"delta":{"type":"text_delta"}}')
    with pytest.raises(ValidationError):
        m.EVENT_ADAPTER.validate_json('{"type":"content_block_stop"}')


def test_request_requires_model_messages_and_max_tokens():
    with pytest.raises(ValidationError) as e:
        m.REQUEST_ADAPTER.validate_python({})
    locs = {err["loc"][0] for err in e.value.errors()}
    assert locs == {"model", "messages", "max_tokens"}
