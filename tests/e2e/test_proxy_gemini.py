"""Google's hosts intercepted in explicit-proxy (regular) mode, offline: a Gemini client talks TLS to
``generativelanguage.googleapis.com`` (and Gemini CLI signed in with Google to ``cloudcode-pa.googleapis.com``)
through mitmdump, trusting its CA, with no base URL; Dragoman answers from a local fake upstream of another
protocol. The Google hosts are never dialed (``connection_strategy=lazy``; the log names no server connect).

The raw calls use urllib (the 3.11 venv too); the ``google-genai`` SDK test needs the SDK (skipped without it).
"""

from __future__ import annotations

import json
import re
import uuid

import pytest

from dragoman import demo as fu
from dragoman.demo import FakeUpstream
from dragoman.demo import Reply

from .test_proxy_mode import RegularProxy

pytestmark = pytest.mark.e2e

GEMINI_HOST = "generativelanguage.googleapis.com"
CODE_ASSIST_HOST = "cloudcode-pa.googleapis.com"
CLIENT_KEY = "AIza-client-key-must-not-travel"
OAUTH_TOKEN = "ya29.oauth-token-must-not-travel"
UPSTREAM_KEY = "sk-configured-upstream"
BODY = {"contents": [{"role": "user", "parts": [{"text": "Say hello."}]}]}


COUNTS = {
    "/v1/messages/count_tokens": lambda rec: Reply(json_body={"input_tokens": 4242}),
    "/v1beta/models/fake-model:countTokens": lambda rec: Reply(
        json_body={"totalTokens": 77, "promptTokensDetails": []}
    ),
}


@pytest.fixture(scope="module")
def fake():
    with FakeUpstream(routes=COUNTS) as up:
        yield up


@pytest.fixture(scope="module", params=["anthropic", "openai-chat"])
def proxy(request, tmp_path_factory, fake):
    """Gemini clients -> an Anthropic or a Chat upstream (the fake), with a configured key."""
    upstream = fake.url if request.param == "anthropic" else f"{fake.url}/v1"
    p = RegularProxy(
        tmp_path_factory.mktemp("proxy-gemini"),
        f"dragoman_target={request.param}",
        f"dragoman_upstream={upstream}",
        f"dragoman_api_key={UPSTREAM_KEY}",
        "dragoman_model_map=gemini-test=fake-model",
    )
    p.target = request.param  # type: ignore[attr-defined]
    yield p
    p.stop()


def explain(proxy: RegularProxy) -> str:
    return f"--- mitmdump log ---\n{proxy.log()}"


def google_dialed(proxy: RegularProxy) -> list[str]:
    """mitmdump's log lines about connecting to a Google host (none may exist: everything is answered here)."""
    lines = proxy.log_path.read_text(errors="replace").splitlines()  # the whole log, not its tail
    return [line for line in lines if re.search(r"server connect .*googleapis\.com", line)]


def seen(fake: FakeUpstream, test_id: str) -> list:
    return [r for r in list(fake.requests) if r.headers.get("x-test-id") == test_id]


def sse_objects(body: bytes) -> list[dict]:
    """The JSON of each ``data:`` line of an SSE body."""
    return [json.loads(line[5:]) for line in body.decode().splitlines() if line.startswith("data:")]


def upstream_path(proxy: RegularProxy) -> str:
    return "/v1/messages" if proxy.target == "anthropic" else "/v1/chat/completions"  # type: ignore[attr-defined]


def check_upstream(proxy: RegularProxy, fake: FakeUpstream, test_id: str, stream: bool, secret: str) -> None:
    """The call reached the fake once, in the upstream's protocol, with the configured key and not the client's."""
    got = seen(fake, test_id)
    assert [r.path for r in got] == [upstream_path(proxy)], explain(proxy)
    req = got[0]
    assert req.body["model"] == "fake-model"  # the model in the URL (or the wrapper), mapped
    assert bool(req.body.get("stream")) is stream
    key = req.headers.get("x-api-key") or req.headers.get("authorization", "").removeprefix("Bearer ")
    assert key == UPSTREAM_KEY
    assert secret not in json.dumps(req.headers) and secret not in req.raw.decode(errors="replace")
    assert "x-goog-api-key" not in req.headers
    assert google_dialed(proxy) == [], explain(proxy)


@pytest.mark.parametrize("stream", [False, True], ids=["generateContent", "streamGenerateContent"])
def test_gemini_api_host_is_translated(proxy, fake, stream):
    tid = uuid.uuid4().hex
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    status, headers, body = proxy.call(
        "POST",
        f"https://{GEMINI_HOST}/v1beta/models/gemini-test:{method}",
        BODY,
        {"x-goog-api-key": CLIENT_KEY, "x-test-id": tid},
    )
    assert status == 200, body[:500].decode(errors="replace") + explain(proxy)
    if stream:
        assert headers["content-type"].startswith("text/event-stream")
        events = sse_objects(body)
        assert len(events) > 2  # delta by delta, not one whole answer
        # the check of ``google_dialed`` can fail: the log does name the connections mitmproxy opens (the stream's)
        assert re.search(r"server connect 127\.0\.0\.1:\d+", proxy.log_path.read_text(errors="replace"))
        text = "".join(p.get("text", "") for e in events for p in e["candidates"][0]["content"]["parts"])
        last = events[-1]
    else:
        last = json.loads(body)
        text = "".join(p.get("text", "") for p in last["candidates"][0]["content"]["parts"])
    assert text == fu.TEXT
    assert last["candidates"][0]["finishReason"] == "STOP"
    assert last["usageMetadata"]["promptTokenCount"] == fu.USAGE_IN
    check_upstream(proxy, fake, tid, stream, CLIENT_KEY)


def test_gemini_api_key_in_the_query_does_not_travel(proxy, fake):
    tid = uuid.uuid4().hex
    status, _, body = proxy.call(
        "POST",
        f"https://{GEMINI_HOST}/v1beta/models/gemini-test:streamGenerateContent?alt=sse&key={CLIENT_KEY}",
        BODY,
        {"x-test-id": tid},
    )
    assert status == 200, explain(proxy)
    assert "".join(p.get("text", "") for e in sse_objects(body) for p in e["candidates"][0]["content"]["parts"])
    check_upstream(proxy, fake, tid, True, CLIENT_KEY)


@pytest.mark.parametrize("stream", [False, True], ids=["generateContent", "streamGenerateContent"])
def test_code_assist_is_answered_wrapped(proxy, fake, stream):
    """Gemini CLI signed in with Google: ``{model, project, request}`` in, ``{"response": ...}`` per answer out
    (what its Code Assist converter reads: ``response.candidates``, ``response.usageMetadata``)."""
    tid = uuid.uuid4().hex
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    wrapped = {"model": "gemini-test", "project": "proj-123", "user_prompt_id": "p1", "request": BODY}
    status, headers, body = proxy.call(
        "POST",
        f"https://{CODE_ASSIST_HOST}/v1internal:{method}",
        wrapped,
        {"authorization": f"Bearer {OAUTH_TOKEN}", "x-test-id": tid},
    )
    assert status == 200, body[:500].decode(errors="replace") + explain(proxy)
    answers = sse_objects(body) if stream else [json.loads(body)]
    assert all(list(a) == ["response"] for a in answers), answers
    inner = [a["response"] for a in answers]
    if stream:
        assert headers["content-type"].startswith("text/event-stream") and len(inner) > 2
    text = "".join(p.get("text", "") for r in inner for p in r["candidates"][0]["content"]["parts"])
    assert text == fu.TEXT
    assert inner[-1]["candidates"][0]["finishReason"] == "STOP"
    assert inner[-1]["usageMetadata"]["candidatesTokenCount"] == fu.USAGE_OUT
    check_upstream(proxy, fake, tid, stream, OAUTH_TOKEN)
    (req,) = seen(fake, tid)
    assert "proj-123" not in req.raw.decode()  # the wrapper's fields stay on this side


def test_code_assist_error_is_gemini_shaped(proxy, fake):
    """A malformed wrapped request is Gemini's 400 INVALID_ARGUMENT naming the field; nothing goes upstream."""
    tid = uuid.uuid4().hex
    wrapped = {"model": "gemini-test", "project": "p", "request": {"contents": [{"parts": [{"text": 7}]}]}}
    status, _, body = proxy.call(
        "POST",
        f"https://{CODE_ASSIST_HOST}/v1internal:streamGenerateContent?alt=sse",
        wrapped,
        {"authorization": f"Bearer {OAUTH_TOKEN}", "x-test-id": tid},
    )
    assert status == 400, body[:500].decode(errors="replace") + explain(proxy)
    err = json.loads(body)["error"]
    assert err["status"] == "INVALID_ARGUMENT" and "contents[0].parts[0].text" in err["message"]
    assert seen(fake, tid) == [] and google_dialed(proxy) == []


def test_google_genai_sdk_through_the_proxy(proxy, fake, monkeypatch):
    """The SDK as a user runs it behind the proxy: HTTPS_PROXY + SSL_CERT_FILE, its default base URL."""
    genai = pytest.importorskip("google.genai")
    from google.genai import types

    for name in ("GOOGLE_GEMINI_BASE_URL", "https_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    monkeypatch.setenv("SSL_CERT_FILE", str(proxy.ca))
    tid = uuid.uuid4().hex
    opts = types.HttpOptions(headers={"x-test-id": tid}, timeout=30_000)
    client = genai.Client(api_key=CLIENT_KEY, http_options=opts)
    assert GEMINI_HOST in str(client._api_client._http_options.base_url)
    chunks = list(client.models.generate_content_stream(model="gemini-test", contents="Say hello."))
    assert "".join(c.text or "" for c in chunks) == fu.TEXT, explain(proxy)
    assert chunks[-1].usage_metadata is not None and chunks[-1].usage_metadata.prompt_token_count == fu.USAGE_IN
    resp = client.models.generate_content(model="gemini-test", contents="Say hello.")
    assert resp.text == fu.TEXT
    got = seen(fake, tid)
    assert [r.path for r in got] == [upstream_path(proxy)] * 2
    assert all(r.headers.get("x-api-key", r.headers.get("authorization", "")).endswith(UPSTREAM_KEY) for r in got)
    assert google_dialed(proxy) == [], explain(proxy)


def test_count_tokens(proxy, fake):
    """``:countTokens``: an Anthropic upstream counts (its count_tokens, translated); a Chat one cannot (estimate)."""
    tid = uuid.uuid4().hex
    status, headers, body = proxy.call(
        "POST",
        f"https://{GEMINI_HOST}/v1beta/models/gemini-test:countTokens",
        BODY,
        {"x-goog-api-key": CLIENT_KEY, "x-test-id": tid},
    )
    assert status == 200, body[:500].decode(errors="replace") + explain(proxy)
    got = seen(fake, tid)
    if proxy.target == "anthropic":  # type: ignore[attr-defined]
        assert json.loads(body) == {"totalTokens": 4242} and "x-dragoman-estimate" not in headers
        assert [r.path for r in got] == ["/v1/messages/count_tokens"]
        assert got[0].body["model"] == "fake-model" and got[0].headers["x-api-key"] == UPSTREAM_KEY
        assert CLIENT_KEY not in json.dumps(got[0].headers)
    else:
        assert headers["x-dragoman-estimate"] == "true" and 5 < json.loads(body)["totalTokens"] < 100
        assert got == []
    assert google_dialed(proxy) == [], explain(proxy)


def test_code_assist_count_tokens(proxy, fake):
    """Gemini CLI signed in with Google counts on ``v1internal:countTokens`` (``{"request": {model, contents}}``)."""
    tid = uuid.uuid4().hex
    status, headers, body = proxy.call(
        "POST",
        f"https://{CODE_ASSIST_HOST}/v1internal:countTokens",
        {"request": {"model": "models/gemini-test", **BODY}},
        {"authorization": f"Bearer {OAUTH_TOKEN}", "x-test-id": tid},
    )
    assert status == 200, body[:500].decode(errors="replace") + explain(proxy)
    got = seen(fake, tid)
    if proxy.target == "anthropic":  # type: ignore[attr-defined]
        assert json.loads(body) == {"totalTokens": 4242}
        assert [r.path for r in got] == ["/v1/messages/count_tokens"] and got[0].body["model"] == "fake-model"
        assert OAUTH_TOKEN not in json.dumps(got[0].headers)
    else:
        assert headers["x-dragoman-estimate"] == "true" and json.loads(body)["totalTokens"] > 0 and got == []
    assert google_dialed(proxy) == [], explain(proxy)


def test_count_tokens_forwarded_to_a_gemini_upstream(tmp_path, fake):
    p = RegularProxy(
        tmp_path,
        "dragoman_target=gemini",
        f"dragoman_upstream={fake.url}",
        f"dragoman_api_key={UPSTREAM_KEY}",
        "dragoman_model_map=gemini-test=fake-model",
    )
    try:
        tid = uuid.uuid4().hex
        status, headers, body = p.call(
            "POST",
            f"https://{GEMINI_HOST}/v1beta/models/gemini-test:countTokens?key={CLIENT_KEY}",
            BODY,
            {"x-test-id": tid},
        )
        assert status == 200, body[:500].decode(errors="replace") + explain(p)
        assert json.loads(body) == {"totalTokens": 77, "promptTokensDetails": []}
        assert "x-dragoman-estimate" not in headers
        (req,) = seen(fake, tid)
        assert req.path == "/v1beta/models/fake-model:countTokens" and req.body == BODY
        assert req.headers["x-goog-api-key"] == UPSTREAM_KEY and CLIENT_KEY not in json.dumps(req.headers)
        assert google_dialed(p) == [], explain(p)
    finally:
        p.stop()
