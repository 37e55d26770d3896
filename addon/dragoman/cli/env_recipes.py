"""``python -m dragoman env``: what a client, or a machine, needs to go through Dragoman.

``env CLIENT``: explicit-proxy mode (default): the proxy URL and the mitmproxy CA for the client's TLS stack;
the client keeps talking to its official host. ``reverse=True``: the base-URL variables instead (no CA needed).

``env --transparent``: the firewall lines that redirect a machine's HTTPS (or, with a gateway interface, the
HTTPS of the devices behind it) to ``mitmdump --mode transparent``, with the owner match that keeps mitmdump's
own connections out of the loop, and the lines that undo them. ``env --wireguard``: the WireGuard client
configuration for ``mitmdump --mode wireguard`` from the keys in mitmproxy's confdir, and how a Linux client
without the kernel module brings it up with wireguard-go. ``tests/interception`` runs exactly these lines.

Pure: the caller passes paths and keys and prints the lines.
"""

from __future__ import annotations

import base64
import json
import logging
import shlex
from collections.abc import Sequence
from typing import NamedTuple

logger = logging.getLogger(__name__)

CA_FILE = "mitmproxy-ca-cert.pem"
DEFAULT_CONFDIR = "~/.mitmproxy"
DEFAULT_PROXY = "http://127.0.0.1:8080"
NO_PROXY = "localhost,127.0.0.1,::1"


class Var(NamedTuple):
    name: str
    value: str | None  # None: unset it
    comment: str = ""


class Recipe(NamedTuple):
    title: str
    proxy: tuple[Var, ...]
    reverse: tuple[Var, ...]
    proxy_notes: tuple[str, ...] = ()
    reverse_notes: tuple[str, ...] = ()


def _recipes(proxy: str, ca: str) -> dict[str, Recipe]:
    no_proxy = Var("NO_PROXY", NO_PROXY, "local servers stay direct")
    return {
        "claude-code": Recipe(
            "Claude Code (native binary on Bun/Node: NODE_EXTRA_CA_CERTS adds the CA)",
            (
                Var("HTTPS_PROXY", proxy),
                Var("NODE_EXTRA_CA_CERTS", ca),
                no_proxy,
                Var("ANTHROPIC_BASE_URL", None, "keep the official host: first-party features stay on"),
                Var("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1", "optional: no telemetry/update traffic"),
            ),
            (
                Var("ANTHROPIC_BASE_URL", proxy),
                Var("ANTHROPIC_API_KEY", "unused", "or your key if Dragoman forwards the client's key"),
            ),
        ),
        "codex": Recipe(
            "Codex CLI with its built-in provider (Rust: SSL_CERT_FILE / CODEX_CA_CERTIFICATE replace the roots)",
            (
                Var("HTTPS_PROXY", proxy),
                Var("SSL_CERT_FILE", ca),
                Var("CODEX_CA_CERTIFICATE", ca),
                no_proxy,
            ),
            (),
            ("the ChatGPT sign-in (chatgpt.com/backend-api/codex) is intercepted the same way",),
            (
                "Codex ignores OPENAI_BASE_URL; put a custom provider in $CODEX_HOME/config.toml:",
                f'  model_provider = "dragoman"  [model_providers.dragoman] base_url = "{proxy}/v1"',
                '  env_key = "OPENAI_API_KEY"  wire_api = "responses"',
            ),
        ),
        "python-sdk": Recipe(
            "Python apps on the anthropic/openai SDKs (httpx reads SSL_CERT_FILE, not REQUESTS_CA_BUNDLE)",
            (
                Var("HTTPS_PROXY", proxy),
                Var("SSL_CERT_FILE", ca),
                no_proxy,
                Var("ANTHROPIC_BASE_URL", None),
                Var("OPENAI_BASE_URL", None),
            ),
            (
                Var("ANTHROPIC_BASE_URL", proxy),
                Var("OPENAI_BASE_URL", proxy + "/v1"),
            ),
            (
                "SSL_CERT_FILE replaces the default roots: with ignore_hosts/allow_hosts, give it certifi's bundle + the CA",
            ),
            (),
        ),
        "node": Recipe(
            "Node.js apps (fetch honours HTTPS_PROXY with NODE_USE_ENV_PROXY=1, Node >= 24)",
            (
                Var("HTTPS_PROXY", proxy),
                Var("NODE_USE_ENV_PROXY", "1"),
                Var("NODE_EXTRA_CA_CERTS", ca),
                no_proxy,
            ),
            (
                Var("ANTHROPIC_BASE_URL", proxy),
                Var("OPENAI_BASE_URL", proxy + "/v1"),
            ),
        ),
        "curl": Recipe(
            "curl",
            (
                Var("https_proxy", proxy),
                Var("HTTPS_PROXY", proxy),
                Var("CURL_CA_BUNDLE", ca),
                no_proxy,
            ),
            (),
            (),
            ("call the proxy directly, e.g. curl " + proxy + "/v1/messages ...",),
        ),
    }


CLIENTS = ("claude-code", "codex", "python-sdk", "node", "curl")


def ca_path(confdir: str = DEFAULT_CONFDIR) -> str:
    """The CA certificate mitmproxy writes into its confdir (``~`` kept as given, expanded by the caller)."""
    return confdir.rstrip("/") + "/" + CA_FILE


def env_lines(
    client: str,
    ca: str,
    proxy: str = DEFAULT_PROXY,
    fmt: str = "sh",
    reverse: bool = False,
) -> list[str]:
    """The lines to paste (``fmt`` ``sh``: export/unset with comments; ``dotenv``: NAME=VALUE only).

    ``ca`` is the CA file's absolute path (no ``~``: a quoted tilde is not expanded by the shell)."""
    recipes = _recipes(proxy.rstrip("/"), ca)
    if client not in recipes:
        raise ValueError(f"unknown client {client!r}; choose one of {', '.join(CLIENTS)}")
    recipe = recipes[client]
    variables: Sequence[Var] = recipe.reverse if reverse else recipe.proxy
    mode = "reverse mode (base URL)" if reverse else "explicit-proxy mode"
    out: list[str] = []
    if fmt == "sh":
        out.append(f"# {recipe.title}; {mode}")
    for var in variables:
        if fmt == "dotenv":
            if var.value is not None:
                out.append(f"{var.name}={var.value}")
            continue
        line = f"unset {var.name}" if var.value is None else f"export {var.name}={shlex.quote(var.value)}"
        out.append(line + (f"  # {var.comment}" if var.comment else ""))
    if fmt == "sh":
        out.extend("# " + n for n in (recipe.reverse_notes if reverse else recipe.proxy_notes))
    return out


# -- interception: transparent and WireGuard modes ------------------------------------------------------------

#: the user mitmdump runs as in transparent mode: the firewall's owner match exempts its connections
PROXY_USER = "mitmproxyuser"
#: decrypt only the LLM API hosts; everything else is tunnelled untouched (the README's recommendation)
#: (every host of ``mitm.hosts.OFFICIAL_HOSTS``: Google's two too, or Gemini clients would be tunnelled to Google)
ALLOW_HOSTS = (
    r"^(api\.anthropic\.com|api\.openai\.com|chatgpt\.com"
    r"|generativelanguage\.googleapis\.com|cloudcode-pa\.googleapis\.com)(:443)?$"
)
TRANSPARENT_PORT = 8080
WG_PORT = 51820
WG_CONF = "wireguard.conf"
NFT_TABLE = "dragoman"
FIREWALLS = ("iptables", "nftables")
#: the tunnel addresses mitmproxy's WireGuard server gives its one client (fixed in mitmproxy)
WG_CLIENT_ADDRESS = "10.0.0.1/32"
WG_DNS = "10.0.0.53"


class Rules(NamedTuple):
    """Firewall lines: ``add`` installs the redirect, ``undo`` removes exactly that again."""

    add: tuple[str, ...]
    undo: tuple[str, ...]


def transparent_rules(
    port: int = TRANSPARENT_PORT, user: str = PROXY_USER, firewall: str = "iptables", gateway: str | None = None
) -> Rules:
    """Redirect TCP port 443 to mitmdump's ``port``: the machine's own connections (``OUTPUT``/``output``),
    except those of ``user`` (mitmdump itself: its connections to the upstream and to passed-through hosts);
    with ``gateway``, also the connections arriving on that interface (``PREROUTING``: devices, VMs,
    containers routed through this machine). IPv4 and IPv6."""
    if firewall not in FIREWALLS:
        raise ValueError(f"unknown firewall {firewall!r}; choose one of {', '.join(FIREWALLS)}")
    add: list[str] = []
    undo: list[str] = []
    if gateway:
        add += [
            "sysctl -w net.ipv4.ip_forward=1",
            "sysctl -w net.ipv6.conf.all.forwarding=1",
            "sysctl -w net.ipv4.conf.all.send_redirects=0",
        ]
    u, g = shlex.quote(user), shlex.quote(gateway or "")
    if firewall == "iptables":
        specs = [f"OUTPUT -p tcp --dport 443 -m owner ! --uid-owner {u} -j REDIRECT --to-port {port}"]
        if gateway:
            specs.append(f"PREROUTING -i {g} -p tcp --dport 443 -j REDIRECT --to-port {port}")
        for tool in ("iptables", "ip6tables"):
            add += [f"{tool} -t nat -A {spec}" for spec in specs]
            undo += [f"{tool} -t nat -D {spec}" for spec in specs]
    else:
        t = f"inet {NFT_TABLE}"
        add += [
            f"nft add table {t}",
            f"nft add chain {t} output '{{ type nat hook output priority -100; }}'",
            f"nft add rule {t} output tcp dport 443 meta skuid != {u} redirect to :{port}",
        ]
        if gateway:
            add += [
                f"nft add chain {t} prerouting '{{ type nat hook prerouting priority -100; }}'",
                f"nft add rule {t} prerouting iifname {g} tcp dport 443 redirect to :{port}",
            ]
        undo.append(f"nft delete table {t}")
    return Rules(tuple(add), tuple(undo))


#: where the machine-local transparent recipe listens: the OUTPUT chain's REDIRECT delivers a connection from
#: this machine to the loopback address of its family, and nothing on the network can reach these
LOOPBACK_HOSTS = ("127.0.0.1", "::1")


def mitmdump_args(mode: str, port: int | None = None, listen: Sequence[str] = ()) -> list[str]:
    """The mitmdump arguments of an interception mode, before the Dragoman options; ``listen``: one server per
    address (``MODE@HOST:PORT``) instead of every interface."""
    if listen:
        args = [a for host in listen for a in ("--mode", f"{mode}@{host}:{port or TRANSPARENT_PORT}")]
    else:
        args = ["--mode", mode if port is None else f"{mode}@{port}"]
    return args + ["--allow-hosts", ALLOW_HOSTS]


def transparent_lines(
    mitmdump: str,
    script: str,
    port: int = TRANSPARENT_PORT,
    user: str = PROXY_USER,
    firewall: str = "iptables",
    gateway: str | None = None,
) -> list[str]:
    """The whole transparent-mode recipe: user, firewall, mitmdump, CA trust, undo (a shell script)."""
    rules = transparent_rules(port, user, firewall, gateway)
    u = shlex.quote(user)
    confdir = f"~{user}/.mitmproxy"
    where = f"this machine and the devices routed through {gateway}" if gateway else "this machine"
    if gateway:
        # the PREROUTING redirect delivers to the address of the interface a device comes in on
        args = mitmdump_args("transparent", None if port == TRANSPARENT_PORT else port)
        binding = [
            f"# mitmdump listens beyond loopback (devices reach it on {gateway}'s address): with upstream keys it",
            "# starts only with client keys (or dragoman_allow_remote=true if your own authentication sits in front)",
        ]
        keys = " --set dragoman_client_keys=devices=env:DRAGOMAN_CLIENT_KEY"
    else:
        args = mitmdump_args("transparent", port, LOOPBACK_HOSTS)
        binding = [
            "# loopback only: the OUTPUT redirect delivers to 127.0.0.1 / ::1, and no other host can reach the port",
            "# (no IPv6 on this machine: drop the ::1 --mode)",
        ]
        keys = ""
    run = [mitmdump, *args, "-s", script]
    out = [
        f"# Transparent mode (Linux, root): HTTPS from {where} goes to mitmdump on port {port}.",
        f"# mitmdump runs as {user}: the owner match keeps its own connections out of the redirect.",
        f"id {u} >/dev/null 2>&1 || useradd --system --create-home {u}",
        f"# {firewall} (`--firewall {'nftables' if firewall == 'iptables' else 'iptables'}` prints the other):",
        *rules.add,
        f"# the proxy ({user} must be able to read mitmdump and Dragoman: not under /root), plus your dragoman options;",
        *binding,
        f"sudo -u {u} -H {shlex.join(run)} \\",
        "  --set dragoman_target=openai-chat --set dragoman_upstream=https://api.example.com/v1 "
        "--set dragoman_api_key=env:UPSTREAM_API_KEY" + keys,
        f"# trust the CA it writes to {confdir}/ (system store; Python SDK apps also need",
        "# SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt, Node apps NODE_EXTRA_CA_CERTS=<the .pem>):",
        f"cp {confdir}/{CA_FILE} /usr/local/share/ca-certificates/mitmproxy.crt && update-ca-certificates",
        "# undo:",
        *rules.undo,
    ]
    return out


def wireguard_keys(conf_text: str) -> tuple[str, str]:
    """(client private key, server public key) from mitmproxy's ``wireguard.conf`` (JSON with ``server_key``
    and ``client_key``, both base64 X25519 private keys). Raises ``ValueError`` when it is not that."""
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding
    from cryptography.hazmat.primitives.serialization import PublicFormat

    try:
        conf = json.loads(conf_text)
        client = str(conf["client_key"])
        server = X25519PrivateKey.from_private_bytes(base64.b64decode(conf["server_key"], validate=True))
        base64.b64decode(client, validate=True)
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"not a mitmproxy WireGuard key file: {e}") from None
    public = server.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return client, base64.b64encode(public).decode()


def wireguard_client_conf(client_private: str, server_public: str, endpoint: str) -> list[str]:
    """The client configuration mitmdump prints at start (the same lines): import it into a WireGuard app or
    save it for ``wg-quick``."""
    return [
        "[Interface]",
        f"PrivateKey = {client_private}",
        f"Address = {WG_CLIENT_ADDRESS}",
        f"DNS = {WG_DNS}",
        "",
        "[Peer]",
        f"PublicKey = {server_public}",
        "AllowedIPs = 0.0.0.0/0",
        f"Endpoint = {endpoint}",
    ]


def wireguard_linux_client(iface: str = "wg0", conf: str = "./dragoman.conf") -> list[str]:
    """Bring the client up on Linux with wireguard-go (no kernel module needed). The endpoint must stay
    reachable outside the tunnel (a more specific route than the default one)."""
    i, c = shlex.quote(iface), shlex.quote(conf)
    return [
        f"WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD=1 wireguard-go -f {i} &",
        f"wg setconf {i} <(wg-quick strip {c})",
        f"ip address add {WG_CLIENT_ADDRESS} dev {i}",
        f"ip link set {i} up",
        f"ip route add default dev {i}",
    ]


def wireguard_lines(
    mitmdump: str, script: str, conf_path: str, client_private: str, server_public: str, endpoint: str
) -> list[str]:
    """The whole WireGuard recipe; every line but the client configuration is a comment, so the output saved
    as ``dragoman.conf`` is a working WireGuard config file."""
    port = endpoint.rpartition(":")[2]
    args = mitmdump_args("wireguard", None if port == str(WG_PORT) else int(port))
    return [
        f"# WireGuard mode: mitmdump is the WireGuard server (UDP {port}); keys from {conf_path}.",
        f"#   {shlex.join([mitmdump, *args, '-s', script])} --set dragoman_...",
        "# Import this client configuration into the WireGuard app of the device (phone, VM, desktop), then trust",
        f"# the CA ({CA_FILE} in the same confdir) on it. Saved as dragoman.conf it also works with wg-quick.",
        *wireguard_client_conf(client_private, server_public, endpoint),
        "# A Linux client without the WireGuard kernel module (userspace wireguard-go), as tests/interception does it:",
        *("#   " + line for line in wireguard_linux_client()),
    ]
