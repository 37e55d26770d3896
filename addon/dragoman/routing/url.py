"""Upstream base URLs in each SDK's convention and the endpoint paths appended to them."""

from __future__ import annotations

import re
from typing import NamedTuple
from urllib.parse import urlsplit

from dragoman.protocols import Protocol


class UpstreamURL(NamedTuple):
    scheme: str
    host: str
    port: int
    path: str  # base path without a trailing slash ("" or "/v1")

    @property
    def origin(self) -> str:
        default = 443 if self.scheme == "https" else 80
        port = "" if self.port == default else f":{self.port}"
        return f"{self.scheme}://{self.host}{port}"


def parse_upstream(spec: str) -> UpstreamURL:
    """``https://api.openai.com/v1`` -> UpstreamURL. Raises ``ValueError`` naming what is wrong."""
    parts = urlsplit(spec.strip())
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"scheme must be http or https, got {parts.scheme or 'none'!r}")
    if not parts.hostname:
        raise ValueError("no host")
    if parts.query or parts.fragment:
        raise ValueError("a base URL has no query string or fragment")
    if parts.username or parts.password:
        raise ValueError("credentials in the URL are not supported; configure a key instead")
    try:
        port = parts.port
    except ValueError as e:
        raise ValueError(f"bad port: {e}") from e
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    return UpstreamURL(parts.scheme, parts.hostname, port, parts.path.rstrip("/"))


def join_endpoint(base: str, endpoint: str) -> str:
    """Append a protocol endpoint to a base path, forgiving a base that already holds (part of) it."""
    if base.endswith(endpoint):
        return base
    if endpoint.startswith("/v1/") and base.endswith("/v1"):
        return base + endpoint[3:]
    return base + endpoint


def gemini_endpoint(base: str, model: str, stream: bool, sse: bool = True) -> str:
    """Gemini's generation path under a base path: ``{base}/v1beta/models/{model}:streamGenerateContent?alt=sse``
    (``sse`` False: without the query, for a client's own query) or ``:generateContent``; a base that already
    ends with an API version (``/v1beta``, ``/v1``) keeps it."""
    method = ("streamGenerateContent" + ("?alt=sse" if sse else "")) if stream else "generateContent"
    version = "" if re.search(r"/v1\w*$", base) else "/v1beta"
    return f"{base}{version}/models/{model.removeprefix('models/')}:{method}"


def default_path(target: Protocol) -> str:
    """The endpoint path used when an upstream has no base URL (the SDKs' default base paths)."""
    if target is Protocol.ANTHROPIC_MESSAGES:
        return target.endpoint
    return "/v1" + target.endpoint
