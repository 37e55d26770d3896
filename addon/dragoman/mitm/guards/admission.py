"""``Admission``: a burst of new streams cannot stall the streams already running and other clients (issue 31).

mitmproxy serves every connection on one asyncio event loop, round robin: each ready task runs one step, then
the next, and a loop turn lasts as long as all of them together. When hundreds of streams open at once (an
agent starting its sub-agents), each one's start (the upstream connection, the request sent, the answer's
headers read, the translator built) joins every following turn, and so does every event of every stream
started: another client's small request, which needs a few turns, waited seconds in the burst bench
(``bench/load.py``).

Admission meters the start of Dragoman's streams, in the request hook right after Translate's (the request is
translated and its route chosen; nothing has gone upstream yet):

* a timer due every ``TICK`` seconds measures the loop's lag (how late it runs: about the last turn's length)
  and grants ``BURST`` starts a tick while the lag is under ``dragoman_admission_lag`` (milliseconds), fewer
  the further it is over (``BURST * limit / lag``, at least one): every stream starts, the ones started run
  at full speed;
* a stream that finds no start granted waits its turn (a future; first come, first served);
* requests that are not streams (short answers, ``count_tokens``, models), flows Dragoman answered itself and
  flows that are not Dragoman's never wait; on a lightly loaded proxy nothing waits at all (the hook takes one
  start from the tick's grant), and the timer stops after ``IDLE_TICKS`` ticks without a stream.

What it cannot bound is mitmproxy's own work on the new connections before the request hook (accepting them,
reading and parsing the requests: the pass-through's floor, ``docs/performance.md``). ``done`` lets every
waiting stream go.

Off by default: it moves the cost of an overload, it does not remove it. Measured (``bench/load.py``, quiet
2-core machine, 20 ms): with 500 streams opened over 2 s the running streams' inter-event gap p99 fell from 1.85x
to 0.82x the pass-through's, and new streams' time to first byte p99 rose from 1.84x to 4.0x; in the burst of
500, another client's worst wait fell from 2.4 s to 1.1 s and its median rose from 9 ms to 190 ms (the burst is
spread over a longer time). A grant by elapsed time instead of by tick (about 30 starts after each long turn)
changed nothing measurable.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from typing import Any

from mitmproxy import ctx
from mitmproxy import exceptions
from mitmproxy import http

logger = logging.getLogger(__name__)

#: how often the loop's lag is sampled and starts are granted (seconds)
TICK = 0.005
#: starts granted per tick while the loop keeps up
BURST = 8
#: ticks without a connection before the timer stops (the next connection starts it)
IDLE_TICKS = 200
OPTION = "dragoman_admission_lag"


class Admission:
    name = "admission"

    def __init__(self, translate: Any) -> None:
        self.translate = translate
        #: the lag limit in seconds (0: off)
        self.limit = 0.0
        #: the last measured lag (seconds)
        self.lag = 0.0
        #: starts left in this tick's grant
        self.tokens = BURST
        #: waiting streams (the future that lets each go), first come first served
        self.waiting: collections.deque[asyncio.Future[None]] = collections.deque()
        #: connections that waited, and the longest wait (seconds): for the log, the bench and the tests
        self.held = 0
        self.longest = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._due = 0.0
        self._quiet = 0

    def load(self, loader: Any) -> None:
        loader.add_option(
            OPTION,
            int,
            0,
            "Milliseconds of event-loop lag above which new Dragoman streams start a few at a time, first come "
            "first served (requests that are not streams never wait): under overload the streams already "
            "running keep their pace and new ones start later (docs/performance.md has the measured trade). "
            "0 (the default): off.",
        )

    def configure(self, updated: set[str]) -> None:
        if OPTION in updated:
            value = ctx.options.dragoman_admission_lag
            if value < 0:
                raise exceptions.OptionsError(f"{OPTION} must be 0 (off) or a number of milliseconds, not {value}")
            self.limit = value / 1000
            if not self.limit:
                self._stop()

    def done(self) -> None:
        self._stop()

    # -- the hook (after Translate's: the flow is translated, its route chosen, nothing sent upstream yet)

    def request(self, flow: http.HTTPFlow) -> Any:
        if not self.limit:
            return None
        state = self.translate.flows.get(flow.id)
        if state is None or not state.stream or flow.response is not None or flow.error is not None:
            return None
        if self._timer is None and not self._start():
            return None
        self._quiet = 0
        if self.tokens and not self.waiting:
            self.tokens -= 1
            return None
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self.waiting.append(fut)
        return self._wait(loop, fut)

    async def _wait(self, loop: asyncio.AbstractEventLoop, fut: asyncio.Future[None]) -> None:
        t0 = loop.time()
        try:
            await fut
        finally:
            waited = loop.time() - t0
            self.held += 1
            if waited > self.longest:
                self.longest = waited
                if waited > 1.0:
                    logger.info("a new stream waited %.1f s to start: the event loop was busy", waited)

    # -- the timer

    def _start(self) -> bool:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a unit test calling the hook directly): nothing to meter
            return False
        self._due = loop.time() + TICK
        self._quiet = 0
        self.tokens = BURST
        self._timer = loop.call_at(self._due, self._tick)
        return True

    def _stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.lag = 0.0
        self.tokens = BURST
        while self.waiting:
            fut = self.waiting.popleft()
            if not fut.done():
                fut.set_result(None)

    def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        self.lag = now - self._due
        # the longer the loop's turns, the fewer new streams join them: BURST at the limit, half at twice it, ...
        grant = BURST if self.lag < self.limit else max(1, int(BURST * self.limit / self.lag))
        waiting = self.waiting
        while grant and waiting:
            fut = waiting.popleft()
            if not fut.done():
                fut.set_result(None)
                grant -= 1
        self.tokens = grant
        self._quiet += 1
        if self._quiet > IDLE_TICKS and not waiting:
            self._timer = None
            return
        self._due = now + TICK
        self._timer = loop.call_at(self._due, self._tick)
