"""``TranslateConfig``: the options half of the Translate addon. Options are declared in ``options``;
``configure`` validates them (``OptionsError`` naming what is wrong) and rebuilds the derived state whole,
as mitmproxy's own addons do: the routes in force (``routing``), the relay, the usage ledger. The hooks half
is ``translate_addon.Translate``."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from mitmproxy import ctx
from mitmproxy import exceptions
from mitmproxy import flowfilter
from mitmproxy.utils import human

from dragoman.ledger import LedgerError
from dragoman.mitm import options
from dragoman.mitm import view
from dragoman.mitm.answer import inbound
from dragoman.mitm.flowstate import FlowStates
from dragoman.mitm.guards.limits import BodyGate
from dragoman.mitm.guards.limits import parse_size
from dragoman.mitm.guards.scrub import Scrubber
from dragoman.mitm.keymask import KeyMask
from dragoman.mitm.relay.relay import Relay
from dragoman.mitm.responses.state import RESPONSES_OPTIONS
from dragoman.mitm.responses.state import ResponsesState
from dragoman.mitm.responses.state import configure_responses
from dragoman.mitm.route_state import Routing
from dragoman.mitm.usage import UsageBook
from dragoman.protocols import Protocol
from dragoman.routing.keyspec import resolve_key as resolve_api_key
from dragoman.routing.load import ConfigError
from dragoman.routing.load import config_from_options
from dragoman.routing.url import UpstreamURL
from dragoman.routing.url import parse_upstream
from dragoman.translate.plan import ModelRule
from dragoman.translate.plan import parse_model_map

logger = logging.getLogger(__name__)

JSON_CT = inbound.JSON_CT
SHORTHAND_OPTIONS = ("dragoman_target", "dragoman_upstream", "dragoman_api_key", "dragoman_model_map")
ROUTING_OPTIONS = frozenset({"dragoman_config", "dragoman_profile", *SHORTHAND_OPTIONS})
CONTEXT_OPTIONS = frozenset({"dragoman_strict", "dragoman_chat_reasoning", "dragoman_chat_max_tokens_field"})
EXPOSURE_OPTIONS = frozenset({"dragoman_client_keys", "dragoman_allow_remote", "listen_host", "mode"})


class TranslateConfig:
    """Options and configuration of ``Translate``: the routes in force, the relay, the usage ledger."""

    def __init__(self) -> None:
        # the single-upstream shorthand, as configured (also what Endpoints reads)
        self.target: Protocol | None = None
        self.upstream: UpstreamURL | None = None
        self.api_key: str | None = None
        self.model_map: list[ModelRule] = []
        self.match: Any = None  # a compiled flowfilter, or None for the default
        self.routing = Routing()
        self.usage = UsageBook()
        self.responses = ResponsesState()
        self.relay = Relay()
        #: the request-body caps, listed first among the addons (``limits``)
        self.gate = BodyGate(self)
        self.flows = FlowStates()
        #: the lossiness summaries already logged as a WARNING (``flowstate.log_dropped``: later flows with the
        #: same losses log them at INFO)
        self.warned_losses: set[str] = set()
        self._warned_deferred: set[str] = set()
        #: seconds without upstream bytes before a streamed flow is failed (0: never)
        self.idle_timeout = 300
        #: send ``x-dragoman-lossy`` (``dragoman_lossy_header``)
        self.lossy_header = True
        #: assemble streamed answers into the flow's metadata for the view (``dragoman_keep_answer``)
        self.keep_answer = False
        #: ``dragoman_lint``: off | log | strict
        self.lint = "off"
        #: flows carrying credentials until their request is sent
        self.scrubber = Scrubber()
        self._keys = KeyMask()
        #: ``dragoman_strict``, ``dragoman_chat_reasoning``, ``dragoman_chat_max_tokens_field`` as configured (read
        #: by every translated flow's ``Context``; None until ``configure`` saw them)
        self.context_options: tuple[bool, str, str] | None = None
        self._keys_for: object = None
        #: the size caps (``options.declare_limits``), in bytes
        self.max_body = human.parse_size(options.MAX_BODY_DEFAULT) or 0
        self.max_inflate_ratio = options.MAX_INFLATE_RATIO_DEFAULT
        self.max_sse_event = human.parse_size(options.MAX_SSE_EVENT_DEFAULT) or 0
        #: keep only this many most recent images per request (``dragoman_keep_images``; 0: all)
        self.keep_images = 0
        #: rename single-underscore ``mcp_`` tools for an Anthropic upstream (``dragoman_mcp_prefix``)
        self.mcp_prefix = False

    # -- options

    def load(self, loader: Any) -> None:
        options.declare(loader)
        view.register()  # the "Dragoman" content view of mitmweb / --flow-detail

    def configure(self, updated: set[str]) -> None:
        opts = ctx.options
        if "dragoman_idle_timeout" in updated:
            if opts.dragoman_idle_timeout < 0:
                raise exceptions.OptionsError(
                    f"Invalid dragoman_idle_timeout {opts.dragoman_idle_timeout}: give seconds as an integer >= 0 "
                    "(0 disables the timeout)"
                )
            self.idle_timeout = opts.dragoman_idle_timeout
        if "dragoman_lossy_header" in updated:
            self.lossy_header = bool(opts.dragoman_lossy_header)
        if "dragoman_lint" in updated and opts.dragoman_lint in options.CHOICES["dragoman_lint"]:
            self.lint = str(opts.dragoman_lint)  # a bad value: OptionsError below
        if "dragoman_keep_answer" in updated:
            self.keep_answer = bool(opts.dragoman_keep_answer)
        if updated & CONTEXT_OPTIONS or self.context_options is None:
            self.context_options = (
                opts.dragoman_strict,
                opts.dragoman_chat_reasoning,
                opts.dragoman_chat_max_tokens_field,
            )
        self._configure_limits(updated)
        for name in ("dragoman_models_ttl", "dragoman_keep_images"):
            if name in updated and getattr(opts, name) < 0:
                raise exceptions.OptionsError(f"Invalid {name} {getattr(opts, name)}: give an integer >= 0 (0: off)")
        if "dragoman_keep_images" in updated:
            self.keep_images = opts.dragoman_keep_images
        if "dragoman_mcp_prefix" in updated:
            self.mcp_prefix = bool(opts.dragoman_mcp_prefix)
        # mitmproxy enforces `choices` only on its command line, not for --set or the options API
        for name, allowed in options.CHOICES.items():
            if name in updated and getattr(opts, name) not in allowed:
                raise exceptions.OptionsError(
                    f"Invalid {name} {getattr(opts, name)!r}: choose one of {', '.join(repr(c) for c in allowed)}"
                )
        self._configure_shorthand(updated)
        if "dragoman_match" in updated:
            expr = opts.dragoman_match
            try:
                self.match = flowfilter.parse(expr) if expr.strip() else None
            except ValueError as e:
                raise exceptions.OptionsError(f"Cannot parse dragoman_match: {e}") from e
        if updated & ROUTING_OPTIONS:
            self._configure_routing()
        if updated & (ROUTING_OPTIONS | EXPOSURE_OPTIONS):
            self._check_exposure()
        if "dragoman_ledger" in updated:
            try:
                self.usage.open(opts.dragoman_ledger)
            except LedgerError as e:
                raise exceptions.OptionsError(f"Cannot use dragoman_ledger: {e}") from e
        if updated & RESPONSES_OPTIONS:
            configure_responses(self.responses)

    def _configure_limits(self, updated: set[str]) -> None:
        opts = ctx.options
        if "dragoman_max_body" in updated:
            self.max_body = parse_size("dragoman_max_body", opts.dragoman_max_body)
        if "dragoman_max_sse_event" in updated:
            self.max_sse_event = parse_size("dragoman_max_sse_event", opts.dragoman_max_sse_event)
        if "dragoman_max_inflate_ratio" in updated:
            if opts.dragoman_max_inflate_ratio < 0:
                raise exceptions.OptionsError(
                    f"Invalid dragoman_max_inflate_ratio {opts.dragoman_max_inflate_ratio}: give an integer >= 0 "
                    "(0: only dragoman_max_body applies)"
                )
            self.max_inflate_ratio = opts.dragoman_max_inflate_ratio

    def _check_exposure(self) -> None:
        """Refuse to serve upstream keys to the network without client keys (see ``client_auth``)."""
        auth = ctx.master.addons.get("clientauth")
        config = self.routing.config
        if auth is None or config is None:
            return
        auth.check_exposure(config.holds_keys)
        if auth.clients():
            keyless = [u.name for u in config.upstreams.values() if not u.keys]
            if keyless:
                logger.warning(
                    "client keys are configured, so a client's key never travels upstream: upstream(s) %s have no "
                    "keys of their own and get none",
                    ", ".join(keyless),
                )

    def _configure_shorthand(self, updated: set[str]) -> None:
        opts = ctx.options
        if "dragoman_target" in updated:
            self.target = Protocol(opts.dragoman_target) if opts.dragoman_target else None
        if "dragoman_upstream" in updated:
            value = opts.dragoman_upstream
            try:
                self.upstream = parse_upstream(value) if value.strip() else None
            except ValueError as e:
                raise exceptions.OptionsError(f"Cannot parse dragoman_upstream {value!r}: {e}") from e
        if "dragoman_api_key" in updated:
            try:
                self.api_key = resolve_api_key(opts.dragoman_api_key, os.environ)
            except ValueError as e:
                # never echo the option value: it may be the key itself
                raise exceptions.OptionsError(f"Cannot use dragoman_api_key: {e}") from e
        if "dragoman_model_map" in updated:
            try:
                self.model_map = parse_model_map(list(opts.dragoman_model_map))
            except ValueError as e:
                raise exceptions.OptionsError(f"Cannot parse dragoman_model_map: {e}") from e

    def _configure_routing(self) -> None:
        path = ctx.options.dragoman_config.strip()
        if not path:
            config = None
            if self.target is not None:
                config = config_from_options(
                    self.target, self.upstream, self.api_key, self.model_map, ctx.options.dragoman_profile
                )
            self.routing.install(config)
            return
        clash = [n for n in SHORTHAND_OPTIONS if getattr(ctx.options, n)]
        if ctx.options.dragoman_profile != "auto":
            clash.append("dragoman_profile (use profile: on the upstream)")
        if clash:
            raise exceptions.OptionsError(
                f"dragoman_config cannot be combined with {', '.join(clash)}: the routes file names every "
                "upstream, key and model (use UPSTREAM/MODEL in a route's `to` instead of dragoman_model_map); "
                "drop either the routes file or those options"
            )
        try:
            self.routing.load_file(Path(path).expanduser())
        except ConfigError as e:
            raise exceptions.OptionsError(f"Cannot use dragoman_config: {e}") from e

    async def running(self) -> None:
        self.warn_deferred()
        await self.relay.start()
        self.routing.start_watching()

    def done(self) -> None:
        self.scrubber.done()
        self.routing.stop_watching()
        self.relay.stop()
        self.usage.close()
        self.responses.close()

    def warn_deferred(self) -> None:
        """Unknown ``--set dragoman_*`` names are deferred silently by mitmproxy: they are typos."""
        for name in sorted(getattr(ctx.options, "deferred", {}) or {}):
            if name.startswith(options.OPTION_PREFIX) and name not in self._warned_deferred:
                self._warned_deferred.add(name)
                logger.warning(
                    "unknown option %s (ignored); Dragoman's options are: %s", name, ", ".join(self._option_names())
                )

    @staticmethod
    def _option_names() -> list[str]:
        return sorted(n for n in ctx.options.keys() if n.startswith(options.OPTION_PREFIX))

    @property
    def keys(self) -> KeyMask:
        """The configured keys (every upstream's, the routes file's as reloaded), masked in answers to clients."""
        config = self.routing.config
        if config is not self._keys_for:
            values = [k.value for u in config.upstreams.values() for k in u.keys] if config is not None else []
            self._keys = KeyMask(values)
            self._keys_for = config
        return self._keys

    @property
    def routed(self) -> bool:
        """Routes come from a routes file (not the single-upstream shorthand)."""
        return self.routing.path is not None
