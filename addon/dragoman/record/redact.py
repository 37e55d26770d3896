"""Redaction: secrets never reach a recording.

What counts as a credential is ONE list, in ``dragoman.record.secret_names`` (read its docstring):

* headers with a credential's name (``authorization``, ``x-api-key``, ``x-goog-api-key``, ``cookie``,
  ``x-auth-token``...) or in the user's list (``dragoman_redact``) are replaced by ``REDACTED``;
* query parameters with a credential's name (``key``, ``token``, ``api_key``, ``access_token``, ``sig``...)
  or in the user's list are replaced by ``REDACTED``;
* JSON body fields with a credential's name (``api_key``, ``password``, ``client_secret``,
  ``access_token``, ``*_api_key``...) whose value is a string or a number are replaced by ``REDACTED``, at
  any depth; ``max_tokens``, ``input_tokens``, ``prompt_cache_key``, a logprobs ``token``, a thinking
  ``signature`` and tool schemas are not touched. The user's names (a bare name matches at any depth, a
  dotted path from the top) replace any value;
* every secret VALUE seen in a redacted place (the key behind ``Bearer``, a cookie, a password field), and
  every key Dragoman holds (``add_secrets``: configured upstream keys, client keys), is then scrubbed wherever
  else it appears, whole and streamed bodies through the same ``StreamMask``: in bodies with a same-length mask (so recorded chunk offsets stay
  valid; ``StreamMask`` does it chunk by chunk for a body written as it streams), in the final text with
  ``REDACTED``.
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

from dragoman.record.secret_names import is_credential
from dragoman.record.secret_names import is_secret_header
from dragoman.record.secret_names import is_secret_query

logger = logging.getLogger(__name__)

REDACTED = "[REDACTED]"
#: shorter values are not scrubbed elsewhere (they would match ordinary text)
MIN_SECRET_LEN = 8
MASK = "*"
#: fields are looked for this many levels deep at most (a hostile request may nest thousands of levels)
MAX_DEPTH = 256


class Redactor:
    """Redacts one exchange; collects the secret values it saw so they can be scrubbed everywhere."""

    __slots__ = ("_fields", "_paths", "_headers", "secrets")

    def __init__(self, names: Iterable[str] = ()) -> None:
        names = [n.strip() for n in names if n and n.strip()]
        self._headers = {n.lower() for n in names if "." not in n}
        self._fields = {n.lower() for n in names if "." not in n}
        self._paths = [n.split(".") for n in names if "." in n]
        self.secrets: set[str] = set()

    def add_secrets(self, values: Iterable[str]) -> None:
        """Values to mask wherever they appear even though no redacted place showed them (the configured keys:
        a relayed request leaves without them, and an upstream may quote one in an error body)."""
        for value in values:
            if len(value) >= MIN_SECRET_LEN:
                self.secrets.add(value)

    def _remember(self, value: str) -> None:
        value = value.strip()
        for piece in [value, *re.split(r"[\s;,=]+", value)]:
            piece = piece.strip()
            if len(piece) >= MIN_SECRET_LEN and piece.lower() not in ("bearer", "basic"):
                self.secrets.add(piece)

    def headers(self, headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        out = []
        for k, v in headers:
            if k.lower() in self._headers or is_secret_header(k):
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
            if k.lower() in self._fields or is_secret_query(k):
                self._remember(v)
                q.append((k, REDACTED))
                changed = True
            else:
                q.append((k, v))
        if not changed:
            return url
        return urlunsplit(parts._replace(query=urlencode(q, safe="[]")))

    def json(self, obj: Any) -> Any:
        """``obj`` with credential fields and the user's named fields replaced (a copy where something
        changed; ``obj`` itself when nothing did)."""
        for path in self._paths:
            obj = _replace_path(obj, path)
        return self._replace_names(obj, 0)

    def _secret_field(self, key: Any, value: Any) -> bool:
        if not isinstance(key, str):
            return False
        if key.lower() in self._fields:
            return True
        scalar = isinstance(value, (str, int, float)) and not isinstance(value, bool)
        return scalar and value != "" and value != REDACTED and is_credential(key)

    def _replace_names(self, obj: Any, depth: int) -> Any:
        if depth > MAX_DEPTH:
            return obj  # a body this deep is recorded as text (``Body.of``); its known secrets are masked there
        if isinstance(obj, dict):
            out, changed = {}, False
            for k, v in obj.items():
                if self._secret_field(k, v):
                    if isinstance(v, str):
                        self._remember(v)
                    out[k], changed = REDACTED, changed or v != REDACTED
                else:
                    out[k] = self._replace_names(v, depth + 1)
                    changed = changed or out[k] is not v
            return out if changed else obj
        if isinstance(obj, list):
            items = [self._replace_names(v, depth + 1) for v in obj]
            return items if any(a is not b for a, b in zip(items, obj, strict=True)) else obj
        return obj

    def mask(self) -> StreamMask:
        """A same-length mask for one body written chunk by chunk (secrets split across chunks included)."""
        return StreamMask(self.secrets)

    def body_bytes(self, data: bytes) -> bytes:
        """Mask known secret values in a whole body with a same-length mask (chunk offsets stay valid): the
        streamed bodies' code path (``mask``), fed the body in one piece."""
        masker = self.mask()
        return masker.feed(data) + masker.flush()

    def text(self, text: str) -> str:
        """Final pass over the serialized recording: no secret value survives, JSON-escaped or not."""
        for s in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(s, REDACTED)
            escaped = json.dumps(s)[1:-1]
            if escaped != s:
                text = text.replace(escaped, REDACTED)
        return text


class StreamMask:
    """``feed(chunk)`` -> the masked bytes that are final so far; ``flush()`` -> the rest. The output, joined,
    equals ``Redactor.body_bytes`` of the joined input (same length: recorded chunk offsets stay valid); up to
    the longest secret's length minus one byte is held back between calls, in case a secret spans chunks."""

    __slots__ = ("_secrets", "_keep", "_held")

    def __init__(self, secrets: Iterable[str]) -> None:
        self._secrets = sorted({s.encode("utf-8") for s in secrets}, key=len, reverse=True)
        self._keep = max((len(s) for s in self._secrets), default=1) - 1
        self._held = b""

    def _masked(self, data: bytes) -> bytes:
        for s in self._secrets:
            if s in data:
                data = data.replace(s, MASK.encode() * len(s))
        return data

    def feed(self, data: bytes) -> bytes:
        if not self._secrets:
            return data
        buf = self._masked(self._held + data)
        cut = max(0, len(buf) - self._keep)
        self._held = buf[cut:]
        return buf[:cut]

    def flush(self) -> bytes:
        out, self._held = self._held, b""
        return out


def _replace_path(obj: Any, path: list[str]) -> Any:
    if not isinstance(obj, dict) or path[0] not in obj:
        return obj
    out = dict(obj)
    if len(path) == 1:
        out[path[0]] = REDACTED
    else:
        out[path[0]] = _replace_path(out[path[0]], path[1:])
    return out
