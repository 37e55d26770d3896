"""The stream callable (``dragoman.mitm.answer.callables.stream_callable``): which one a flow gets, and that the plain
one (a translated stream with nothing beside the translator) gives the client the same bytes as the general
one for every split of the upstream's bytes, keys masked, the idle watchdog's clock kept."""

from __future__ import annotations

import json

import pytest

from conftest import chunkings
from dragoman.mitm.answer import callables as sc
from dragoman.mitm.answer.faults import IdleWatchdog
from dragoman.mitm.keymask import MASK
from dragoman.mitm.keymask import KeyMask

from ..test_translate_addon import feed_all
from ..test_translate_addon import start_stream

KEY = "sk-configured-SECRET-0123456789"


def chat_chunk(delta: dict, finish: str | None = None) -> bytes:
    obj = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        "usage": None,
        "obfuscation": "Zx9",
    }
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


#: a Chat stream that quotes the key: whole in one text delta, split across two, and in tool arguments
CHAT_STREAM = b"".join(
    [
        chat_chunk({"role": "assistant", "content": ""}),
        chat_chunk({"content": None, "reasoning_content": "think"}),
        chat_chunk({"content": f"the key is {KEY}."}),
        chat_chunk({"content": " half " + KEY[:12]}),
        chat_chunk({"content": KEY[12:] + " \u00e9\n"}),
        chat_chunk(
            {"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": ""}}]}
        ),
        chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"k": "' + KEY + '"}'}}]}),
        chat_chunk({}, "tool_calls"),
        b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],'
        b'"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}}\n\n',
        b"data: [DONE]\n\n",
    ]
)


def kind(fn) -> str:
    return fn.__qualname__.split(".")[0]


def test_a_translated_stream_gets_the_plain_callable(tctx, addon):
    f = start_stream(tctx, addon, dragoman_api_key=KEY)
    assert kind(f.response.stream) == "_plain_callable"


@pytest.mark.parametrize(
    "target, opts",
    [
        ("anthropic", {}),  # same protocol both sides: the bytes pass, usage read beside them
        ("openai-chat", {"dragoman_lint": "strict"}),  # the live lint checks our output before it leaves
        ("openai-chat", {"dragoman_keep_answer": True}),  # the view's client-side tap
    ],
)
def test_a_stream_with_work_beside_the_translator_gets_the_general_callable(tctx, addon, target, opts):
    f = start_stream(tctx, addon, target=target, **opts)
    assert kind(f.response.stream) == "_general_callable"


@pytest.mark.parametrize("name, pieces", chunkings(CHAT_STREAM, seeds=4))
def test_the_plain_callable_gives_the_general_ones_bytes(tctx, addon, name, pieces):
    plain = start_stream(tctx, addon, dragoman_api_key=KEY)
    other = start_stream(tctx, addon, dragoman_api_key=KEY)
    state = addon.flows.get(other.id)
    general = sc._general_callable(other.id, state, addon.keys.stream())
    out = feed_all(plain.response.stream, [*pieces, b""])
    assert out == feed_all(general, [*pieces, b""])
    assert KEY.encode() not in out and out.count(MASK) == 2  # whole in a delta, and in the tool arguments
    assert b"message_stop" in out and b'"output_tokens":7' in out
    assert addon.flows.get(plain.id).sent == len(out)


def _broken_at(stream: bytes, index: int) -> bytes:
    """``stream`` with its ``index``-th event no ``chat.completion.chunk`` (the upstream lint's violation)."""
    events = [e + b"\n\n" for e in stream.split(b"\n\n") if e]
    events[index] = events[index].replace(b'"object":"chat.completion.chunk"', b'"object":"chat.completion"')
    return b"".join(events)


def test_log_mode_lint_rides_the_plain_callable(tctx, addon):
    f = start_stream(tctx, addon, dragoman_lint="log")
    assert kind(f.response.stream) == "_plain_callable"
    assert addon.flows.get(f.id).lint is not None


@pytest.mark.parametrize("name, pieces", chunkings(_broken_at(CHAT_STREAM, 3), seeds=4))
def test_the_plain_callable_lints_as_the_general_one(tctx, addon, name, pieces, caplog):
    """``dragoman_lint=log`` on the plain callable: the same bytes, the same reports (the upstream's chunk #3,
    our output clean), each logged once, as the general callable's ``lint.on_stream``."""
    plain = start_stream(tctx, addon, dragoman_api_key=KEY, dragoman_lint="log")
    other = start_stream(tctx, addon, dragoman_api_key=KEY, dragoman_lint="log")
    assert kind(plain.response.stream) == "_plain_callable"  # so the two callables compared differ
    state = addon.flows.get(other.id)
    general = sc._general_callable(other.id, state, addon.keys.stream())
    caplog.set_level("WARNING", logger="dragoman.mitm.guards.lint")
    out = feed_all(plain.response.stream, [*pieces, b""])
    logged = [r.getMessage() for r in caplog.records]
    assert out == feed_all(general, [*pieces, b""])
    got = addon.flows.get(plain.id).lint.reports
    assert got == state.lint.reports
    assert [(r["side"], r["index"]) for r in got] == [("upstream", 3)]
    assert "object must be 'chat.completion.chunk'" in got[0]["message"]
    assert len(logged) == 1 and plain.id in logged[0] and "upstream (chat)" in logged[0]


def test_the_plain_callable_keeps_the_idle_watchdogs_clock(tctx, addon):
    f = start_stream(tctx, addon)
    state = addon.flows.get(f.id)
    state.watchdog = IdleWatchdog(f, 60)  # not started: no event loop here
    f.response.stream = sc.stream_callable(f.id, state, addon.keys)
    state.watchdog.last = 0.0
    f.response.stream(chat_chunk({"role": "assistant", "content": "hi"}))
    assert state.watchdog.last > 0.0 and state.started


class Pieces:
    """A stand-in translator that answers each chunk with the next prepared piece."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = iter(pieces)

    def feed(self, data: bytes) -> bytes:
        return next(self.pieces)

    def close(self) -> bytes:
        return b""


@pytest.mark.parametrize("keys", [[KEY], [KEY, "sk-other-key-000000"]])
def test_the_plain_callable_masks_a_key_split_across_its_output(tctx, addon, keys):
    f = start_stream(tctx, addon)
    state = addon.flows.get(f.id)
    masker = KeyMask(keys).stream()
    general = sc._general_callable(f.id, state, masker)
    translator, state.translator = (
        state.translator,
        Pieces([b"a " + KEY[:10].encode(), b"", KEY[10:].encode() + b" b", b"x sk-", b"y\n\n"]),
    )
    fn = sc._plain_callable(f.id, state, masker, general)  # takes the stand-in's feed
    state.translator = translator
    out = bytearray()
    for chunk in (b"1", b"2", b"3", b"4", b"5"):
        r = fn(chunk)
        assert r != b""
        out += r if isinstance(r, bytes) else b"".join(r)
    assert bytes(out) == b"a " + MASK + b" bx sk-y\n\n"


def test_the_ledger_reads_the_usage_the_translated_stream_carried(tctx, addon, tmp_path):
    f = start_stream(tctx, addon, dragoman_ledger=str(tmp_path / "usage.sqlite3"))
    state = addon.flows.get(f.id)
    assert state.usage_tap is state.translator  # no decoder wrapper per event
    feed_all(f.response.stream, [CHAT_STREAM, b""])
    usage = state.usage_tap.usage
    assert (usage.input_tokens, usage.output_tokens) == (11, 7)
    addon.usage.close()


# -- the end of the flow: its stream's state goes with the stream, not with the flow (issue 31)


@pytest.mark.parametrize("hook", ["response", "error"])
@pytest.mark.parametrize("opts", [{}, {"dragoman_keep_answer": True}])
def test_a_finished_stream_lets_its_state_go_without_the_flow(tctx, addon, hook, opts):
    """mitmproxy's flow is freed only by the cyclic collector: what it still holds when it ends waited for a
    collection. At ``response``/``error`` the stream callable (which holds the translator, the request's IR and
    parsed JSON) is replaced by an inert one, so all of that is freed by reference counting there and then."""
    import gc
    import weakref

    from mitmproxy import flow as mflow

    from dragoman.mitm.flowstate import ended_stream

    f = start_stream(tctx, addon, **opts)
    fn = f.response.stream
    state = addon.flows.get(f.id)
    held = _Held()
    state.ctx.extra["held by the stream's state"] = held  # what the translator's context holds
    held_ref = weakref.ref(held)
    del held
    out = feed_all(fn, [CHAT_STREAM])
    assert b"message_start" in out
    fn(b"")
    del fn, state
    gc.disable()  # freed by reference counting alone, not by a collection
    try:
        if hook == "error":
            f.error = mflow.Error("connection closed")
            addon.error(f)
        else:
            addon.response(f)
        assert f.response.stream is ended_stream
        assert f.response.stream(b"x") == [] and f.response.stream(b"") == []
        assert held_ref() is None
    finally:
        gc.enable()


class _Held:
    pass


def test_a_stream_callable_put_around_ours_by_another_addon_stays(tctx, addon):
    f = start_stream(tctx, addon)
    ours = f.response.stream

    def theirs(data: bytes):
        return ours(data)

    f.response.stream = theirs
    feed_all(theirs, [CHAT_STREAM])
    theirs(b"")
    addon.response(f)
    assert f.response.stream is theirs  # not ours to drop
