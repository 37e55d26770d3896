"""``Responsive``: one fast stream cannot hold up every other flow (issue 23, 3(d)).

mitmproxy serves every connection on one asyncio event loop. A connection's task reads what the socket has
(``reader.read``), runs the layers and Dragoman's stream translation on it, writes the result, and reads
again; it hands the loop back only when the socket has nothing more. asyncio's selector transport takes up
to 256 KiB per ``recv``, so an upstream streaming as fast as it can keeps the loop on one task for the time it
takes to translate 256 KiB of events (about 1,500 small SSE events, 80 ms on the 2-core bench machine), and
a request on another connection needs several loop turns: with a 300,000-event stream, another client's
``count_tokens`` waited up to 350 ms without any recording. Two process-wide settings bound that:

* ``dragoman_read_size`` (default 16 KiB): the most a socket read takes per loop turn
  (``asyncio.selector_events._SelectorSocketTransport.max_size``, the ``recv`` size; ``0`` keeps asyncio's
  256 KiB). A turn then carries about 90 events, so other flows are served between them;
* at ``running``, after start-up, ``gc.freeze()``: the objects that exist once mitmproxy and Dragoman are
  loaded (about 100,000: modules, pydantic schemas, option tables) move to the permanent generation, so a
  full collection no longer walks them (those pauses were 50-95 ms, taken by whichever flow allocated).

* Dragoman's loggers (``dragoman.*``) log at the level mitmproxy shows (``termlog_verbosity``, or the console's
  ``console_eventlog_verbosity`` when lower). mitmproxy sets the root logger to DEBUG, and its legacy
  ``add_log`` handler turns EVERY record into a hook call on every addon (formatted, posted to the loop);
  a debug line nobody sees cost about as much as a hook of its own per flow (issue 31). mitmweb keeps every
  record in its event store, so there the level is left as it is.
* Dragoman's records skip that legacy ``add_log`` handler while no addon has an ``add_log`` hook (none of
  mitmproxy's own has; it is deprecated since mitmproxy 9): the one info line per flow was otherwise a
  synchronous walk of every addon (a ``safecall`` each), about 6 % of a short request's CPU. termlog, mitmweb's
  event store and any ``logging`` handler still get every record; the check is redone whenever an addon is
  registered (a script that defines ``add_log`` gets Dragoman's records again).

* ``dragoman_listen_backlog`` (default 4096): mitmproxy listens with asyncio's default backlog of 100 pending
  connections. When more clients connect at once (an agent starting 500 sub-agent streams, issue 31's burst),
  the kernel drops the SYNs beyond it and those clients retry after 1, 2, 4 s: another client's small request
  waited 7-10 s in the burst bench, for Dragoman and the pass-through alike, every wait a SYN retry
  (``nstat TcpExtListenOverflows``). Once mitmproxy's servers listen (at ``running``, and after a change of
  ``mode``/``listen_host``/``listen_port``), each TCP listening socket is given the larger backlog (``listen``
  again on the same socket; the kernel caps it at ``net.core.somaxconn``). ``0`` keeps mitmproxy's.

Measured with ``make bench-record`` (``bench/README.md``). Both are undone in ``done`` (a test harness, a
script reload). The transport attribute is asyncio's own (the same since Python 3.4, in 3.11 and 3.12);
where a loop has no such attribute (another event loop implementation), nothing is set and the log says so.
"""

from __future__ import annotations

import asyncio
import asyncio.selector_events
import gc
import logging
import os
import socket
from typing import Any

from mitmproxy import ctx
from mitmproxy import exceptions
from mitmproxy.addonmanager import traverse
from mitmproxy.utils import human

logger = logging.getLogger(__name__)

READ_SIZE_DEFAULT = "16k"
#: below this a read costs more in loop turns than it saves (each turn is tens of µs)
READ_SIZE_MIN = 4096
_TRANSPORT: Any = getattr(asyncio.selector_events, "_SelectorSocketTransport", None)
#: mitmproxy's verbosity names (``mitmproxy.log.LogLevels``) as logging levels
_LEVELS = {
    "error": logging.ERROR,
    "warn": logging.WARNING,
    "info": logging.INFO,
    "alert": logging.INFO,
    "debug": logging.DEBUG,
}
_VERBOSITY_OPTIONS = ("termlog_verbosity", "console_eventlog_verbosity")
LISTEN_BACKLOG_DEFAULT = 4096
#: how many times (0.1 s apart) the listening sockets are widened after mitmproxy's servers (re)start
WIDEN_TRIES = 50
#: mitmproxy's options that restart its servers (their sockets then listen with asyncio's default again)
_SERVER_OPTIONS = frozenset({"mode", "listen_host", "listen_port", "server"})
DRAGOMAN_LOGGER = logging.getLogger("dragoman")


def shown_level(options: Any, addons: Any) -> int | None:
    """The lowest level mitmproxy shows anywhere, or None when every record may be kept (mitmweb's event
    store, or no verbosity option: a test harness)."""
    try:
        if addons is not None and addons.get("eventstore") is not None:
            return None
    except Exception:  # noqa: BLE001 - an internal API: when in doubt, keep every record
        return None
    levels = [_LEVELS.get(str(getattr(options, name, "")).lower()) for name in _VERBOSITY_OPTIONS]
    known = [lv for lv in levels if lv is not None]
    return min(known) if known else None


class QuietLegacyLog(logging.Filter):
    """On mitmproxy's ``LegacyLogEvents`` handler: lets ``dragoman.*`` records through only while some addon
    has an ``add_log`` hook (looked for again whenever the number of registered addons changes)."""

    def __init__(self, addons: Any) -> None:
        super().__init__()
        self.addons = addons
        self._seen = -1
        self._heard = True

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith("dragoman"):
            return True
        n = len(self.addons.lookup)
        if n != self._seen:
            self._seen = n
            self._heard = any(callable(getattr(a, "add_log", None)) for a in traverse(self.addons.chain))
        return self._heard


def widen_backlogs(addons: Any, backlog: int) -> int:
    """``listen(backlog)`` again on every TCP listening socket of mitmproxy's servers; how many were widened.

    The servers are mitmproxy's (``proxyserver.servers``, each asyncio server's ``sockets``): internal API, the
    same in 11.0.2 and 12.x; anything else (a WireGuard or DNS server, a changed API) is left alone."""
    try:
        instances = list(getattr(addons.get("proxyserver"), "servers", None) or ())
    except Exception:  # noqa: BLE001 - an internal API: when in doubt, leave mitmproxy's servers alone
        return 0
    widened = 0
    for instance in instances:
        for server in getattr(instance, "_servers", None) or ():
            if not isinstance(server, asyncio.Server):
                continue
            for tsock in server.sockets:
                try:
                    sock = socket.socket(fileno=os.dup(tsock.fileno()))  # the same socket, its own descriptor
                except OSError:
                    continue
                try:
                    if sock.type == socket.SOCK_STREAM:
                        sock.listen(backlog)
                        widened += 1
                except OSError as e:
                    logger.debug("dragoman_listen_backlog: %s: %s", tsock.getsockname(), e)
                finally:
                    sock.close()
    return widened


def read_size(value: str) -> int:
    """``dragoman_read_size`` in bytes (0: asyncio's default); ``OptionsError`` when it is not a size."""
    text = value.strip()
    if text == "0":
        return 0
    try:
        size = human.parse_size(text)
    except ValueError:
        size = None
    if size is None or size < READ_SIZE_MIN:
        raise exceptions.OptionsError(
            f"Invalid dragoman_read_size {value!r}: give 0 (asyncio's default, 256k) or a size of at least "
            f"{READ_SIZE_MIN} bytes (e.g. 16k)"
        )
    return size


class Responsive:
    def __init__(self) -> None:
        self._asyncio_default: int | None = None
        self._frozen = False
        self._log_level: int | None = None  # the ``dragoman`` logger's level before Dragoman set it
        self._quiet: tuple[logging.Handler, QuietLegacyLog] | None = None
        self._running = False
        self._widening: asyncio.Task[None] | None = None

    def load(self, loader: Any) -> None:
        loader.add_option(
            "dragoman_read_size",
            str,
            READ_SIZE_DEFAULT,
            "Most bytes one socket read takes per turn of mitmproxy's event loop (or with k/m). Smaller keeps "
            "other flows answered while a fast stream is translated (16k: about 90 SSE events per turn); larger "
            "costs a little less CPU per byte. 0: asyncio's default (256k).",
        )
        loader.add_option(
            "dragoman_listen_backlog",
            int,
            LISTEN_BACKLOG_DEFAULT,
            "Connections the kernel queues for mitmproxy's listening sockets before they are accepted (capped by "
            "net.core.somaxconn). Beyond it, clients connecting at once wait for SYN retries (1, 2, 4 s). "
            "0: mitmproxy's own (100).",
        )

    def configure(self, updated: set[str]) -> None:
        if "dragoman_listen_backlog" in updated and ctx.options.dragoman_listen_backlog < 0:
            raise exceptions.OptionsError(
                f"Invalid dragoman_listen_backlog {ctx.options.dragoman_listen_backlog}: give a number of "
                "connections >= 1, or 0 for mitmproxy's own backlog"
            )
        if self._running and updated & (_SERVER_OPTIONS | {"dragoman_listen_backlog"}):
            self._widen_soon()
        if updated.intersection(_VERBOSITY_OPTIONS):
            self._follow_verbosity()
        if "dragoman_read_size" not in updated:
            return
        size = read_size(ctx.options.dragoman_read_size)
        if _TRANSPORT is None or not isinstance(getattr(_TRANSPORT, "max_size", None), int):
            logger.info("dragoman_read_size: this event loop's transports have no read size; left as it is")
            return
        if self._asyncio_default is None:
            self._asyncio_default = _TRANSPORT.max_size
        _TRANSPORT.max_size = size or self._asyncio_default

    def _follow_verbosity(self) -> None:
        level = shown_level(ctx.options, getattr(ctx.master, "addons", None))
        if level is None:
            return
        if self._log_level is None:
            self._log_level = DRAGOMAN_LOGGER.level
        DRAGOMAN_LOGGER.setLevel(level)

    def _widen_soon(self) -> None:
        """Once mitmproxy's servers listen (they start or restart asynchronously), widen their backlogs."""
        backlog = ctx.options.dragoman_listen_backlog
        if backlog <= 0:
            return
        if self._widening is not None:
            self._widening.cancel()
        try:
            self._widening = asyncio.get_running_loop().create_task(self._widen(backlog), name="dragoman-backlog")
        except RuntimeError:  # no running loop (a test harness)
            self._widening = None

    async def _widen(self, backlog: int) -> None:
        addons = ctx.master.addons
        # mitmproxy starts (or restarts) its servers asynchronously, after this hook: widen what listens now and
        # again for a few seconds (a few system calls each time; a socket widened twice is unchanged)
        widened = 0
        for _ in range(WIDEN_TRIES):
            widened = widen_backlogs(addons, backlog)
            await asyncio.sleep(0.1)
        logger.debug("listening sockets given a backlog of %d: %d", backlog, widened)

    def running(self) -> None:
        self._running = True
        self._widen_soon()
        legacy = getattr(getattr(ctx, "master", None), "_legacy_log_events", None)
        if self._quiet is None and isinstance(legacy, logging.Handler):
            quiet = QuietLegacyLog(ctx.master.addons)
            legacy.addFilter(quiet)
            self._quiet = (legacy, quiet)
        if not self._frozen:
            gc.collect()
            gc.freeze()
            self._frozen = True
            logger.debug("start-up objects frozen out of the garbage collector: %d", gc.get_freeze_count())

    def done(self) -> None:
        self._running = False
        if self._widening is not None:
            self._widening.cancel()
            self._widening = None
        if self._quiet is not None:
            self._quiet[0].removeFilter(self._quiet[1])
            self._quiet = None
        if self._log_level is not None:
            DRAGOMAN_LOGGER.setLevel(self._log_level)
            self._log_level = None
        if self._asyncio_default is not None and _TRANSPORT is not None:
            _TRANSPORT.max_size = self._asyncio_default
            self._asyncio_default = None
        if self._frozen:
            gc.unfreeze()
            self._frozen = False
