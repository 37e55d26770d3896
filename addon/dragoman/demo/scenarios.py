"""The scenario registry: what the fake upstream answers, by name (``SCENARIOS``).

text        a short text answer
thinking    reasoning/thinking (Anthropic: thinking block with signature; Chat: ``reasoning_content``;
            Responses: a reasoning item with a summary and ``encrypted_content``), then text
tools       two parallel function calls (get_weather Paris / get_time Tokyo); Chat and Responses
            INTERLEAVE the argument deltas of the two calls; Anthropic sends them one after the other
error429    HTTP 429 with ``retry-after: 7`` and the protocol's error body
midstream_error  a few text events, then the protocol's in-stream error event
stall       the first text delta, then a pause of ``stall`` seconds (header ``x-fake-stall``), then the rest
drop        a few text events, then the connection is closed without the terminating chunk
length      the text, then a length stop (Anthropic ``max_tokens``, Chat ``length``, Responses
            ``response.incomplete`` with reason ``max_output_tokens``)
custom      one call of a freeform (custom) tool ``apply_patch`` with a patch as raw input: Responses sends
            a native ``custom_tool_call``; Anthropic and Chat, which have no custom tools, call the function
            Dragoman offered for it, with the raw input in its one string property ``input``
agent       a tiny tool-using agent for the real CLI clients (``dragoman.demo.agent``)
"""

from __future__ import annotations

import json

from dragoman.demo.agent import Agent
from dragoman.demo.answer import Answer
from dragoman.demo.answer import Call
from dragoman.demo.render import rate_limited
from dragoman.demo.render import render
from dragoman.demo.wire import ANTHROPIC
from dragoman.demo.wire import CHAT
from dragoman.demo.wire import DROP
from dragoman.demo.wire import MIDSTREAM_ERROR
from dragoman.demo.wire import RESPONSES
from dragoman.demo.wire import STALL
from dragoman.demo.wire import Reply
from dragoman.demo.wire import Request
from dragoman.demo.wire import Scenario

TEXT_PIECES = ("Hello", " from", " the", " fake", " upstream", ".")
TEXT = "".join(TEXT_PIECES)
THINKING_PIECES = ("Let me", " think", " about", " this.")
THINKING = "".join(THINKING_PIECES)
SIGNATURE = "sig-fake-0123456789abcdef"
ENCRYPTED = "enc-fake-reasoning-blob"
TOOL_CALLS = (
    ("call_weather_1", "get_weather", ('{"city"', ': "Par', 'is", "unit"', ': "c"}')),
    ("call_time_2", "get_time", ('{"tz"', ': "Asia/', 'Tokyo"', "}")),
)
PATCH = '*** Begin Patch\n*** Add File: hello.txt\n+hello "world"\n*** End Patch'
_PATCH_ARGS = json.dumps({"input": PATCH})
CUSTOM_CALL = ("call_patch_1", "apply_patch", (_PATCH_ARGS[:20], _PATCH_ARGS[20:45], _PATCH_ARGS[45:]))
ERROR_429_MESSAGE = "Rate limited by the fake upstream, retry later"
USAGE_IN = 12
USAGE_OUT = 7

BUILTIN = ("text", "thinking", "tools", "error429", "midstream_error", "stall", "drop", "length", "custom")


def _calls(name: str, protocol: str) -> tuple[Call, ...]:
    """The tool calls of a scenario (custom: the function standing in for the freeform tool, but in Responses)."""
    if name == "tools":
        return tuple(Call(cid, fn, frags, item_id=f"fc_fake_{n}") for n, (cid, fn, frags) in enumerate(TOOL_CALLS))
    if name == "custom" and protocol == RESPONSES:
        return (Call(CUSTOM_CALL[0], CUSTOM_CALL[1], (PATCH[:15], PATCH[15:]), item_id="ctc_fake_1", custom=True),)
    if name == "custom":
        return (Call(*CUSTOM_CALL),)
    return ()


def script(name: str, protocol: str) -> Answer:
    """What a built-in scenario (but ``error429``) says in ``protocol``."""
    thinking = name == "thinking"
    calls = _calls(name, protocol)
    return Answer(
        thinking=THINKING_PIECES if thinking else (),
        signature=SIGNATURE,
        encrypted=ENCRYPTED,
        text=() if calls else TEXT_PIECES,
        calls=calls,
        length=name == "length",
        fault=name if name in (MIDSTREAM_ERROR, STALL, DROP) else None,
        usage_in=USAGE_IN,
        usage_out=USAGE_OUT,
        reasoning_tokens=3 if thinking else 0,
    )


def _builtin(name: str) -> Scenario:
    def scenario(request: Request) -> Reply:
        if name == "error429":
            return rate_limited(request, ERROR_429_MESSAGE)
        return render(request, script(name, request.protocol))

    scenario.__name__ = scenario.__qualname__ = name
    return scenario


#: name -> scenario; ``FakeUpstream(scenarios=...)`` adds to (or overrides) these
SCENARIOS: dict[str, Scenario] = {name: _builtin(name) for name in BUILTIN}
SCENARIOS["agent"] = Agent()


# -- one reply without a server (unit tests build upstream bytes with these) ---------------------------------


def reply(scenario: str, protocol: str, model: str, stream: bool, include_usage: bool = False) -> Reply:
    return SCENARIOS[scenario](Request(protocol, model, stream, include_usage))


def anthropic_reply(scenario: str, model: str, stream: bool) -> Reply:
    return reply(scenario, ANTHROPIC, model, stream)


def chat_reply(scenario: str, model: str, stream: bool, include_usage: bool) -> Reply:
    return reply(scenario, CHAT, model, stream, include_usage)


def responses_reply(scenario: str, model: str, stream: bool) -> Reply:
    return reply(scenario, RESPONSES, model, stream)
