"""Only the N most recent images of a conversation are sent (``dragoman_keep_images``, issue 30 item 4): older
ones in user turns and tool results become a short text, in each client protocol, and are reported as dropped."""

from __future__ import annotations

import json

import pytest

from dragoman.protocols import Protocol
from dragoman.protocols.base import Context
from dragoman.translate.images import PLACEHOLDER
from dragoman.translate.images import keep_recent_images
from dragoman.translate.plan import Plan
from dragoman.translate.request import decode_client_request
from dragoman.translate.request import encode_upstream_request

A, C, R = Protocol.ANTHROPIC_MESSAGES, Protocol.OPENAI_CHAT, Protocol.OPENAI_RESPONSES
PNG = "iVBORw0KGgo="


def a_img(tag: str) -> dict:
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG + tag}}


def anthropic_loop() -> dict:
    """A computer-use loop: a user screenshot, then three tool results each carrying one, newest last."""
    messages: list[dict] = [{"role": "user", "content": [{"type": "text", "text": "go"}, a_img("0")]}]
    for i in range(1, 4):
        messages.append(
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": "shot", "input": {}}]}
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"t{i}",
                        "content": [{"type": "text", "text": "ok"}, a_img(str(i))],
                    }
                ],
            }
        )
    return {"model": "claude-x", "max_tokens": 64, "messages": messages}


def chat_loop() -> dict:
    def img(tag):
        return {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}{tag}"}}

    return {
        "model": "gpt-x",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "go"}, img("0")]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "shot", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "ok"}, img("1")]},
            {"role": "user", "content": [img("2"), img("3")]},
        ],
    }


def responses_loop() -> dict:
    def img(tag):
        return {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}{tag}"}

    return {
        "model": "gpt-x",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "go"}, img("0")]},
            {"type": "function_call", "call_id": "c1", "name": "shot", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": [img("1")]},
            {"type": "message", "role": "user", "content": [img("2")]},
            {"type": "function_call", "call_id": "c2", "name": "shot", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c2", "output": [img("3")]},
        ],
    }


LOOPS = {A: anthropic_loop, C: chat_loop, R: responses_loop}
IMAGE_TYPE = {A: "image", C: "image_url", R: "input_image"}
TEXT_TYPE = {A: "text", C: "text", R: "input_text"}


def tags_left(obj: dict) -> list[str]:
    """The tags (0 = oldest) of the images still in the request, in order."""
    raw = json.dumps(obj)
    return [t for t in "0123" if f"{PNG}{t}" in raw]


@pytest.mark.parametrize("client", [A, C, R])
@pytest.mark.parametrize("keep, left", [(1, "3"), (2, "23"), (3, "123"), (4, "0123"), (9, "0123")])
def test_keeps_the_newest(client, keep, left):
    obj = LOOPS[client]()
    replaced = keep_recent_images(obj, client, keep)
    assert tags_left(obj) == list(left)
    assert replaced == 4 - len(left)
    raw = json.dumps(obj)
    assert raw.count(PLACEHOLDER) == replaced
    assert raw.count(f'"type": "{IMAGE_TYPE[client]}"') == len(left)
    assert raw.count(json.dumps({"type": TEXT_TYPE[client], "text": PLACEHOLDER})) == replaced


@pytest.mark.parametrize("client", [A, C, R])
def test_off_by_default(client):
    obj = LOOPS[client]()
    assert keep_recent_images(obj, client, 0) == 0
    assert obj == LOOPS[client]()


def test_assistant_images_and_cache_breakpoints():
    obj = anthropic_loop()
    first = obj["messages"][0]["content"][1]
    first["cache_control"] = {"type": "ephemeral"}
    obj["messages"][1]["content"].append(a_img("9"))  # not a user turn or tool result: never counted or touched
    keep_recent_images(obj, A, 1)
    assert obj["messages"][0]["content"][1] == {
        "type": "text",
        "text": PLACEHOLDER,
        "cache_control": {"type": "ephemeral"},
    }
    assert obj["messages"][1]["content"][-1] == a_img("9")


@pytest.mark.parametrize("client", [A, C, R])
@pytest.mark.parametrize("upstream", [A, C, R])
def test_through_translation_reported_as_dropped(client, upstream):
    body = json.dumps(LOOPS[client]()).encode()
    cr = decode_client_request(body, client, keep_images=2)
    assert cr.rewritten
    ctx = Context()
    out = encode_upstream_request(cr, Plan(client, upstream), ctx, "m")
    sent = json.loads(out)
    assert tags_left(sent) == ["2", "3"]
    assert json.dumps(sent).count(PLACEHOLDER) == 2
    assert any("2 replaced" in name and "dragoman_keep_images" in name for name in ctx.dropped.fields)


def test_nothing_to_replace_keeps_the_client_bytes():
    body = json.dumps(anthropic_loop()).encode()
    cr = decode_client_request(body, A, keep_images=4)
    assert cr.raw is body and not cr.rewritten
    assert encode_upstream_request(cr, Plan(A, A), Context(), "claude-x") is body
