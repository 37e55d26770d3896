"""Admission: new Dragoman streams start a few at a time while the event loop lags, first come first served;
nothing else ever waits; the option is validated; ``done`` lets every waiting stream go."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest
from mitmproxy import exceptions
from mitmproxy.test import taddons
from mitmproxy.test import tflow

from dragoman.mitm.flowstate import FlowStates
from dragoman.mitm.guards import admission
from dragoman.mitm.guards.admission import Admission


def _addon(lag_ms: int = 20):
    translate = SimpleNamespace(flows=FlowStates())
    a = Admission(translate)
    tctx = taddons.context(a)
    tctx.__enter__()
    tctx.configure(a, dragoman_admission_lag=lag_ms)
    return a, translate, tctx


def _flow(translate, stream: bool | None):
    f = tflow.tflow()
    f.response = None
    if stream is not None:
        translate.flows.put(f.id, SimpleNamespace(stream=stream))
    return f


def test_the_option_is_validated():
    a, _, tctx = _addon()
    with pytest.raises(exceptions.OptionsError, match="dragoman_admission_lag must be 0"):
        tctx.configure(a, dragoman_admission_lag=-1)
    assert a.limit == 0.02
    tctx.configure(a, dragoman_admission_lag=0)
    assert a.limit == 0


def test_without_a_running_loop_nothing_waits():
    a, translate, _ = _addon()
    assert a.request(_flow(translate, True)) is None


def test_an_idle_loop_starts_a_tick_s_grant_at_once_and_queues_the_rest_in_order():
    async def run():
        a, translate, _ = _addon()
        flows = [_flow(translate, True) for _ in range(admission.BURST + 5)]
        results = [a.request(f) for f in flows]
        assert results[: admission.BURST] == [None] * admission.BURST  # the grant: no wait at all
        pending = results[admission.BURST :]
        assert all(r is not None for r in pending) and len(a.waiting) == 5
        order: list[int] = []

        async def wait(i, aw):
            await aw
            order.append(i)

        await asyncio.wait_for(asyncio.gather(*(wait(i, r) for i, r in enumerate(pending))), 2)
        assert order == [0, 1, 2, 3, 4]  # first come, first served
        assert a.held == 5 and not a.waiting
        a.done()

    asyncio.run(run())


def test_flows_that_are_not_dragoman_streams_never_wait():
    async def run():
        a, translate, _ = _addon()
        a.tokens = 0
        a._start()
        a.tokens = 0
        assert a.request(_flow(translate, False)) is None  # a whole answer
        assert a.request(_flow(translate, None)) is None  # not Dragoman's
        answered = _flow(translate, True)
        answered.response = tflow.tresp()
        assert a.request(answered) is None  # answered in the request hook (an error, a cached answer)
        w = a.request(_flow(translate, True))
        assert w is not None  # a stream does wait
        a.done()
        await asyncio.wait_for(w, 1)

    asyncio.run(run())


def test_a_lagging_loop_lets_one_stream_go_a_tick():
    async def run():
        a, translate, _ = _addon(lag_ms=1)
        a._start()
        a.tokens = 0
        waits = [a.request(_flow(translate, True)) for _ in range(100)]
        tasks = [asyncio.ensure_future(w) for w in waits]
        # keep the loop's turns long (20 ms of CPU between yields, ticks due every 5 ms): the lag stays over 1 ms
        t_end = time.monotonic() + 0.2
        turns = 0
        while time.monotonic() < t_end:
            busy = time.monotonic() + 0.02
            while time.monotonic() < busy:
                pass
            await asyncio.sleep(0)
            turns += 1
        done = sum(t.done() for t in tasks)
        assert a.lag >= 0.001
        # released one a tick (one tick a turn at most), not a grant of BURST each
        assert 1 <= done <= turns < 100, (done, turns)
        a.done()  # lets the rest go
        await asyncio.wait_for(asyncio.gather(*tasks), 1)

    asyncio.run(run())


def test_done_lets_every_waiting_stream_go_and_off_never_waits():
    async def run():
        a, translate, tctx = _addon()
        a._start()
        a.tokens = 0
        w = asyncio.ensure_future(a.request(_flow(translate, True)))
        await asyncio.sleep(0)
        tctx.configure(a, dragoman_admission_lag=0)  # off: the queue is let go
        await asyncio.wait_for(w, 1)
        assert a.request(_flow(translate, True)) is None
        assert a._timer is None

    asyncio.run(run())


def test_the_timer_stops_when_nothing_starts():
    async def run():
        a, translate, _ = _addon()
        assert a.request(_flow(translate, True)) is None
        assert a._timer is not None
        ticks_needed = admission.TICK * admission.IDLE_TICKS
        for _ in range(100):  # ticks come late on a busy machine: wait for them, up to 10x as long
            await asyncio.sleep(ticks_needed / 10)
            if a._timer is None:
                break
        assert a._timer is None  # no wake-ups on an idle proxy
        assert a.request(_flow(translate, True)) is None  # and the next stream starts it again
        assert a._timer is not None
        a.done()

    asyncio.run(run())
