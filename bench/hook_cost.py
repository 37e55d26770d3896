"""Issue 31: the CPU of Dragoman's own hooks for one short request, in process (no mitmdump, no sockets).

    .venv/bin/python bench/hook_cost.py [--stream] [--flows 2000] [--rounds 5] [--script addon/dragoman.py]

Loads the entry script's ``Chain`` under ``mitmproxy.test.taddons`` (one Chat upstream, the fake upstream of
``fake_upstream.py`` answering once for the real upstream answer), then runs ``requestheaders``, ``request``,
``responseheaders`` and ``response`` on new flows shaped as ``load.py``'s short requests (a Claude Code-shaped
non-streamed Anthropic request, reverse mode, plain HTTP/1.1; ``--body``: a real Claude Code request instead) and prints the thread CPU µs per flow of each hook
(median over rounds). mitmproxy's own work (HTTP layers, its hook dispatch, its addons) is not in it: this is
what Dragoman adds on top of the pass-through, and it moves with the code, not with the machine's load, much less
than ``load.py``'s ratios. The ledger is off and termlog absent (mitmproxy's legacy ``add_log`` handler is
there, so the one WARNING line of a lossy flow costs a little more than in mitmdump). ``--script`` measures
another checkout's entry script (its package must be the one importable, e.g. its own ``.venv``).

``--stream``: the same request with ``"stream": true`` (what stands before a stream's first byte): the fake
upstream's SSE answer headers, ``requestheaders``, ``request`` and ``responseheaders`` timed, then the upstream's
first event through the stream callable (``first chunk``: the client's first byte); ``response`` comes after the
last byte and is not timed; every flow must leave ``responseheaders`` with Dragoman's stream callable set
(translated, not a shortcut), or the probe stops.

``--cold``: between two hooks, 4 MiB of memory and 20,000 small objects are touched (what mitmproxy's own work
between hooks does to the caches inside mitmdump); the figures then match the per-hook times measured inside
mitmdump (``docs/performance.md``, session 6), 2-3x the warm ones. They move more with the machine's load (the
L3 cache is shared): compare builds run after one another several times. ``--parts``: each Chain part's time per
hook (the timer around each part adds a little). ``--profile N``: cProfile of the timed hooks only, the N
functions with the most time (``--profile-out FILE`` keeps the stats).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import http.client as http_client
import pstats
import statistics
import time
from collections.abc import Awaitable
from pathlib import Path

import orjson
import procs
import streams
from mitmproxy import http
from mitmproxy.addons import script as mscript
from mitmproxy.proxy import mode_specs
from mitmproxy.test import taddons
from mitmproxy.test import tflow

HOOKS = ("requestheaders", "request", "responseheaders", "response")


def _run(res: Awaitable[None] | None) -> None:
    """A hook's awaitable, run to its end (none of them waits on anything for these flows)."""
    if res is None:
        return
    it = res.__await__()
    try:
        it.send(None)
    except StopIteration:
        return
    raise RuntimeError("a hook really waited: this probe measures flows answered without waiting")


def _nothing() -> None:
    pass


_JUNK = bytearray(4 << 20)
_JUNK_OBJS = [{"k": i, "v": str(i)} for i in range(20000)]


def _evict() -> None:
    """Touch 4 MiB of memory and 20,000 small objects: the caches hold none of Dragoman's code or data after."""
    _JUNK[::64] = bytes(len(_JUNK) // 64)
    n = 0
    for o in _JUNK_OBJS:
        n += o["k"]


def _time_parts(chain: object, acc: dict[str, float]) -> None:
    """Each part's method of each hook wrapped in a thread-CPU timer adding into ``acc`` (key "hook: Part")."""
    from dragoman.mitm import chain as chain_mod

    tt = time.thread_time

    def timed(call, key):
        def run(*args):
            t = tt()
            try:
                return call(*args)
            finally:
                acc[key] = acc.get(key, 0.0) + tt() - t

        return run

    for hook, calls in list(chain.hooks.items()):  # type: ignore[attr-defined]
        if hook in ("load", "done", "configure", "running"):
            continue

        wrapped = tuple(timed(c, f"{hook}: {getattr(c, '__qualname__', c)}") for c in calls)
        setattr(chain, hook, chain_mod._sync_hook(wrapped))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flows", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--script", default=str(procs.REPO / "addon" / "dragoman.py"))
    ap.add_argument("--stream", action="store_true", help="a streamed request (the hooks before the first byte)")
    ap.add_argument("--profile", type=int, default=0, help="cProfile the timed loop: print this many functions")
    ap.add_argument(
        "--parts",
        action="store_true",
        help="also time each part of the Chain per hook (thread CPU µs per flow, median of rounds)",
    )
    ap.add_argument(
        "--cold",
        action="store_true",
        help="between hooks, touch 4 MiB and run unrelated Python (as mitmproxy's own work does between them in "
        "mitmdump): caches are cold as there",
    )
    ap.add_argument("--profile-out", default="", help="with --profile: keep cProfile's stats in this file")
    ap.add_argument(
        "--body",
        help="an Anthropic request body to send instead (e.g. bench/data/claude-code-cc-tool-002.messages.json, a "
        "real 85 KB Claude Code request); its model becomes the fake upstream's 'text'",
    )
    a = ap.parse_args()
    hooks = (*HOOKS[:3], "first chunk") if a.stream else HOOKS
    up = procs.start_upstream(None, [])
    try:
        chain = mscript.load_script(a.script).addons[0]
        if a.body:
            req = orjson.loads(Path(a.body).read_bytes())
            req["model"] = "text"
        else:
            req = dict(streams.small_request(streams.ANTHROPIC, "text"))
        req["stream"] = a.stream
        body = orjson.dumps(req)
        head = [
            (b"host", b"127.0.0.1"),
            (b"content-type", b"application/json"),
            (b"x-api-key", b"sk-bench"),
            (b"authorization", b"Bearer sk-bench"),
            (b"anthropic-version", b"2023-06-01"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"keep-alive"),
        ]
        mode = mode_specs.ProxyMode.parse(f"reverse:http://127.0.0.1:{up.port}")

        def flow() -> http.HTTPFlow:
            f = tflow.tflow()
            f.client_conn.tls = False
            f.client_conn.proxy_mode = mode
            now = time.time()
            f.request = http.Request(
                "127.0.0.1", up.port, b"POST", b"http", b"", b"/v1/messages", b"HTTP/1.1", http.Headers(head), body,
                None, now, now,
            )  # fmt: skip
            f.response = None
            return f

        with taddons.context(chain) as tctx:
            tctx.options.listen_host = "127.0.0.1"
            tctx.options.mode = [f"reverse:http://127.0.0.1:{up.port}"]
            tctx.configure(
                chain,
                dragoman_target="openai-chat",
                dragoman_upstream=f"http://127.0.0.1:{up.port}/v1",
                dragoman_api_key="sk-bench",
                dragoman_ledger="off",
            )
            f = flow()
            chain.requestheaders(f)
            _run(chain.request(f))
            conn = http_client.HTTPConnection("127.0.0.1", up.port)
            conn.request("POST", f.request.path, f.request.content, dict(f.request.headers))
            answer = conn.getresponse()
            answer_body = answer.read()
            answer_head = [(k.lower().encode(), v.encode()) for k, v in answer.getheaders()]
            first_event = b""
            if a.stream:  # the stream's headers only: its body goes through the stream callable, not a hook
                first_event = answer_body[: answer_body.index(b"\n\n") + 2]
                answer_body = b""
                if not dict(answer_head).get(b"content-type", b"").startswith(b"text/event-stream"):
                    raise RuntimeError(f"the fake upstream did not stream: {answer_head!r}")
            if answer.status != 200:
                raise RuntimeError(f"the fake upstream answered {answer.status}: {answer_body[:200]!r}")
            gc.freeze()  # as Dragoman's mitmdump does at ``running`` (``Responsive``): start-up objects are not walked
            per: dict[str, list[float]] = {h: [] for h in hooks}
            part_acc: dict[str, float] = {}
            if a.parts:
                _time_parts(chain, part_acc)
            evict = _evict if a.cold else _nothing
            tt = time.thread_time
            prof = cProfile.Profile() if a.profile else None
            on = prof.enable if prof is not None else _nothing
            off = prof.disable if prof is not None else _nothing
            for _ in range(a.rounds):
                acc = dict.fromkeys(hooks, 0.0)
                part_acc.clear()
                for _ in range(a.flows):
                    f = flow()
                    evict()
                    on()
                    t0 = tt()
                    chain.requestheaders(f)
                    d_rqh = tt() - t0
                    evict()
                    t0 = tt()
                    _run(chain.request(f))
                    d_rq = tt() - t0
                    off()
                    now = time.time()
                    f.response = http.Response(
                        b"HTTP/1.1", 200, b"OK", http.Headers(answer_head), answer_body, None, now, now
                    )
                    evict()
                    on()
                    t0 = tt()
                    chain.responseheaders(f)
                    d_rsh = tt() - t0
                    if a.stream:
                        stream = f.response.stream
                        if not callable(stream):
                            raise RuntimeError("a streamed flow got no stream callable: it was not translated")
                        evict()
                        t0 = tt()
                        out = stream(first_event)  # the upstream's first event: the client's first byte
                        d_last = tt() - t0
                        off()
                        if not out:
                            raise RuntimeError("the first upstream event gave the client no byte")
                        # the flow's state is released as mitmproxy's ``response`` hook would (untimed)
                        f.response.stream = False
                        chain.response(f)
                    else:
                        evict()
                        t0 = tt()
                        chain.response(f)
                        d_last = tt() - t0
                        off()
                    for h, d in zip(hooks, (d_rqh, d_rq, d_rsh, d_last), strict=True):
                        acc[h] += d
                for h in hooks:
                    per[h].append(acc[h] / a.flows * 1e6)
                for k, v in part_acc.items():
                    per.setdefault(k, []).append(v / a.flows * 1e6)
            if prof is not None:
                n = a.rounds * a.flows
                print(
                    f"cProfile of the timed hooks, {n} flows (times are totals; ÷ {n} per flow, inflated by cProfile)"
                )
                if a.profile_out:
                    prof.dump_stats(a.profile_out)
                pstats.Stats(prof).sort_stats("tottime").print_stats(a.profile)
                pstats.Stats(prof).sort_stats("cumtime").print_stats(a.profile)
            if not a.stream and b'"type":"message"' not in (f.response.content or b""):
                raise RuntimeError(f"the last flow was not translated: {f.response.content[:200]!r}")
        total = [sum(per[h][i] for h in hooks) for i in range(a.rounds)]
        kind = "streamed request, before its first byte" if a.stream else "short request"
        print(f"Dragoman's hooks, thread CPU µs per {kind} (median of rounds):")
        for h in hooks:
            print(f"  {h:16s} {statistics.median(per[h]):8.1f}")
        print(f"  {'total':16s} {statistics.median(total):8.1f}  (min {min(total):.1f}, max {max(total):.1f})")
        if a.parts:
            print("each part (hook: part), largest first:")
            rest = sorted((k for k in per if k not in hooks), key=lambda k: -statistics.median(per[k]))
            for k in rest:
                print(f"  {k:48s} {statistics.median(per[k]):8.1f}")
    finally:
        up.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
