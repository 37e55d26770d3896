"""``Translate``: the mitmproxy addon that rewrites matching LLM API flows toward the target protocol.

request          -> plan (client protocol from the path, target from the options), translate the body,
                    rewrite URL and auth; an invalid client body is answered 400 in the client's shape
responseheaders  -> for a 2xx ``text/event-stream`` answer, install the stream callable (StreamTranslator)
response         -> translate whole JSON bodies and upstream errors (same status, message, retry-after)
error            -> the upstream died: release the state and log (see README: what the client sees)
"""

from __future__ import annotations

import logging
import os
import zlib
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any
from typing import NamedTuple
from urllib.parse import urlsplit

from mitmproxy import ctx
from mitmproxy import exceptions
from mitmproxy import flowfilter
from mitmproxy import http
from mitmproxy.net.http import status_codes

from dragoman.errors import TranslationError
from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.mitm import hosts
from dragoman.mitm.faults import IdleWatchdog
from dragoman.mitm.faults import deliver_final_frame
from dragoman.mitm.flowstate import METADATA_KEY
from dragoman.mitm.flowstate import TARGET_OVERRIDE_KEY
from dragoman.mitm.flowstate import FlowState
from dragoman.mitm.flowstate import FlowStates
from dragoman.protocols import Protocol
from dragoman.protocols import detect
from dragoman.protocols import get_codec
from dragoman.protocols.base import Context
from dragoman.translate.plan import ModelRule
from dragoman.translate.plan import Plan
from dragoman.translate.plan import parse_model_map
from dragoman.translate.request import translate_request
from dragoman.translate.response import UpstreamErrorInBody
from dragoman.translate.response import error_body
from dragoman.translate.response import translate_error
from dragoman.translate.response import translate_response
from dragoman.translate.stream import PassThrough
from dragoman.translate.stream import StreamTranslator

logger = logging.getLogger(__name__)

OPTION_PREFIX = "dragoman_"
ANTHROPIC_VERSION = "2023-06-01"
#: client headers that carry credentials
AUTH_HEADERS = ("x-api-key", "authorization")
JSON_CT = "application/json"
SSE_CT = "text/event-stream; charset=utf-8"
CHOICES = {
    "dragoman_target": ["", *(p.value for p in Protocol)],
    "dragoman_chat_reasoning": ["reasoning_content", "drop"],
    "dragoman_chat_max_tokens_field": ["max_tokens", "max_completion_tokens"],
}


class Upstream(NamedTuple):
    scheme: str
    host: str
    port: int
    path: str  # base path without a trailing slash ("" or "/v1")


def parse_upstream(spec: str) -> Upstream:
    """``https://api.openai.com/v1`` -> Upstream. Raises ``ValueError`` naming what is wrong."""
    parts = urlsplit(spec.strip())
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"scheme must be http or https, got {parts.scheme or 'none'!r}")
    if not parts.hostname:
        raise ValueError("no host")
    if parts.query or parts.fragment:
        raise ValueError("a base URL has no query string or fragment")
    if parts.username or parts.password:
        raise ValueError("credentials in the URL are not supported; use dragoman_api_key")
    try:
        port = parts.port
    except ValueError as e:
        raise ValueError(f"bad port: {e}") from e
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    return Upstream(parts.scheme, parts.hostname, port, parts.path.rstrip("/"))


def join_endpoint(base: str, endpoint: str) -> str:
    """Append a protocol endpoint to a base path, forgiving a base that already holds (part of) it."""
    if base.endswith(endpoint):
        return base
    if endpoint.startswith("/v1/") and base.endswith("/v1"):
        return base + endpoint[3:]
    return base + endpoint


def default_path(target: Protocol) -> str:
    """The endpoint path used when no ``dragoman_upstream`` is set (the SDKs' default base paths)."""
    if target is Protocol.ANTHROPIC_MESSAGES:
        return target.endpoint
    return "/v1" + target.endpoint


def resolve_api_key(spec: str, environ: Mapping[str, str]) -> str | None:
    """A literal key, ``env:NAME`` (read now; missing or empty is a ``ValueError``), or "" -> None."""
    spec = spec.strip()
    if not spec:
        return None
    if spec.startswith("env:"):
        name = spec[4:].strip()
        if not name:
            raise ValueError("env: needs a variable name (env:NAME)")
        value = environ.get(name, "").strip()
        if not value:
            raise ValueError(f"environment variable {name} is not set or empty")
        return value
    return spec


def client_key(headers: http.Headers) -> str | None:
    """The credential the client sent (``x-api-key`` or ``Authorization: Bearer``), if any."""
    key = headers.get("x-api-key")
    if key:
        return key
    auth = headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return None


def default_match(flow: http.HTTPFlow) -> bool:
    """POSTs to the official endpoints in every mode, to any endpoint path in reverse mode (see hosts.py)."""
    return hosts.default_match(flow)


class Translate:
    """Translate matching flows between Anthropic Messages, OpenAI Chat Completions and OpenAI Responses."""

    def __init__(self) -> None:
        self.target: Protocol | None = None
        self.upstream: Upstream | None = None
        self.api_key: str | None = None
        self.model_map: list[ModelRule] = []
        self.match: Any = None  # a compiled flowfilter, or None for the default
        self.flows = FlowStates()
        self._warned_deferred: set[str] = set()
        #: seconds without upstream bytes before a streamed flow is failed (0: never)
        self.idle_timeout = 300

    # -- options

    def load(self, loader: Any) -> None:
        loader.add_option(
            "dragoman_target",
            str,
            "",
            "Protocol of the upstream to translate to. Empty: Dragoman is off and passes everything through.",
            choices=CHOICES["dragoman_target"],
        )
        loader.add_option(
            "dragoman_upstream",
            str,
            "",
            "Base URL of the upstream in the target SDK's convention (https://api.anthropic.com, "
            "https://api.openai.com/v1, http://localhost:11434/v1); the target's endpoint path is appended. "
            "Empty: keep the host the client asked for (e.g. the reverse-mode target) and use the target's "
            "default path (/v1/messages, /v1/chat/completions, /v1/responses).",
        )
        loader.add_option(
            "dragoman_api_key",
            str,
            "",
            "API key for the upstream, or env:NAME to read it from the environment at startup. When set, the "
            "client's x-api-key, authorization and cookie headers are removed. Empty: the client's own key is "
            "moved to the target's header (x-api-key for anthropic, Authorization: Bearer for OpenAI).",
        )
        loader.add_option(
            "dragoman_model_map",
            Sequence[str],
            [],
            "Model name mapping, PATTERN=MODEL (shell glob, first match wins) or a bare MODEL that maps every "
            "model. Repeat the option for several rules.",
        )
        loader.add_option(
            "dragoman_match",
            str,
            "",
            "mitmproxy filter expression selecting the flows to translate (they must also have an endpoint "
            "path). Empty: POSTs to the official endpoints (api.anthropic.com/v1/messages, "
            "api.openai.com/v1/chat/completions and /v1/responses, chatgpt.com/backend-api/codex/responses) in "
            "every mode, and to any /v1/messages, /chat/completions or /responses path in reverse mode.",
        )
        loader.add_option(
            "dragoman_strict",
            bool,
            False,
            "Treat tolerated upstream oddities (unknown stream event types) as errors.",
        )
        loader.add_option(
            "dragoman_idle_timeout",
            int,
            300,
            "Seconds without any upstream byte during a streamed response before Dragoman closes the upstream "
            "connection and ends the client's stream with an error event in its protocol. 0 disables it.",
        )
        loader.add_option(
            "dragoman_chat_reasoning",
            str,
            "reasoning_content",
            "How thinking in the conversation history is sent to an openai-chat upstream: as "
            "reasoning_content (DeepSeek, vLLM, OpenRouter) or dropped.",
            choices=CHOICES["dragoman_chat_reasoning"],
        )
        loader.add_option(
            "dragoman_chat_max_tokens_field",
            str,
            "max_tokens",
            "Which field carries the output token limit to an openai-chat upstream "
            "(OpenAI's reasoning models need max_completion_tokens).",
            choices=CHOICES["dragoman_chat_max_tokens_field"],
        )

    def configure(self, updated: set[str]) -> None:
        if "dragoman_idle_timeout" in updated:
            value = ctx.options.dragoman_idle_timeout
            if value < 0:
                raise exceptions.OptionsError(
                    f"Invalid dragoman_idle_timeout {value}: give seconds as an integer >= 0 (0 disables the timeout)"
                )
            self.idle_timeout = value
        # mitmproxy enforces `choices` only on its command line, not for --set or the options API
        for name, allowed in CHOICES.items():
            if name in updated and getattr(ctx.options, name) not in allowed:
                raise exceptions.OptionsError(
                    f"Invalid {name} {getattr(ctx.options, name)!r}: choose one of {', '.join(repr(c) for c in allowed)}"
                )
        if "dragoman_target" in updated:
            value = ctx.options.dragoman_target
            self.target = Protocol(value) if value else None
        if "dragoman_upstream" in updated:
            value = ctx.options.dragoman_upstream
            try:
                self.upstream = parse_upstream(value) if value.strip() else None
            except ValueError as e:
                raise exceptions.OptionsError(f"Cannot parse dragoman_upstream {value!r}: {e}") from e
        if "dragoman_api_key" in updated:
            try:
                self.api_key = resolve_api_key(ctx.options.dragoman_api_key, os.environ)
            except ValueError as e:
                # never echo the option value: it may be the key itself
                raise exceptions.OptionsError(f"Cannot use dragoman_api_key: {e}") from e
        if "dragoman_model_map" in updated:
            try:
                self.model_map = parse_model_map(list(ctx.options.dragoman_model_map))
            except ValueError as e:
                raise exceptions.OptionsError(f"Cannot parse dragoman_model_map: {e}") from e
        if "dragoman_match" in updated:
            expr = ctx.options.dragoman_match
            try:
                self.match = flowfilter.parse(expr) if expr.strip() else None
            except ValueError as e:
                raise exceptions.OptionsError(f"Cannot parse dragoman_match: {e}") from e

    def running(self) -> None:
        self.warn_deferred()

    def warn_deferred(self) -> None:
        """Unknown ``--set dragoman_*`` names are deferred silently by mitmproxy: they are typos."""
        for name in sorted(getattr(ctx.options, "deferred", {}) or {}):
            if name.startswith(OPTION_PREFIX) and name not in self._warned_deferred:
                self._warned_deferred.add(name)
                logger.warning(
                    "unknown option %s (ignored); Dragoman's options are: %s", name, ", ".join(self._option_names())
                )

    @staticmethod
    def _option_names() -> list[str]:
        return sorted(n for n in ctx.options.keys() if n.startswith(OPTION_PREFIX))

    # -- hooks

    def request(self, flow: http.HTTPFlow) -> None:
        # the Replayer sets the recorded upstream's protocol per flow
        override = flow.metadata.get(TARGET_OVERRIDE_KEY)
        target = Protocol(override) if override else self.target
        if target is None:
            return
        if flow.response is not None or flow.error is not None or flow.is_replay:
            return
        if not self._matches(flow):
            return
        client = detect(flow.request.path)
        if client is None:
            return
        plan = Plan(client, target)
        tctx = Context(
            strict=ctx.options.dragoman_strict,
            chat_reasoning_field=ctx.options.dragoman_chat_reasoning,
            chat_max_tokens_field=ctx.options.dragoman_chat_max_tokens_field,
        )
        body = flow.request.get_content(strict=False) or b""
        try:
            tr = translate_request(body, plan, tctx, self.model_map)
        except TranslationError as e:
            self._reject(flow, plan, e.to_error_info())
            return
        except Exception as e:  # noqa: BLE001 - a codec bug must not reach the upstream or kill the flow
            logger.exception("flow %s: request translation failed", flow.id)
            info = ErrorInfo(
                kind=ErrorKind.API_ERROR,
                message=f"Dragoman failed to translate the request: {type(e).__name__}",
                status=500,
            )
            self._reject(flow, plan, info)
            return

        state = FlowState(plan, tctx, tr.client_model, tr.upstream_model, tr.stream)
        self.flows.put(flow.id, state)
        self._rewrite_url(flow, plan)
        self._rewrite_auth(flow.request.headers, target)
        headers = flow.request.headers
        headers["accept-encoding"] = "identity"
        if target is not Protocol.ANTHROPIC_MESSAGES:
            for name in [n for n in headers.keys() if n.lower().startswith("anthropic-")]:
                headers.pop(name, None)
        if tr.body is not body:
            headers.pop("content-encoding", None)
            headers.pop("transfer-encoding", None)
            flow.request.content = tr.body
        flow.metadata[METADATA_KEY] = state.metadata()

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        state = self.flows.get(flow.id)
        if state is None or flow.response is None or flow.is_replay:
            return
        resp = flow.response
        if not 200 <= resp.status_code < 300:
            return
        if not resp.headers.get("content-type", "").lower().startswith("text/event-stream"):
            return
        plan = state.plan
        if plan.identity:
            state.translator = PassThrough()
        else:
            encoding = resp.headers.get("content-encoding", "identity").lower().strip()
            if encoding in ("gzip", "x-gzip", "deflate"):
                state.decompressor = zlib.decompressobj(zlib.MAX_WBITS | 32)
            elif encoding not in ("", "identity"):
                # no incremental decoder for it: buffer, then translate the whole body in `response`
                logger.info(
                    "flow %s: upstream SSE is %s-encoded; translating after the body is complete", flow.id, encoding
                )
                return
            state.translator = StreamTranslator(
                get_codec(plan.upstream).stream_decoder(state.ctx),
                get_codec(plan.client).stream_encoder(state.ctx),
            )
            resp.headers.pop("content-length", None)
            resp.headers.pop("content-encoding", None)
            if resp.http_version.startswith("HTTP/1"):
                resp.headers["transfer-encoding"] = "chunked"
            resp.headers["content-type"] = SSE_CT
        if self.idle_timeout > 0:
            state.watchdog = IdleWatchdog(flow, self.idle_timeout).start()
        resp.stream = self._stream_callable(flow.id, state)

    def response(self, flow: http.HTTPFlow) -> None:
        state = self.flows.pop(flow.id)
        if state is not None and state.watchdog is not None:
            state.watchdog.cancel()
        if state is None or flow.response is None:
            return
        logger.debug("flow %s: state released, %d flows in flight", flow.id, len(self.flows))
        if flow.is_replay:
            return
        resp = flow.response
        if state.translator is None and not state.plan.identity:
            self._translate_whole(flow, state)
        flow.metadata[METADATA_KEY] = state.metadata()
        self._log_done(flow, state, resp.status_code)

    def error(self, flow: http.HTTPFlow) -> None:
        state = self.flows.pop(flow.id)
        if state is None:
            return
        logger.debug("flow %s: state released, %d flows in flight", flow.id, len(self.flows))
        message = flow.error.msg if flow.error else "unknown error"
        if state.watchdog is not None:
            timed_out = state.watchdog.timed_out
            state.watchdog.cancel()
            if state.translator is not None and self._final_error_frame(flow, state, message, timed_out):
                flow.metadata[METADATA_KEY] = state.metadata()
                self._log_dropped(flow, state)
                return
        if state.translator is not None and state.started:
            # Measured on mitmproxy 11.0.2 and 12.2.3: when the upstream dies mid-stream, the stream
            # callable is never called with b"" and nothing more can be written; mitmproxy closes the
            # client connection without the terminating chunk, so every SDK raises a connection error.
            logger.warning(
                "flow %s: connection failed mid-stream after %d bytes to the client (%s); the client's stream is cut off",
                flow.id,
                state.sent,
                message,
            )
        else:
            logger.warning("flow %s: connection failed (%s)", flow.id, message)
        flow.metadata[METADATA_KEY] = state.metadata()
        self._log_dropped(flow, state)

    # -- internals

    def _final_error_frame(self, flow: http.HTTPFlow, state: FlowState, message: str, timed_out: bool) -> bool:
        """The upstream died (or was closed for idling) mid-stream: finish the client's body with one error
        event in its protocol where mitmproxy lets us (plain-HTTP/1.1 clients, see ``dragoman.mitm.faults``)."""
        if timed_out:
            info = ErrorInfo(
                kind=ErrorKind.TIMEOUT,
                message=f"upstream sent nothing for {self.idle_timeout} s (dragoman_idle_timeout); connection closed",
                status=504,
            )
        else:
            info = ErrorInfo(
                kind=ErrorKind.API_ERROR, message=f"upstream connection failed mid-stream: {message}", status=502
            )
        try:
            frame = state.translator.fail(info)
        except Exception:  # noqa: BLE001
            logger.exception("flow %s: encoding the final error frame failed", flow.id)
            return False
        if not frame or not deliver_final_frame(flow, frame):
            return False  # pass-through (no frame of our own) or a client connection we cannot write to
        state.sent += len(frame)
        logger.warning(
            "flow %s: %s after %d bytes to the client; ended the client's stream with an error event",
            flow.id,
            "idle timeout" if timed_out else f"connection failed mid-stream ({message})",
            state.sent,
        )
        return True

    def _matches(self, flow: http.HTTPFlow) -> bool:
        if self.match is None:
            return default_match(flow)
        return bool(self.match(flow))

    def _reject(self, flow: http.HTTPFlow, plan: Plan, info: ErrorInfo) -> None:
        """Answer the client ourselves with an error in its own protocol; nothing is forwarded."""
        status = info.http_status
        flow.response = http.Response.make(status, error_body(info, plan.client), {"content-type": JSON_CT})
        logger.warning("flow %s: %s request rejected with %d: %s", flow.id, plan.client.value, status, info.message)

    def _rewrite_url(self, flow: http.HTTPFlow, plan: Plan) -> None:
        req = flow.request
        target = plan.upstream
        _, sep, query = req.path.partition("?")
        up = self.upstream
        if up is not None:
            req.scheme = up.scheme  # scheme first: setting host/port then fixes the Host header
            req.host = up.host
            req.port = up.port
            path = join_endpoint(up.path, target.endpoint)
        elif plan.identity:
            return
        else:
            path = default_path(target)
        if plan.identity and sep:
            path += "?" + query
        req.path = path

    def _rewrite_auth(self, headers: http.Headers, target: Protocol) -> None:
        if self.api_key is not None:
            key: str | None = self.api_key
            headers.pop("cookie", None)
        else:
            key = client_key(headers)
        for name in AUTH_HEADERS:
            headers.pop(name, None)
        if target is Protocol.ANTHROPIC_MESSAGES:
            if "anthropic-version" not in headers:
                headers["anthropic-version"] = ANTHROPIC_VERSION
            if key:
                headers["x-api-key"] = key
        elif key:
            headers["authorization"] = f"Bearer {key}"

    def _stream_callable(self, flow_id: str, state: FlowState):
        translator = state.translator

        def on_chunk(data: bytes) -> bytes | list[bytes]:
            # Never raises, never returns b"" for a data chunk (that would end the client's body).
            try:
                if state.watchdog is not None:
                    state.watchdog.touch()
                if data:
                    state.started = True
                    if state.decompressor is not None:
                        data = state.decompressor.decompress(data)
                        if not data:
                            return []
                    out = translator.feed(data)
                else:
                    out = b""
                    if state.decompressor is not None:
                        rest = state.decompressor.flush()
                        state.decompressor = None
                        if rest:
                            out = translator.feed(rest)
                    out += translator.close()
            except Exception as e:  # noqa: BLE001 - an exception here kills the client connection
                logger.exception("flow %s: stream callable failed", flow_id)
                try:
                    out = translator.fail(
                        ErrorInfo(
                            kind=ErrorKind.API_ERROR, message=f"Dragoman stream failure: {type(e).__name__}", status=500
                        )
                    )
                except Exception:  # noqa: BLE001
                    out = b""
            if not out:
                return []
            state.sent += len(out)
            return out

        return on_chunk

    def _translate_whole(self, flow: http.HTTPFlow, state: FlowState) -> None:
        resp = flow.response
        assert resp is not None
        plan = state.plan
        body = resp.get_content(strict=False) or b""
        status = resp.status_code
        headers = {k.lower(): v for k, v in resp.headers.items()}
        content_type = (
            "text/event-stream" if headers.get("content-type", "").lower().startswith("text/event-stream") else JSON_CT
        )
        try:
            if not 200 <= status < 300:
                status, out, _info = translate_error(status, body, plan, headers)
                content_type = JSON_CT
            elif content_type == JSON_CT:
                try:
                    out = translate_response(body, plan, state.ctx)
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
            logger.warning("flow %s: upstream response could not be translated: %s", flow.id, e)
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
        resp.headers.pop("content-encoding", None)
        resp.headers.pop("transfer-encoding", None)
        resp.headers["content-type"] = content_type if content_type == JSON_CT else SSE_CT
        resp.content = out

    def _log_done(self, flow: http.HTTPFlow, state: FlowState, status: int) -> None:
        plan = state.plan
        model = (
            state.client_model
            if state.client_model == state.upstream_model
            else f"{state.client_model} -> {state.upstream_model}"
        )
        how = (
            "stream"
            if state.translator is not None
            else ("stream requested, JSON answered" if state.stream else "json")
        )
        logger.info(
            "flow %s: %s -> %s, model %s, status %d, %s",
            flow.id,
            plan.client.value,
            plan.upstream.value,
            model,
            status,
            how,
        )
        self._log_dropped(flow, state)

    def _log_dropped(self, flow: http.HTTPFlow, state: FlowState) -> None:
        if state.ctx.dropped.fields:
            logger.warning(
                "flow %s: dropped (not carried to the other protocol): %s", flow.id, ", ".join(state.ctx.dropped.fields)
            )
