"""Google's official ``google-genai`` SDK as a client through Dragoman (real mitmdump) on Anthropic, Chat and
Responses fake upstreams; the official ``anthropic`` and ``openai`` SDKs on a Gemini fake upstream.

Each result is what the SDK itself assembled (``response.text``, ``function_calls``, its stream chunks, its
exceptions). The fake is this module's own (``json``: a structured answer), so its requests can be inspected.
"""

from __future__ import annotations

import json
import uuid

import pytest

from dragoman import demo as fu
from dragoman.demo.answer import Answer
from dragoman.demo.gemini import REQUIRE_SIGNATURES
from dragoman.demo.gemini import THOUGHT_SIGNATURE
from dragoman.demo.gemini import step_signature
from dragoman.demo.render import render
from dragoman.demo.wire import Reply
from dragoman.demo.wire import Request
from e2e.conftest import Proxy

pytestmark = pytest.mark.e2e
genai = pytest.importorskip("google.genai")
from google.genai import errors as genai_errors  # noqa: E402
from google.genai import types  # noqa: E402

UPSTREAMS = ["anthropic", "openai-chat", "openai-responses"]
JSON_ANSWER = '{"city": "Paris", "sunny": true}'
WEATHER = types.FunctionDeclaration(
    name="get_weather",
    description="Weather for a city",
    parameters_json_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def _json_scenario(request: Request) -> Reply:
    return render(request, Answer(text=(JSON_ANSWER[:10], JSON_ANSWER[10:])))


@pytest.fixture(scope="module")
def gfake():
    with fu.FakeUpstream(scenarios={"json": _json_scenario}) as up:
        yield up


@pytest.fixture(scope="module")
def gproxies(gfake, tmp_path_factory):
    started: dict[str, Proxy] = {}
    workdir = tmp_path_factory.mktemp("mitm-gemini")

    def get(target: str) -> Proxy:
        if target not in started:
            started[target] = Proxy(target, gfake, workdir)
        return started[target]

    yield get
    for p in started.values():
        p.stop()


def _client(proxy: Proxy, scenario: str, test_id: str):
    opts = types.HttpOptions(
        base_url=f"http://127.0.0.1:{proxy.port}",
        headers={"x-fake-scenario": scenario, "x-test-id": test_id},
        timeout=30_000,
    )
    return genai.Client(api_key="gemini-client-key", http_options=opts)


def _seen(fake, test_id: str):
    return [q for q in fake.requests if q.headers.get("x-test-id") == test_id]


@pytest.fixture(params=UPSTREAMS)
def upstream(request, gproxies):
    return request.param, gproxies(request.param)


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
def test_text(upstream, gfake, stream):
    target, proxy = upstream
    tid = uuid.uuid4().hex
    client = _client(proxy, "text", tid)
    if stream:
        chunks = list(client.models.generate_content_stream(model="gemini-test", contents="Say hello."))
        text = "".join(c.text or "" for c in chunks)
        finish = chunks[-1].candidates[0].finish_reason
        usage = chunks[-1].usage_metadata
    else:
        resp = client.models.generate_content(model="gemini-test", contents="Say hello.")
        text, finish, usage = resp.text, resp.candidates[0].finish_reason, resp.usage_metadata
    assert text == fu.TEXT
    assert finish == types.FinishReason.STOP
    assert (usage.prompt_token_count, usage.candidates_token_count) == (fu.USAGE_IN, fu.USAGE_OUT)
    (seen,) = _seen(gfake, tid)
    assert seen.protocol == target
    assert "x-goog-api-key" not in seen.headers  # the key moved to the upstream's own header
    key = seen.headers.get("x-api-key") or seen.headers.get("authorization", "").removeprefix("Bearer ")
    assert key == "gemini-client-key"
    assert seen.body.get("stream", False) is stream


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
def test_thinking(upstream, stream):
    _, proxy = upstream
    client = _client(proxy, "thinking", uuid.uuid4().hex)
    config = types.GenerateContentConfig(thinking_config=types.ThinkingConfig(include_thoughts=True))
    if stream:
        parts = [
            p
            for c in client.models.generate_content_stream(model="g", contents="Think.", config=config)
            for p in c.candidates[0].content.parts or []
        ]
    else:
        resp = client.models.generate_content(model="g", contents="Think.", config=config)
        parts = resp.candidates[0].content.parts
    assert "".join(p.text or "" for p in parts if p.thought) == fu.THINKING
    assert "".join(p.text or "" for p in parts if not p.thought) == fu.TEXT


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
def test_two_call_tool_loop(upstream, gfake, stream):
    target, proxy = upstream
    tid = uuid.uuid4().hex
    config = types.GenerateContentConfig(tools=[types.Tool(function_declarations=[WEATHER])])
    contents: list = [types.Content(role="user", parts=[types.Part(text="Weather and time?")])]
    first = _client(proxy, "tools", tid)
    if stream:
        chunks = list(first.models.generate_content_stream(model="g", contents=contents, config=config))
        model_parts = [p for c in chunks for p in c.candidates[0].content.parts or []]
    else:
        model_parts = (
            first.models.generate_content(model="g", contents=contents, config=config).candidates[0].content.parts
        )
    calls = [p.function_call for p in model_parts if p.function_call]
    assert [(c.name, c.args) for c in calls] == [
        ("get_weather", {"city": "Paris", "unit": "c"}),
        ("get_time", {"tz": "Asia/Tokyo"}),
    ]
    contents.append(types.Content(role="model", parts=model_parts))
    contents.append(
        types.Content(
            role="user",
            parts=[types.Part.from_function_response(name=c.name, response={"output": f"{c.name} ok"}) for c in calls],
        )
    )
    second_client = _client(proxy, "text", tid)  # a genai.Client closes its connections when collected: keep it
    resp = second_client.models.generate_content(model="g", contents=contents, config=config)
    assert resp.text == fu.TEXT
    second = _seen(gfake, tid)[-1].body
    # the upstream got both results, each paired with its call's id
    if target == "anthropic":
        uses = [b["id"] for b in second["messages"][1]["content"] if b["type"] == "tool_use"]
        results = [(b["tool_use_id"], b["content"]) for b in second["messages"][2]["content"]]
        assert [r[0] for r in results] == uses and "get_weather ok" in json.dumps(results)
    elif target == "openai-chat":
        ids = [c["id"] for c in second["messages"][1]["tool_calls"]]
        assert [m["tool_call_id"] for m in second["messages"][2:4]] == ids
    else:
        items = second["input"]
        ids = [i["call_id"] for i in items if i["type"] == "function_call"]
        assert [i["call_id"] for i in items if i["type"] == "function_call_output"] == ids


def test_structured_output(upstream, gfake):
    target, proxy = upstream
    tid = uuid.uuid4().hex
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "sunny": {"type": "boolean"}}}
    config = types.GenerateContentConfig(response_mime_type="application/json", response_json_schema=schema)
    client = _client(proxy, "json", tid)
    resp = client.models.generate_content(model="g", contents="JSON please", config=config)
    assert resp.parsed == {"city": "Paris", "sunny": True}
    body = json.dumps(_seen(gfake, tid)[-1].body)
    assert '"sunny"' in body  # the schema reached the upstream in its own protocol's structured-output field


def test_rate_limit(upstream):
    _, proxy = upstream
    client = _client(proxy, "error429", uuid.uuid4().hex)
    with pytest.raises(genai_errors.ClientError) as e:
        client.models.generate_content(model="g", contents="hi")
    assert e.value.code == 429 and e.value.status == "RESOURCE_EXHAUSTED"
    assert fu.ERROR_429_MESSAGE in e.value.message


def test_midstream_error(upstream):
    _, proxy = upstream
    got = []
    client = _client(proxy, "midstream_error", uuid.uuid4().hex)
    with pytest.raises(genai_errors.APIError) as e:
        for c in client.models.generate_content_stream(model="g", contents="hi"):
            got.append(c.text)
    assert got and "".join(got) == fu.TEXT_PIECES[0] + fu.TEXT_PIECES[1]
    assert fu.MIDSTREAM_ERROR_MESSAGE in e.value.message


# ---------------------------------------------------------------- other SDKs on a Gemini upstream


def _gemini_calls(fake, tid: str) -> list[list[dict]]:
    """Every functionCall part of each model turn the Gemini upstream got in the last request."""
    body = _seen(fake, tid)[-1].body
    return [[p for p in c["parts"] if "functionCall" in p] for c in body["contents"] if c["role"] == "model"]


def test_anthropic_sdk_on_gemini_keeps_signatures_over_two_tool_rounds(gproxies, gfake):
    anthropic = pytest.importorskip("anthropic")
    proxy = gproxies("gemini")
    tid = uuid.uuid4().hex
    client = anthropic.Anthropic(
        base_url=f"http://127.0.0.1:{proxy.port}",
        api_key="k",
        max_retries=0,
        default_headers={"x-test-id": tid, "x-fake-scenario": "tools"},
    )
    tools = [
        {"name": "get_weather", "input_schema": {"type": "object"}},
        {"name": "get_time", "input_schema": {"type": "object"}},
    ]
    messages: list = [{"role": "user", "content": "go"}]
    for _round in range(2):
        with client.messages.stream(model="gemini-3-pro", max_tokens=256, tools=tools, messages=messages) as s:
            msg = s.get_final_message()
        assert msg.stop_reason == "tool_use"
        assert [b.type for b in msg.content] == ["thinking", "tool_use", "tool_use"]
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in msg.content]})
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": b.id, "content": "ok"}
                    for b in msg.content
                    if b.type == "tool_use"
                ],
            }
        )
    client.messages.create(model="gemini-3-pro", max_tokens=256, tools=tools, messages=messages)
    turns = _gemini_calls(gfake, tid)
    assert len(turns) == 2
    for calls in turns:  # each step's first call signed exactly as Gemini sent it, the second not
        assert [c.get("thoughtSignature") for c in calls] == [THOUGHT_SIGNATURE, None]
    assert _seen(gfake, tid)[-1].headers.get("x-goog-api-key") == "k"


def test_openai_sdk_on_gemini_keeps_signatures_over_two_tool_rounds(gproxies, gfake):
    openai = pytest.importorskip("openai")
    proxy = gproxies("gemini")
    tid = uuid.uuid4().hex
    client = openai.OpenAI(
        base_url=f"http://127.0.0.1:{proxy.port}/v1",
        api_key="k",
        max_retries=0,
        default_headers={"x-test-id": tid, "x-fake-scenario": "tools"},
    )
    tools = [{"type": "function", "name": n, "parameters": {"type": "object"}} for n in ("get_weather", "get_time")]
    items: list = [{"role": "user", "content": "go"}]
    for _round in range(2):
        resp = client.responses.create(model="gemini-3-pro", input=items, tools=tools)
        kinds = [o.type for o in resp.output]
        assert kinds == ["reasoning", "function_call", "function_call"], kinds
        items += [o.model_dump(exclude_none=True) for o in resp.output]
        items += [
            {"type": "function_call_output", "call_id": o.call_id, "output": "ok"}
            for o in resp.output
            if o.type == "function_call"
        ]
    client.responses.create(model="gemini-3-pro", input=items, tools=tools)
    for calls in _gemini_calls(gfake, tid):
        assert [c.get("thoughtSignature") for c in calls] == [THOUGHT_SIGNATURE, None]
    assert len(_gemini_calls(gfake, tid)) == 2


def _chat_client(openai, proxy: Proxy, tid: str, scenario: str, strict: bool = False):
    headers = {"x-test-id": tid, "x-fake-scenario": scenario}
    if strict:  # the fake answers 400 unless each step's first call comes back with the signature it gave
        headers[REQUIRE_SIGNATURES] = "1"
    return openai.OpenAI(
        base_url=f"http://127.0.0.1:{proxy.port}/v1", api_key="k", max_retries=0, default_headers=headers
    )


def _chat_ask(c, stream: bool, **kw):
    if not stream:
        return c.chat.completions.create(model="gemini-3-pro", **kw)
    with c.chat.completions.stream(model="gemini-3-pro", stream_options={"include_usage": True}, **kw) as s:
        return s.get_final_completion()


CHAT_TOOLS = [
    {"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {}}}}
    for n in ("get_weather", "get_time")
]


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
def test_openai_chat_sdk_on_gemini(gproxies, gfake, stream):
    """The openai SDK's Chat Completions on a Gemini upstream: text, usage and a two-round parallel tool loop,
    whole and streamed (the SDK's own stream accumulator). Each step's first call reaches the client signed as
    Google's OpenAI-compatible layer signs it (``extra_content.google.thought_signature``); the SDK's message,
    handed back as the app got it, brings the signature back to its ``functionCall`` part, and the fake, which
    requires each step's own signature (no skip value), answers every round."""
    openai = pytest.importorskip("openai")
    proxy = gproxies("gemini")
    tid = uuid.uuid4().hex

    done = _chat_ask(_chat_client(openai, proxy, tid, "text"), stream, messages=[{"role": "user", "content": "Hi."}])
    assert done.choices[0].message.content == fu.TEXT
    assert done.choices[0].finish_reason == "stop"
    assert (done.usage.prompt_tokens, done.usage.completion_tokens) == (fu.USAGE_IN, fu.USAGE_OUT)
    assert _seen(gfake, tid)[-1].headers.get("x-goog-api-key") == "k"

    c = _chat_client(openai, proxy, tid, "tools", strict=True)
    messages: list = [{"role": "user", "content": "go"}]
    for step in range(2):
        done = _chat_ask(c, stream, messages=messages, tools=CHAT_TOOLS)
        msg = done.choices[0].message
        assert done.choices[0].finish_reason == "tool_calls"
        assert [t.function.name for t in msg.tool_calls] == ["get_weather", "get_time"]
        dumped = msg.model_dump(exclude_none=True)
        assert [t.get("extra_content") for t in dumped["tool_calls"]] == [
            {"google": {"thought_signature": step_signature(step)}},
            None,
        ]
        messages.append(dumped)
        messages += [{"role": "tool", "tool_call_id": t.id, "content": "ok"} for t in msg.tool_calls]
    done = _chat_ask(c, stream, messages=messages, tools=CHAT_TOOLS)
    assert done.choices[0].finish_reason == "tool_calls"  # the fake accepted the history
    turns = _gemini_calls(gfake, tid)
    assert [[c.get("thoughtSignature") for c in calls] for calls in turns] == [
        [step_signature(0), None],
        [step_signature(1), None],
    ]
    assert "skip_thought_signature_validator" not in json.dumps(_seen(gfake, tid)[-1].body)


def test_openai_chat_sdk_on_gemini_message_objects_and_a_lost_signature(gproxies, gfake):
    """The SDK's message object appended as is (the pattern of Google's own OpenAI-compatibility examples)
    brings the signature back too; a history whose call lost it gets Google's skip value, which the strict
    fake refuses: the check above can fail."""
    openai = pytest.importorskip("openai")
    proxy = gproxies("gemini")
    tid = uuid.uuid4().hex
    c = _chat_client(openai, proxy, tid, "tools", strict=True)
    messages: list = [{"role": "user", "content": "go"}]
    msg = _chat_ask(c, False, messages=messages, tools=CHAT_TOOLS).choices[0].message
    results = [{"role": "tool", "tool_call_id": t.id, "content": "ok"} for t in msg.tool_calls]
    again = _chat_ask(c, False, messages=[*messages, msg, *results], tools=CHAT_TOOLS)
    assert again.choices[0].finish_reason == "tool_calls"
    assert [p.get("thoughtSignature") for p in _gemini_calls(gfake, tid)[0]] == [step_signature(0), None]

    lost = msg.model_dump(exclude_none=True)
    for t in lost["tool_calls"]:
        t.pop("extra_content", None)
    with pytest.raises(openai.BadRequestError, match="(?i)thought.signature"):
        _chat_ask(c, False, messages=[*messages, lost, *results], tools=CHAT_TOOLS)
    sent = _gemini_calls(gfake, tid)[0]
    assert [p.get("thoughtSignature") for p in sent] == ["skip_thought_signature_validator", None]
