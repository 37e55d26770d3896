"""Wire edge: one package per protocol, each with pydantic wire models, a decoder into the IR and an
encoder out of it (requests, whole responses, stream events, errors).

``registry.get_codec`` gives a protocol's codec. May import: ``dragoman.sse``, ``dragoman.ir``, ``dragoman.errors``. Never mitmproxy.
"""

from __future__ import annotations

import re
from enum import StrEnum
from functools import lru_cache


class Protocol(StrEnum):
    ANTHROPIC_MESSAGES = "anthropic"
    OPENAI_CHAT = "openai-chat"
    OPENAI_RESPONSES = "openai-responses"
    GEMINI = "gemini"

    @property
    def endpoint(self) -> str:
        """The path appended to an upstream base URL in its SDK convention."""
        return _ENDPOINTS[self]


_ENDPOINTS = {
    Protocol.ANTHROPIC_MESSAGES: "/v1/messages",
    Protocol.OPENAI_CHAT: "/chat/completions",
    Protocol.OPENAI_RESPONSES: "/responses",
    #: Gemini puts the model and method in the path: ``gemini.request_encode.upstream_path`` builds it
    Protocol.GEMINI: "/v1beta/models",
}


#: Gemini's generation calls: ``/v1beta/models/{model}:generateContent`` (and ``:streamGenerateContent``, any API
#: version), and Code Assist's ``/v1internal:streamGenerateContent`` (Gemini CLI signed in with Google)
_GEMINI_PATH = re.compile(r"/v1\w*(?:/models/[^/:]+|internal):(?:stream)?[gG]enerateContent$")


def detect(path: str) -> Protocol | None:
    """The client's protocol from the request path (query string ignored)."""
    return _detect(path.split("?", 1)[0])


@lru_cache(maxsize=256)
def _detect(path: str) -> Protocol | None:
    """``detect`` of a path without its query (which may carry a key: never kept here); remembered, as every
    flow asks several times (the gate, the endpoints, the recorder, Translate) for the same few paths."""
    p = path.rstrip("/")
    if ":" in p and _GEMINI_PATH.search(p):
        return Protocol.GEMINI
    if p.endswith("/v1/messages") or p == "/messages":
        return Protocol.ANTHROPIC_MESSAGES
    if p.endswith("/chat/completions"):
        return Protocol.OPENAI_CHAT
    if p.endswith("/responses"):
        return Protocol.OPENAI_RESPONSES
    return None
