"""``Chain``: the parts behind one addon object, called in order, found by name, as side by side (issue 31)."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path

import pytest
from mitmproxy import hooks
from mitmproxy.proxy.layers.http import HttpRequestHook
from mitmproxy.test import taddons
from mitmproxy.test import tflow

from dragoman.mitm.chain import Chain

SCRIPT = Path(__file__).resolve().parents[2] / "addon" / "dragoman.py"


class Part:
    def __init__(self, tag: str, calls: list[str]) -> None:
        self.name = f"part-{tag}"
        self.tag = tag
        self.calls = calls

    def request(self, flow) -> None:
        self.calls.append(f"{self.tag}:request:{flow.id[:4]}")


class AsyncPart(Part):
    async def request(self, flow) -> None:
        await asyncio.sleep(0)
        self.calls.append(f"{self.tag}:async-request")

    async def running(self) -> None:
        self.calls.append(f"{self.tag}:running")


class AwaitablePart:
    """A sync method that returns an awaitable (mitmproxy awaits it; so must the chain)."""

    def __init__(self, tag: str, calls: list[str]) -> None:
        self.name = f"part-{tag}"
        self.tag = tag
        self.calls = calls

    def response(self, flow):
        async def later() -> None:
            self.calls.append(f"{self.tag}:response-awaited")

        return later()


class Boom(Part):
    def request(self, flow) -> None:
        raise RuntimeError("boom")


def test_only_the_hooks_some_part_has_are_attributes():
    calls: list[str] = []
    chain = Chain([Part("a", calls), AwaitablePart("b", calls)])
    assert callable(chain.request) and callable(chain.response)
    for absent in ("update", "responseheaders", "tcp_message", "error"):
        assert not hasattr(chain, absent), absent


def test_a_hook_one_part_has_is_that_part_method_itself():
    calls: list[str] = []
    part = Part("a", calls)
    chain = Chain([part, AwaitablePart("b", calls)])
    assert chain.request == part.request


def test_sync_parts_run_in_order_with_the_same_arguments():
    calls: list[str] = []
    chain = Chain([Part("a", calls), Part("b", calls), Part("c", calls)])
    f = tflow.tflow()
    assert not inspect.iscoroutinefunction(chain.request)
    assert chain.request(f) is None
    tag = f.id[:4]
    assert calls == [f"a:request:{tag}", f"b:request:{tag}", f"c:request:{tag}"]


def test_an_async_part_makes_the_hook_async_and_is_awaited_in_turn():
    calls: list[str] = []
    chain = Chain([Part("a", calls), AsyncPart("b", calls), Part("c", calls)])
    f = tflow.tflow()
    assert inspect.iscoroutinefunction(chain.request)
    asyncio.run(chain.request(f))
    tag = f.id[:4]
    assert calls == [f"a:request:{tag}", "b:async-request", f"c:request:{tag}"]


def test_an_awaitable_result_holds_back_the_parts_after_it():
    calls: list[str] = []

    class Late(Part):
        def response(self, flow) -> None:
            self.calls.append(f"{self.tag}:response")

    chain = Chain([AwaitablePart("a", calls), Late("b", calls)])
    pending = chain.response(tflow.tflow(resp=True))
    assert calls == []  # b waits for a's awaitable
    assert inspect.isawaitable(pending)
    asyncio.run(pending)
    assert calls == ["a:response-awaited", "b:response"]


def test_an_exception_ends_the_hook_for_the_parts_after_it():
    calls: list[str] = []
    chain = Chain([Part("a", calls), Boom("x", calls), Part("c", calls)])
    with pytest.raises(RuntimeError, match="boom"):
        chain.request(tflow.tflow())
    assert len(calls) == 1 and calls[0].startswith("a:")


def test_through_mitmproxy_dispatch_each_part_runs_once_per_hook():
    calls: list[str] = []
    chain = Chain([Part("a", calls), AsyncPart("b", calls)])
    f = tflow.tflow()

    async def main() -> None:
        with taddons.context(chain) as tctx:
            await tctx.master.addons.trigger_event(hooks.RunningHook())
            await tctx.master.addons.handle_lifecycle(HttpRequestHook(f))

    asyncio.run(main())
    assert calls == ["b:running", f"a:request:{f.id[:4]}", "b:async-request"]


def test_parts_are_found_by_name_and_forgotten_when_done():
    calls: list[str] = []
    a, b = Part("a", calls), Part("b", calls)
    chain = Chain([a, b])
    with taddons.context(chain) as tctx:
        assert tctx.master.addons.get("part-a") is a
        assert tctx.master.addons.get("part-b") is b
        assert tctx.master.addons.get("dragoman") is chain
        tctx.master.addons.remove(chain)
        assert tctx.master.addons.get("part-a") is None
        assert tctx.master.addons.get("dragoman") is None


def test_the_entry_script_loads_as_one_chain_with_every_part_reachable():
    asyncio.run(_load_the_entry_script())


async def _load_the_entry_script() -> None:
    with taddons.context() as tctx:
        ns = tctx.script(str(SCRIPT))
        translate = tctx.master.addons.get("translate")
        assert translate is not None and type(translate).__name__ == "Translate"
        assert tctx.master.addons.get("clientauth") is not None
        chain = tctx.master.addons.get("dragoman")
        assert isinstance(chain, Chain) and translate in chain.parts
        # the parts' options are declared (load reached every part)
        assert "dragoman_target" in tctx.options and "dragoman_lint" in tctx.options
        # mitmproxy's walk sees the script module and the chain: no part is an addon of its own
        assert ns.addons == [chain]
