"""A whole translated answer is parsed once: its usage reaches the ledger from the translation's own decoding
(issue 31: "parse each body once"); answers the translation does not decode as JSON still read it apart."""

from __future__ import annotations

import json

import pytest
from mitmproxy import http
from mitmproxy.test import taddons
from tests.mitm.test_translate_addon import make_flow

from dragoman import demo as fu
from dragoman.mitm.translate_addon import Translate
from dragoman.protocols import _wire

USAGE = {
    "prompt_tokens": 40,
    "completion_tokens": 7,
    "total_tokens": 47,
    "prompt_tokens_details": {"cached_tokens": 10},
}


class Ledger:
    def __init__(self) -> None:
        self.records: list = []

    def add(self, record) -> None:
        self.records.append(record)

    def close(self) -> None:
        pass


@pytest.fixture
def run(monkeypatch):
    parsed: list[bytes] = []
    real = _wire.parse_upstream_json

    def counting(body: bytes):
        parsed.append(body)
        return real(body)

    for mod in ("dragoman.translate.response", "dragoman.translate.usage"):
        monkeypatch.setattr(f"{mod}.parse_upstream_json", counting)
    addon = Translate()
    with taddons.context(addon) as tctx:
        tctx.configure(addon, dragoman_target="openai-chat", dragoman_upstream="http://127.0.0.1:1/v1")
        ledger = Ledger()
        addon.usage.ledger = ledger

        def once(body: dict, content_type: str = "application/json") -> tuple[http.HTTPFlow, list, list]:
            parsed.clear()
            f = make_flow("anthropic")
            addon.request(f)
            f.response = http.Response.make(200, json.dumps(body).encode(), {"content-type": content_type})
            addon.responseheaders(f)
            addon.response(f)
            return f, ledger.records, parsed

        yield once
        addon.usage.ledger = None


def test_a_translated_json_answer_is_parsed_once_and_its_usage_recorded(run):
    body = dict(fu.chat_reply("text", "gpt-x", False, False).json_body)
    body["usage"] = USAGE
    f, records, parsed = run(body)
    assert json.loads(f.response.content)["usage"]["output_tokens"] == 7
    assert len(parsed) == 1
    rec = records[-1]
    assert (rec.input_tokens, rec.cache_read_tokens, rec.output_tokens, rec.estimated) == (30, 10, 7, False)


def test_an_answer_without_usage_is_estimated(run):
    body = dict(fu.chat_reply("text", "gpt-x", False, False).json_body)
    body.pop("usage", None)
    _f, records, parsed = run(body)
    assert len(parsed) == 1
    assert records[-1].estimated is True and records[-1].output_tokens == 0
