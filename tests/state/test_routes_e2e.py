"""A conversation moving between upstreams (routes file): ``previous_response_id`` passes through to the
Responses upstream that answered the previous turn (it keeps that state itself), and is expanded from the
store when the next turn goes to another upstream."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from tests.e2e.test_routes import Routed
from tests.state.conversation import conversation
from tests.state.test_chains_e2e import create
from tests.state.test_chains_e2e import next_input

from dragoman.demo import FakeUpstream

openai = pytest.importorskip("openai")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    with FakeUpstream(scenarios={"conversation": conversation}, scenario="conversation") as up:
        work = tmp_path_factory.mktemp("routes")
        text = f"""
upstreams:
  - name: resp
    protocol: openai-responses
    base_url: {up.url}/v1
    keys: [key-resp]
  - name: claude
    protocol: anthropic
    base_url: {up.url}
    keys: [key-claude]
routes:
  - match: 'gpt-*'
    to: [resp/gpt-fake]
  - match: 'claude-*'
    to: [claude/claude-fake]
"""
        routed = Routed(work, text, extra=["--set", f"dragoman_responses_store={work / 'responses.sqlite3'}"])
        try:
            yield up, routed
        finally:
            routed.stop()


def bodies_since(up: FakeUpstream, start: int) -> list[tuple[str, dict[str, Any]]]:
    with up.lock:
        return [(r.path, r.body) for r in up.requests[start:]]


def test_pass_through_then_expand_when_the_route_changes(setup) -> None:
    up, routed = setup
    c = openai.OpenAI(base_url=f"http://127.0.0.1:{routed.port}/v1", api_key="k", max_retries=0)
    start = len(up.requests)
    first = create(c, stream=True, model="gpt-a", input=f"weather? {uuid.uuid4().hex}")
    second = create(c, stream=False, model="gpt-a", input=next_input(first, 0, "x"), previous_response_id=first.id)
    third = create(c, stream=True, model="claude-a", input="thanks, and Rome?", previous_response_id=second.id)
    sent = bodies_since(up, start)
    assert [p.rsplit("/", 1)[-1] for p, _ in sent] == ["responses", "responses", "messages"]
    # the same Responses upstream answered the previous turn: the id passes as the client sent it
    assert sent[1][1]["previous_response_id"] == first.id
    assert [i.get("type") for i in sent[1][1]["input"]] == ["function_call_output"]
    # another upstream: the whole conversation, expanded from the store (turn 1 + turn 2 + the new input)
    roles = [m["role"] for m in sent[2][1]["messages"]]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    assert third.previous_response_id == second.id and third.status == "completed"
    got = c.responses.retrieve(first.id)  # stored on the way, though a Responses upstream answered
    assert got.id == first.id and got.output[0].type == first.output[0].type
