"""The answer's way back to the client: a stream's set-up (translator, framing headers) and whole-body
translation (the stream callable mitmproxy then calls per chunk is in ``callables``, the answers after an
upstream fault in ``faults``). Called by the Translate addon's response hooks."""

from __future__ import annotations

import logging
import zlib
from collections.abc import Sequence

from mitmproxy import http
from mitmproxy.net.http import status_codes

from dragoman.errors import TranslationError
from dragoman.inspect.assemble import AnswerTap
from dragoman.inspect.assemble import Assembled
from dragoman.inspect.assemble import BytesTap
from dragoman.inspect.assemble import assemble
from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.logsafe import logsafe
from dragoman.mitm.flowstate import FlowState
from dragoman.mitm.guards import lint
from dragoman.mitm.relay import headers as hdr
from dragoman.protocols import Protocol
from dragoman.protocols.gemini.request_decode import ARRAY
from dragoman.protocols.registry import get_codec
from dragoman.translate.mcp_names import McpNameStream
from dragoman.translate.mcp_names import rename_response
from dragoman.translate.response import UpstreamErrorInBody
from dragoman.translate.response import error_body
from dragoman.translate.response import translate_error
from dragoman.translate.response import translate_response_usage
from dragoman.translate.stream import PassThrough
from dragoman.translate.stream import StreamTranslator
from dragoman.translate.usage import PassThroughUsage

logger = logging.getLogger(__name__)

JSON_CT = "application/json"
SSE_CT = "text/event-stream; charset=utf-8"
#: the response header naming who answered a routed request
ROUTE_HEADER = "x-dragoman-route"
#: response header: the number of entries in a translated flow's lossiness report (``dragoman_lossy_header``)
LOSSY_HEADER = "x-dragoman-lossy"
ROUTE_HEADER_B, LOSSY_HEADER_B = ROUTE_HEADER.encode(), LOSSY_HEADER.encode()
#: headers every translated stream carries: no cache may keep it, and no proxy in front of Dragoman (nginx's
#: ``proxy_buffering``, honoured per response through ``X-Accel-Buffering``) may hold it back to the end
SSE_HEADERS = (("content-type", SSE_CT), ("cache-control", "no-cache"), ("x-accel-buffering", "no"))
#: the request id header each client protocol's SDK reads (``_request_id``): Anthropic's ``request-id``,
#: OpenAI's ``x-request-id``; both names are looked for in the upstream's answer
REQUEST_ID_HEADERS = ("request-id", "x-request-id")
#: a whole translated answer's framing: its encoding is gone, its length set anew
_WHOLE_DROP = frozenset({b"content-encoding", b"transfer-encoding"})


#: the framing headers a translated stream replaces (``stream_headers``); with ``transfer-encoding`` for HTTP/1
_REFRAMED = frozenset((b"content-length", b"content-encoding", b"content-type", b"cache-control", b"x-accel-buffering"))
_REFRAMED_CHUNKED = _REFRAMED | {b"transfer-encoding"}
_SSE_PUTS = tuple((k.encode(), v) for k, v in SSE_HEADERS[1:])
_REQUEST_ID_RAW = tuple(name.encode() for name in REQUEST_ID_HEADERS)


def stream_headers(
    resp: http.Response,
    translated: bool = True,
    content_type: str = SSE_CT,
    chunked: bool = False,
    puts: Sequence[tuple[bytes, str]] = (),
) -> None:
    """The framing of a stream to the client: its content type, no caching, no buffering by a proxy in front
    (``x-accel-buffering: no``); a translated body has neither the upstream's length nor its encoding
    (``chunked``: and is sent chunked, HTTP/1). A pass-through stream (same protocol both sides) keeps the
    upstream's headers and gains only ``x-accel-buffering: no``. ``puts``: other headers set in the same pass
    (names outside the framing ones: the result is that of setting them first, ``hdr.edit``)."""
    if not translated:
        hdr.edit(resp.headers, put=[*puts, (b"x-accel-buffering", "no")])
        return
    put = [*puts, (b"content-type", content_type), *_SSE_PUTS]
    if chunked:
        put.append((b"transfer-encoding", "chunked"))
    hdr.edit(resp.headers, _REFRAMED_CHUNKED if chunked else _REFRAMED, put)


def upstream_request_id(resp: http.Response) -> str | None:
    """The id the upstream gave this answer (``request-id`` or ``x-request-id``), if any."""
    return _request_ids(resp)[0]


def _request_ids(resp: http.Response) -> tuple[str | None, set[bytes]]:
    """The upstream's request id (``request-id`` first, then ``x-request-id``; several values joined as
    mitmproxy's ``headers[name]`` does) and which of the two names it sent: one pass over the headers."""
    found: dict[bytes, list[bytes]] = {}
    for name, value in resp.headers.fields:
        low = name.lower()
        if low in _REQUEST_ID_RAW:
            found.setdefault(low, []).append(value)
    for name in _REQUEST_ID_RAW:
        if name in found:
            rid = b", ".join(found[name]).decode("utf-8", "surrogateescape").strip()
            if rid:
                return rid, set(found)
    return None, set(found)


def request_id_puts(resp: http.Response, state: FlowState) -> list[tuple[bytes, str]]:
    """The upstream's request id reaches the client under the header its own SDK reads (the upstream's header
    is kept too), and is remembered for the flow's log line: the header to set, if any (read once per flow)."""
    if state.request_id_read:
        return []
    state.request_id_read = True
    rid, present = _request_ids(resp)
    if rid is None:
        return []
    state.request_id = rid
    name = b"request-id" if state.plan.client is Protocol.ANTHROPIC_MESSAGES else b"x-request-id"
    return [] if name in present else [(name, rid)]


def answer_puts(resp: http.Response, state: FlowState, lossy_header: bool) -> list[tuple[bytes, str]]:
    """The headers Dragoman adds to an answer: the request id under the client's name for it, who answered a
    routed request (``x-dragoman-route``), the lossiness report's size (``dragoman_lossy_header``)."""
    puts = request_id_puts(resp, state)
    if state.upstream_name:
        puts.append((ROUTE_HEADER_B, f"{state.upstream_name}/{state.upstream_model}"))
    if lossy_header and not state.plan.identity:
        puts.append((LOSSY_HEADER_B, str(state.ctx.dropped.count)))
    return puts


def is_sse_2xx(resp: http.Response) -> bool:
    """A 2xx answer whose body is an SSE stream (what ``install_stream`` may translate event by event)."""
    if not 200 <= resp.status_code < 300:
        return False
    return (hdr.get(resp.headers, b"content-type", "") or "").lower().startswith("text/event-stream")


def carry_request_id(resp: http.Response, state: FlowState) -> None:
    """``request_id_puts``, set."""
    puts = request_id_puts(resp, state)
    if puts:
        hdr.edit(resp.headers, put=puts)


def install_stream(
    flow: http.HTTPFlow,
    state: FlowState,
    track_usage: bool = False,
    max_event: int = 0,
    keep_answer: bool = False,
    lint_mode: str = "off",
    puts: Sequence[tuple[bytes, str]] = (),
) -> bool:
    """For a 2xx SSE answer: set up the translator and rewrite the framing headers. False: not streamable
    (an encoding without an incremental decoder: translated whole in ``response``; the headers untouched).
    ``max_event``: the longest upstream SSE line or event buffered (``dragoman_max_sse_event``). ``puts``:
    more headers to set with the framing ones, in the same pass (``stream_headers``)."""
    resp = flow.response
    assert resp is not None
    plan = state.plan
    names = state.ctx.extra.get("mcp_names")
    if names:
        state.renamer = McpNameStream(names)
    # ``dragoman_lint`` (a Gemini client's array stream is linted as one; the upstream's is SSE here)
    lint.start(state, lint_mode, ours=True, ours_array=client_stream_type(state) == JSON_CT)
    if plan.identity:
        state.translator = PassThrough()
        if track_usage:
            state.usage_tap = PassThroughUsage(plan.upstream, state.ctx, max_event)
        stream_headers(resp, translated=False, puts=puts)
        return True
    encoding = (hdr.get(resp.headers, b"content-encoding", "identity") or "").lower().strip()
    if encoding in ("gzip", "x-gzip", "deflate"):
        state.decompressor = zlib.decompressobj(zlib.MAX_WBITS | 32)
    elif encoding not in ("", "identity"):
        logger.info("flow %s: upstream SSE is %s-encoded; translating after the body is complete", flow.id, encoding)
        return False
    decoder = get_codec(plan.upstream).stream_decoder(state.ctx)
    if keep_answer:  # ``dragoman_keep_answer``: the mitmweb view's two sides of a streamed flow
        decoder = state.answer_tap = AnswerTap(decoder, plan.upstream.value)
        state.client_tap = BytesTap(plan.client, array=client_stream_type(state) == JSON_CT)
    state.translator = StreamTranslator(
        decoder, get_codec(plan.client).stream_encoder(state.ctx), max_event, state.ctx.dropped
    )
    if track_usage:  # the translator keeps the usage its upstream events carried (``StreamTranslator.usage``)
        state.usage_tap = state.translator
    chunked = resp.http_version.startswith("HTTP/1")
    stream_headers(resp, content_type=client_stream_type(state), chunked=chunked, puts=puts)
    return True


def assemble_whole(resp: http.Response, protocol: Protocol) -> Assembled:
    """A whole answer of ``protocol`` assembled (``dragoman_keep_answer``: the view's upstream side)."""
    body = resp.get_content(strict=False) or b""
    return assemble(body, protocol, resp.status_code, resp.headers.get("content-type"))


def client_stream_type(state: FlowState) -> str:
    """SSE, or JSON for a Gemini client's ``:streamGenerateContent`` without ``alt=sse`` (a JSON array)."""
    req = state.ctx.request
    return JSON_CT if req is not None and req.extra.get(ARRAY) else SSE_CT


def rename_back_whole(flow: http.HTTPFlow, state: FlowState) -> None:
    """A whole 2xx answer from an Anthropic upstream names the tools as the client named them
    (``dragoman_mcp_prefix``, ``translate.mcp_names``), before it is translated or passed on."""
    names = state.ctx.extra.get("mcp_names")
    resp = flow.response
    if not names or resp is None or not 200 <= resp.status_code < 300:
        return
    body = resp.get_content(strict=False) or b""
    if resp.headers.get("content-type", "").lower().startswith("text/event-stream"):
        renamer = McpNameStream(names)
        out = renamer.feed(body) + renamer.close()
    else:
        out = rename_response(body, names)
    if out != body:
        resp.headers.pop("content-encoding", None)
        resp.content = out


def json_translated(flow: http.HTTPFlow, state: FlowState) -> bool:
    """A whole 2xx answer that ``translate_whole`` decodes as JSON (and reads the usage of)."""
    resp = flow.response
    if state.plan.identity or resp is None:
        return False
    return not (hdr.get(resp.headers, b"content-type", "") or "").lower().startswith("text/event-stream")


def translate_whole(flow: http.HTTPFlow, state: FlowState, lossy_header: bytes = b"") -> None:
    """The whole answer in the client's protocol; ``lossy_header``: the header naming how many entries the flow's
    lossiness report holds once the answer is translated (set with the answer's other headers)."""
    resp = flow.response
    assert resp is not None
    plan = state.plan
    body = hdr.body(resp)
    status = resp.status_code
    headers: dict[str, str] = {}
    for k, v in resp.headers.fields:  # lower-case names, the first value of each (one pass)
        headers.setdefault(k.decode("latin-1").lower(), v.decode("utf-8", "surrogateescape"))
    is_sse = headers.get("content-type", "").lower().startswith("text/event-stream")
    content_type = "text/event-stream" if is_sse else JSON_CT
    try:
        if not 200 <= status < 300:
            status, out, _info = translate_error(status, body, plan, headers, state.ctx)
            content_type = JSON_CT
        elif not is_sse:
            try:
                out, usage = translate_response_usage(body, plan, state.ctx)
                if usage is not None:
                    state.whole_usage = usage
            except UpstreamErrorInBody as e:
                status = e.info.http_status
                out = error_body(e.info, plan.client)
        else:
            # SSE that could not be streamed (unknown content-encoding): translate it in one go
            translator = StreamTranslator(
                get_codec(plan.upstream).stream_decoder(state.ctx),
                get_codec(plan.client).stream_encoder(state.ctx),
            )
            out = translator.feed(body) + translator.close()
    except TranslationError as e:
        logger.warning("flow %s: upstream response could not be translated: %s", flow.id, logsafe(e))
        info = e.to_error_info()
        status, out, content_type = info.http_status, error_body(info, plan.client), JSON_CT
    except Exception as e:  # noqa: BLE001
        logger.exception("flow %s: response translation failed", flow.id)
        info = ErrorInfo(
            kind=ErrorKind.API_ERROR,
            message=f"Dragoman failed to translate the response: {type(e).__name__}",
            status=502,
        )
        status, out, content_type = 502, error_body(info, plan.client), JSON_CT
    if status != resp.status_code:
        resp.status_code = status
        resp.reason = status_codes.RESPONSES.get(status, "")
    puts = [(lossy_header, str(state.ctx.dropped.count))] if lossy_header else []
    if content_type == JSON_CT:
        puts += [(b"content-type", JSON_CT), (b"content-length", str(len(out)))]
        hdr.edit(resp.headers, _WHOLE_DROP, puts)
        resp.raw_content = out  # no content-encoding left: the body as it goes (what ``content =`` sets)
        return
    resp.headers.pop("content-encoding", None)
    resp.headers.pop("transfer-encoding", None)
    stream_headers(resp, content_type=client_stream_type(state))
    if puts:
        hdr.edit(resp.headers, put=puts)
    resp.content = out
