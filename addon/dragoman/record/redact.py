"""Redaction: secrets never reach a recording.

* headers named in ``SECRET_HEADERS`` or in the user's list are replaced by ``REDACTED``;
* JSON body fields named in the user's list (a bare name matches at any depth, a dotted path from the
  top) are replaced by ``REDACTED``;
* query parameters named in ``SECRET_QUERY`` or in the user's list are replaced by ``REDACTED``;
* every secret VALUE seen in a redacted header (the key behind ``Bearer``, a cookie) is then scrubbed
  wherever else it appears: in bodies with a same-length mask (so recorded chunk offsets stay valid),
  in the final text with ``REDACTED``.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl
from urllib.parse import urlencode
from urllib.parse import urlsplit
from urllib.parse import urlunsplit

logger = logging.getLogger(__name__)

REDACTED = "[REDACTED]"
SECRET_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "x-goog-api-key",
        "cookie",
        "set-cookie",
    }
)
SECRET_QUERY = frozenset({"key", "api_key", "api-key", "access_token"})
#: shorter values are not scrubbed elsewhere (they would match ordinary text)
MIN_SECRET_LEN = 8
MASK = "*"


class Redactor:
    """Redacts one exchange; collects the secret values it saw so they can be scrubbed everywhere."""

    __slots__ = ("_fields", "_paths", "_headers", "secrets")

    def __init__(self, names: Iterable[str] = ()) -> None:
        names = [n.strip() for n in names if n and n.strip()]
        self._headers = SECRET_HEADERS | {n.lower() for n in names if "." not in n}
        self._fields = {n.lower() for n in names if "." not in n}
        self._paths = [n.split(".") for n in names if "." in n]
        self.secrets: set[str] = set()

    def _remember(self, value: str) -> None:
        value = value.strip()
        for piece in [value, *re.split(r"[\s;,=]+", value)]:
            piece = piece.strip()
            if len(piece) >= MIN_SECRET_LEN and piece.lower() not in ("bearer", "basic"):
                self.secrets.add(piece)

    def headers(self, headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        out = []
        for k, v in headers:
            if k.lower() in self._headers:
                self._remember(v)
                out.append((k, REDACTED))
            else:
                out.append((k, v))
        return out

    def url(self, url: str) -> str:
        parts = urlsplit(url)
        if not parts.query:
            return url
        q = []
        changed = False
        for k, v in parse_qsl(parts.query, keep_blank_values=True):
            if k.lower() in SECRET_QUERY or k.lower() in self._fields:
                self._remember(v)
                q.append((k, REDACTED))
                changed = True
            else:
                q.append((k, v))
        if not changed:
            return url
        return urlunsplit(parts._replace(query=urlencode(q, safe="[]")))

    def json(self, obj: Any) -> Any:
        """``obj`` with the named fields replaced (a copy where something changed)."""
        if not self._fields and not self._paths:
            return obj
        for path in self._paths:
            obj = _replace_path(obj, path)
        if self._fields:
            obj = self._replace_names(obj)
        return obj

    def _replace_names(self, obj: Any) -> Any:
        if isinstance(obj, dict):
            out = {}
            for k, v in obj.items():
                if isinstance(k, str) and k.lower() in self._fields:
                    out[k] = REDACTED
                else:
                    out[k] = self._replace_names(v)
            return out
        if isinstance(obj, list):
            return [self._replace_names(v) for v in obj]
        return obj

    def body_bytes(self, data: bytes) -> bytes:
        """Mask known secret values in raw bytes with a same-length mask (chunk offsets stay valid)."""
        for s in self.secrets:
            b = s.encode("utf-8")
            if b in data:
                data = data.replace(b, MASK.encode() * len(b))
        return data

    def text(self, text: str) -> str:
        """Final pass over the serialized recording: no secret value survives, JSON-escaped or not."""
        for s in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(s, REDACTED)
            escaped = json.dumps(s)[1:-1]
            if escaped != s:
                text = text.replace(escaped, REDACTED)
        return text


def _replace_path(obj: Any, path: list[str]) -> Any:
    if not isinstance(obj, dict) or path[0] not in obj:
        return obj
    out = dict(obj)
    if len(path) == 1:
        out[path[0]] = REDACTED
    else:
        out[path[0]] = _replace_path(out[path[0]], path[1:])
    return out
