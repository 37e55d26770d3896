"""``python -m dragoman env``: the lines that route a client through Dragoman, or the transparent/WireGuard
recipe (``dragoman.cli.env_recipes`` holds the text)."""

from __future__ import annotations

import argparse
import shutil
import socket
import sys
from pathlib import Path

from dragoman.cli.common import entry_script


def local_ip() -> str | None:
    """This machine's address on its default route (no packet is sent), as mitmproxy guesses it."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))
            return str(s.getsockname()[0])
    except OSError:
        return None


def _cmd_env_intercept(args: argparse.Namespace) -> int:
    from dragoman.cli import env_recipes as env

    local = Path(sys.executable).parent / "mitmdump"
    script, mitmdump = str(entry_script()), str(local) if local.is_file() else shutil.which("mitmdump") or "mitmdump"
    if args.transparent:
        for line in env.transparent_lines(mitmdump, script, args.port, args.user, args.firewall, args.gateway):
            print(line)
        return 0
    conf = Path(args.confdir).expanduser() / env.WG_CONF
    try:
        client, server = env.wireguard_keys(conf.read_text())
    except (OSError, ValueError) as e:
        print(
            f"dragoman env --wireguard: cannot read the keys in {conf} ({e}); start `mitmdump --mode wireguard` "
            "once with this confdir to create them",
            file=sys.stderr,
        )
        return 1
    endpoint = args.endpoint or f"{local_ip() or 'THIS-MACHINE'}:{env.WG_PORT}"
    for line in env.wireguard_lines(mitmdump, script, str(conf), client, server, endpoint):
        print(line)
    return 0


def _cmd_env(args: argparse.Namespace, extra: list[str]) -> int:
    from dragoman.cli import env_recipes as env

    if extra:
        raise SystemExit(f"dragoman env: unexpected arguments {' '.join(extra)}")
    if args.transparent or args.wireguard:
        if args.client:
            raise SystemExit("dragoman env: give a CLIENT or --transparent/--wireguard, not both")
        return _cmd_env_intercept(args)
    if not args.client:
        raise SystemExit(f"dragoman env: give a CLIENT ({', '.join(env.CLIENTS)}) or --transparent or --wireguard")
    ca = Path(env.ca_path(args.confdir)).expanduser().resolve()
    for line in env.env_lines(args.client, str(ca), args.proxy, args.format, args.reverse):
        print(line)
    if not args.reverse and not ca.is_file():
        print(
            f"note: {ca} does not exist yet: start mitmdump once (with the same confdir) to create the CA",
            file=sys.stderr,
        )
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    from dragoman.cli.env_recipes import CLIENTS
    from dragoman.cli.env_recipes import DEFAULT_CONFDIR
    from dragoman.cli.env_recipes import DEFAULT_PROXY

    envp = sub.add_parser(
        "env",
        help="print the environment lines that route a client through Dragoman, or the transparent/WireGuard recipe",
    )
    envp.add_argument("client", nargs="?", choices=CLIENTS)
    mode = envp.add_mutually_exclusive_group()
    mode.add_argument("--transparent", action="store_true", help="the transparent-mode recipe (firewall lines)")
    mode.add_argument("--wireguard", action="store_true", help="the WireGuard client config from the confdir's keys")
    envp.add_argument("--port", type=int, default=8080, help="--transparent: mitmdump's port (default 8080)")
    envp.add_argument("--user", default="mitmproxyuser", help="--transparent: the user mitmdump runs as")
    envp.add_argument("--firewall", choices=("iptables", "nftables"), default="iptables", help="--transparent")
    envp.add_argument("--gateway", metavar="IFACE", help="--transparent: also redirect devices routed via IFACE")
    envp.add_argument("--endpoint", metavar="HOST:PORT", help="--wireguard: where clients reach mitmdump")
    envp.add_argument("--proxy", default=DEFAULT_PROXY, help=f"the proxy's URL (default {DEFAULT_PROXY})")
    envp.add_argument(
        "--confdir", default=DEFAULT_CONFDIR, help=f"mitmproxy's confdir holding the CA (default {DEFAULT_CONFDIR})"
    )
    envp.add_argument("--format", choices=("sh", "dotenv"), default="sh", help="sh (export lines) or dotenv")
    envp.add_argument("--reverse", action="store_true", help="reverse mode: base-URL variables, no CA")
    envp.set_defaults(func=_cmd_env)
