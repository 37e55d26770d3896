"""The lossiness report (issue 35 item 1) for every codec direction.

Requests: each field the README's "What each direction carries and drops" table lists for a direction is in
the report of a request that carries it; a request every protocol can carry gives an empty report; the same
request to an upstream of its own protocol gives an empty report too. Responses and streams: what a real
upstream answer (tests/corpus) carries that the client's protocol cannot is in the report, with the kind
and a reason; a plain answer gives an empty one. Streams run over every chunking of ``tests/conftest.py``.
"""

from __future__ import annotations

import re

import orjson
import pytest

from conftest import chunkings
from conftest import run_stream
from corpus_loader import samples
from dragoman.ir.lossy import APPROXIMATED
from dragoman.ir.lossy import DROPPED
from dragoman.ir.lossy import INVENTED
from dragoman.ir.lossy import LossReport
from dragoman.ir.lossy import collapse
from dragoman.ir.request import Request
from dragoman.protocols import Protocol
from dragoman.protocols import profiles
from dragoman.protocols.base import Context
from dragoman.protocols.registry import get_codec
from dragoman.translate.plan import Plan
from dragoman.translate.request import translate_request
from dragoman.translate.response import translate_response
from dragoman.translate.stream import StreamTranslator

A, C, R = Protocol.ANTHROPIC_MESSAGES, Protocol.OPENAI_CHAT, Protocol.OPENAI_RESPONSES
CROSS = [(c, u) for c in Protocol for u in Protocol if c is not u and u in (A, C, R) and c in (A, C, R)]
SHORT = {A: "anthropic", C: "chat", R: "responses"}
CORPUS = {A: "anthropic", C: "openai-chat", R: "openai-responses"}

TOOL = {"name": "get_time", "description": "now", "input_schema": {"type": "object", "properties": {}}}
FN = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}

#: requests every protocol carries whole: text, a system prompt, one function tool, a tool round trip
FAITHFUL = {
    A: {
        "model": "m",
        "max_tokens": 100,
        "system": "Be brief.",
        "tools": [TOOL],
        "messages": [
            {"role": "user", "content": "time?"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "call_1", "name": "get_time", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "noon"}]},
        ],
    },
    C: {
        "model": "m",
        "max_tokens": 100,
        "tools": [FN],
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "time?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "noon"},
        ],
    },
    R: {
        "model": "m",
        "max_output_tokens": 100,
        "instructions": "Be brief.",
        "tools": [{"type": "function", "name": "get_time", "parameters": {"type": "object", "properties": {}}}],
        "input": [
            {"role": "user", "content": "time?"},
            {"type": "function_call", "call_id": "call_1", "name": "get_time", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "noon"},
        ],
    },
}

_A_LOSSY = {
    **FAITHFUL[A],
    "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    "tools": [
        {**TOOL, "cache_control": {"type": "ephemeral"}},
        {"type": "code_execution_20250522", "name": "code_execution"},
    ],
    "context_management": {"edits": []},
    "betas": ["x"],
    "top_k": 5,
    "output_config": {"task_budget": 1000},
    "messages": [
        {"role": "user", "content": "time?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hm", "signature": "EqNativeSig"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "tool_use", "id": "call_1", "name": "get_time", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "failed", "is_error": True}],
        },
    ],
}
_C_LOSSY = {
    **FAITHFUL[C],
    "logprobs": True,
    "seed": 1,
    "presence_penalty": 0.5,
    "logit_bias": {"1": 2},
    "service_tier": "flex",
    "store": True,
    "metadata": {"k": "v"},
}
_R_LOSSY = {
    **FAITHFUL[R],
    "store": True,
    "include": ["file_search_call.results"],
    "prompt_cache_key": "k",
    "service_tier": "flex",
    "metadata": {"k": "v"},
    "truncation": "auto",
    "text": {"verbosity": "low"},
    "tools": [*FAITHFUL[R]["tools"], {"type": "web_search"}],
}

#: (client, upstream) -> (request, the report paths the README lists for it)
LOSSY = {
    (A, C): (
        _A_LOSSY,
        {
            "system[0].cache_control",
            "tools[0].cache_control",
            "context_management",
            "output_config.task_budget",
            "betas",
            "top_k",
            "messages[1].thinking.signature",
            "messages[1].redacted_thinking",
            "messages[2].tool_result.is_error",
            "tools[1].builtin",
        },
    ),
    (A, R): (
        _A_LOSSY,
        {
            "system[0].cache_control",
            "tools[0].cache_control",
            "context_management",
            "betas",
            "top_k",
            "messages[1].thinking",
        },
    ),
    (C, A): (_C_LOSSY, {"logprobs", "seed", "presence_penalty", "logit_bias", "service_tier", "store", "metadata"}),
    (C, R): (_C_LOSSY, {"logprobs", "seed", "presence_penalty", "logit_bias"}),
    (R, A): (
        _R_LOSSY,
        {"store", "include", "prompt_cache_key", "service_tier", "metadata", "truncation", "text.verbosity"},
    ),
    (R, C): (_R_LOSSY, {"store", "include", "prompt_cache_key", "truncation", "text.verbosity"}),
}


def _request_report(client: Protocol, upstream: Protocol, body: dict, **kw) -> LossReport:
    ctx = Context(**kw)
    tr = translate_request(orjson.dumps(body), Plan(client, upstream), ctx)
    assert tr.report is ctx.dropped is ctx.report  # returned next to the translated request
    return tr.report


@pytest.mark.parametrize("client,upstream", CROSS, ids=[f"{SHORT[c]}->{SHORT[u]}" for c, u in CROSS])
def test_a_faithful_request_gives_an_empty_report(client, upstream):
    report = _request_report(client, upstream, FAITHFUL[client])
    assert report.entries == [], report


@pytest.mark.parametrize("client,upstream", list(LOSSY), ids=[f"{SHORT[c]}->{SHORT[u]}" for c, u in LOSSY])
def test_each_listed_field_is_in_the_report(client, upstream):
    body, listed = LOSSY[(client, upstream)]
    report = _request_report(client, upstream, body)
    assert listed <= set(report.fields), sorted(listed - set(report.fields))
    for e in report.entries:
        assert e.kind in (DROPPED, APPROXIMATED, INVENTED) and e.reason, e
    assert all(e.kind == DROPPED for e in report.entries if e.path in listed)


@pytest.mark.parametrize("proto", [A, C, R], ids=SHORT.values())
def test_same_protocol_gives_an_empty_report(proto):
    body = {A: _A_LOSSY, C: _C_LOSSY, R: _R_LOSSY}[proto]
    assert _request_report(proto, proto, {**body, "stream": True}).entries == []


def test_reasons_name_why():
    report = _request_report(A, C, _A_LOSSY)
    by_path = {e.path: e for e in report.entries}
    assert by_path["system[0].cache_control"].reason == "the target protocol has no cache hints"
    assert by_path["tools[0].cache_control"].reason == "the target protocol has no cache hints"
    assert by_path["top_k"].reason == "the target protocol has no top_k sampling"
    assert "server tools" in by_path["tools[1].builtin"].reason
    assert by_path["messages[2].tool_result.is_error"].reason == "the target protocol has no error flag on tool results"


# ---------------------------------------------------------------- indexed paths, all 12 directions

G = Protocol.GEMINI
_C_INDEXED = {
    **FAITHFUL[C],
    "messages": [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "time?"},
                {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "hm",
            "tool_calls": FAITHFUL[C]["messages"][2]["tool_calls"],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "noon"},
    ],
}
_R_INDEXED = {
    **FAITHFUL[R],
    "input": [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "time?"},
                {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
            ],
        },
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "hm"}],
            "encrypted_content": "E",
        },
        *FAITHFUL[R]["input"][1:],
        {"type": "item_reference", "id": "msg_0"},
    ],
}
_G_INDEXED = {
    "contents": [
        {"role": "user", "parts": [{"text": "time?"}, {"executableCode": {"language": "PYTHON", "code": "1"}}]},
        {
            "role": "model",
            "parts": [{"text": "hm", "thought": True}, {"functionCall": {"name": "get_time", "args": {}}}],
        },
        {"role": "user", "parts": [{"functionResponse": {"name": "get_time", "response": {"r": "noon"}}}]},
    ],
    "tools": [{"functionDeclarations": [{"name": "get_time", "description": "now"}]}],
}
INDEXED_BODIES = {A: _A_LOSSY, C: _C_INDEXED, R: _R_INDEXED, G: _G_INDEXED}
_A_ALL = ["system[0].cache_control", "tools[0].cache_control"]
_R_ALL = ["input[0].content[1].input_audio", "input[4].item_reference"]
#: (client, upstream) -> every entry whose path has an index: each list item named by its place in the
#: client's request (a decoder's list, or the turn an encoder was encoding)
INDEXED = {
    (A, C): [
        *_A_ALL,
        "messages[1].thinking.signature",
        "messages[1].redacted_thinking",
        "messages[2].tool_result.is_error",
        "tools[1].builtin",
    ],
    (A, R): [*_A_ALL, "messages[1].thinking", "messages[2].tool_result.is_error", "tools[1].code_execution"],
    (A, G): [*_A_ALL, "messages[1].thinking.signature", "tools[1].code_execution"],
    (C, A): ["messages[1].content[1].input_audio", "messages[2].thinking_without_signature"],
    (C, R): ["messages[1].content[1].input_audio", "messages[2].thinking"],
    (C, G): ["messages[1].content[1].input_audio"],
    (R, A): [*_R_ALL, "input[1].thinking_without_signature"],
    (R, C): [*_R_ALL, "input[1].reasoning.encrypted_content"],
    (R, G): [*_R_ALL, "input[1].thinking.signature"],
    (G, A): ["contents[0].parts[1].executableCode", "contents[1].thinking_without_signature"],
    (G, C): ["contents[0].parts[1].executableCode"],
    (G, R): ["contents[0].parts[1].executableCode", "contents[1].thinking"],
}
_NAMES = {A: "anthropic", C: "chat", R: "responses", G: "gemini"}


def _item(body: dict, path: str):
    """The item of ``body`` an indexed path names (``messages[1].content[1]``): KeyError/IndexError if none."""
    node = body
    for key, i in re.findall(r"(\w+)\[(\d+)\]", path):
        node = node[key][int(i)]
    return node


@pytest.mark.parametrize("client,upstream", list(INDEXED), ids=[f"{_NAMES[c]}->{_NAMES[u]}" for c, u in INDEXED])
def test_list_items_are_named_by_their_index_in_the_clients_request(client, upstream):
    body = INDEXED_BODIES[client]
    report = _request_report(client, upstream, body)
    indexed = [p for p in report.fields if "[" in p]
    assert sorted(indexed) == sorted(INDEXED[(client, upstream)]), indexed
    for p in indexed:
        assert isinstance(_item(body, p), dict), p  # the index names an item that is there
    for e in report.entries:
        assert e.kind in (DROPPED, APPROXIMATED, INVENTED) and e.reason, e
    audio = [e for e in report.entries if e.path.endswith("input_audio")]
    assert all(e.reason == "the target protocol takes no audio input" for e in audio)
    # the log line names each path once, indexes collapsed: it does not grow with the conversation
    summary = report.summary()
    assert not re.search(r"\[\d+\]", summary)
    assert all(collapse(p) in summary for p in indexed)


def test_the_log_line_does_not_grow_with_the_conversation():
    def body(n: int) -> dict:
        tools = [{**TOOL, "name": f"t{i}", "cache_control": {"type": "ephemeral"}} for i in range(n)]
        return {**FAITHFUL[A], "tools": tools}

    small, big = _request_report(A, C, body(2)), _request_report(A, C, body(40))
    assert [p for p in big.fields if p.endswith("cache_control")] == [f"tools[{i}].cache_control" for i in range(40)]
    assert big.summary() == small.summary() == "dropped: tools[].cache_control"


def test_an_anthropic_stream_reports_its_estimated_input_tokens():
    report = _request_report(A, C, {**FAITHFUL[A], "stream": True})
    assert [(e.path, e.kind) for e in report.entries] == [("message_start.usage.input_tokens", APPROXIMATED)]


def test_a_placeholder_for_another_models_history_is_invented():
    body = {
        **FAITHFUL[A],
        "messages": [
            {"role": "user", "content": "time?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hm", "signature": "EqNativeSig"},
                    {"type": "tool_use", "id": "call_1", "name": "get_time", "input": {}},
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "noon"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "call_2", "name": "get_time", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_2", "content": "noon"}]},
        ],
    }
    report = _request_report(A, C, body, profile=profiles.PROFILES["deepseek"])
    inv = [e for e in report.entries if e.kind == INVENTED]
    assert [e.path for e in inv] == ["reasoning_content"], report
    assert "placeholder" in inv[0].reason


# ---------------------------------------------------------------- answers


def _sample(protocol: Protocol, name: str):
    return next(s for s in samples(CORPUS[protocol]) if name in s.name)


#: (upstream, corpus sample, streamed) -> the report paths any client of another protocol gets
ANSWERS = [
    (
        A,
        "pydantic-ai__stream-code-execution",
        True,
        {"server_tool_use", "bash_code_execution_tool_result", "container"},
    ),
    (A, "pydantic-ai__json-code-execution", False, {"server_tool_use", "bash_code_execution_tool_result"}),
    (A, "pydantic-ai__stream-mcp-servers", True, {"mcp_tool_use", "mcp_tool_result"}),
    (C, "openai-python__stream-n3-choices", True, {"choices[1:]"}),
    (C, "openai-python__json-n3-choices", False, {"choices[1:]"}),
    (R, "pydantic-ai__stream-logprobs", True, {"logprobs"}),
    (R, "pydantic-ai__stream-mcp", True, {"output.mcp_list_tools", "output.mcp_call"}),
]
ANSWER_CASES = [(up, name, st, want, cl) for up, name, st, want in ANSWERS for cl in (A, C, R) if cl is not up]


def _stream_report(upstream: Protocol, client: Protocol, body: bytes, pieces: list[bytes]) -> LossReport:
    ctx = Context(request=Request(model="m", stream=True, include_usage=True))
    tr = StreamTranslator(
        get_codec(upstream).stream_decoder(ctx), get_codec(client).stream_encoder(ctx), report=ctx.dropped
    )
    run_stream(tr, pieces)
    assert tr.report is ctx.report
    return tr.report


@pytest.mark.parametrize(
    "upstream,name,stream,want,client",
    ANSWER_CASES,
    ids=[f"{n.split('__')[1]}->{SHORT[c]}" for _, n, _, _, c in ANSWER_CASES],
)
def test_an_answers_losses_are_in_the_report(upstream, name, stream, want, client):
    body = _sample(upstream, name).body
    if stream:
        reports = [_stream_report(upstream, client, body, pieces) for _, pieces in chunkings(body)]
        assert all(r == reports[0] for r in reports)  # the chunking never changes the report
        report = reports[0]
    else:
        ctx = Context(request=Request(model="m"))
        translate_response(body, Plan(client, upstream), ctx)
        report = ctx.report
    got = {p.partition("(")[0] for p in report.fields}
    assert {w for w in want if w in got or any(g.startswith(w + ".") for g in got)} == want, report


PLAIN = [
    (A, "pydantic-ai__stream-plain-text", True),
    (A, "vercel-ai__json-plain-text", False),
    (C, "vercel-ai__stream-plain-text-usage", True),
    (C, "pydantic-ai__json-tool-call-roundtrip", False),
    (R, "pydantic-ai__stream-text-then-function-call.yaml#1", True),
    (R, "pydantic-ai__json-plain-text", False),
]
PLAIN_CASES = [(up, name, st, cl) for up, name, st in PLAIN for cl in (A, C, R) if cl is not up]


@pytest.mark.parametrize(
    "upstream,name,stream,client", PLAIN_CASES, ids=[f"{n}->{SHORT[c]}" for _, n, _, c in PLAIN_CASES]
)
def test_a_plain_answer_gives_an_empty_report(upstream, name, stream, client):
    body = _sample(upstream, name).body
    if stream:
        report = _stream_report(upstream, client, body, [body])
    else:
        ctx = Context(request=Request(model="m"))
        translate_response(body, Plan(client, upstream), ctx)
        report = ctx.report
    assert report.entries == [], report


def test_a_chat_answers_thinking_reaches_an_anthropic_client_with_an_invented_marker():
    body = _sample(C, "pydantic-ai__stream-deepseek-reasoning-content").body
    report = _stream_report(C, A, body, [body])
    assert [(e.path, e.kind) for e in report.entries] == [("content.thinking.signature", INVENTED)]
