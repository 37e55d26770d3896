"""The offline demo's scriptable fake LLM upstream, speaking all four protocols (stdlib only, 127.0.0.1).

``make run`` / ``python -m dragoman demo`` put mitmdump in front of it; ``python -m dragoman fake-upstream``
runs it alone; the tests, the real-CLI tests (``agent`` scenario) and the benchmark (its own scenario)
all use it. It does I/O: the sans-I/O core never imports it.

  server.py        ``FakeUpstream``: the HTTP/1.1 server (asyncio), request log, stall/drop faults; the CLI
  scenarios.py     the registry of named scenarios (text, thinking, tools, error429, midstream_error, ...)
  agent.py         the ``agent`` scenario: a tool-using model for Claude Code / Codex tool loops
  answer.py        ``Answer``: what the fake model says, whatever the protocol
  anthropic.py, chat.py, responses.py, gemini.py   one answer written as each protocol's JSON body or SSE events
  render.py        the dispatch to those four
  wire.py          ``Request`` / ``Reply`` / SSE framing (``split_sse``: a recorded stream cut into events)
"""

from dragoman.demo.scenarios import CUSTOM_CALL
from dragoman.demo.scenarios import ENCRYPTED
from dragoman.demo.scenarios import ERROR_429_MESSAGE
from dragoman.demo.scenarios import PATCH
from dragoman.demo.scenarios import SCENARIOS
from dragoman.demo.scenarios import SIGNATURE
from dragoman.demo.scenarios import TEXT
from dragoman.demo.scenarios import TEXT_PIECES
from dragoman.demo.scenarios import THINKING
from dragoman.demo.scenarios import THINKING_PIECES
from dragoman.demo.scenarios import TOOL_CALLS
from dragoman.demo.scenarios import USAGE_IN
from dragoman.demo.scenarios import USAGE_OUT
from dragoman.demo.scenarios import anthropic_reply
from dragoman.demo.scenarios import chat_reply
from dragoman.demo.scenarios import responses_reply
from dragoman.demo.server import FakeUpstream
from dragoman.demo.server import RecordedRequest
from dragoman.demo.wire import MIDSTREAM_ERROR_MESSAGE
from dragoman.demo.wire import Reply
from dragoman.demo.wire import Request
from dragoman.demo.wire import detect_protocol
from dragoman.demo.wire import split_sse

__all__ = [
    "CUSTOM_CALL",
    "ENCRYPTED",
    "ERROR_429_MESSAGE",
    "FakeUpstream",
    "MIDSTREAM_ERROR_MESSAGE",
    "PATCH",
    "RecordedRequest",
    "Reply",
    "Request",
    "SCENARIOS",
    "SIGNATURE",
    "TEXT",
    "TEXT_PIECES",
    "THINKING",
    "THINKING_PIECES",
    "TOOL_CALLS",
    "USAGE_IN",
    "USAGE_OUT",
    "anthropic_reply",
    "chat_reply",
    "detect_protocol",
    "responses_reply",
    "split_sse",
]
