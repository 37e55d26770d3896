"""One answer, written in the protocol a request speaks."""

from __future__ import annotations

from dragoman.demo import anthropic
from dragoman.demo import chat
from dragoman.demo import gemini
from dragoman.demo import responses
from dragoman.demo.answer import Answer
from dragoman.demo.wire import ANTHROPIC
from dragoman.demo.wire import CHAT
from dragoman.demo.wire import GEMINI
from dragoman.demo.wire import RESPONSES
from dragoman.demo.wire import Reply
from dragoman.demo.wire import Request

_RENDER = {ANTHROPIC: anthropic.render, CHAT: chat.render, RESPONSES: responses.render, GEMINI: gemini.render}
_RATE_LIMITED = {
    ANTHROPIC: anthropic.rate_limited,
    CHAT: chat.rate_limited,
    RESPONSES: responses.rate_limited,
    GEMINI: gemini.rate_limited,
}


def render(request: Request, answer: Answer) -> Reply:
    """The answer as the JSON body or the SSE events of ``request.protocol``."""
    return _RENDER[request.protocol](answer, request)


def rate_limited(request: Request, message: str) -> Reply:
    """HTTP 429 with ``retry-after: 7`` and the protocol's error body."""
    return _RATE_LIMITED[request.protocol](message)
