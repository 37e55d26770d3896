"""The stream callable mitmproxy calls per chunk of a translated answer (``stream_callable``): the plain one for
the usual flow (the translation, the idle watchdog's clock, key masking, ``dragoman_lint=log``'s gathering) or
the general one (decompression, tool renaming, a stored Responses answer, the view's tap, ``strict`` lint), and
the stream's end (``_finish``). Installed by the Translate addon once ``inbound.install_stream`` set the flow up.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.lint.flow import BATCH as LINT_BATCH
from dragoman.mitm.flowstate import FlowState
from dragoman.mitm.flowstate import inner_code
from dragoman.mitm.guards import lint
from dragoman.mitm.keymask import KeyMask
from dragoman.mitm.keymask import StreamMask
from dragoman.translate.stream import StreamTranslator
from dragoman.translate.usage import PassThroughUsage

logger = logging.getLogger(__name__)


def stream_callable(
    flow_id: str, state: FlowState, keys: KeyMask | None = None
) -> Callable[[bytes], bytes | list[bytes]]:
    """mitmproxy's stream callable for a flow whose translator is installed (``install_stream``). Never raises,
    never returns ``b""`` for a data chunk (that would end the client's body). What the flow needs is decided
    here, once: a translated stream with nothing beside the translator (no decompression, tool renaming,
    recording of a Responses answer, view tap or ``strict`` lint: the usual case) gets ``_plain_callable``, which
    does per chunk only the translation, the idle watchdog's clock, key masking and (``dragoman_lint=log``) the
    lint's gathering; anything else the general one."""
    masker = keys.stream() if keys else None
    general = _general_callable(flow_id, state, masker)
    if (
        isinstance(state.translator, StreamTranslator)
        and state.decompressor is None
        and state.renamer is None
        and state.ticket is None
        and (state.lint is None or not state.lint.strict)
        and state.client_tap is None
    ):
        return _plain_callable(flow_id, state, masker, general)
    return general


def _plain_callable(
    flow_id: str, state: FlowState, masker: StreamMask | None, general: Callable[[bytes], bytes | list[bytes]]
) -> Callable[[bytes], bytes | list[bytes]]:
    """``on_chunk`` of the general callable for a flow that needs nothing but the translation: the same bytes
    out, less work per chunk (measured in mitmdump: bench/README.md, "Where the time goes"). The end of the
    stream (``b""``) goes to ``general``, which shares the masker."""
    feed = state.translator.feed
    # ``log`` mode's lint: both sides gathered per chunk (two appends here), checked per batch (the general
    # callable's ``lint.on_stream`` before the end, without its per-chunk branches); the end goes to ``general``
    flow_lint = state.lint
    steps = flow_lint.steps if flow_lint is not None else None
    gathered = 0
    watchdog = state.watchdog
    clock = time.monotonic
    # one configured key (the usual case): a piece that neither holds it, nor ends in a byte a key can begin
    # with, nor follows a held tail passes the masker unchanged (``StreamMask.feed``), so it is not called
    secret = masker.keys.secrets[0] if masker is not None and len(masker.keys.secrets) == 1 else None
    tail = masker.keys.tail_bytes if masker is not None else frozenset()

    def on_chunk(data: bytes) -> bytes | list[bytes]:
        nonlocal gathered
        if not data:
            return general(data)
        try:
            if watchdog is not None:
                watchdog.last = clock()
            state.started = True
            out = feed(data)
            if steps is not None:
                steps.append(data)
                steps.append(out)
                gathered += len(data) + len(out)
                if gathered >= LINT_BATCH:
                    gathered = 0
                    found = flow_lint.check_steps()
                    if found is not None:
                        lint.log_found(flow_id, found)
        except Exception as e:  # noqa: BLE001 - an exception here kills the client connection
            logger.exception("flow %s: stream callable failed", flow_id)
            out = _fail(state.translator, f"Dragoman stream failure: {type(e).__name__}", ErrorKind.API_ERROR, 500)
        if not out:
            if masker is not None and masker.held:
                out = masker.feed(out)
                if out:
                    state.sent += len(out)
                    return out
            return []
        if masker is not None and (secret is None or secret in out or masker.held or out[-1] in tail):
            out = masker.feed(out)
            if not out:
                return []
        state.sent += len(out)
        return out

    return on_chunk


def _general_callable(
    flow_id: str, state: FlowState, masker: StreamMask | None
) -> Callable[[bytes], bytes | list[bytes]]:
    translator = state.translator
    beside = state.usage_tap if isinstance(state.usage_tap, PassThroughUsage) else None
    ticket = state.ticket
    renamer = state.renamer

    def on_chunk(data: bytes) -> bytes | list[bytes]:
        # Never raises, never returns b"" for a data chunk (that would end the client's body).
        raw = b""
        try:
            if state.watchdog is not None:
                state.watchdog.touch()
            if data:
                state.started = True
                if state.decompressor is not None:
                    data = state.decompressor.decompress(data)
                    if not data:
                        return []
                raw = data
                if renamer is not None:
                    data = renamer.feed(data)
                    if not data:
                        return []
                out = translator.feed(data)
                if beside is not None:
                    beside.feed(data)
            else:
                out = _finish(state)
            if ticket is not None:  # stored before the end of the answer reaches the client
                ticket.offer_stream(state, data)
            if state.lint is not None:
                out = lint.on_stream(flow_id, state, raw, out, not data)
        except Exception as e:  # noqa: BLE001 - an exception here kills the client connection
            logger.exception("flow %s: stream callable failed", flow_id)
            out = _fail(translator, f"Dragoman stream failure: {type(e).__name__}", ErrorKind.API_ERROR, 500)
        if masker is not None:
            out = masker.feed(out) if data else masker.feed(out) + masker.flush()
        if state.client_tap is not None:  # a capped copy of what the client gets, assembled as it leaves
            state.client_tap.feed(out)
            if not data:
                state.client_tap.close()
        if not out:
            return []
        state.sent += len(out)
        return out

    return on_chunk


#: the code of the stream callables above (``flowstate.detach_stream`` drops them at the flow's end)
STREAM_CODES = frozenset({inner_code(_plain_callable, "on_chunk"), inner_code(_general_callable, "on_chunk")})


def _finish(state: FlowState) -> bytes:
    translator = state.translator
    out = b""
    if state.decompressor is not None:
        rest = state.decompressor.flush()
        state.decompressor = None
        if rest:
            out = translator.feed(rest if state.renamer is None else state.renamer.feed(rest))
    if state.renamer is not None:
        rest = state.renamer.close()
        state.renamer = None
        if rest:
            out += translator.feed(rest)
    if state.relay_failure is not None:
        # the relay ended its body cleanly after an upstream fault: say what happened, in the client's protocol
        message, timed_out = state.relay_failure
        kind, status = (ErrorKind.TIMEOUT, 504) if timed_out else (ErrorKind.API_ERROR, 502)
        return out + _fail(translator, message, kind, status)
    return out + translator.close()


def _fail(translator: object, message: str, kind: ErrorKind, status: int) -> bytes:
    try:
        return translator.fail(ErrorInfo(kind=kind, message=message, status=status))  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001
        return b""
