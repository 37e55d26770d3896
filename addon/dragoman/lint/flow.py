"""One flow's live lint (``dragoman_lint``): our client-bound output and the upstream's stream, each
checked as it passes, each violation reported once (side, protocol, event index, message).

Sans-I/O: the addon feeds the upstream bytes and our output bytes; ``FlowLint`` says when our output
has just broken its grammar (``strict`` then ends the stream with an error event in the client's protocol).
"""

from __future__ import annotations

from typing import Any

from dragoman.lint.live import StreamLint
from dragoman.lint.live import Violation
from dragoman.lint.live import check_body

MODES = ("off", "log", "strict")
#: bytes gathered before a side is checked: the upstream's always, ours in ``log`` mode (``strict`` checks
#: our output before it leaves). The cheap path (``replay``) takes a run of alike deltas in a few C calls
#: for the whole run, so the bigger the batch, the less each event costs; a violation is still reported
#: with its event index.
BATCH = 1 << 17
#: dragoman.protocols.Protocol values -> lint protocol names
PROTOCOL_NAMES = {"anthropic": "anthropic", "openai-chat": "chat", "openai-responses": "responses", "gemini": "gemini"}


class FlowLint:
    """``ours``: the client's protocol, strict grammar (None: not linted, e.g. bytes passed untouched);
    ``upstream``: the upstream's protocol, the grammar tolerant of real provider output."""

    def __init__(
        self,
        mode: str,
        client: str,
        upstream: str,
        *,
        ours: bool = True,
        ours_array: bool = False,
        upstream_array: bool = False,
        ours_wrapped: bool = False,
    ) -> None:
        """``ours_array`` / ``upstream_array``: that side is a Gemini JSON-array stream (no ``alt=sse``);
        ``ours_wrapped``: our Gemini events are Code Assist's ``{"response": ...}`` (the upstream's may be)."""
        self.strict = mode == "strict"
        self.client = PROTOCOL_NAMES[client]
        self.upstream = PROTOCOL_NAMES[upstream]
        self.ours = StreamLint(self.client, strict=True, array=ours_array, wrapped=ours_wrapped) if ours else None
        self.theirs: StreamLint | None = StreamLint(self.upstream, strict=False, array=upstream_array)
        self.reports: list[dict[str, Any]] = []
        #: strict mode cut our stream after a violation: nothing more is sent
        self.muted = False
        #: each side's bytes gathered since the last check, and their total size
        self._up: list[bytes] = []
        self._out: list[bytes] = []
        self._size = 0
        #: ``feed``'s steps since the last check (upstream, ours, upstream, ...); the addon's plain stream
        #: callable appends to it itself and calls ``check_steps`` once it gathered ``BATCH`` bytes
        self.steps: list[bytes] = []

    def feed(self, upstream: bytes, out: bytes) -> list[dict[str, Any]] | None:
        """One step of a ``log`` mode stream (not its end): the upstream bytes and our output, gathered
        (two appends and a sum: the hot path) and both sides checked once they hold ``BATCH`` bytes.
        -> the new reports, or None."""
        steps = self.steps
        steps.append(upstream)
        steps.append(out)
        self._size += len(upstream) + len(out)
        if self._size < BATCH:
            return None
        return self.check_steps()

    def check_steps(self) -> list[dict[str, Any]] | None:
        """Both sides of the gathered steps checked (``feed`` once ``BATCH`` bytes are gathered, or the
        stream callable that gathers them itself) -> the new reports, or None."""
        steps = self.steps
        new = []
        if self.theirs is not None:
            ups = steps[0::2]
            if self._up:
                ups[:0] = self._up
                self._up.clear()
            new.append(self._check(False, ups, False))
        if self.ours is not None:
            outs = steps[1::2]
            if self._out:
                outs[:0] = self._out
                self._out.clear()
            new.append(self._check(True, outs, False))
        steps.clear()
        self._up.clear()
        self._out.clear()
        self._size = 0
        return [r for r in new if r is not None] or None

    def _drain(self) -> None:
        """``feed``'s steps to each side's pending bytes."""
        steps = self.steps
        if steps:
            self._up += steps[0::2]
            self._out += steps[1::2]
            steps.clear()
        self._size = 0

    def feed_upstream(self, data: bytes, final: bool = False) -> dict[str, Any] | None:
        """Upstream bytes as received (b"" / ``final``: the end). -> a new report, or None."""
        if self.steps:
            self._drain()
        if self.theirs is None or not (data or final):
            return None
        self._up.append(data)
        self._size += len(data)
        if self._size < BATCH and not final:
            return None
        self._size = 0
        return self._check_upstream(final)

    def feed_ours(self, out: bytes, final: bool = False) -> dict[str, Any] | None:
        """Our output bytes as they leave (``final``: the last of them). -> a new report, or None."""
        if self.steps:
            self._drain()
        if self.ours is None or not (out or final):
            return None
        self._out.append(out)
        if not self.strict:
            self._size += len(out)
            if self._size < BATCH and not final:
                return None
            self._size = 0
        return self._check_ours(final)

    def _check_upstream(self, final: bool) -> dict[str, Any] | None:
        chunks, self._up = self._up, []
        return self._check(False, chunks, final)

    def _check_ours(self, final: bool) -> dict[str, Any] | None:
        chunks, self._out = self._out, []
        return self._check(True, chunks, final)

    def _check(self, ours: bool, chunks: list[bytes], final: bool) -> dict[str, Any] | None:
        """One side's gathered chunks (empty ones are skipped) through its ``StreamLint``."""
        lint = self.ours if ours else self.theirs
        if lint is None:
            return None
        chunks = list(filter(None, chunks))
        v = lint.feed_chunks(chunks) if chunks else None
        if v is None and final:
            v = lint.close()
        if v is not None or final:
            if ours:
                self.ours = None
            else:
                self.theirs = None
        return self._report("ours" if ours else "upstream", self.client if ours else self.upstream, v)

    def flush(self) -> list[dict[str, Any]]:
        """A stream cut off (the connection failed): check the bytes gathered so far (no end-of-stream
        rule: the stream did not end) -> the new reports."""
        self._drain()
        new: list[dict[str, Any]] = []
        for side, lint, pending, protocol in (
            ("upstream", self.theirs, self._up, self.upstream),
            ("ours", self.ours, self._out, self.client),
        ):
            data = b"".join(pending)
            pending.clear()
            if lint is not None and data:
                rep = self._report(side, protocol, lint.feed(data))
                if rep is not None:
                    new.append(rep)
        self._size = 0
        self.theirs = self.ours = None
        return new

    def body(self, side: str, body: bytes, *, error: bool) -> dict[str, Any] | None:
        """A whole JSON body: ours (strict grammar) or the upstream's (tolerant)."""
        protocol = self.client if side == "ours" else self.upstream
        if protocol == "gemini" and not error and body.lstrip()[:1] == b"[":  # a whole JSON-array stream
            lint = StreamLint("gemini", strict=side == "ours", array=True)
            return self._report(side, protocol, lint.feed(body) or lint.close())
        return self._report(side, protocol, check_body(protocol, body, error=error, strict=side == "ours"))

    def _report(self, side: str, protocol: str, v: Violation | None) -> dict[str, Any] | None:
        if v is None:
            return None
        rep = {"side": side, "protocol": protocol, "index": v.index, "message": v.message}
        self.reports.append(rep)
        return rep


def describe(rep: dict[str, Any]) -> str:
    where = f"event #{rep['index']}" if rep["index"] >= 0 else "end of stream/body"
    who = "our output" if rep["side"] == "ours" else "upstream"
    return f"lint: {who} ({rep['protocol']}) breaks the grammar at {where}: {rep['message']}"
