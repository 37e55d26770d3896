"""Responsive: the read-size option (validated, applied to asyncio's socket transports, undone), the start-up
objects frozen out of the collector, and what a smaller read size does to a real loopback socket."""

from __future__ import annotations

import asyncio
import asyncio.selector_events
import gc
import logging

import pytest
from mitmproxy import exceptions
from mitmproxy.test import taddons

from dragoman.mitm.guards import responsive
from dragoman.mitm.guards.responsive import Responsive
from listen_backlog import listen_backlog
from listen_backlog import somaxconn

TRANSPORT = asyncio.selector_events._SelectorSocketTransport
ASYNCIO_DEFAULT = 256 * 1024


@pytest.fixture
def addon():
    assert TRANSPORT.max_size == ASYNCIO_DEFAULT
    a = Responsive()
    with taddons.context(a) as tctx:
        a.configure(set(tctx.options.keys()))  # as mitmproxy's script loader does on load
        yield a, tctx
        a.done()
    assert TRANSPORT.max_size == ASYNCIO_DEFAULT


@pytest.mark.parametrize("value, size", [("0", 0), ("16k", 16384), ("4096", 4096), ("1m", 1 << 20), (" 32k ", 32768)])
def test_read_size_values(value, size):
    assert responsive.read_size(value) == size


@pytest.mark.parametrize("value", ["1k", "4095", "-16k", "lots", "", "16q"])
def test_bad_read_size_names_the_option(value):
    with pytest.raises(exceptions.OptionsError, match="dragoman_read_size"):
        responsive.read_size(value)


def test_default_is_16k_on_every_socket_transport(addon):
    a, tctx = addon
    assert tctx.options.dragoman_read_size == "16k"
    assert TRANSPORT.max_size == 16384


def test_zero_keeps_asyncio_default_and_changes_apply(addon):
    a, tctx = addon
    tctx.configure(a, dragoman_read_size="0")
    assert TRANSPORT.max_size == ASYNCIO_DEFAULT
    tctx.configure(a, dragoman_read_size="64k")
    assert TRANSPORT.max_size == 65536
    with pytest.raises(exceptions.OptionsError):
        tctx.configure(a, dragoman_read_size="2k")
    assert TRANSPORT.max_size == 65536


def test_running_freezes_start_up_objects_once(addon):
    a, tctx = addon
    before = gc.get_freeze_count()  # the interpreter may start with a few hundred frozen
    a.running()
    frozen = gc.get_freeze_count()
    assert frozen > before + 10_000  # the modules, classes and tables loaded by now
    junk = [[i] for i in range(1000)]
    a.running()  # a script reload calls running again: nothing more is frozen
    assert gc.get_freeze_count() == frozen
    del junk
    a.done()
    assert gc.get_freeze_count() == 0


async def _largest_reads(total: int) -> list[int]:
    """Send ``total`` bytes at once over loopback; the sizes the server's protocol received, read by read."""
    sizes: list[int] = []
    done = asyncio.get_running_loop().create_future()

    class Sink(asyncio.Protocol):
        def data_received(self, data: bytes) -> None:
            sizes.append(len(data))
            if sum(sizes) >= total and not done.done():
                done.set_result(None)

    server = await asyncio.get_running_loop().create_server(Sink, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"x" * total)
    await writer.drain()
    await asyncio.wait_for(done, 10)
    writer.close()
    server.close()
    await server.wait_closed()
    return sizes


def test_a_loop_turn_reads_at_most_the_read_size(addon):
    a, tctx = addon
    sizes = asyncio.run(_largest_reads(4 << 20))
    assert sum(sizes) == 4 << 20
    assert max(sizes) <= 16384
    tctx.configure(a, dragoman_read_size="0")
    sizes = asyncio.run(_largest_reads(4 << 20))
    assert max(sizes) > 16384  # asyncio's own reads take what the socket has, up to 256 KiB


class _Options:
    def __init__(self, **values: str) -> None:
        self.__dict__.update(values)


class _Addons:
    def __init__(self, *names: str) -> None:
        self.names = names

    def get(self, name: str) -> object | None:
        return object() if name in self.names else None


@pytest.mark.parametrize(
    "values, level",
    [
        ({"termlog_verbosity": "warn"}, logging.WARNING),
        ({"termlog_verbosity": "info"}, logging.INFO),
        ({"termlog_verbosity": "debug"}, logging.DEBUG),
        ({"termlog_verbosity": "error", "console_eventlog_verbosity": "info"}, logging.INFO),  # the lower one shows
        ({}, None),  # no verbosity option (a test harness): every record may be wanted
    ],
)
def test_the_level_mitmproxy_shows(values, level):
    assert responsive.shown_level(_Options(**values), _Addons()) == level


def test_mitmweb_keeps_every_record():
    assert responsive.shown_level(_Options(termlog_verbosity="warn"), _Addons("eventstore")) is None


def test_dragoman_loggers_follow_the_verbosity_and_are_restored():
    """Every record reaches mitmproxy's legacy add_log handler (a hook on every addon): Dragoman's own records
    below what mitmproxy shows are not made at all."""
    lg = logging.getLogger("dragoman")
    before = lg.level
    a = Responsive()
    with taddons.context(a) as tctx:
        tctx.options.add_option("termlog_verbosity", str, "info", "as mitmproxy's TermLog declares it")
        tctx.configure(a, termlog_verbosity="warn")
        assert lg.level == logging.WARNING
        assert not logging.getLogger("dragoman.mitm.translate_addon").isEnabledFor(logging.INFO)
        tctx.configure(a, termlog_verbosity="debug")
        assert logging.getLogger("dragoman.mitm.translate_addon").isEnabledFor(logging.DEBUG)
        a.done()
    assert lg.level == before


class _Listener:
    name = "listener"

    def __init__(self) -> None:
        self.entries: list[str] = []

    def add_log(self, entry) -> None:
        self.entries.append(entry.msg)


def _legacy_records(tctx, logger_name: str) -> list[logging.LogRecord]:
    """What the filters on mitmproxy's legacy add_log handler pass on of one record of ``logger_name`` (its own
    filter, which drops records of another pytest phase than the one it was made in, left out)."""
    handler = tctx.master._legacy_log_events
    record = logging.LogRecord(logger_name, logging.INFO, __file__, 1, "flow 1: translated", None, None)
    return [record] if all(f.filter(record) for f in handler.filters) else []


def test_dragoman_records_skip_the_legacy_add_log_walk_while_nobody_listens(addon):
    a, tctx = addon
    assert len(_legacy_records(tctx, "dragoman.mitm.translate_addon")) == 1  # before running: as mitmproxy has it
    a.running()
    assert _legacy_records(tctx, "dragoman.mitm.translate_addon") == []
    # mitmproxy's own records and other loggers are untouched
    assert len(_legacy_records(tctx, "mitmproxy.proxy.server")) == 1
    assert len(_legacy_records(tctx, "someone.else")) == 1


def test_an_addon_with_add_log_registered_later_gets_dragoman_records_again(addon):
    a, tctx = addon
    a.running()
    assert _legacy_records(tctx, "dragoman.x") == []
    tctx.master.addons.add(_Listener())
    assert len(_legacy_records(tctx, "dragoman.x")) == 1


def test_done_takes_the_filter_off(addon):
    a, tctx = addon
    a.running()
    a.done()
    assert len(_legacy_records(tctx, "dragoman.x")) == 1


class _Instance:
    def __init__(self, servers) -> None:
        self._servers = servers


class _ProxyAddons:
    def __init__(self, instances) -> None:
        self.instances = instances

    def get(self, name):
        return type("P", (), {"servers": self.instances})() if name == "proxyserver" else None


def test_widen_backlogs_listens_again_with_the_larger_backlog():

    async def main():
        srv = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = srv.sockets[0].getsockname()[1]
        try:
            before = listen_backlog(port)
            n = responsive.widen_backlogs(_ProxyAddons([_Instance([srv]), _Instance([object()]), object()]), 2000)
            return before, n, listen_backlog(port)
        finally:
            srv.close()

    before, n, after = asyncio.run(main())
    assert before == 100  # asyncio's default, what mitmproxy listens with
    assert n == 1
    assert after == min(2000, somaxconn())


def test_widen_backlogs_leaves_a_changed_api_alone():
    class Broken:
        def get(self, name):
            raise RuntimeError("no such addon manager")

    assert responsive.widen_backlogs(Broken(), 4096) == 0
    assert responsive.widen_backlogs(_ProxyAddons(None), 4096) == 0


def test_a_negative_backlog_names_the_option(addon):
    a, tctx = addon
    assert tctx.options.dragoman_listen_backlog == responsive.LISTEN_BACKLOG_DEFAULT
    with pytest.raises(exceptions.OptionsError, match="dragoman_listen_backlog"):
        tctx.configure(a, dragoman_listen_backlog=-1)
