"""``python -m dragoman env CLIENT``: the environment a client needs to go through Dragoman.

Explicit-proxy mode (default): the proxy URL and the mitmproxy CA for the client's TLS stack; the client
keeps talking to its official host. ``reverse=True``: the base-URL variables instead (no CA needed).
Pure: the caller passes the CA path (``<confdir>/mitmproxy-ca-cert.pem``) and prints the lines.
"""

from __future__ import annotations

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
