"""Responses client requests -> IR (corpus, Codex captures, hand-made cases), and back (round trips)."""

from __future__ import annotations

import json

import pytest

from corpus_loader import requests
from dragoman.errors import ClientRequestError
from dragoman.ir import carry
from dragoman.ir.request import FilePart
from dragoman.ir.request import ImagePart
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import ToolCallPart
from dragoman.ir.request import ToolResultPart
from dragoman.protocols.base import Context
from dragoman.protocols.openai_responses import CODEC
from dragoman.protocols.openai_responses.request_decode import EXTRA_NAMESPACES
from dragoman.protocols.openai_responses.request_decode import EXTRA_PREVIOUS

from .helpers import DATA

CODEX = sorted(DATA.glob("*.request.json"))

REQS = requests("openai-responses")


def _codex(name: str) -> dict:
    return json.loads((DATA / f"{name}.request.json").read_text())


@pytest.mark.parametrize("name,proto,body", REQS, ids=[r[0] for r in REQS])
def test_corpus_requests_decode_and_reencode(name, proto, body):
    req = CODEC.decode_request(body)
    assert req.model == body["model"]
    out = CODEC.encode_request(req, Context(request=req))
    assert out["model"] == body["model"]
    # every message/function item of the source survives the round trip
    src = body["input"] if isinstance(body["input"], list) else [{"type": "message"}]
    kinds = {"message", "function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output", None}
    n_src = sum(1 for it in src if it.get("type") in kinds)
    n_out = sum(1 for it in out["input"] if it["type"] in kinds)
    n_sys = 1 if "instructions" in out else 0
    assert n_out + n_sys >= min(n_src, 1)
    assert bool(out.get("stream")) == bool(body.get("stream"))


@pytest.mark.parametrize("path", CODEX, ids=[p.name for p in CODEX])
def test_codex_requests_decode_and_reencode(path):
    body = json.loads(path.read_text())
    req = CODEC.decode_request(body)
    assert req.system and "Codex" in req.system[0].text  # leading developer messages
    assert req.messages[0].role == "user"
    names = {t.name for t in req.tools}
    assert {"store", "include", "client_metadata"} <= set(req.dropped.fields)
    # Codex's own prompt_cache_key is carried (issue 36) and given back to a Responses upstream as sent
    assert req.prompt_cache_key == body["prompt_cache_key"] and "prompt_cache_key" not in req.dropped.fields
    out = CODEC.encode_request(req, Context(request=req))
    assert out["prompt_cache_key"] == body["prompt_cache_key"]
    assert out["store"] is False
    assert out["instructions"].startswith(req.system[0].text[:50])
    assert all(t["name"] in names for t in out["tools"] if t["type"] in ("function", "custom"))


def test_codex_code_mode_tools_and_custom_calls():
    req = CODEC.decode_request(_codex("cx-tool-default"))
    by_name = {t.name: t for t in req.tools}
    assert by_name["exec"].kind == "custom" and by_name["exec"].format["syntax"] == "lark"
    assert by_name["sleep"].kind == "function"
    assert req.custom_tool_names() == {"exec"}
    # the namespace map keeps non-default namespaces (Codex calls "functions" tools by bare name)
    ns = req.extra[EXTRA_NAMESPACES]
    assert ns["sleep"] == ("clock", "sleep") and "exec" not in ns
    calls = [p for m in req.messages for p in m.parts if isinstance(p, ToolCallPart)]
    assert calls[0].kind == "custom" and calls[0].name == "exec" and calls[0].arguments.startswith("const r")
    assert calls[0].item_id.startswith("ctc_")
    results = [p for m in req.messages for p in m.parts if isinstance(p, ToolResultPart)]
    assert results[0].kind == "custom" and results[0].tool_call_id == calls[0].id
    assert len(results[0].content) == 2 and all(isinstance(c, TextPart) for c in results[0].content)
    assert req.reasoning.effort == "low" and "reasoning.context" in req.dropped.fields
    assert req.parallel_tool_calls is False


def test_codex_reasoning_and_function_call_grouping():
    req = CODEC.decode_request(_codex("cx-tool-claude-sonnet-4-5"))
    asst = [m for m in req.messages if m.role == "assistant"]
    assert len(asst) == 1
    thinking, call = asst[0].parts
    assert isinstance(thinking, ThinkingPart) and thinking.encrypted_content.startswith("fake-encrypted-")
    assert thinking.item_id.startswith("rs_") and thinking.summary and "Greeting" in thinking.text
    assert isinstance(call, ToolCallPart) and call.name == "exec_command" and call.item_id.startswith("fc_")
    assert req.messages[-1].role == "user"
    assert isinstance(req.messages[-1].parts[0], ToolResultPart)
    # namespace tools are flattened
    assert {"close_agent", "spawn_agent"} <= {t.name for t in req.tools}
    # the hosted web search is the request's search spec (dragoman.ir.search), kept as Codex sent it
    assert not [t for t in req.tools if t.kind == "builtin"]
    assert req.web_search is not None and req.web_search.origin == "responses"
    assert req.web_search.raw is not None and req.web_search.raw["type"] == "web_search"
    # re-encode: the reasoning item keeps its native encrypted content and id, then the call
    out = CODEC.encode_request(req, Context(request=req))
    types = [it["type"] for it in out["input"]]
    assert types[-3:] == ["reasoning", "function_call", "function_call_output"]
    rs = out["input"][-3]
    assert rs["encrypted_content"] == thinking.encrypted_content and rs["id"] == thinking.item_id


def test_namespace_collision_gets_prefixed_and_resolves_calls():
    body = {
        "model": "m",
        "tools": [
            {"type": "function", "name": "spawn", "parameters": {}},
            {"type": "namespace", "name": "agents", "tools": [{"type": "function", "name": "spawn", "parameters": {}}]},
        ],
        "input": [
            {"type": "function_call", "call_id": "c1", "name": "spawn", "namespace": "agents", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        ],
    }
    req = CODEC.decode_request(body)
    assert [t.name for t in req.tools] == ["spawn", "agents__spawn"]
    assert req.messages[0].parts[0].name == "agents__spawn"
    assert req.extra[EXTRA_NAMESPACES] == {"agents__spawn": ("agents", "spawn")}


def test_previous_response_id_is_kept_for_the_store_or_a_responses_upstream():
    req = CODEC.decode_request({"model": "m", "input": "hi", "previous_response_id": "resp_1"})
    assert req.extra[EXTRA_PREVIOUS] == "resp_1"


def test_invalid_request_is_client_error():
    with pytest.raises(ClientRequestError):
        CODEC.decode_request({"input": "no model"})
    with pytest.raises(ClientRequestError):
        CODEC.decode_request({"model": "m", "input": [{"type": "message", "role": "robot", "content": "x"}]})


def test_string_input_images_files_and_options():
    req = CODEC.decode_request({"model": "m", "input": "hello", "instructions": "be nice", "stream": True})
    assert req.system[0].text == "be nice" and req.messages[0].parts[0].text == "hello" and req.stream
    body = {
        "model": "m",
        "input": [
            {"role": "developer", "content": "sys"},
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "look"},
                    {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "high"},
                    {"type": "input_image", "image_url": "https://x/y.png"},
                    {"type": "input_image", "file_id": "file-1"},
                    {"type": "input_file", "file_data": "data:application/pdf;base64,JVBE", "filename": "a.pdf"},
                    {"type": "input_file", "file_id": "file-2"},
                    {"type": "input_audio", "input_audio": {}},
                ],
            },
            {
                "role": "assistant",
                "content": [{"type": "output_text", "text": "hi"}, {"type": "refusal", "refusal": "no"}],
            },
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "mid"}]},
            {"type": "item_reference", "id": "x"},
        ],
        "tool_choice": {"type": "function", "name": "f"},
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": True}],
        "reasoning": {"effort": "high", "summary": "detailed"},
        "max_output_tokens": 100,
        "temperature": 0.5,
        "top_p": 0.9,
        "text": {
            "format": {"type": "json_schema", "name": "s", "schema": {"type": "object"}, "strict": True},
            "verbosity": "low",
        },
        "safety_identifier": "u1",
        "store": False,
        "metadata": {"a": "b"},
    }
    req = CODEC.decode_request(body)
    assert req.system[0].text == "sys"
    user = req.messages[0].parts
    assert (
        isinstance(user[1], ImagePart)
        and user[1].data == "AAAA"
        and user[1].media_type == "image/png"
        and user[1].detail == "high"
    )
    assert user[2].url == "https://x/y.png" and user[3].file_id == "file-1"
    assert isinstance(user[4], FilePart) and user[4].media_type == "application/pdf" and user[4].data == "JVBE"
    assert user[5].file_id == "file-2"
    assert "input[1].content[6].input_audio" in req.dropped.fields and "input[4].item_reference" in req.dropped.fields
    assert req.messages[2].role == "system" and req.messages[2].source_role == "developer"
    assert req.tool_choice.mode == "tool" and req.tool_choice.name == "f"
    assert req.reasoning.effort == "high" and req.reasoning.summary == "detailed"
    assert (req.max_tokens, req.temperature, req.top_p, req.user) == (100, 0.5, 0.9, "u1")
    assert req.response_format.type == "json_schema" and req.response_format.strict is True
    assert {"store", "metadata", "text.verbosity"} <= set(req.dropped.fields)
    out = CODEC.encode_request(req, Context(request=req))
    assert out["instructions"] == "sys"
    assert out["input"][0]["content"][1] == {
        "type": "input_image",
        "detail": "high",
        "image_url": "data:image/png;base64,AAAA",
    }
    assert out["input"][2]["role"] == "developer"
    assert out["tool_choice"] == {"type": "function", "name": "f"}
    assert out["text"]["format"]["name"] == "s"
    assert out["reasoning"] == {"effort": "high", "summary": "detailed"} and out["include"] == [
        "reasoning.encrypted_content"
    ]


@pytest.mark.parametrize(
    "choice,mode", [("auto", "auto"), ("none", "none"), ("required", "any"), ({"type": "custom", "name": "x"}, "tool")]
)
def test_tool_choice(choice, mode):
    req = CODEC.decode_request({"model": "m", "input": "x", "tool_choice": choice})
    assert req.tool_choice.mode == mode


def test_carried_anthropic_reasoning_is_unwrapped():
    enc = carry.wrap_anthropic("SIG123", "I think", None)
    red = carry.wrap_anthropic(None, "", "REDACTED")
    body = {
        "model": "m",
        "input": [
            {"role": "user", "content": "q"},
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "I think"}],
                "encrypted_content": enc,
            },
            {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": red},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a"}]},
        ],
    }
    req = CODEC.decode_request(body)
    parts = req.messages[1].parts
    assert parts[0].signature == "SIG123" and parts[0].text == "I think" and parts[0].encrypted_content is None
    assert parts[1].redacted_data == "REDACTED" and parts[1].signature is None
    # foreign (carried) reasoning never goes to a Responses upstream
    ctx = Context(request=req)
    out = CODEC.encode_request(req, ctx)
    assert [it["type"] for it in out["input"]] == ["message", "message"]
    assert "input[1].thinking" in ctx.dropped.fields
