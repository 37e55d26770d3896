"""Gemini requests both ways: Gemini CLI's real requests decoded, IR requests encoded for a Gemini upstream."""

from __future__ import annotations

import base64
import json

import pytest

from dragoman.errors import ClientRequestError
from dragoman.ir import carry
from dragoman.ir.request import Message
from dragoman.ir.request import Reasoning
from dragoman.ir.request import Request
from dragoman.ir.request import ResponseFormat
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import Tool
from dragoman.ir.request import ToolCallPart
from dragoman.ir.request import ToolChoice
from dragoman.ir.request import ToolResultPart
from dragoman.protocols import Protocol
from dragoman.protocols import detect
from dragoman.protocols.base import Context
from dragoman.protocols.gemini import CODEC
from dragoman.protocols.gemini.request_decode import ARRAY
from dragoman.protocols.gemini.request_decode import WRAPPED
from dragoman.protocols.gemini.request_decode import apply_path
from dragoman.protocols.registry import get_codec
from protocols.gemini.helpers import CAPTURES

needs_captures = pytest.mark.skipif(not CAPTURES.is_dir(), reason="Gemini CLI captures not on this machine")


def _capture(name: str) -> tuple[str, dict]:
    obj = json.loads((CAPTURES / name).read_text())
    return obj["path"], obj["body"]


@needs_captures
def test_gemini_cli_turn_decodes():
    path, body = _capture("turn1-streamGenerateContent.json")
    assert detect(path) is Protocol.GEMINI
    req = CODEC.decode_request(body)
    apply_path(req, path)
    assert (req.model, req.stream, req.extra.get(ARRAY)) == ("gemini-3.1-pro-preview", True, None)
    assert req.system and req.system[0].text.startswith("You are Gemini CLI")
    names = [t.name for t in req.tools]
    assert "read_file" in names and "list_directory" in names
    assert all(t.parameters and t.parameters.get("type") == "object" for t in req.tools if t.kind == "function")
    assert req.reasoning == Reasoning(enabled=True, effort="high", summary="auto")
    assert req.messages[-1].parts[-1] == TextPart("say hello")
    # and it goes to Anthropic as a valid request
    out = get_codec(Protocol.ANTHROPIC_MESSAGES).encode_request(req, Context(request=req))
    assert out["model"] == "gemini-3.1-pro-preview" and out["tools"]


@needs_captures
def test_gemini_cli_routing_call_asks_for_structured_output():
    path, body = _capture("routing-classifier-generateContent.json")
    req = CODEC.decode_request(body)
    apply_path(req, path)
    assert (req.model, req.stream) == ("gemini-3.5-flash-lite", False)
    assert req.response_format is not None and req.response_format.type == "json_schema"
    assert req.response_format.schema and req.response_format.schema.get("type") == "object"


def test_paths():
    req = Request(model="")
    apply_path(req, "/v1beta/models/gemini-2.5-pro:streamGenerateContent")
    assert (req.model, req.stream, req.extra.get(ARRAY)) == ("gemini-2.5-pro", True, True)
    wrapped = CODEC.decode_request({"model": "gemini-2.5-pro", "project": "p", "request": {"contents": []}})
    apply_path(wrapped, "/v1internal:streamGenerateContent?alt=sse")
    assert (wrapped.model, wrapped.stream, wrapped.extra.get(WRAPPED), wrapped.extra.get(ARRAY)) == (
        "gemini-2.5-pro",
        True,
        True,
        None,
    )
    for p in ("/v1/models/x:countTokens", "/v1beta/models", "/v1beta/models/x"):
        assert detect(p) is None


def test_calls_and_responses_pair_by_id_then_by_name():
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "hi"}]},
            {
                "role": "model",
                "parts": [
                    {"functionCall": {"name": "ls", "args": {"dir": "."}}, "thoughtSignature": "SIG"},
                    {"functionCall": {"name": "cat", "args": {"f": "a"}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"id": "cat-123", "name": "cat", "response": {"output": "A"}}},
                    {"functionResponse": {"name": "ls", "response": {"error": "denied"}}},
                ],
            },
        ]
    }
    req = CODEC.decode_request(body)
    sig, ls, cat = req.messages[1].parts
    assert isinstance(sig, ThinkingPart) and carry.unwrap_gemini(sig.signature) == {"call_0": "SIG"}
    assert (ls.id, ls.name, json.loads(ls.arguments)) == ("call_0", "ls", {"dir": "."})
    r_cat, r_ls = req.messages[2].parts
    assert (r_cat.tool_call_id, r_cat.content, r_cat.is_error) == (cat.id, [TextPart("A")], False)
    assert (r_ls.tool_call_id, r_ls.content, r_ls.is_error) == ("call_0", [TextPart("denied")], True)
    # back to Gemini: the signature on its call, the responses named after their calls
    out = CODEC.encode_request(req, Context(request=req))
    model, user = out["contents"][1]["parts"], out["contents"][2]["parts"]
    assert model[0] == {"functionCall": {"id": "call_0", "name": "ls", "args": {"dir": "."}}, "thoughtSignature": "SIG"}
    assert "thoughtSignature" not in model[1]
    assert user[1]["functionResponse"] == {"id": "call_0", "name": "ls", "response": {"error": "denied"}}


def test_carried_anthropic_thinking_comes_back_whole():
    value = base64.b64encode(carry.wrap_anthropic("ant-sig", "thought text").encode()).decode()
    body = {"contents": [{"role": "model", "parts": [{"text": "answer", "thoughtSignature": value}]}]}
    t, text = CODEC.decode_request(body).messages[0].parts
    assert (t.text, t.signature, text) == ("thought text", "ant-sig", TextPart("answer"))


@pytest.mark.parametrize(
    "config,choice",
    [
        ({"mode": "AUTO"}, ToolChoice("auto")),
        ({"mode": "ANY"}, ToolChoice("any")),
        ({"mode": "NONE"}, ToolChoice("none")),
        ({"mode": "ANY", "allowedFunctionNames": ["f"]}, ToolChoice("tool", "f")),
    ],
)
def test_tool_config_both_ways(config, choice):
    body = {"contents": [], "tools": [{"functionDeclarations": [{"name": "f"}]}]}
    req = CODEC.decode_request({**body, "toolConfig": {"functionCallingConfig": config}})
    assert req.tool_choice == choice
    assert CODEC.encode_request(req, Context())["toolConfig"]["functionCallingConfig"] == config


def test_generation_config_both_ways():
    g = {
        "temperature": 0.2,
        "topP": 0.9,
        "topK": 40,
        "maxOutputTokens": 100,
        "stopSequences": ["END"],
        "responseMimeType": "application/json",
        "responseSchema": {"type": "OBJECT", "properties": {"a": {"type": "STRING", "nullable": True}}},
        "thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": True},
    }
    req = CODEC.decode_request({"contents": [], "generationConfig": g})
    assert (req.temperature, req.top_p, req.top_k, req.max_tokens, req.stop) == (0.2, 0.9, 40, 100, ["END"])
    assert req.response_format == ResponseFormat(
        type="json_schema",
        name="response",
        schema={"type": "object", "properties": {"a": {"type": ["string", "null"]}}},
    )
    assert req.reasoning == Reasoning(enabled=True, budget_tokens=1024, summary="auto")
    out = CODEC.encode_request(req, Context())["generationConfig"]
    assert out["responseJsonSchema"] == req.response_format.schema
    assert out["thinkingConfig"] == {"includeThoughts": True, "thinkingBudget": 1024}
    off = CODEC.decode_request({"contents": [], "generationConfig": {"thinkingConfig": {"thinkingBudget": 0}}})
    assert CODEC.encode_request(off, Context())["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 0}


def test_an_anthropic_conversation_for_a_gemini_upstream():
    req = Request(
        model="gemini-2.5-flash",
        system=[TextPart("be brief")],
        messages=[
            Message("user", [TextPart("weather?")]),
            Message(
                "assistant",
                [
                    ThinkingPart(text="hmm", signature="claude-sig"),
                    ToolCallPart("toolu_1", "get_weather", '{"city":"Paris"}'),
                ],
            ),
            Message("user", [ToolResultPart("toolu_1", [TextPart("sunny")])]),
            Message("system", [TextPart("developer note")]),
        ],
        tools=[Tool("get_weather", "Weather", {"type": "object"}), Tool("web_search", kind="builtin", raw={})],
        reasoning=Reasoning(enabled=True, effort="low"),
    )
    ctx = Context(request=req)
    out = CODEC.encode_request(req, ctx)
    assert out["systemInstruction"] == {"parts": [{"text": "be brief"}, {"text": "developer note"}]}
    assert [c["role"] for c in out["contents"]] == ["user", "model", "user"]
    assert out["contents"][1]["parts"] == [
        {"text": "hmm", "thought": True},
        {
            "functionCall": {"id": "toolu_1", "name": "get_weather", "args": {"city": "Paris"}},
            # another model's call: Google's documented skip value, or Gemini 3 answers 400
            "thoughtSignature": "skip_thought_signature_validator",
        },
    ]
    assert ctx.placeholders == {"thought_signature"}
    assert out["contents"][2]["parts"][0]["functionResponse"]["name"] == "get_weather"
    assert out["tools"] == [
        {
            "functionDeclarations": [
                {"name": "get_weather", "description": "Weather", "parametersJsonSchema": {"type": "object"}}
            ]
        }
    ]
    assert out["generationConfig"]["thinkingConfig"] == {"includeThoughts": True, "thinkingLevel": "LOW"}
    assert set(ctx.dropped.fields) >= {"thinking.signature", "tools.web_search"}


@pytest.mark.parametrize("body", [{"contents": "x"}, {"contents": [{"parts": "x"}]}, {"tools": ["x"], "contents": []}])
def test_bad_requests(body):
    with pytest.raises(ClientRequestError):
        CODEC.decode_request(body)


def test_the_skip_validator_sentinel_is_no_signature():
    """Gemini CLI signs a call it has no signature for with the sentinel Gemini's docs name: nothing to carry."""
    fc = {"functionCall": {"name": "ls", "args": {}}, "thoughtSignature": "skip_thought_signature_validator"}
    (call,) = CODEC.decode_request({"contents": [{"role": "model", "parts": [fc]}]}).messages[0].parts
    assert isinstance(call, ToolCallPart)
