"""In-process measurements: the stream translator per direction, its floors, and request translation.

Each stream run builds a fresh ``StreamTranslator`` (not timed), then times ``feed`` of every upstream
event (one SSE event per call, as mitmproxy's stream callable receives one HTTP chunk per call) plus
``close``. ``µs/event`` = this thread's CPU time (``time.thread_time``) / upstream events: CPU time,
not wall time, so that other load on a shared machine (being descheduled) does not count.
"""

from __future__ import annotations

import gc
import statistics
import time
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

import orjson
import streams

DATA = Path(__file__).parent / "data"
#: (label, client protocol, file); the first one carries the "≤ 2 ms" budget line
REQUEST_FILES = (
    ("claude-code", streams.ANTHROPIC, "claude-code-cc-tool-002.messages.json"),
    ("codex", streams.RESPONSES, "codex-cx-tool-gpt-5.5-002.responses.json"),
    ("ccr-chat", streams.CHAT, "ccr-tool-002.chat.json"),
)


#: the in-process clock: this thread's CPU time (robust to other load on the machine)
CLOCK = time.thread_time


@dataclass
class Stat:
    samples: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.samples) if self.samples else float("nan")

    @property
    def lo(self) -> float:
        return min(self.samples) if self.samples else float("nan")

    @property
    def hi(self) -> float:
        return max(self.samples) if self.samples else float("nan")

    def as_dict(self) -> dict:
        return {"median": self.median, "min": self.lo, "max": self.hi, "samples": self.samples}


def _import_api():
    from dragoman.protocols import Protocol
    from dragoman.protocols.base import Context
    from dragoman.protocols.registry import get_codec
    from dragoman.translate.plan import Plan
    from dragoman.translate.request import translate_request
    from dragoman.translate.stream import StreamTranslator

    return Protocol, get_codec, Context, Plan, translate_request, StreamTranslator


def make_translator(client: str, upstream: str, request_body: bytes):
    """A fresh StreamTranslator for ``client`` <- ``upstream``, with the context a real flow would have."""
    Protocol, get_codec, Context, Plan, translate_request, StreamTranslator = _import_api()
    plan = Plan(Protocol(client), Protocol(upstream))
    ctx = Context()
    translate_request(request_body, plan, ctx)
    # the cap the addon passes by default (dragoman_max_sse_event=8m): the decoder the addon really runs
    return StreamTranslator(
        get_codec(plan.upstream).stream_decoder(ctx), get_codec(plan.client).stream_encoder(ctx), 8 << 20
    )


def _run_once(client: str, upstream: str, req: bytes, events: list[bytes], keep: bool) -> tuple[float, bytes | None]:
    """Thread CPU seconds for feeding every event then closing (CPU time, not wall: a busy machine
    deschedules us, which must not count), and the output when ``keep``."""
    tr = make_translator(client, upstream, req)
    feed = tr.feed
    clock = CLOCK
    if keep:
        out = bytearray()
        t0 = clock()
        for ev in events:
            out += feed(ev)
        out += tr.close()
        return clock() - t0, bytes(out)
    t0 = clock()
    for ev in events:
        feed(ev)
    tr.close()
    return clock() - t0, None


def available_directions() -> tuple[list[tuple[str, str]], dict[str, str]]:
    """(client, upstream) pairs whose two codecs import, and {protocol: import error} for the others."""
    missing: dict[str, str] = {}
    try:
        Protocol, get_codec, *_ = _import_api()
    except Exception as e:  # noqa: BLE001
        return [], {p: f"{type(e).__name__}: {e}" for p in streams.PROTOCOLS}
    ok = []
    for p in streams.PROTOCOLS:
        try:
            codec = get_codec(Protocol(p))
            for name in ("stream_decoder", "stream_encoder", "decode_request", "encode_request"):
                getattr(codec, name)
        except Exception as e:  # noqa: BLE001
            missing[p] = f"{type(e).__name__}: {e}"
        else:
            ok.append(p)
    return [(c, u) for c in ok for u in ok], missing


def bench_streams(n_events: int, runs: int, warmups: int, log=print) -> dict:
    """µs per upstream event for each available direction (identity included), with floors."""
    directions, missing = available_directions()
    events = {p: streams.generate(p, n_events) for p in streams.PROTOCOLS}
    out: dict = {"n_events": {p: len(e) for p, e in events.items()}, "missing": missing, "directions": {}, "floors": {}}
    # floors: orjson loads+dumps of every JSON payload; our SSE decoder alone
    for p, evs in events.items():
        pl = streams.payloads(evs)
        orj, sse = Stat(), Stat()
        for i in range(warmups + runs):
            t0 = CLOCK()
            for d in pl:
                orjson.dumps(orjson.loads(d))
            dt = CLOCK() - t0
            if i >= warmups:
                orj.samples.append(dt / len(evs) * 1e6)
        try:
            from dragoman.sse.decoder import SSEDecoder

            for i in range(warmups + runs):
                dec = SSEDecoder()
                t0 = CLOCK()
                for ev in evs:
                    dec.feed(ev)
                dec.close()
                dt = CLOCK() - t0
                if i >= warmups:
                    sse.samples.append(dt / len(evs) * 1e6)
        except Exception as e:  # noqa: BLE001
            log(f"  sse decoder floor failed: {e}")
        out["floors"][p] = {"orjson": orj.as_dict(), "sse_decoder": sse.as_dict()}
    reqs = {c: orjson.dumps(streams.small_request(c, "bench-model")) for c in streams.PROTOCOLS}
    stats: dict[tuple[str, str], Stat] = {d: Stat() for d in directions}
    checks: dict[tuple[str, str], dict] = {}
    for d in directions:
        client, upstream = d
        try:
            _, body = _run_once(client, upstream, reqs[client], events[upstream], keep=True)
            n_out, problem = streams.check_output(client, body)
            checks[d] = {"out_events": n_out, "out_bytes": len(body), "problem": problem}
        except Exception as e:  # noqa: BLE001
            checks[d] = {"out_events": 0, "out_bytes": 0, "problem": f"{type(e).__name__}: {e}"}
    live = [d for d in directions if not checks[d]["problem"] or checks[d]["out_events"] > 0]
    # interleave directions inside each round so that machine noise hits all of them alike
    for i in range(warmups + runs):
        for d in live:
            gc.collect()
            try:
                dt, _ = _run_once(d[0], d[1], reqs[d[0]], events[d[1]], keep=False)
            except Exception as e:  # noqa: BLE001
                checks[d]["problem"] = f"{type(e).__name__}: {e}"
                continue
            if i >= warmups:
                stats[d].samples.append(dt / len(events[d[1]]) * 1e6)
    for d in directions:
        out["directions"][f"{d[0]}<-{d[1]}"] = {
            "client": d[0],
            "upstream": d[1],
            "us_per_event": stats[d].as_dict(),
            **checks[d],
        }
    return out


def bench_requests(runs: int, warmups: int, min_time: float = 0.05, log=print) -> dict:
    """µs per request: each real client request translated to every upstream (identity included)."""
    Protocol, get_codec, Context, Plan, translate_request, _ = _import_api()
    directions, missing = available_directions()
    ok_protocols = {c for c, _ in directions}
    out: dict = {"missing": missing, "requests": {}}
    for label, client, fname in REQUEST_FILES:
        body = (DATA / fname).read_bytes()
        if client not in ok_protocols:
            continue
        for upstream in streams.PROTOCOLS:
            if upstream not in ok_protocols:
                continue
            key = f"{label}:{streams.SHORT[client]}->{streams.SHORT[upstream]}"
            plan = Plan(Protocol(client), Protocol(upstream))
            rec: dict = {"client": client, "upstream": upstream, "file": fname, "bytes_in": len(body)}
            try:
                ctx = Context()
                tr = translate_request(body, plan, ctx)
                rec["bytes_out"] = len(tr.body)
                rec["dropped"] = list(ctx.dropped.fields)
            except Exception as e:  # noqa: BLE001
                rec["problem"] = f"{type(e).__name__}: {e}"
                out["requests"][key] = rec
                continue
            # calibrate the loop to >= min_time per sample
            loops = 1
            while True:
                t0 = CLOCK()
                for _ in range(loops):
                    translate_request(body, plan, Context())
                dt = CLOCK() - t0
                if dt >= min_time or loops >= 10_000:
                    break
                loops *= 2
            st = Stat()
            for i in range(warmups + runs):
                gc.collect()
                t0 = CLOCK()
                for _ in range(loops):
                    translate_request(body, plan, Context())
                dt = CLOCK() - t0
                if i >= warmups:
                    st.samples.append(dt / loops * 1e6)
            rec["us_per_request"] = st.as_dict()
            rec["loops"] = loops
            out["requests"][key] = rec
    return out
