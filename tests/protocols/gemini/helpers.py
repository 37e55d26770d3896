"""Helpers for the Gemini codec tests: the corpus files, the CLI captures, a stream decoder run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dragoman.ir.events import StreamError
from dragoman.protocols.base import Context
from dragoman.protocols.gemini import CODEC
from dragoman.sse import SSEDecoder

CORPUS = Path(__file__).resolve().parents[2] / "corpus" / "gemini"
#: Gemini CLI 0.61.0's requests, captured offline (see the README there)
CAPTURES = Path("/work/shared/clients/captures/gemini-cli-0.61.0")


def chunks(name: str) -> bytes:
    """A Vercel AI SDK ``.chunks.txt`` fixture framed as the SSE Gemini sends."""
    lines = (CORPUS / f"vercel-ai__{name}.chunks.txt").read_text().splitlines()
    return b"".join(b"data: " + line.encode() + b"\n\n" for line in lines if line.strip())


def body(name: str) -> dict[str, Any]:
    return json.loads((CORPUS / f"vercel-ai__{name}").read_text())


def decode_stream(pieces: list[bytes], ctx: Context | None = None) -> list[Any]:
    ctx = ctx or Context()
    sse = SSEDecoder()
    dec = CODEC.stream_decoder(ctx)
    out: list[Any] = []
    for p in pieces:
        for ev in sse.feed(p):
            evs = dec.feed(ev)
            out.extend(evs)
            if any(type(e) is StreamError for e in evs):
                return out
    for ev in sse.close():
        out.extend(dec.feed(ev))
    out.extend(dec.close())
    return out
