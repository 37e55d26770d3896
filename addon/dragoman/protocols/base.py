"""The codec interface every protocol implements, and the context a translation carries."""

from __future__ import annotations

from abc import ABC
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from typing import TYPE_CHECKING
from typing import Any

from dragoman.ir.common import Dropped
from dragoman.ir.common import ErrorInfo
from dragoman.ir.events import StreamEvent
from dragoman.ir.limits import ModelLimits
from dragoman.ir.request import Request
from dragoman.ir.response import Response
from dragoman.protocols.profiles import GENERIC
from dragoman.protocols.profiles import Profile
from dragoman.sse.events import SSEEvent

if TYPE_CHECKING:
    from dragoman.protocols import Protocol

#: an SSE comment line: the keepalive of Chat and Responses clients (their SDKs skip comments)
KEEPALIVE_COMMENT = b": keepalive\n\n"


@dataclass(slots=True)
class Context:
    """What one translated exchange knows, shared by the request, response and stream codecs.

    ``request`` is the client's request in IR form (after model mapping): encoders toward the client
    use it (custom tool names, ``include_usage``, the request echo a Responses object carries).
    ``dropped`` is the exchange's lossiness report (``ir.lossy.LossReport``, also ``report``): what was
    dropped, approximated or invented, by field path, logged once per flow and kept with the flow.
    ``strict``: tolerated oddities (unknown event types) become errors.
    """

    request: Request | None = None
    dropped: Dropped = field(default_factory=Dropped)
    strict: bool = False
    #: how thinking in history goes to a Chat upstream: "reasoning_content" or "drop"
    chat_reasoning_field: str = "reasoning_content"
    #: how a Chat request asks for the token limit: "max_tokens" or "max_completion_tokens"
    chat_max_tokens_field: str = "max_tokens"
    #: the Chat upstream's provider profile (``profiles``): how reasoning is asked for and given back
    profile: Profile = GENERIC
    #: what was sent in place of reasoning state the history lacks (``profiles`` placeholders), for one log line
    placeholders: set[str] = field(default_factory=set)
    #: the local estimate of the request's input tokens (``translate.tokens``), set by the translate layer
    #: for an Anthropic client's stream: its ``message_start`` shows it when the upstream reports usage at the end
    input_tokens_estimate: int | None = None
    #: computes ``input_tokens_estimate`` on demand (set by the translate layer; an overflow answer uses it)
    estimate: Callable[[], int] | None = None
    #: the upstream model's declared limits (routes file ``models:``), None when none are declared
    model_limits: ModelLimits | None = None
    #: how an Anthropic upstream is asked to cache a request from a client of another protocol:
    #: "auto" (top-level ``cache_control``), "breakpoints" (explicit ones on tools/system/last turns), "off"
    #: (the codec default; the addon sets each upstream's mode, ``routing.spec.anthropic_cache``)
    anthropic_cache: str = "off"
    #: what the translation changed on purpose (e.g. ``max_tokens 32000 -> 8192``), for one log line
    adjusted: list[str] = field(default_factory=list)
    #: how the upstream serves the hosted web search the request offers (``dragoman.ir.search.SEARCH_*``),
    #: set by the upstream's request encoder; None: no search offered
    search: str | None = None
    #: an Anthropic upstream gets single-underscore ``mcp_`` tool names as ``mcp__`` (``translate.mcp_names``)
    mcp_prefix: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def report(self) -> Dropped:
        """The lossiness report (the same object as ``dropped``)."""
        return self.dropped

    def estimate_input_tokens(self) -> int | None:
        """The request's estimated input tokens (``translate.tokens``), computed once when first asked."""
        if self.input_tokens_estimate is None and self.estimate is not None:
            self.input_tokens_estimate = self.estimate()
        return self.input_tokens_estimate

    def custom_tools(self) -> set[str]:
        return self.request.custom_tool_names() if self.request is not None else set()


#: ``StreamEncoder.literal``: (delta event class, block index, JSON string token) -> client bytes, or None
Literal = Callable[[type, int, bytes], "bytes | None"]
#: ``StreamDecoder.repeat``: (the Shape, the IR delta class, the block index, what the decoder does with a token)
Repeat = tuple[Any, type, int, "list[str] | Callable[[bytes], None] | None"]


class StreamDecoder(ABC):
    """Upstream SSE events -> IR stream events, enforcing the source protocol's event order.

    Raises ``UpstreamProtocolError`` for an out-of-order or malformed event; an in-band upstream error
    is returned as an IR ``StreamError`` (not raised). ``done`` is True once the terminal event was seen.
    """

    done: bool = False
    #: set by every ``shortcut`` that gave bytes: (its ``protocols._shape.Shape``, the IR delta class, the block
    #: index, what the decoder does with the token: None for nothing (a text / thinking delta), a list (a
    #: call's argument fragments, kept for the end check and compacted as ``_checks.keeper`` does), or a
    #: function of the token (e.g. the characters counted for a ``.done`` check)) when taking the same frame
    #: again would do exactly that and nothing else, as long as nothing else is fed; else None.
    #: ``StreamTranslator`` then writes the frames of that shape without asking the decoder (its repeat, with
    #: ``StreamEncoder.pieces`` / ``writer``).
    repeat: Repeat | None = None

    @abstractmethod
    def feed(self, ev: SSEEvent) -> list[StreamEvent]: ...

    @abstractmethod
    def close(self) -> list[StreamEvent]:
        """End of upstream bytes. Raises ``UpstreamProtocolError`` when the stream ended early."""

    def shortcut(self, raw: bytes, literal: Literal) -> bytes | None:
        """``raw``, one whole SSE frame with nothing pending before it, translated without a parse when it is a
        delta this decoder learnt (``protocols._shape``) for the block open now: the client's bytes
        ``literal(TextDelta / ThinkingDelta / ToolArgsDelta, block index, the text as orjson's JSON string
        token)`` gives (the encoder's ``literal``), the decoder's own state then updated as ``feed`` would
        have; None (the frame not learnt, or ``literal`` gave None): nothing changed, ``feed`` it. The
        default learns nothing."""
        return None


class StreamEncoder(ABC):
    """IR stream events -> client SSE bytes, owning the client protocol's framing and id allocation."""

    @abstractmethod
    def encode(self, ev: StreamEvent) -> bytes: ...

    @abstractmethod
    def error(self, err: ErrorInfo) -> bytes:
        """Terminal in-stream error framing in this protocol; closes the stream."""

    @abstractmethod
    def close(self) -> bytes:
        """Anything owed at the end of a well-formed stream (e.g. Chat's ``[DONE]``)."""

    def literal(self, kind: type[StreamEvent], index: int, token: bytes) -> bytes | None:
        """``encode(kind(index, text))`` given ``text`` as its JSON string token (``StreamDecoder.shortcut``),
        when this encoder's hot path would write it from the token alone; None: it needs ``encode``."""
        return None

    def pieces(self, kind: type[StreamEvent], index: int) -> list[bytes] | None:
        """The bytes ``literal(kind, index, token)`` writes around the token, so that it writes exactly
        ``token.join(pieces)`` (a token twice: three pieces), when writing it changes nothing of this encoder's
        state (the same delta can be written again and again as long as nothing else is encoded); None:
        ``literal`` must be asked each time (the default)."""
        return None

    def writer(self, kind: type[StreamEvent], index: int) -> Callable[[bytes], bytes] | None:
        """Where ``pieces`` gives None because ``literal`` keeps something per delta (the text for a closing
        event, a counter): a function of the token that writes exactly what ``literal(kind, index, token)``
        writes and keeps what it keeps, its checks skipped (valid as long as nothing else is encoded); None:
        ``literal`` must be asked each time (the default)."""
        return None

    def keepalive(self) -> bytes:
        """The client protocol's keepalive, sent when the upstream sent one: an SSE comment (Chat and
        Responses clients skip comments). Never sent on Dragoman's own initiative."""
        return KEEPALIVE_COMMENT


class Codec(ABC):
    protocol: Protocol

    # requests
    @abstractmethod
    def decode_request(self, body: dict[str, Any]) -> Request:
        """Client JSON -> IR. Raises ``ClientRequestError`` for an invalid request."""

    @abstractmethod
    def encode_request(self, req: Request, ctx: Context) -> dict[str, Any]:
        """IR -> upstream JSON. Records what it cannot carry in ``ctx.dropped``."""

    # whole responses
    @abstractmethod
    def decode_response(self, body: dict[str, Any], ctx: Context) -> Response: ...

    @abstractmethod
    def encode_response(self, resp: Response, ctx: Context) -> dict[str, Any]: ...

    # errors
    @abstractmethod
    def decode_error(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> ErrorInfo:
        """Any upstream error body (JSON in this protocol, foreign JSON, HTML, empty) -> ErrorInfo."""

    @abstractmethod
    def encode_error(self, err: ErrorInfo) -> dict[str, Any]:
        """ErrorInfo -> this protocol's HTTP error body (status is ``err.http_status``)."""

    # streams
    @abstractmethod
    def stream_decoder(self, ctx: Context) -> StreamDecoder: ...

    @abstractmethod
    def stream_encoder(self, ctx: Context) -> StreamEncoder: ...


class ModuleCodec(Codec):
    """The shape every protocol package has: module-level request, response and error functions, one
    stream decoder class and one stream encoder class, each living in the module of its concern."""

    def __init__(
        self,
        protocol: Protocol,
        *,
        decode_request: Callable[[dict[str, Any]], Request],
        encode_request: Callable[[Request, Context], dict[str, Any]],
        decode_response: Callable[[dict[str, Any], Context], Response],
        encode_response: Callable[[Response, Context], dict[str, Any]],
        decode_error: Callable[[int, bytes, dict[str, str] | None], ErrorInfo],
        encode_error: Callable[[ErrorInfo], dict[str, Any]],
        stream_decoder: Callable[[Context], StreamDecoder],
        stream_encoder: Callable[[Context], StreamEncoder],
    ) -> None:
        self.protocol = protocol
        self._decode_request = decode_request
        self._encode_request = encode_request
        self._decode_response = decode_response
        self._encode_response = encode_response
        self._decode_error = decode_error
        self._encode_error = encode_error
        self._stream_decoder = stream_decoder
        self._stream_encoder = stream_encoder

    def decode_request(self, body: dict[str, Any]) -> Request:
        return self._decode_request(body)

    def encode_request(self, req: Request, ctx: Context) -> dict[str, Any]:
        return self._encode_request(req, ctx)

    def decode_response(self, body: dict[str, Any], ctx: Context) -> Response:
        return self._decode_response(body, ctx)

    def encode_response(self, resp: Response, ctx: Context) -> dict[str, Any]:
        return self._encode_response(resp, ctx)

    def decode_error(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> ErrorInfo:
        return self._decode_error(status, body, headers)

    def encode_error(self, err: ErrorInfo) -> dict[str, Any]:
        return self._encode_error(err)

    def stream_decoder(self, ctx: Context) -> StreamDecoder:
        return self._stream_decoder(ctx)

    def stream_encoder(self, ctx: Context) -> StreamEncoder:
        return self._stream_encoder(ctx)
