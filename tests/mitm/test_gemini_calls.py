"""Gemini's ``:countTokens`` in the Endpoints addon (taddons/tflow, no network): forwarded to a Gemini upstream
as it is, to an Anthropic upstream as its count_tokens, estimated otherwise or when the upstream cannot count."""

from __future__ import annotations

import json

import pytest
from mitmproxy.test import taddons

from dragoman.mitm import gemini_calls
from dragoman.mitm.endpoints import METADATA_KEY
from dragoman.mitm.endpoints import Endpoints
from dragoman.mitm.translate_addon import Translate
from dragoman.protocols import Protocol
from mitm.test_endpoints import make_flow
from mitm.test_endpoints import respond

CLIENT_KEY = "AIza-client-SECRET-1"
OPTION_KEY = "sk-option-SECRET-2"
GOOGLE = "https://generativelanguage.googleapis.com"
BODY = {
    "contents": [{"role": "user", "parts": [{"text": "What is the weather in Paris? " * 10}]}],
}
WRAPPED = {
    "generateContentRequest": {"model": "models/gemini-x", **BODY, "systemInstruction": {"parts": [{"text": "terse"}]}}
}


@pytest.fixture
def addon():
    return Endpoints()


@pytest.fixture
def tctx(addon):
    with taddons.context(addon, Translate()) as tctx:
        yield tctx


def count_flow(body: object = BODY, query: str = "", headers: dict | None = None):
    url = f"{GOOGLE}/v1beta/models/gemini-x:countTokens{query}"
    return make_flow("POST", url, body, {"x-goog-api-key": CLIENT_KEY} if headers is None else headers)


def estimate_of(body: object) -> int:
    status, raw = gemini_calls.count_tokens(json.dumps(body).encode())
    assert status == 200
    return json.loads(raw)["totalTokens"]


@pytest.mark.parametrize(
    ("upstream", "path"),
    [
        ("https://g.example/gemini", "/gemini/v1beta/models/gemini-real:countTokens"),
        ("https://g.example/v1beta", "/v1beta/models/gemini-real:countTokens"),
    ],
)
def test_forwarded_to_a_gemini_upstream(tctx, addon, upstream, path):
    tctx.configure(
        addon,
        dragoman_target="gemini",
        dragoman_upstream=upstream,
        dragoman_api_key=OPTION_KEY,
        dragoman_model_map=["gemini-x=gemini-real"],
    )
    f = count_flow(WRAPPED, query=f"?key={CLIENT_KEY}")
    addon.request(f)
    assert f.response is None and f.metadata[METADATA_KEY] == "countTokens-forwarded"
    r = f.request
    assert (r.host, r.path) == ("g.example", path)  # no query: the client's key= stays here
    assert r.headers["x-goog-api-key"] == OPTION_KEY and CLIENT_KEY not in str(r.headers)
    sent = json.loads(r.content)
    assert sent["generateContentRequest"]["model"] == "models/gemini-real"  # the model of the path
    assert sent["generateContentRequest"]["contents"] == BODY["contents"]
    respond(f, 200, {"totalTokens": 17, "cachedContentTokenCount": 4, "promptTokensDetails": []})
    addon.response(f)
    assert f.response.status_code == 200 and "x-dragoman-estimate" not in f.response.headers
    assert json.loads(f.response.content) == {
        "totalTokens": 17,
        "cachedContentTokenCount": 4,
        "promptTokensDetails": [],
    }
    assert f.id not in addon.counts


def test_gemini_target_without_upstream_keeps_google_with_the_clients_key(tctx, addon):
    tctx.configure(addon, dragoman_target="gemini")
    f = count_flow()
    addon.request(f)
    assert f.request.host == "generativelanguage.googleapis.com"
    assert f.request.path == "/v1beta/models/gemini-x:countTokens"
    assert f.request.headers["x-goog-api-key"] == CLIENT_KEY


@pytest.mark.parametrize(
    ("status", "answer"),
    [(500, {"error": {"code": 500, "message": "boom", "status": "INTERNAL"}}), (200, b"<html>"), (200, {"x": 1})],
)
def test_upstream_that_cannot_count_gives_the_estimate(tctx, addon, status, answer):
    tctx.configure(addon, dragoman_target="gemini", dragoman_upstream="https://g.example", dragoman_api_key=OPTION_KEY)
    f = count_flow()
    addon.request(f)
    respond(f, status, answer)
    f.response.headers["content-encoding"] = "identity"
    addon.response(f)
    assert f.response.status_code == 200 and f.response.headers["x-dragoman-estimate"] == "true"
    assert json.loads(f.response.content) == {"totalTokens": estimate_of(BODY)}
    assert "content-encoding" not in f.response.headers
    assert f.metadata[METADATA_KEY] == "countTokens-estimated"


def test_forwarded_to_an_anthropic_upstream_as_count_tokens(tctx, addon):
    tctx.configure(
        addon,
        dragoman_target="anthropic",
        dragoman_upstream="https://a.example/anthropic",
        dragoman_api_key=OPTION_KEY,
        dragoman_model_map=["gemini-x=claude-real"],
    )
    body = {
        **BODY,
        "systemInstruction": {"parts": [{"text": "terse"}]},
        "tools": [{"functionDeclarations": [{"name": "f", "parameters": {"type": "OBJECT"}}]}],
        "generationConfig": {"maxOutputTokens": 10, "temperature": 0.5},
    }
    f = count_flow(body)
    addon.request(f)
    r = f.request
    assert (r.host, r.path) == ("a.example", "/anthropic/v1/messages/count_tokens")
    assert r.headers["x-api-key"] == OPTION_KEY and "x-goog-api-key" not in r.headers
    sent = json.loads(r.content)
    assert set(sent) == {"model", "messages", "system", "tools"}  # count_tokens refuses max_tokens, sampling
    assert sent["model"] == "claude-real" and sent["tools"][0]["name"] == "f"
    respond(f, 200, {"input_tokens": 42})
    addon.response(f)
    assert json.loads(f.response.content) == {"totalTokens": 42}
    assert "x-dragoman-estimate" not in f.response.headers


def test_anthropic_target_without_upstream_is_estimated_not_sent_to_google(tctx, addon):
    tctx.configure(addon, dragoman_target="anthropic", dragoman_api_key=OPTION_KEY)
    f = count_flow()
    addon.request(f)
    assert f.response is not None and f.response.headers["x-dragoman-estimate"] == "true"
    assert json.loads(f.response.content) == {"totalTokens": estimate_of(BODY)}


def test_other_targets_are_estimated(tctx, addon):
    tctx.configure(addon, dragoman_target="openai-chat", dragoman_upstream="https://o.example/v1")
    f = count_flow()
    addon.request(f)
    assert f.response is not None and f.response.status_code == 200
    assert json.loads(f.response.content) == {"totalTokens": estimate_of(BODY)}
    assert f.metadata[METADATA_KEY] == "countTokens"


@pytest.mark.parametrize("target", ["gemini", "anthropic"])
def test_bad_body_is_geminis_400(tctx, addon, target):
    tctx.configure(addon, dragoman_target=target, dragoman_upstream="https://u.example")
    f = count_flow(b"not json")
    addon.request(f)
    assert f.response is not None and f.response.status_code == 400
    assert json.loads(f.response.content)["error"]["status"] == "INVALID_ARGUMENT"


def test_error_forgets_the_flow(tctx, addon):
    tctx.configure(addon, dragoman_target="gemini", dragoman_upstream="https://g.example")
    f = count_flow()
    addon.request(f)
    assert f.id in addon.counts
    addon.error(f)
    assert f.id not in addon.counts


@pytest.mark.parametrize(
    ("target", "status", "body", "out"),
    [
        (Protocol.GEMINI, 200, b'{"totalTokens": 3}', b'{"totalTokens": 3}'),
        (Protocol.GEMINI, 200, b'{"totalTokens": -1}', None),
        (Protocol.GEMINI, 200, b'{"totalTokens": true}', None),
        (Protocol.ANTHROPIC_MESSAGES, 200, b'{"input_tokens": 9}', b'{"totalTokens":9}'),
        (Protocol.ANTHROPIC_MESSAGES, 429, b'{"input_tokens": 9}', None),
        (Protocol.ANTHROPIC_MESSAGES, 200, b"[]", None),
    ],
)
def test_from_upstream(target, status, body, out):
    assert gemini_calls.from_upstream(target, status, body) == out


CODE_ASSIST = "https://cloudcode-pa.googleapis.com/v1internal:countTokens"
CA_BODY = {"request": {"model": "models/gemini-x", **BODY}}  # what Gemini CLI signed in with Google sends


def test_code_assist_count_forwarded_to_a_gemini_upstream(tctx, addon):
    tctx.configure(
        addon,
        dragoman_target="gemini",
        dragoman_upstream="https://g.example",
        dragoman_api_key=OPTION_KEY,
        dragoman_model_map=["gemini-x=gemini-real"],
    )
    f = make_flow("POST", CODE_ASSIST, CA_BODY, {"authorization": "Bearer ya29.token"})
    addon.request(f)
    r = f.request
    assert (r.host, r.path) == ("g.example", "/v1beta/models/gemini-real:countTokens")
    assert json.loads(r.content) == BODY  # the API's own body: the wrapper and its model stay here
    assert r.headers["x-goog-api-key"] == OPTION_KEY and "authorization" not in r.headers
    respond(f, 200, {"totalTokens": 12})
    addon.response(f)
    assert json.loads(f.response.content) == {"totalTokens": 12}  # Code Assist's answer has the same shape


def test_code_assist_count_forwarded_to_an_anthropic_upstream(tctx, addon):
    tctx.configure(
        addon, dragoman_target="anthropic", dragoman_upstream="https://a.example", dragoman_api_key=OPTION_KEY
    )
    f = make_flow("POST", CODE_ASSIST, CA_BODY, {"authorization": "Bearer ya29.token"})
    addon.request(f)
    assert (f.request.host, f.request.path) == ("a.example", "/v1/messages/count_tokens")
    assert json.loads(f.request.content)["model"] == "gemini-x"
    respond(f, 200, {"input_tokens": 8})
    addon.response(f)
    assert json.loads(f.response.content) == {"totalTokens": 8}


def test_code_assist_count_without_upstream_is_estimated(tctx, addon):
    """No base URL: Code Assist's host has no Gemini API path to send the count to."""
    tctx.configure(addon, dragoman_target="gemini")
    f = make_flow("POST", CODE_ASSIST, CA_BODY, {"authorization": "Bearer ya29.token"})
    addon.request(f)
    assert f.response is not None and f.response.headers["x-dragoman-estimate"] == "true"
    assert json.loads(f.response.content) == {"totalTokens": estimate_of(BODY)}


def test_other_code_assist_calls_are_not_counted(tctx, addon):
    tctx.configure(addon, dragoman_target="gemini", dragoman_upstream="https://g.example")
    f = make_flow("POST", "https://cloudcode-pa.googleapis.com/v1internal:loadCodeAssist", {"x": 1})
    addon.request(f)
    assert f.response is None and f.request.host == "cloudcode-pa.googleapis.com" and f.id not in addon.counts
