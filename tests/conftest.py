"""Shared fixtures. ``chunkings(data)`` gives the splits every stream test runs over."""

from __future__ import annotations

import os
import random
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

# The usage ledger is off unless a test asks for one (``--set dragoman_ledger=PATH``): tests never write to
# the user's ~/.dragoman, and the mitmdump subprocesses they start inherit this.
os.environ["DRAGOMAN_LEDGER"] = "off"
os.environ["DRAGOMAN_RESPONSES_STORE"] = "off"  # tests that want the response store set it themselves


def frames(data: bytes) -> list[bytes]:
    """One SSE frame per chunk (each ends with its blank line), as upstreams write them."""
    return [f for f in re.split(rb"(?<=\n\n)|(?<=\r\n\r\n)", data) if f]


def chunkings(data: bytes, seeds: int = 6) -> list[tuple[str, list[bytes]]]:
    """Whole; one SSE frame per chunk (what upstreams send: the translator's shortcut); byte by byte; seeded
    random splits; splits inside every multi-byte UTF-8 character."""
    out: list[tuple[str, list[bytes]]] = [("whole", [data])]
    each = frames(data)
    if len(each) > 1:
        out.append(("frames", each))
    if len(data) <= 200_000:
        out.append(("bytewise", [data[i : i + 1] for i in range(len(data))]))
    for seed in range(seeds):
        rng = random.Random(seed)
        pieces, i = [], 0
        while i < len(data):
            n = rng.randint(1, 64 if seed % 2 else 700)
            pieces.append(data[i : i + n])
            i += n
        out.append((f"random{seed}", pieces))
    # cut in the middle of multi-byte characters (continuation bytes 0x80-0xBF)
    cuts = [i for i in range(1, len(data)) if 0x80 <= data[i] <= 0xBF][:200]
    if cuts:
        pieces, prev = [], 0
        for c in cuts:
            pieces.append(data[prev:c])
            prev = c
        pieces.append(data[prev:])
        out.append(("mid-utf8", pieces))
    # CR-LF split: cut right after every CR
    if b"\r\n" in data:
        pieces, prev = [], 0
        for i in range(len(data)):
            if data[i] == 13:
                pieces.append(data[prev : i + 1])
                prev = i + 1
        pieces.append(data[prev:])
        out.append(("after-cr", pieces))
    return out


def run_stream(translator, pieces: list[bytes]) -> bytes:
    out = bytearray()
    for p in pieces:
        out += translator.feed(p)
    out += translator.close()
    return bytes(out)
