"""``Chain``: Dragoman's addon objects behind one, so that mitmproxy's hook dispatch visits one object, not 19.

mitmproxy calls every hook (about eight per flow: requestheaders, request, responseheaders, response and an
``update`` after each) by walking every addon object in the chain: a ``getattr`` and a ``hasattr("addons")`` per
object, and the hook's arguments built again (a ``dataclasses.fields`` walk) for each object that has the hook.
With Dragoman's parts as separate objects that walk was the largest cost of a short request above the
pass-through floor (issue 31: ``bench/README.md``, "Where the time goes"). ``Chain`` holds the parts in order and,
once at construction, the bound methods each hook calls, in that order: mitmproxy finds one method per hook
and builds its arguments once; a hook no part has (``update``, ``tcp_message``, ...) is not an attribute at all.

Same semantics as the parts side by side under one script: called in order with the same arguments, an
awaitable result is awaited before the next part runs, an exception ends the hook for the parts after it (as
mitmproxy's one ``safecall`` around a script does). A hook with an ``async def`` part is itself ``async def``
(mitmproxy refuses coroutine functions in its synchronous calls, as it did for the part). ``load`` also makes
each part known to mitmproxy as before: ``ctx.master.addons.get("translate")`` finds it, its commands are
collected; ``done`` forgets them again (a script reload registers the new parts).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

import mitmproxy.addonmanager  # noqa: F401  (each module below registers its hooks in hooks.all_hooks)
import mitmproxy.log  # noqa: F401
import mitmproxy.proxy.layers  # noqa: F401
import mitmproxy.proxy.server_hooks  # noqa: F401
from mitmproxy import ctx
from mitmproxy import hooks

Call = Callable[..., Any]


def _name(part: object) -> str:
    return getattr(part, "name", type(part).__name__.lower())


def _finish(pending: Awaitable[Any], rest: Sequence[Call], args: tuple[Any, ...]) -> Awaitable[None]:
    async def run() -> None:
        await pending
        for call in rest:
            res = call(*args)
            if res is not None and inspect.isawaitable(res):
                await res

    return run()


def _sync_hook(calls: tuple[Call, ...]) -> Call:
    if len(calls) == 1:
        return calls[0]

    def hook(*args: Any) -> Awaitable[None] | None:
        for i, call in enumerate(calls):
            res = call(*args)
            if res is not None and inspect.isawaitable(res):
                return _finish(res, calls[i + 1 :], args)
        return None

    return hook


def _async_hook(calls: tuple[Call, ...]) -> Call:
    async def hook(*args: Any) -> None:
        for call in calls:
            res = call(*args)
            if res is not None and inspect.isawaitable(res):
                await res

    return hook


class Chain:
    """The parts of ``addon/dragoman.py`` in hook order, dispatched by one object."""

    name = "dragoman"

    def __init__(self, parts: Sequence[object]) -> None:
        self.parts = tuple(parts)
        self.hooks: dict[str, tuple[Call, ...]] = {}
        for hook in hooks.all_hooks:
            calls = tuple(getattr(p, hook) for p in self.parts if callable(getattr(p, hook, None)))
            if not calls:
                continue
            self.hooks[hook] = calls
            if hook in ("load", "done"):
                continue  # defined as methods below
            is_async = any(inspect.iscoroutinefunction(c) for c in calls)
            setattr(self, hook, _async_hook(calls) if is_async else _sync_hook(calls))

    def load(self, loader: Any) -> None:
        for call in self.hooks.get("load", ()):
            call(loader)
        master = getattr(loader, "master", None)
        if master is None:
            return
        for part in self.parts:
            master.addons.lookup[_name(part)] = part
            master.commands.collect_commands(part)

    def done(self) -> None:
        try:
            for call in self.hooks.get("done", ()):
                call()
        finally:
            master = getattr(ctx, "master", None)
            lookup = getattr(getattr(master, "addons", None), "lookup", None)
            if isinstance(lookup, dict):
                for part in self.parts:
                    if lookup.get(_name(part)) is part:
                        del lookup[_name(part)]
