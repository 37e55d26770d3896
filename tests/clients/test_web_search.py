"""Issue 33 with real clients: the real Claude Code's WebSearch and Codex's web search through Dragoman.

Scripted fakes (``search_upstream.py``): a hosted search is answered with a real provider recording of a
search with citations (tests/corpus), the main loop by the agent.

* Claude Code on a Responses upstream: the main turn calls ``WebSearch``; Claude Code runs it as a
  sub-request to the Messages API carrying only the ``web_search_20250305`` server tool (forced by
  ``tool_choice``); Dragoman sends it as Responses ``{"type": "web_search"}`` and turns the recorded
  ``web_search_call`` + ``url_citation`` reply into ``server_tool_use`` / ``web_search_tool_result`` /
  cited text; Claude Code's tool result lists the sources ("Links: [...]") and the turn completes.
* Claude Code on a Chat upstream without search: the sub-request goes without the tool, the reply opens
  with a ``web_search_tool_result`` error ``unavailable``, and Claude Code reports "Web search error:
  unavailable" instead of an invented search.
* Codex (an unknown slug: classic tools with ``{"type": "web_search"}``) on an Anthropic upstream: the
  search reaches Claude as ``web_search_20250305``; the recorded Anthropic search comes back to Codex as a
  ``web_search_call`` item and its cited answer.
"""

from __future__ import annotations

import json
import re

import pytest
from npm_clients import explain
from npm_clients import run_claude
from npm_clients import run_codex
from search_upstream import NO_SEARCH
from search_upstream import QUERY
from search_upstream import SearchUpstream
from search_upstream import recording

from dragoman.demo.agent import FINAL_MARK

pytestmark = [pytest.mark.e2e, pytest.mark.clients]

CODEX_SLUG = "claude-sonnet-4-5"


@pytest.fixture(scope="module")
def search_upstream():
    with SearchUpstream() as up:
        yield up


@pytest.fixture(scope="module")
def proxies(search_upstream, e2e, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("search-mitm")
    started: dict[str, object] = {}

    def get(target: str):
        if target not in started:
            started[target] = e2e.Proxy(target, search_upstream, workdir)
        return started[target]

    yield get
    for p in started.values():
        p.stop()


@pytest.fixture
def upstream(search_upstream):
    search_upstream.reset()
    yield search_upstream
    search_upstream.reset()


def _summary(reqs) -> str:
    return "\n".join(f"  {r.path} [{r.protocol}] {json.dumps(r.body)[-600:]}" for r in reqs) or "  (none)"


def _claude_search(npm_clients, upstream, proxies, tmp_path, target):
    proxy = proxies(target)
    run = run_claude(
        npm_clients,
        f"http://127.0.0.1:{proxy.port}",
        f"search the web for {QUERY}",
        tmp_path / "work",
        tmp_path / "home",
        ["--allowedTools", "WebSearch"],
    )
    reqs = upstream.model_requests()
    return run, reqs, explain(run, _summary(reqs), proxy.log())


def _recorded_urls(protocol: str) -> list[str]:
    """The source urls the recorded search reply returns, in order, without repeats."""
    return list(dict.fromkeys(re.findall(r'"url"\s*:\s*"([^"]+)"', recording(protocol, True).body.decode())))


def test_claude_code_web_search_on_responses_shows_sources(npm_clients, upstream, proxies, tmp_path):
    run, reqs, why = _claude_search(npm_clients, upstream, proxies, tmp_path, "openai-responses")

    assert run.returncode == 0, why
    result = json.loads(run.stdout)
    assert result.get("is_error") is False and result.get("num_turns") == 2, why
    # main turn (WebSearch call), the search sub-request, the main turn with the tool result
    assert [r.protocol for r in reqs] == ["openai-responses"] * 3, why
    main, sub, final = (r.body for r in reqs)
    assert not any(str(t.get("type", "")).startswith("web_search") for t in main.get("tools") or []), why
    # the sub-request: Anthropic's web_search server tool became the Responses hosted tool, forced and with sources
    assert sub["tools"] == [{"type": "web_search"}], why
    assert sub.get("tool_choice") == "required", why
    assert "web_search_call.action.sources" in sub.get("include", []), why
    assert QUERY in json.dumps(sub["input"]), why
    # Claude Code's WebSearch tool result (what the model gets, quoted by the agent) lists the sources
    text = result["result"]
    assert FINAL_MARK in text and f'Web search results for query: "{QUERY}"' in text, why
    links = json.loads(json.dumps(final)).get("input")
    tool_output = next(
        it["output"] for it in links if isinstance(it, dict) and it.get("type") == "function_call_output"
    )
    tool_output = tool_output if isinstance(tool_output, str) else json.dumps(tool_output)
    urls = _recorded_urls("openai-responses")
    assert urls and "Links: [" in tool_output, why
    shown = re.findall(r'"url":"([^"]+)"', tool_output.split("Links: ", 1)[1].split("\n", 1)[0])
    assert shown and set(shown) <= set(urls), why
    assert "error" not in tool_output.split("Links: ", 1)[0].lower(), why
    # the usage Claude Code counted for the sub-request: the searches the reply showed
    assert sum(u.get("webSearchRequests", 0) for u in result["modelUsage"].values()) >= 1, why


def test_claude_code_web_search_on_chat_without_search_reports_unavailable(npm_clients, upstream, proxies, tmp_path):
    run, reqs, why = _claude_search(npm_clients, upstream, proxies, tmp_path, "openai-chat")

    assert run.returncode == 0, why
    result = json.loads(run.stdout)
    assert result.get("is_error") is False, why
    assert [r.protocol for r in reqs] == ["openai-chat"] * 3, why
    sub = reqs[1].body
    # the generic profile cannot search: neither the tool nor a choice naming it reaches the upstream
    assert "tools" not in sub and "tool_choice" not in sub and "web_search_options" not in sub, why
    assert QUERY in json.dumps(sub["messages"]), why
    # Claude Code shows a failed search, not the model's answer from memory as search results
    text = result["result"]
    assert "Web search error: unavailable" in text, why
    assert "Links: [" not in text, why
    assert sum(u.get("webSearchRequests", 0) for u in result["modelUsage"].values()) == 0, why
    assert NO_SEARCH in text, why  # the model's words still arrive, after the failed search


def test_codex_web_search_on_anthropic(npm_clients, upstream, proxies, tmp_path):
    proxy = proxies("anthropic")
    run = run_codex(
        npm_clients,
        f"http://127.0.0.1:{proxy.port}/v1",
        f"search the web for {QUERY}",
        tmp_path / "work",
        tmp_path / "codex-home",
        model=CODEX_SLUG,
    )
    reqs = upstream.model_requests()
    why = explain(run, _summary(reqs), proxy.log())

    assert run.returncode == 0, why
    assert [r.protocol for r in reqs] == ["anthropic"], why
    tools = reqs[0].body.get("tools") or []
    assert [t for t in tools if str(t.get("type", "")).startswith("web_search")] == [
        {"type": "web_search_20250305", "name": "web_search"}
    ], why
    queries, answer = _recorded_anthropic_search()
    # Codex shows each search the upstream ran, with its query, then the answer after the last search as its final message
    shown = re.findall(r"^web search: (.+)$", run.stderr + run.stdout, re.M)
    assert queries and shown == queries, why
    assert answer and answer in run.stdout, why


def _recorded_anthropic_search() -> tuple[list[str], str]:
    """(the queries of the recorded Anthropic search stream, its text after the last search) from its SSE events."""
    inputs: dict[int, str] = {}
    kinds: dict[int, str] = {}
    text: list[str] = []
    for line in recording("anthropic", True).body.decode().splitlines():
        if not line.startswith("data:"):
            continue
        ev = json.loads(line[5:])
        if ev.get("type") == "content_block_start":
            kinds[ev["index"]] = ev["content_block"]["type"]
            if kinds[ev["index"]] == "web_search_tool_result":
                text = []  # Codex prints the last message: the text after the last search
        delta = ev.get("delta") or {}
        if delta.get("type") == "input_json_delta" and kinds.get(ev["index"]) == "server_tool_use":
            inputs[ev["index"]] = inputs.get(ev["index"], "") + delta["partial_json"]
        elif delta.get("type") == "text_delta":
            text.append(delta["text"])
    return [json.loads(v)["query"] for _, v in sorted(inputs.items())], "".join(text).strip()
