"""LangChain on the Responses API through Dragoman in front of a Chat upstream (issue 14).

``ChatOpenAI(use_responses_api=True)``, streaming, two tools bound, through a real mitmdump with the addon
in front of the fake Chat upstream's ``tools`` scenario, which streams two parallel tool calls with their
argument deltas interleaved (0, 1, 0, 1, ...). LangChain advances its content index whenever
``output_index`` changes, so overlapping output items came out as four broken calls; one item after the
other, both calls arrive with their exact arguments. LangChain runs in the SDK client interpreter
(``$DRAGOMAN_CLIENT_PYTHON``): on Python 3.11 it cannot share a venv with mitmproxy 11.0.2 (h11 pin).
"""

from __future__ import annotations

import json
import subprocess

import pytest

from dragoman import demo as fu

from .conftest import client_python

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def langchain_client():
    py = client_python()
    r = subprocess.run([py, "-c", "import langchain_openai"], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"the SDK client interpreter {py} lacks langchain-openai (the [test] extra on 3.12; .ci/run)")


def test_langchain_streams_two_parallel_tool_calls_from_a_chat_upstream(langchain_client, proxies, fake, run_client):
    proxy = proxies("openai-chat")
    result, upstream = run_client(proxy, fake, "langchain-responses", "stream", "tools")
    assert result["ok"], result
    # the upstream really was a streamed Chat request offering both tools
    assert upstream is not None and upstream.path == "/v1/chat/completions"
    assert upstream.body["stream"] is True
    assert [t["function"]["name"] for t in upstream.body["tools"]] == ["get_weather", "get_time"]
    # both calls, each with its exact arguments, and nothing broken beside them
    want = [(cid, name, json.loads("".join(frags))) for cid, name, frags in fu.TOOL_CALLS]
    assert [(c["id"], c["name"], c["arguments"]) for c in result["tool_calls"]] == want
    assert [c["arguments"] for c in result["tool_calls"]] == [{"city": "Paris", "unit": "c"}, {"tz": "Asia/Tokyo"}]
    assert result["invalid_tool_calls"] == []
    assert result["stop"] == "completed"
