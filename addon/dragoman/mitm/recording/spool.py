"""A streamed body goes to disk as it arrives, and into the recording file from there (issue 23, 3(d)).

* ``BodySpool``: one body written to a hidden file in the session folder (``.spool-<flow>.<side>``) chunk
  by chunk, secrets masked on the way in (``StreamMask``, same length, so chunk offsets stay valid); it
  knows the body's size and whether it is UTF-8 (``Body.text``) or not (``Body.b64``);
* ``ChunkLog``: the ``[offset, seconds]`` pair of every upstream chunk, one line each in a second file;
* ``assemble``: the recording's text, streamed: the exchange serialised with placeholders where the spooled
  body and chunk list go, the placeholders replaced by the spool files read in blocks. The file has the same
  format as an exchange recorded whole (``dragoman.record.model``), so the replayer reads it unchanged.

Nothing here holds a whole body: memory stays flat however long the stream is.
"""

from __future__ import annotations

import base64
import codecs
import json
import os
from collections.abc import Iterable
from collections.abc import Iterator
from pathlib import Path

from dragoman.record.redact import StreamMask

BLOCK = (
    3 << 12
)  # 12 KiB, a multiple of 3 (base64 blocks concatenate); small: larger str blocks fragment the heap (+50 MiB at 96 KiB)
#: the chunk list's placeholder pair, found after the body's own (unique) placeholder
CHUNKS_PAIR = (-271828, -3.14159)
CHUNKS_MARK = f"[{CHUNKS_PAIR[0]}, {CHUNKS_PAIR[1]!r}]"


class BodySpool:
    """One body, masked, to ``path`` (None: no file, e.g. ``-w`` alone); ``memory`` keeps the raw bytes too."""

    def __init__(self, path: Path | None, mask: StreamMask, keep: bool = False) -> None:
        self.path = path
        self.mask = mask
        self.size = 0
        self.utf8 = True
        self.memory: bytearray | None = bytearray() if keep else None
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._file = open(path, "wb") if path is not None else None  # noqa: SIM115 - closed in close()

    def write(self, data: bytes) -> None:
        if not data:
            return
        self.size += len(data)
        if self.memory is not None:
            self.memory.extend(data)
        if self._file is not None:
            self._put(self.mask.feed(data))

    def _put(self, out: bytes) -> None:
        if self.utf8:
            try:
                self._decoder.decode(out)
            except UnicodeDecodeError:
                self.utf8 = False
        assert self._file is not None
        self._file.write(out)

    def close(self) -> None:
        if self._file is None or self._file.closed:
            return
        self._put(self.mask.flush())
        if self.utf8:
            try:
                self._decoder.decode(b"", final=True)
            except UnicodeDecodeError:
                self.utf8 = False
        self._file.close()

    def discard(self) -> None:
        if self._file is not None:
            self._file.close()
        if self.path is not None:
            try:
                os.unlink(self.path)
            except OSError:
                pass


class ChunkLog:
    """``[offset, seconds]`` per upstream chunk, as text lines (``offset seconds``)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.count = 0
        self.last = 0.0
        self._file = open(path, "w", encoding="ascii") if path is not None else None  # noqa: SIM115

    def add(self, offset: int, seconds: float) -> None:
        self.count += 1
        self.last = seconds
        if self._file is not None:
            self._file.write(f"{offset} {round(seconds, 6)!r}\n")

    def close(self) -> None:
        if self._file is not None and not self._file.closed:
            self._file.close()

    def discard(self) -> None:
        self.close()
        if self.path is not None:
            try:
                os.unlink(self.path)
            except OSError:
                pass


def body_pieces(path: Path, utf8: bool, mask: StreamMask) -> Iterator[str]:
    """The spooled body as the inside of a JSON string: escaped text, or base64. ``mask`` masks once more
    with every secret known at the end (a key first seen after the stream started)."""
    with open(path, "rb") as f:
        if not utf8:
            held = b""
            while block := f.read(BLOCK):
                data = held + mask.feed(block)
                cut = len(data) - len(data) % 3
                held = data[cut:]
                yield base64.b64encode(data[:cut]).decode("ascii")
            yield base64.b64encode(held + mask.flush()).decode("ascii")
            return
        decoder = codecs.getincrementaldecoder("utf-8")()
        while block := f.read(BLOCK):
            yield json.dumps(decoder.decode(mask.feed(block)), ensure_ascii=False)[1:-1]
        yield json.dumps(decoder.decode(mask.flush(), final=True), ensure_ascii=False)[1:-1]


def chunk_pieces(path: Path, indent: str) -> Iterator[str]:
    """The chunk list's pairs, ``[offset, seconds]`` one per line as ``Exchange.to_json`` writes them."""
    with open(path, encoding="ascii") as f:
        sep = ""
        for line in f:
            offset, seconds = line.split()
            yield f"{sep}[{int(offset)}, {float(seconds)!r}]"
            sep = ",\n" + indent


def assemble(text: str, marks: Iterable[tuple[str, Iterable[str] | None]]) -> Iterator[str]:
    """``text`` with each mark (in order of appearance) replaced by its pieces; a None pieces for a chunk
    list mark removes the mark (an empty list)."""
    pos = 0
    for mark, pieces in marks:
        at = text.index(mark, pos)
        yield text[pos:at]
        if pieces is not None:
            yield from pieces
        pos = at + len(mark)
    yield text[pos:]


def indent_before(text: str, mark: str, start: int = 0) -> str:
    """The whitespace that starts the line ``mark`` is on."""
    at = text.index(mark, start)
    line = text[text.rfind("\n", 0, at) + 1 : at]
    return line[: len(line) - len(line.lstrip())]
