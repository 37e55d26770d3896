"""``Exchange``: one recorded request/response pair, as written to ``DIR/<session>/NNN-<slug>.json``.

Readable and diffable: request bodies that are JSON are stored parsed (``Body.json``); response bodies are
stored byte-exact as text (``Body.text``, or ``Body.b64`` when not UTF-8). The upstream body keeps its
original chunk boundaries and arrival times in ``HttpResponse.chunks``: ``[offset, seconds]`` pairs, the
byte offset where each chunk starts in the body and when it arrived, counted from the response headers.
"""

from __future__ import annotations

import base64
import json
import logging
import re
from typing import Any

from pydantic import BaseModel
from pydantic import ConfigDict
from pydantic import Field

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1

_SCALAR = r'("(?:[^"\\]|\\.)*"|-?[0-9][0-9.eE+-]*)'
#: a two-element list of scalars spread over four lines by ``indent=2``
_PAIR = re.compile(r"\[\n\s*" + _SCALAR + r",\n\s*" + _SCALAR + r"\n\s*\]")

#: a header list keeps order and repeated names: ``[["content-type", "application/json"], ...]``
HeaderList = list[tuple[str, str]]


#: a JSON body nested deeper than this is kept as text (pydantic's serializer stops at 255 levels)
JSON_DEPTH_LIMIT = 200


def _depth_within(obj: Any, limit: int) -> bool:
    """Whether ``obj`` nests at most ``limit`` containers deep (iterative: no recursion limit of its own)."""
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return False
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node if isinstance(v, (dict, list)))
    return True


class Body(BaseModel):
    """A body as JSON (parsed, for requests), text (byte-exact UTF-8) or base64 (anything else)."""

    model_config = ConfigDict(extra="forbid")

    json_: Any = Field(default=None, alias="json")
    text: str | None = None
    b64: str | None = None

    @classmethod
    def of(cls, data: bytes | None, parse_json: bool = False) -> Body:
        if not data:
            return cls(text="")
        if parse_json:
            try:
                obj = json.loads(data)
            except (ValueError, RecursionError):
                obj = None
            if obj is not None and _depth_within(obj, JSON_DEPTH_LIMIT):
                return cls(json=obj)
        try:
            return cls(text=data.decode("utf-8"))
        except UnicodeDecodeError:
            return cls(b64=base64.b64encode(data).decode("ascii"))

    def raw(self) -> bytes:
        """The bytes (a JSON body is re-serialized compactly, so not byte-exact)."""
        if self.b64 is not None:
            return base64.b64decode(self.b64)
        if self.text is not None:
            return self.text.encode("utf-8")
        if self.json_ is not None:
            return json.dumps(self.json_, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        return b""

    def parsed(self) -> Any:
        """The body as JSON, or None when it is not JSON."""
        if self.json_ is not None:
            return self.json_
        try:
            obj = json.loads(self.raw())
        except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
            return None
        return obj if _depth_within(obj, JSON_DEPTH_LIMIT) else None  # kept as text (``of``)


class HttpRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    method: str = "POST"
    url: str = ""
    http_version: str = "HTTP/1.1"
    headers: HeaderList = Field(default_factory=list)
    body: Body = Field(default_factory=Body)

    def header(self, name: str) -> str | None:
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return None


class HttpResponse(BaseModel):
    model_config = ConfigDict(extra="allow")

    status: int
    reason: str = ""
    http_version: str = "HTTP/1.1"
    headers: HeaderList = Field(default_factory=list)
    body: Body = Field(default_factory=Body)
    #: seconds from the request being sent to the response headers (upstream side only)
    headers_delay: float = 0.0
    #: streamed bodies: ``[byte offset where the chunk starts, seconds after the headers]`` per chunk
    chunks: list[tuple[int, float]] | None = None
    #: the body ended early (connection lost): replay closes the connection the same way
    truncated: bool = False

    def header(self, name: str) -> str | None:
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return None

    def chunk_bytes(self) -> list[tuple[bytes, float]]:
        """The body split at the recorded chunk boundaries, with arrival times."""
        data = self.body.raw()
        if not self.chunks:
            return [(data, 0.0)] if data else []
        out = []
        for i, (start, t) in enumerate(self.chunks):
            end = self.chunks[i + 1][0] if i + 1 < len(self.chunks) else len(data)
            out.append((data[start:end], t))
        return out


class Exchange(BaseModel):
    """One client request, the request sent upstream, the upstream response and the client's response."""

    model_config = ConfigDict(extra="allow")

    schema_version: int = SCHEMA_VERSION
    seq: int = 0
    started: str = ""  # ISO 8601, UTC
    flow_id: str | None = None
    #: protocols: the client's, and the upstream's (equal when passed through)
    client_protocol: str | None = None
    upstream_protocol: str | None = None
    client_model: str | None = None
    upstream_model: str | None = None
    stream: bool = False
    #: names of fields not carried to the other protocol (never values)
    dropped: list[str] = Field(default_factory=list)
    #: the lossiness report (``ir.lossy``): ``{"path", "kind", "reason"}`` per entry; absent when empty
    lossy: list[dict[str, str]] | None = None
    client_request: HttpRequest
    upstream_request: HttpRequest | None = None
    upstream_response: HttpResponse | None = None
    client_response: HttpResponse | None = None
    #: the flow's error (connection refused, upstream died mid-stream), if any
    error: str | None = None
    #: routes file (``dragoman_config``): the route that matched (its ``match``), the upstream that answered
    #: and every attempt made, in order (upstream, model, key index, status, error class, seconds; never a key)
    route: str | None = None
    upstream: str | None = None
    attempts: list[dict[str, Any]] | None = None
    #: the client key's name (``dragoman_client_keys``), never the key
    client_name: str | None = None
    #: where a constructed recording comes from (repository, path, commit, license) and how it was built
    source: dict[str, Any] | None = None
    note: str | None = None

    def to_json(self) -> str:
        """Indented JSON; header pairs and chunk pairs each on one line (readable, one diff line each)."""
        text = self.model_dump_json(indent=2, by_alias=True, exclude_none=True)
        return _PAIR.sub(r"[\1, \2]", text) + "\n"

    @classmethod
    def from_json(cls, data: str | bytes) -> Exchange:
        return cls.model_validate_json(data)
