"""Through a real mitmdump toward a Chat upstream replaying OpenAI's live recordings (issue 11, items 1-2):

* a refusal (``refusal`` deltas / ``message.refusal``, ``finish_reason: "stop"``) reaches an Anthropic SDK
  client as ``stop_reason: "refusal"`` with the refusal as its text, a Responses SDK client as a refusal
  part of a completed response;
* an ``n=3`` answer (three choices, their chunks interleaved) reaches an Anthropic or Responses SDK client
  as choice 0 only, the rest named in the flow's dropped log line; a Chat SDK client asking ``n=3`` is
  passed through and gets all three.

The upstream replays ``tests/corpus/chat/openai-python__*`` (the model name picks the recording).
"""

from __future__ import annotations

import re
import time
import uuid

import pytest

from corpus_loader import samples
from e2e.conftest import Proxy
from hardening.rawupstream import RawUpstream
from hardening.rawupstream import chunk
from hardening.rawupstream import response
from hardening.rawupstream import sse_head

pytestmark = pytest.mark.e2e

RECORDED = {
    (model, stream): next(
        s.body for s in samples("openai-chat") if s.name == f"chat/openai-python__{kind}-{model}.{ext}"
    )
    for model in ("refusal", "n3-choices")
    for stream, kind, ext in ((True, "stream", "sse"), (False, "json", "json"))
}
STREAM_REFUSAL = "I'm sorry, I can't assist with that request."
WHOLE_REFUSAL = "I'm very sorry, but I can't assist with that."
#: the three choices of each live n=3 recording, in index order
STREAM_CHOICES = [f'{{"city":"San Francisco","temperature":{t},"units":"f"}}' for t in (65, 61, 59)]
WHOLE_CHOICES = [f'{{"city":"San Francisco","temperature":{t},"units":"f"}}' for t in ("64", "65", "63.0")]
DROPPED = re.compile(r"flow (\S+): lossy translation, \d+ not carried as sent \((.*)\)")


def script(seen):
    body = seen.json()
    stream = bool(body.get("stream"))
    data = RECORDED[(body["model"], stream)]
    if stream:
        return [sse_head() + chunk(data) + b"0\r\n\r\n"]
    return [response(200, data)]


@pytest.fixture(scope="module")
def upstream():
    with RawUpstream(script) as up:
        yield up


@pytest.fixture(scope="module")
def proxy(upstream, tmp_path_factory):
    p = Proxy("openai-chat", upstream, tmp_path_factory.mktemp("proxy"))
    yield p
    p.stop()


def call(
    sdk_worker, proxy: Proxy, upstream: RawUpstream, sdk: str, mode: str, model: str, **extra
) -> tuple[dict, dict]:
    """The SDK's result and the request body the upstream received."""
    test_id = uuid.uuid4().hex
    sc = {"sdk": sdk, "base_url": proxy.base_url(sdk), "mode": mode, "scenario": "plain", "model": model}
    res = sdk_worker.call({**sc, "test_id": test_id, **extra})
    seen = [q for q in upstream.seen if q.headers.get("x-test-id") == test_id]
    assert len(seen) == 1, (res, proxy.log()[-3000:])
    return res, seen[0].json()


def dropped_lines(proxy: Proxy) -> list[str]:
    time.sleep(0.2)  # the dropped line is written when the flow ends
    return [m.group(2) for m in DROPPED.finditer(proxy.log())]


@pytest.mark.parametrize("mode", ["create", "stream"])
def test_refusal_reaches_each_client_as_a_refusal(sdk_worker, proxy, upstream, mode):
    want = STREAM_REFUSAL if mode == "stream" else WHOLE_REFUSAL
    res, _ = call(sdk_worker, proxy, upstream, "anthropic", mode, "refusal")
    assert res["ok"], res
    assert (res["stop"], res["text"]) == ("refusal", want)
    res, _ = call(sdk_worker, proxy, upstream, "openai-responses", mode, "refusal")
    assert res["ok"], res
    assert (res["stop"], res["refusal"], res["text"]) == ("completed", want, "")
    res, _ = call(sdk_worker, proxy, upstream, "openai-chat", mode, "refusal")  # the same protocol: untouched
    assert res["ok"], res
    assert (res["stop"], res.get("refusal"), res["text"]) == ("stop", want, "")


@pytest.mark.parametrize("mode", ["create", "stream"])
def test_several_choices_reach_a_one_answer_client_as_choice_0(sdk_worker, proxy, upstream, mode):
    choices = STREAM_CHOICES if mode == "stream" else WHOLE_CHOICES
    before = len(dropped_lines(proxy))
    for sdk, stop in (("anthropic", "end_turn"), ("openai-responses", "completed")):
        res, sent = call(sdk_worker, proxy, upstream, sdk, mode, "n3-choices")
        assert res["ok"], res
        assert (res["stop"], res["text"]) == (stop, choices[0])
        assert "n" not in sent
    lines = dropped_lines(proxy)[before:]
    assert len(lines) == 2 and all("choices[1:]" in line for line in lines), lines


@pytest.mark.parametrize("mode", ["create", "stream"])
def test_chat_client_asking_n3_of_a_chat_upstream_gets_every_choice(sdk_worker, proxy, upstream, mode):
    res, sent = call(sdk_worker, proxy, upstream, "openai-chat", mode, "n3-choices", n=3)
    assert res["ok"], res
    assert sent["n"] == 3
    assert res["choices"] == (STREAM_CHOICES if mode == "stream" else WHOLE_CHOICES)
    assert len(set(res["choices"])) == 3  # three distinct answers, in index order
