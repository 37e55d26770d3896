"""Header reads and edits in one scan of a mitmproxy ``Headers``' fields (issue 31: short requests).

mitmproxy's ``Headers`` is a ``MutableMapping`` over a tuple of ``(name, value)`` bytes pairs: each ``get``,
``in``, ``pop`` or ``[]=`` walks every field through several layers (``_kconv`` lower-cases each name, values are
converted and joined), 3-4 µs per call on a request of seven headers. A short flow did about 40 of them in
Dragoman's hooks. The functions here read ``fields`` directly (names compared lower-cased as bytes, values
decoded as mitmproxy decodes them) and apply several removals and settings in one pass, so a flow's header work
is one or two scans. Same results as mitmproxy's own accessors: a repeated header reads as its values joined
with ``", "``; a set header replaces every field of that name at the first one's place (appended when absent).
"""

from __future__ import annotations

from collections.abc import Container
from collections.abc import Iterable

from mitmproxy import http


def _text(value: bytes) -> str:
    return value.decode("utf-8", "surrogateescape")


def _index(headers: http.Headers) -> dict[bytes, bytes | tuple[bytes, ...]]:
    """The header values by lower-case name (a repeated header's as a tuple), built once per ``fields`` tuple and
    kept on the ``Headers`` itself: every change to a mitmproxy ``Headers`` assigns a new ``fields`` tuple (tuples
    never change), so an index whose tuple is the current one is current. A flow's hooks read its request headers
    about ten times (the gate, CORS, client keys, endpoints, Translate): one scan instead of ten (issue 31). The
    index holds bytes only (tuples for repeats), so the cyclic collector does not track it: it adds nothing to
    what a young-generation collection walks when the flow is freed."""
    fields = headers.fields
    d = headers.__dict__
    if d.get("_dragoman_fields") is fields:
        return d["_dragoman_index"]
    index: dict[bytes, bytes | tuple[bytes, ...]] = {}
    for k, v in fields:
        low = k.lower()
        had = index.get(low)
        if had is None:
            index[low] = v
        elif isinstance(had, tuple):
            index[low] = (*had, v)
        else:
            index[low] = (had, v)
    d["_dragoman_fields"], d["_dragoman_index"] = fields, index
    return index


def get(headers: http.Headers, name: bytes, default: str | None = None) -> str | None:
    """The value of header ``name`` (lower case), its values joined with ``", "`` when repeated; ``default``
    when absent (as ``headers.get(name, default)``)."""
    found = _index(headers).get(name)
    if found is None:
        return default
    if isinstance(found, bytes):
        return _text(found)
    return ", ".join(_text(v) for v in found)


def has(headers: http.Headers, name: bytes) -> bool:
    """``name`` (lower case) is among the headers."""
    return name in _index(headers)


def body(message: http.Message) -> bytes:
    """``message.get_content(strict=False) or b""``: the raw body when no ``content-encoding`` applies (one scan
    instead of mitmproxy's lookup), else mitmproxy's decoding (the raw body when it cannot decode)."""
    raw = message.raw_content
    if not raw:
        return b""
    if has(message.headers, b"content-encoding"):
        return message.get_content(strict=False) or b""
    return raw


def set_body(message: http.Message, body: bytes) -> None:
    """``message.content = body`` (the length set, unless a ``transfer-encoding`` frames it), without
    mitmproxy's three header lookups; a message with a ``content-encoding`` is left to mitmproxy (it encodes)."""
    names = {k.lower() for k, _ in message.headers.fields}
    if b"content-encoding" in names:
        message.content = body
        return
    message.raw_content = body
    if b"transfer-encoding" not in names:
        edit(message.headers, put=[(b"content-length", str(len(body)))])


def replace(headers: http.Headers, name: bytes, value: str) -> None:
    """Set header ``name`` (lower case) only where it is present (every field of that name gets ``value``)."""
    new = value.encode("utf-8", "surrogateescape")
    fields = headers.fields
    out = tuple((k, new) if k.lower() == name else (k, v) for k, v in fields)
    if out != fields:
        headers.fields = out


def edit(headers: http.Headers, drop: Container[bytes] = (), put: Iterable[tuple[bytes, str]] = ()) -> None:
    """Remove every field whose lower-case name is in ``drop`` and set each ``(name, value)`` of ``put`` (lower
    case names; a name in both is set), in one pass over the fields; ``fields`` is assigned only on a change."""
    puts = {n: v.encode("utf-8", "surrogateescape") for n, v in put}
    placed: set[bytes] = set()
    fields = headers.fields
    out: list[tuple[bytes, bytes]] = []
    for k, v in fields:
        low = k.lower()
        if low in puts:
            if low not in placed:
                placed.add(low)
                out.append((k, puts[low]))
            continue
        if low not in drop:
            out.append((k, v))
    for n, v in puts.items():
        if n not in placed:
            out.append((n, v))
    new = tuple(out)
    if new != fields:
        headers.fields = new
