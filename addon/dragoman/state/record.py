"""A stored response and the rules around it, sans-I/O: building a record from the ``response.completed``
snapshot, the history a chain of records expands to, who owns a record, and ``input_items`` pages.

A record keeps, per response id: the input items of its own turn (as the client sent them, a string input
as one user message), the response object the client saw (its ``output`` holds reasoning items with their
``encrypted_content``, carried Anthropic signatures included), the id it continued and the ids of every
response before it (oldest first), so a chain of any length is read in one batch. It never holds a key or
a header: ``owner`` is a client key's name, or a digest of the credential the client presented.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from dataclasses import field
from typing import Any

import orjson


@dataclass(slots=True)
class StoredResponse:
    id: str
    owner: str
    #: the upstream that answered (its name in the routes file; "" for the single upstream)
    upstream: str
    created: float
    #: this turn's input items
    input: list[Any]
    #: the response object as the client saw it in ``response.completed`` (or the whole JSON answer)
    response: dict[str, Any]
    previous: str | None = None
    #: the ids before ``previous`` in the chain and ``previous`` itself, oldest first
    chain: list[str] = field(default_factory=list)

    def dumps(self) -> bytes:
        return orjson.dumps(
            {
                "id": self.id,
                "owner": self.owner,
                "upstream": self.upstream,
                "created": self.created,
                "input": self.input,
                "response": self.response,
                "previous": self.previous,
                "chain": self.chain,
            }
        )

    @classmethod
    def loads(cls, data: bytes | str) -> StoredResponse:
        obj = orjson.loads(data)
        return cls(
            id=obj["id"],
            owner=obj["owner"],
            upstream=obj["upstream"],
            created=float(obj["created"]),
            input=list(obj["input"]),
            response=dict(obj["response"]),
            previous=obj.get("previous"),
            chain=list(obj.get("chain") or []),
        )

    @property
    def output(self) -> list[Any]:
        out = self.response.get("output")
        return out if isinstance(out, list) else []


def owner_of(client_name: str, credential: str | None) -> str:
    """Who a stored response belongs to: the client key's name (client keys configured), else a digest of
    the credential the client presented (never the credential), else "" (an open, key-less Dragoman)."""
    if client_name:
        return "client:" + client_name
    if credential:
        return "key:" + hashlib.sha256(credential.encode()).hexdigest()[:32]
    return ""


def input_items(value: Any) -> list[Any]:
    """A request's ``input`` as a list of items (a string is one user message, as the API stores it)."""
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": value}]}]
    if isinstance(value, list):
        return list(value)
    return []


def history(chain: list[StoredResponse]) -> list[Any]:
    """The conversation a chain (oldest first) stands for: each turn's input, then its output items."""
    items: list[Any] = []
    for rec in chain:
        items.extend(rec.input)
        items.extend(rec.output)
    return items


def expand(body: dict[str, Any], chain: list[StoredResponse]) -> dict[str, Any]:
    """The request as if the client had sent the whole history: ``previous_response_id`` removed, the chain's
    items before this request's input. ``instructions`` are not inherited (the API's rule): only the
    request's own count."""
    out = {k: v for k, v in body.items() if k != "previous_response_id"}
    out["input"] = history(chain) + input_items(body.get("input"))
    return out


def snapshot(response: dict[str, Any], previous: str | None, stored: bool = True) -> dict[str, Any]:
    """The response object as stored and served by GET: ``store`` as kept, ``previous_response_id`` echoed."""
    obj = dict(response)
    obj["store"] = stored
    obj["previous_response_id"] = previous
    return obj


def with_ids(rec: StoredResponse) -> list[dict[str, Any]]:
    """The record's input items as ``input_items`` lists them: every item with an id (one minted from the
    response id and its position when the client sent none)."""
    out = []
    for n, item in enumerate(rec.input):
        if isinstance(item, dict):
            if not item.get("id"):
                item = {"id": f"msg_{rec.id[5:] if rec.id.startswith('resp_') else rec.id}_{n}", **item}
            if "type" not in item and "role" in item:
                item = {**item, "type": "message"}
            out.append(item)
    return out


def page(
    items: list[dict[str, Any]], *, after: str | None, before: str | None, limit: int, order: str
) -> dict[str, Any]:
    """One ``input_items`` page in the API's list shape (``order`` ``desc`` by default, as the API does)."""
    seq = list(reversed(items)) if order == "desc" else list(items)
    ids = [str(i.get("id")) for i in seq]
    start, end = 0, len(seq)
    if after is not None and after in ids:
        start = ids.index(after) + 1
    if before is not None and before in ids:
        end = ids.index(before)
    window = seq[start:end]
    data = window[:limit]
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": len(window) > limit,
    }
