"""A streamed body spooled to disk and assembled into the recording file: the same file format as an exchange
recorded whole (the replayer reads it unchanged), UTF-8 or base64, secrets masked across chunk boundaries,
nothing held in memory."""

from __future__ import annotations

import base64
import json

import pytest

from dragoman.mitm.recording.spool import CHUNKS_MARK
from dragoman.mitm.recording.spool import CHUNKS_PAIR
from dragoman.mitm.recording.spool import BodySpool
from dragoman.mitm.recording.spool import ChunkLog
from dragoman.mitm.recording.spool import assemble
from dragoman.mitm.recording.spool import body_pieces
from dragoman.mitm.recording.spool import chunk_pieces
from dragoman.mitm.recording.spool import indent_before
from dragoman.record.model import Body
from dragoman.record.model import Exchange
from dragoman.record.model import HttpRequest
from dragoman.record.model import HttpResponse
from dragoman.record.redact import Redactor

SECRET = "sk-SECRET-abcdef0123456789"


def _spool(tmp_path, chunks: list[bytes], red: Redactor) -> tuple[BodySpool, ChunkLog]:
    up = BodySpool(tmp_path / ".up", red.mask())
    log = ChunkLog(tmp_path / ".chunks")
    for i, c in enumerate(chunks):
        log.add(up.size, i * 0.25)
        up.write(c)
    up.close()
    log.close()
    assert up.memory is None  # nothing kept in memory
    return up, log


def _assembled(tmp_path, chunks: list[bytes], red: Redactor) -> Exchange:
    up, log = _spool(tmp_path, chunks, red)
    mark = "@@mark-up@@"
    body = Body(text=mark) if up.utf8 else Body(b64=mark)
    ex = Exchange(
        client_request=HttpRequest(body=Body(json={"a": [-271828, -3.14159]})),  # the mark's numbers, elsewhere
        upstream_response=HttpResponse(status=200, body=body, chunks=[CHUNKS_PAIR]),
    )
    text = ex.to_json()
    indent = indent_before(text, CHUNKS_MARK, text.index(mark))
    pieces = assemble(
        text,
        [(mark, body_pieces(up.path, up.utf8, red.mask())), (CHUNKS_MARK, chunk_pieces(log.path, indent))],
    )
    out = "".join(pieces)
    json.loads(out)
    return Exchange.from_json(out)


@pytest.mark.parametrize("binary", [False, True])
def test_assembled_file_is_an_ordinary_recording(tmp_path, binary):
    chunks = [b"data: one\n\n", "data: é→✓\n\n".encode(), b"data: three\n\n"]
    if binary:
        chunks.append(b"\xff\xfe\x00 not utf-8")
    chunks = chunks * 50
    ex = _assembled(tmp_path, chunks, Redactor())
    up = ex.upstream_response
    assert (up.body.b64 is not None) is binary
    assert up.body.raw() == b"".join(chunks)
    assert [c for c, _ in up.chunk_bytes()] == chunks
    assert [t for _, t in up.chunks] == [i * 0.25 for i in range(len(chunks))]
    assert ex.client_request.body.json_ == {"a": [-271828, -3.14159]}


def test_a_secret_split_across_chunks_is_masked_with_the_same_length(tmp_path):
    red = Redactor()
    red.headers([("x-api-key", SECRET)])
    data = f"data: you sent {SECRET} and {SECRET}\n\n".encode()
    chunks = [data[i : i + 5] for i in range(0, len(data), 5)]
    ex = _assembled(tmp_path, chunks, red)
    raw = ex.upstream_response.body.raw()
    assert SECRET.encode() not in raw and len(raw) == len(data)
    assert [len(c) for c, _ in ex.upstream_response.chunk_bytes()] == [len(c) for c in chunks]


def test_a_secret_learnt_after_the_stream_started_is_masked_at_assembly(tmp_path):
    early = Redactor()
    chunks = [f"data: {SECRET}\n\n".encode()]
    up, _ = _spool(tmp_path, chunks, early)
    assert SECRET.encode() in (tmp_path / ".up").read_bytes()
    late = Redactor()
    late.headers([("authorization", f"Bearer {SECRET}")])
    text = json.loads('"' + "".join(body_pieces(up.path, up.utf8, late.mask())) + '"')
    assert SECRET not in text and len(text) == len(chunks[0])


def test_binary_base64_pieces_concatenate(tmp_path):
    data = bytes(range(256)) * 5000  # > one block, not a multiple of 3
    up = BodySpool(tmp_path / ".b", Redactor().mask())
    up.write(data)
    up.close()
    assert not up.utf8
    assert base64.b64decode("".join(body_pieces(up.path, False, Redactor().mask()))) == data


def test_discard_removes_the_spool_files(tmp_path):
    up, log = _spool(tmp_path, [b"x"], Redactor())
    up.discard()
    log.discard()
    assert list(tmp_path.iterdir()) == []
