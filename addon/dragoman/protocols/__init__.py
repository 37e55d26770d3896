"""Wire edge: one package per protocol, each with pydantic wire models, a decoder into the IR and an
encoder out of it (requests, whole responses, stream events, errors).

``registry.get_codec`` gives a protocol's codec. May import: ``dragoman.sse``, ``dragoman.ir``, ``dragoman.errors``. Never mitmproxy.
"""

from __future__ import annotations

from enum import StrEnum


class Protocol(StrEnum):
    ANTHROPIC_MESSAGES = "anthropic"
    OPENAI_CHAT = "openai-chat"
    OPENAI_RESPONSES = "openai-responses"

    @property
    def endpoint(self) -> str:
        """The path appended to an upstream base URL in its SDK convention."""
        return _ENDPOINTS[self]


_ENDPOINTS = {
    Protocol.ANTHROPIC_MESSAGES: "/v1/messages",
    Protocol.OPENAI_CHAT: "/chat/completions",
    Protocol.OPENAI_RESPONSES: "/responses",
}


def detect(path: str) -> Protocol | None:
    """The client's protocol from the request path (query string ignored)."""
    p = path.split("?", 1)[0].rstrip("/")
    if p.endswith("/v1/messages") or p == "/messages":
        return Protocol.ANTHROPIC_MESSAGES
    if p.endswith("/chat/completions"):
        return Protocol.OPENAI_CHAT
    if p.endswith("/responses"):
        return Protocol.OPENAI_RESPONSES
    return None
