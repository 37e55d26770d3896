"""``ClientAuth``: only clients holding a client key reach the upstreams (registered first).

With client keys configured (``dragoman_client_keys`` and/or ``clients:`` in the routes file), every flow that
Dragoman would translate or answer (the three endpoints, model lists, count_tokens, the Responses state
endpoints) must carry one of them in its protocol's own header (``x-api-key`` or ``Authorization: Bearer``);
anything else is answered 401 (no or unknown key) or 403 (a key restricted to other models/routes) in the
client's protocol shape, before anything reaches an upstream. The presented key is then removed from the
flow, so it never travels upstream, into a recording or a flow file; the flow carries the client's NAME
(``flow.metadata["dragoman_client"]``), and logs name the client, never the key.

Safe default: when upstream keys are configured and no client keys are, mitmdump refuses to start if a
mode that any TCP client can reach (regular, reverse, upstream, socks5, transparent) listens beyond loopback, unless
``dragoman_allow_remote`` is set (for a deployment with its own authentication in front); and requests from
browser pages (``Origin``) are refused unless ``dragoman_cors_origins`` allows them (``cors.Cors.guard``).
"""

from __future__ import annotations

import ipaddress
import logging
import os
from collections.abc import Sequence
from typing import Any

import orjson
from mitmproxy import ctx
from mitmproxy import exceptions
from mitmproxy import http
from mitmproxy.proxy import mode_specs

from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.logsafe import logsafe
from dragoman.mitm import hosts
from dragoman.mitm.outbound import AUTH_HEADERS
from dragoman.mitm.outbound import client_key
from dragoman.protocols import Protocol
from dragoman.protocols import detect
from dragoman.routing.clients import allowed
from dragoman.routing.clients import identify
from dragoman.routing.clients import parse_client_keys
from dragoman.routing.spec import ClientKey
from dragoman.translate.response import error_body

logger = logging.getLogger(__name__)

CLIENT_METADATA_KEY = "dragoman_client"
#: modes with a TCP port any host that reaches it can use: transparent mode included (a host can connect to its
#: port directly, and the gateway recipe redirects a network's traffic to it). WireGuard mode admits only peers
#: holding the key of mitmproxy's WireGuard configuration; local mode has no port (the OS redirects this
#: machine's own processes): neither is exposed (see ``direct``)
EXPOSED_MODES = (
    mode_specs.RegularMode,
    mode_specs.ReverseMode,
    mode_specs.UpstreamMode,
    mode_specs.Socks5Mode,
    mode_specs.TransparentMode,
)
GUARDED_SUFFIXES = ("/messages", "/messages/count_tokens", "/chat/completions", "/responses", "/models")


def guarded(flow: http.HTTPFlow) -> bool:
    """A flow Dragoman would translate or answer."""
    if not hosts.in_scope(flow):
        return False
    path = hosts.bare_path(flow.request.path)
    if detect(path) is not None or path.endswith(GUARDED_SUFFIXES):
        return True
    return "/responses/" in path or "/models/" in path


def is_loopback(host: str) -> bool:
    if host in ("localhost",):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class ClientAuth:
    def __init__(self) -> None:
        self.option_clients: tuple[ClientKey, ...] = ()

    def load(self, loader: Any) -> None:
        loader.add_option(
            "dragoman_client_keys",
            Sequence[str],
            [],
            "Client keys, NAME=KEY or NAME=env:VAR (repeat the option). When set (here or in the routes file's "
            "clients: section), every request must carry one of them (x-api-key or Authorization: Bearer); "
            "others get 401 in their protocol's shape. Logs and recordings name the client, never the key.",
        )
        loader.add_option(
            "dragoman_allow_remote",
            bool,
            False,
            "Start even though upstream keys are configured, no client keys are, and mitmproxy listens beyond "
            "loopback (for deployments with their own authentication in front).",
        )

    def configure(self, updated: set[str]) -> None:
        if "dragoman_client_keys" in updated:
            try:
                self.option_clients = parse_client_keys(ctx.options.dragoman_client_keys, os.environ)
            except ValueError as e:
                raise exceptions.OptionsError(f"Cannot use dragoman_client_keys: {e}") from e

    def clients(self) -> tuple[ClientKey, ...]:
        translate = ctx.master.addons.get("translate")
        config = getattr(getattr(translate, "routing", None), "config", None)
        from_file = config.clients if config is not None else ()
        return self.option_clients + from_file

    # -- the startup check (called by Translate once its routes are known)

    def check_exposure(self, holds_keys: bool) -> None:
        if not holds_keys or self.clients() or ctx.options.dragoman_allow_remote:
            return
        exposed = []
        for spec in ctx.options.mode:
            try:
                mode = mode_specs.ProxyMode.parse(spec)
            except ValueError:
                continue
            if not isinstance(mode, EXPOSED_MODES):
                continue
            host = mode.listen_host(ctx.options.listen_host)
            if not is_loopback(host):
                exposed.append(f"{spec} on {host or 'every interface'}")
        if exposed:
            raise exceptions.OptionsError(
                "Dragoman holds upstream keys but has no client keys, and mitmproxy would listen beyond loopback "
                f"({'; '.join(exposed)}): anyone who can reach the port could spend the keys. Bind to loopback "
                "(--listen-host 127.0.0.1), or add client keys (--set dragoman_client_keys=NAME=env:VAR, or a "
                "clients: section in the routes file), or --set dragoman_allow_remote=true if your own "
                "authentication sits in front."
            )

    # -- the hook

    def request(self, flow: http.HTTPFlow) -> None:
        if flow.response is not None or flow.error is not None or flow.is_replay:
            return
        clients = self.clients()
        if not clients or not guarded(flow):
            return
        presented = client_key(flow.request.headers)
        client = identify(presented, clients)
        shape = detect(flow.request.path) or hosts.client_shape(flow)
        if client is None:
            why = "no client key" if not presented else "an unknown client key"
            self._deny(
                flow,
                shape,
                401,
                ErrorKind.AUTHENTICATION,
                f"{why}: send a Dragoman client key as x-api-key or Authorization: Bearer",
            )
            return
        for name in AUTH_HEADERS:
            flow.request.headers.pop(name, None)
        flow.metadata[CLIENT_METADATA_KEY] = client.name
        if client.models or client.routes:
            model, route = self._model_and_route(flow)
            if not allowed(client, model, route):
                self._deny(flow, shape, 403, ErrorKind.PERMISSION, f"client {client.name} may not use model {model!r}")
                return
        logger.debug("flow %s: client %s", flow.id, logsafe(client.name))

    def _model_and_route(self, flow: http.HTTPFlow) -> tuple[str | None, str | None]:
        if flow.request.method != "POST":
            return None, None
        try:
            body = orjson.loads(flow.request.get_content(strict=False) or b"")
        except orjson.JSONDecodeError:
            return None, None
        model = body.get("model") if isinstance(body, dict) else None
        if not isinstance(model, str):
            return None, None
        translate = ctx.master.addons.get("translate")
        router = getattr(getattr(translate, "routing", None), "router", None)
        route = router.route(model) if router is not None else None
        return model, route.match if route is not None else None

    def _deny(self, flow: http.HTTPFlow, shape: Protocol, status: int, kind: ErrorKind, message: str) -> None:
        for name in AUTH_HEADERS:
            flow.request.headers.pop(name, None)
        info = ErrorInfo(kind=kind, message=message, status=status)
        flow.response = http.Response.make(status, error_body(info, shape), {"content-type": "application/json"})
        flow.metadata[CLIENT_METADATA_KEY] = f"denied ({status})"
        logger.warning(
            "flow %s: %s %s refused with %d: %s",
            flow.id,
            logsafe(flow.request.method),
            logsafe(flow.request.path),
            status,
            logsafe(message),
        )
