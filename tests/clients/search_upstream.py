"""The fake upstream of the real-client web search tests: the agent, plus hosted searches replayed from real recordings.

* a request that offers the upstream's hosted search tool (Anthropic ``web_search_*``, Responses
  ``web_search*``) and carries no tool result -> the recorded reply of a real search with citations, in
  the request's protocol, streamed or whole (tests/corpus, see INDEX.tsv: ``RECORDINGS``);
* a request that offers Claude Code's client-side ``WebSearch`` tool -> one ``WebSearch`` call for
  ``QUERY`` (the main loop's turn; Claude Code then runs the search as a sub-request);
* a request that offers nothing and carries no tool result -> ``NO_SEARCH`` (what a model without search
  answers: from memory);
* everything else -> the agent (``dragoman.demo.agent``): after a tool result, ``FINAL_MARK`` + its text.
"""

from __future__ import annotations

import json
import uuid
from functools import cache
from pathlib import Path
from typing import Any

from corpus_loader import Sample
from corpus_loader import samples
from dragoman.demo.agent import Agent
from dragoman.demo.agent import offered_tools
from dragoman.demo.agent import tool_results
from dragoman.demo.answer import Answer
from dragoman.demo.answer import Call
from dragoman.demo.answer import Ids
from dragoman.demo.answer import pieces
from dragoman.demo.render import render
from dragoman.demo.server import FakeUpstream
from dragoman.demo.wire import ANTHROPIC
from dragoman.demo.wire import RESPONSES
from dragoman.demo.wire import Reply
from dragoman.demo.wire import Request
from dragoman.demo.wire import split_sse

QUERY = "dragoman mitmproxy addon"
NO_SEARCH = "dragoman-no-search: answered from memory"

#: (protocol, streamed) -> the corpus sample replayed as a hosted search reply
RECORDINGS = {
    (RESPONSES, True): "responses/vercel-ai__stream-web-search-citations.chunks.txt",
    (RESPONSES, False): "responses/pydantic-ai__json-url-citations.yaml",
    (ANTHROPIC, True): "anthropic/pydantic-ai__stream-web-search-citations.yaml",
    (ANTHROPIC, False): "anthropic/pydantic-ai__json-web-search-citations.yaml",
}


@cache
def recording(protocol: str, stream: bool) -> Sample:
    want = RECORDINGS[(protocol, stream)]
    found = [
        s
        for s in samples(protocol, stream=stream, ok=True)
        if s.name.split("#")[0] == want and b"web_search" in s.body  # the interaction that searched
    ]
    assert found, f"corpus sample {want} is missing"
    return found[0]


def hosted_search_offered(protocol: str, body: dict[str, Any]) -> bool:
    """The request offers the upstream's own web search tool."""
    for t in body.get("tools") or []:
        kind = str(t.get("type") or "") if isinstance(t, dict) else ""
        if (protocol == ANTHROPIC and kind.startswith("web_search_")) or (
            protocol == RESPONSES and kind.startswith("web_search")
        ):
            return True
    return False


def _replay(sample: Sample) -> Reply:
    if sample.stream:
        return Reply(headers={"content-type": "text/event-stream"}, events=split_sse(sample.body))
    return Reply(headers={"content-type": "application/json"}, body=sample.body)


class SearchAgent:
    """The scenario (a callable)."""

    def __init__(self) -> None:
        self.agent = Agent()

    def __call__(self, request: Request) -> Reply:
        protocol, body = request.protocol, request.body
        results = tool_results(protocol, body)
        if not results and hosted_search_offered(protocol, body):
            return _replay(recording(protocol, request.stream))
        tools = offered_tools(protocol, body)
        if not results and "WebSearch" in tools:
            call = Call(
                call_id=("toolu_" if protocol == ANTHROPIC else "call_") + uuid.uuid4().hex[:24],
                name="WebSearch",
                fragments=pieces(json.dumps({"query": QUERY})),
                item_id="fc_" + uuid.uuid4().hex[:24],
            )
            return render(request, Answer(calls=(call,), ids=_ids()))
        if not results and not tools:
            return render(request, Answer(text=pieces(NO_SEARCH), ids=_ids()))
        return self.agent(request)


def _ids() -> Ids:
    h = uuid.uuid4().hex[:24]
    return Ids(message="msg_" + h, completion="chatcmpl-" + h, response="resp_" + h, reasoning="rs_" + h)


class SearchUpstream(FakeUpstream):
    def __init__(self, log_path: Path | None = None) -> None:
        super().__init__(scenario="search", scenarios={"search": SearchAgent()}, log_path=log_path)

    def reset(self) -> None:
        with self.lock:
            self.requests = []

    def model_requests(self) -> list[Any]:
        with self.lock:
            return [r for r in self.requests if r.method == "POST" and r.protocol is not None]
