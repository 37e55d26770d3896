"""``DirectGuard``: in transparent mode, a connection that was not redirected is never an API flow.

Transparent mode learns where a connection was headed from the firewall (the original destination of a
REDIRECT). A host that reaches the proxy's port directly - or any other address of this machine, which the
gateway recipe's PREROUTING rule redirects too - has the proxy itself as its destination: no API host was
ever involved, and the TLS SNI or Host header naming ``api.anthropic.com`` is only the client's word
(with the flow rerouted to the configured upstream, the named host is never contacted, so no certificate
vouches for it). Such a connection is marked in ``requestheaders`` (``hosts.DIRECT_KEY``: ``hosts`` then
takes its destination for the address it is, never for the name), and a request on it that names an
official host or an API endpoint is answered 421 (Misdirected Request) in the client's protocol, with a log
line saying why; nothing is sent upstream. Other requests on it pass as before (mitmproxy's own rules).

"This machine" is: a loopback address, or an address this host can bind (checked with a socket bind; when
the kernel lets any address bind, ``ip_nonlocal_bind``, loopback only). mitmproxy reports the original
destination as the connection's socket address too, so the proxy's own listening address is not compared.

WireGuard and local modes are not checked here: there the client's destination is the address it dialled
through the tunnel / the OS redirector (mitmproxy reports it as the socket address), no TCP port is open to
the network, and only holders of the WireGuard peer key (or processes on this machine) get in.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from functools import cache

from mitmproxy import ctx
from mitmproxy import http
from mitmproxy.proxy import mode_specs
from mitmproxy.proxy import server_hooks

from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.logsafe import logsafe
from dragoman.mitm import hosts
from dragoman.protocols import Protocol
from dragoman.protocols import detect
from dragoman.translate.response import error_body

logger = logging.getLogger(__name__)

#: the status of the answer: the request was directed at a server (the proxy) that does not serve that host
MISDIRECTED = 421
_PROBE = ("192.0.2.1", "2001:db8::1")  # documentation addresses: no host has them


def _address(addr: object) -> tuple[str, int] | None:
    """``(ip, port)`` of a socket address, an IPv4-mapped IPv6 address as IPv4; None when there is none."""
    if not isinstance(addr, tuple) or len(addr) < 2:
        return None
    host, port = str(addr[0]).strip("[]"), addr[1]
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return str(ip), int(port)


def _bindable(ip: str) -> bool:
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.bind((ip, 0))
    except OSError:
        return False
    return True


@cache
def _bind_tells() -> bool:
    """Binding tells local addresses apart (not when the kernel allows non-local binds)."""
    return not any(_bindable(p) for p in _PROBE)


def is_local_address(ip: str) -> bool:
    """``ip`` belongs to this machine (loopback, or bindable here)."""
    if ipaddress.ip_address(ip).is_loopback:
        return True
    return _bind_tells() and _bindable(ip)


def _transparent_ports() -> set[int]:
    ports: set[int] = set()
    for spec in ctx.options.mode:
        try:
            mode = mode_specs.ProxyMode.parse(spec)
        except ValueError:
            continue
        if isinstance(mode, mode_specs.TransparentMode):
            port = mode.listen_port(ctx.options.listen_port)
            if port is not None:
                ports.add(port)
    return ports


def original_destination(flow: http.HTTPFlow) -> tuple[str, int] | None:
    """Where the client's connection was headed (transparent mode: the firewall's original destination)."""
    return _address(flow.server_conn.address) or _address((flow.request.host, flow.request.port))


def headed_here(flow: http.HTTPFlow) -> str | None:
    """In transparent mode, the ``ip:port`` the connection was headed to when that is this machine, else None."""
    if not isinstance(flow.client_conn.proxy_mode, mode_specs.TransparentMode):
        return None
    dest = original_destination(flow)
    if dest is not None and is_local_address(dest[0]):
        return f"{dest[0]}:{dest[1]}"
    return None


def names_api(flow: http.HTTPFlow) -> str | None:
    """The official host (SNI or Host header) or API endpoint a request names, if any."""
    sni = (flow.client_conn.sni or "").lower().rstrip(".")
    if sni in hosts.OFFICIAL_HOSTS:
        return sni
    header = (flow.request.host_header or "").rsplit(":", 1)[0].lower().rstrip(".")
    if header in hosts.OFFICIAL_HOSTS:
        return header
    if detect(flow.request.path) is not None:
        return hosts.bare_path(flow.request.path)
    return None


class DirectGuard:
    """Listed before every other Dragoman addon (see the module docstring)."""

    def server_connect(self, data: server_hooks.ServerConnectionHookData) -> None:
        """mitmproxy refuses to connect to its own port on loopback or its listen host only: a connection
        straight to the port on another address of this machine would make it connect to itself, again and
        again (``connection_strategy=eager`` dials before the client's first request). Refused here too."""
        if data.server.error or not isinstance(data.client.proxy_mode, mode_specs.TransparentMode):
            return
        dest = _address(data.server.address)
        if dest is None or dest[1] not in _transparent_ports():
            return
        if is_local_address(dest[0]):
            data.server.error = (
                f"{dest[0]}:{dest[1]} is this proxy's own port: a connection straight to it, not a redirected one"
            )
            logger.warning(
                "connection from %s straight to the proxy's own port %s:%d: not connecting to itself",
                logsafe(str(data.client.peername)),
                dest[0],
                dest[1],
            )

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        here = headed_here(flow)
        if here is not None:
            flow.metadata[hosts.DIRECT_KEY] = here

    def request(self, flow: http.HTTPFlow) -> None:
        here = flow.metadata.get(hosts.DIRECT_KEY)
        if here is None or flow.response is not None or flow.error is not None:
            return
        named = names_api(flow)
        if named is None:
            return
        shape = detect(flow.request.path) or (
            Protocol.ANTHROPIC_MESSAGES if named in hosts.ANTHROPIC_HOSTS else hosts.client_shape(flow)
        )
        message = (
            f"this connection went straight to the proxy's own address ({here}), not to {named} through the "
            "firewall's redirect: Dragoman's transparent mode serves only redirected connections"
        )
        info = ErrorInfo(kind=ErrorKind.PERMISSION, message=message, status=MISDIRECTED)
        flow.response = http.Response.make(MISDIRECTED, error_body(info, shape), {"content-type": "application/json"})
        logger.warning(
            "flow %s: %s %s refused with %d: a connection straight to the proxy's own address %s (client %s) "
            "named %s; transparent mode serves only redirected connections, nothing was sent upstream",
            flow.id,
            logsafe(flow.request.method),
            logsafe(flow.request.path),
            MISDIRECTED,
            here,
            logsafe(str(flow.client_conn.peername)),
            logsafe(named),
        )
