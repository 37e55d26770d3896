"""The configured keys never reach a client: an upstream that quotes the key it received (``invalid x-api-key
sk-...``) in an error body, a stream event or anything else it answers has that key replaced by ``MASK``
before the answer leaves, whole bodies and streams alike (a key split across stream chunks included), and its
headers (``mask_headers``, ``mask_whole``: a mitmproxy answer's).

Only keys of at least ``MIN_LENGTH`` characters are masked: a shorter "key" would mangle ordinary text.
"""

from __future__ import annotations

from collections.abc import Iterable

from mitmproxy import http

from dragoman.mitm.relay import headers as hdr

MASK = b"[key masked by Dragoman]"
MIN_LENGTH = 8


class KeyMask:
    """The set of secrets to mask; ``mask`` for a whole body, ``stream()`` for a body that arrives in pieces."""

    __slots__ = ("secrets", "tail_bytes", "texts")

    def __init__(self, keys: Iterable[str] = ()) -> None:
        found = {k.encode() for k in keys if k and len(k) >= MIN_LENGTH}
        #: longest first, so a key that contains another is masked whole
        self.secrets: tuple[bytes, ...] = tuple(sorted(found, key=len, reverse=True))
        #: the bytes a piece can end in while ending in the beginning of a key: any other last byte (an SSE
        #: event's newline) holds nothing back, without looking for a partial key at all
        self.tail_bytes = frozenset(b for s in self.secrets for b in s[:-1])
        #: the secrets as text, to look for one in a string without encoding it
        self.texts: tuple[str, ...] = tuple(s.decode("utf-8", "surrogateescape") for s in self.secrets)

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def mask(self, data: bytes) -> bytes:
        for secret in self.secrets:
            if secret in data:
                data = data.replace(secret, MASK)
        return data

    def in_bytes(self, data: bytes) -> bool:
        """Some key occurs in ``data``."""
        return any(secret in data for secret in self.secrets)

    def in_text(self, text: str) -> bool:
        """Some key occurs in ``text``."""
        return any(secret in text for secret in self.texts)

    def mask_text(self, text: str) -> str:
        if not self.in_text(text):
            return text
        return self.mask(text.encode("utf-8", "surrogateescape")).decode("utf-8", "surrogateescape")

    def stream(self) -> StreamMask:
        return StreamMask(self)


class StreamMask:
    """Masks a body fed piece by piece: holds back only a tail that could begin a key (an SSE event ends in a
    blank line, which begins none, so nothing is held back in practice)."""

    __slots__ = ("keys", "held")

    def __init__(self, keys: KeyMask) -> None:
        self.keys = keys
        self.held = b""

    def feed(self, data: bytes) -> bytes:
        if self.held:
            data = self.held + data
            self.held = b""
        keys = self.keys
        data = keys.mask(data)
        if not data or data[-1] not in keys.tail_bytes:
            return data
        hold = max((_partial_tail(data, s) for s in keys.secrets), default=0)
        if hold:
            self.held = data[-hold:]
            data = data[:-hold]
        return data

    def flush(self) -> bytes:
        out, self.held = self.held, b""
        return out


def _partial_tail(data: bytes, secret: bytes) -> int:
    """The length of the longest tail of ``data`` that is a proper prefix of ``secret`` (0: none)."""
    first = secret[:1]
    i = data.find(first, max(0, len(data) - len(secret) + 1))
    while i != -1:
        if secret.startswith(data[i:]):
            return len(data) - i
        i = data.find(first, i + 1)
    return 0


def mask_headers(resp: http.Response, keys: KeyMask) -> None:
    """Response headers quoting a configured key reach the client with the key masked."""
    if not keys:
        return
    fields = resp.headers.fields
    every = b"\n".join(value for _, value in fields)  # one search per key over all the values (no key holds LF)
    if any(secret in every for secret in keys.secrets):
        resp.headers.fields = tuple((name, keys.mask(value)) for name, value in fields)


def mask_whole(flow: http.HTTPFlow, keys: KeyMask) -> None:
    """A whole answer quoting a configured key reaches the client with the key masked."""
    resp = flow.response
    if not keys or resp is None or resp.stream:
        return
    body = hdr.body(resp)
    if body:
        masked = keys.mask(body)
        if masked is not body and masked != body:
            resp.content = masked
