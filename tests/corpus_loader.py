"""Load the real-traffic corpus (tests/corpus) into uniform samples.

* ``*.yaml`` VCR cassettes: one sample per interaction. SSE bodies are ``response.body.string``;
  JSON bodies are YAML ``parsed_body`` (re-serialized to JSON) or a (possibly gzip+base64) string.
* ``*.chunks.txt``: one JSON payload per line; framed as SSE here (``event: <type>`` for Anthropic and
  Responses; Chat gets a final ``data: [DONE]`` because the files omit it).
* ``*.sse``, ``*.sse.txt``: raw SSE bytes. ``*.json``: raw JSON body.
"""

from __future__ import annotations

import csv
import gzip
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

CORPUS = Path(__file__).parent / "corpus"
PROTOCOLS = {"anthropic": "anthropic", "chat": "openai-chat", "responses": "openai-responses", "gemini": "gemini"}


@dataclass(frozen=True)
class Sample:
    name: str  # e.g. "chat/pydantic-ai__stream-plain-text-with-request.yaml#0"
    protocol: str  # "anthropic" | "openai-chat" | "openai-responses"
    stream: bool
    status: int
    body: bytes
    request: dict[str, Any] | None
    provenance: str

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def __repr__(self) -> str:  # short ids in pytest output
        return self.name


@lru_cache(maxsize=1)
def _index() -> dict[str, dict[str, str]]:
    with open(CORPUS / "INDEX.tsv", newline="") as f:
        return {row["local_file"]: row for row in csv.DictReader(f, delimiter="\t")}


def _body_bytes(body: Any) -> bytes:
    if body is None:
        return b""
    if isinstance(body, dict) and "string" in body:
        s = body["string"]
    else:
        s = body
    if isinstance(s, bytes):
        raw = s
    else:
        raw = s.encode("utf-8")
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return raw


def _from_cassette(rel: str, path: Path, prov: str) -> list[Sample]:
    data = yaml.safe_load(path.read_text())
    out = []
    proto = PROTOCOLS[rel.split("/")[0]]
    for i, inter in enumerate(data.get("interactions", [])):
        req = inter.get("request", {})
        resp = inter.get("response", {})
        if "parsed_body" in req:
            request = req["parsed_body"]
        else:
            rb = req.get("body")
            try:
                request = json.loads(rb) if rb else None
            except (TypeError, ValueError):
                request = None
        status = (resp.get("status") or {}).get("code", 200)
        if "parsed_body" in resp:
            body = json.dumps(resp["parsed_body"]).encode()
        else:
            body = _body_bytes(resp.get("body"))
        headers = {k.lower(): v for k, v in (resp.get("headers") or {}).items()}
        ctype = (
            " ".join(headers.get("content-type", [""]))
            if isinstance(headers.get("content-type"), list)
            else str(headers.get("content-type", ""))
        )
        stream = "event-stream" in ctype or body.lstrip().startswith((b"event:", b"data:", b":"))
        out.append(Sample(f"{rel}#{i}", proto, stream, int(status), body, request, prov))
    return out


def _from_chunks(rel: str, path: Path, prov: str) -> Sample:
    proto = PROTOCOLS[rel.split("/")[0]]
    parts = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        if proto in ("openai-chat", "gemini"):
            parts.append(f"data: {line}\n\n")
        else:
            parts.append(f"event: {json.loads(line)['type']}\ndata: {line}\n\n")
    if proto == "openai-chat":
        parts.append("data: [DONE]\n\n")
    return Sample(rel, proto, True, 200, "".join(parts).encode(), None, prov)


@lru_cache(maxsize=1)
def load_all() -> tuple[Sample, ...]:
    out: list[Sample] = []
    for rel, row in sorted(_index().items()):
        path = CORPUS / rel
        prov = row.get("provenance", "")
        proto = PROTOCOLS[rel.split("/")[0]]
        if rel.endswith(".yaml"):
            out.extend(_from_cassette(rel, path, prov))
        elif rel.endswith(".chunks.txt"):
            out.append(_from_chunks(rel, path, prov))
        elif rel.endswith((".sse", ".sse.txt")):
            out.append(Sample(rel, proto, True, 200, path.read_bytes(), None, prov))
        elif rel.endswith(".json"):
            body = path.read_bytes()
            obj = json.loads(body)
            status = 200
            if "error" in obj and obj.get("error") and not obj.get("output") and not obj.get("choices"):
                status = 400
            if obj.get("type") == "error":
                status = 400
            if proto == "gemini" and isinstance(obj.get("error"), dict):
                status = int(obj["error"].get("code", 400))
            out.append(Sample(rel, proto, False, status, body, None, prov))
    return tuple(out)


def samples(protocol: str | None = None, *, stream: bool | None = None, ok: bool | None = None) -> list[Sample]:
    return [
        s
        for s in load_all()
        if (protocol is None or s.protocol == protocol)
        and (stream is None or s.stream == stream)
        and (ok is None or s.ok == ok)
    ]


def requests(protocol: str | None = None) -> list[tuple[str, str, dict[str, Any]]]:
    """(name, protocol, request JSON) for every recorded request body."""
    return [
        (s.name, s.protocol, s.request)
        for s in load_all()
        if isinstance(s.request, dict) and (protocol is None or s.protocol == protocol)
    ]
