"""What every protocol does the same way with hosted web search: the "search unavailable" answer.

When a request offers a hosted web search and the upstream cannot run one (``Context.search`` is
``SEARCH_UNAVAILABLE``, set by the upstream's request encoder), the client must not take the answer for a
searched one: its reply opens with a search call that failed with ``unavailable`` (Anthropic
``web_search_tool_result_error``, a Responses ``web_search_call`` with status ``failed``), so Claude Code and
Codex show a failed search. ``SearchCodec`` (the ``ModuleCodec`` of the protocol packages) applies this to
every decoder, whole and streamed.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from dragoman.ir import search as s
from dragoman.ir.events import MessageStart
from dragoman.ir.events import StreamEvent
from dragoman.ir.events import WebSearch
from dragoman.ir.request import Request
from dragoman.ir.request import TextPart
from dragoman.ir.response import Response
from dragoman.protocols.base import Context
from dragoman.protocols.base import ModuleCodec
from dragoman.protocols.base import StreamDecoder
from dragoman.sse.events import SSEEvent

#: the longest query the unavailable call shows (the user's last words)
QUERY_CHARS = 500


def last_user_text(req: Request | None) -> str:
    """The text of the last user message: what the search would have been about."""
    if req is None:
        return ""
    for msg in reversed(req.messages):
        if msg.role == "user":
            text = " ".join(p.text for p in msg.parts if type(p) is TextPart).strip()
            if text:
                return text[:QUERY_CHARS]
    return ""


def unavailable(ctx: Context, message_id: str) -> s.WebSearchPart:
    """The failed search; its id is derived from the reply's id (unique per reply, the same on a replay)."""
    digest = hashlib.blake2s(message_id.encode(), digest_size=12).hexdigest() if message_id else secrets.token_hex(12)
    return s.WebSearchPart(id="srvtoolu_" + digest, query=last_user_text(ctx.request), error=s.UNAVAILABLE)


def is_unavailable(ctx: Context) -> bool:
    return ctx.search == s.SEARCH_UNAVAILABLE and ctx.request is not None and ctx.request.web_search is not None


def prepend_unavailable(resp: Response, ctx: Context) -> Response:
    resp.content.insert(0, unavailable(ctx, resp.id))
    return resp


class UnavailableSearchDecoder(StreamDecoder):
    """A stream decoder whose stream opens with the unavailable search right after ``MessageStart``."""

    __slots__ = ("_inner", "_ctx", "_sent")

    def __init__(self, inner: StreamDecoder, ctx: Context) -> None:
        self._inner = inner
        self._ctx = ctx
        self._sent = False

    @property  # type: ignore[override,unused-ignore]
    def done(self) -> bool:  # type: ignore[override,unused-ignore]
        return self._inner.done

    def feed(self, ev: SSEEvent) -> list[StreamEvent]:
        out = self._inner.feed(ev)
        if not self._sent:
            for i, e in enumerate(out):
                if type(e) is MessageStart:
                    self._sent = True
                    out.insert(i + 1, WebSearch(unavailable(self._ctx, e.id)))
                    break
        return out

    def close(self) -> list[StreamEvent]:
        return self._inner.close()


class SearchCodec(ModuleCodec):
    """A ``ModuleCodec`` whose decoders open the reply with the unavailable search when ``is_unavailable``."""

    def decode_response(self, body: dict[str, Any], ctx: Context) -> Response:
        resp = super().decode_response(body, ctx)
        return prepend_unavailable(resp, ctx) if is_unavailable(ctx) else resp

    def stream_decoder(self, ctx: Context) -> StreamDecoder:
        dec = super().stream_decoder(ctx)
        return UnavailableSearchDecoder(dec, ctx) if is_unavailable(ctx) else dec
