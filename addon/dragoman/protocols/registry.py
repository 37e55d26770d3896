"""Which codec speaks which protocol: ``get_codec(Protocol.X)``. A module of its own so that the package
root (``Protocol``, ``detect``), which every codec imports, never imports the codecs back."""

from __future__ import annotations

from dragoman.protocols import Protocol
from dragoman.protocols.anthropic_messages import CODEC as ANTHROPIC
from dragoman.protocols.base import Codec
from dragoman.protocols.openai_chat import CODEC as CHAT
from dragoman.protocols.openai_responses import CODEC as RESPONSES

CODECS: dict[Protocol, Codec] = {
    Protocol.ANTHROPIC_MESSAGES: ANTHROPIC,
    Protocol.OPENAI_CHAT: CHAT,
    Protocol.OPENAI_RESPONSES: RESPONSES,
}


def get_codec(protocol: Protocol) -> Codec:
    """The codec singleton for ``protocol``."""
    return CODECS[protocol]
