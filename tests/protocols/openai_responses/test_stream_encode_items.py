"""The stream encoder's output-item state."""

from __future__ import annotations


def test_snapshot_chunks_are_compacted():
    """The text kept for the final snapshot is joined every 256 pieces: memory follows the text, not
    the number of deltas (issue 6)."""
    from dragoman.ir.events import BlockKind as _BK
    from dragoman.protocols.openai_responses.stream_encode_items import OutItem as _Out

    b = _Out(_BK.TEXT, 0, "msg_1")
    pieces = [f"w{i} " for i in range(20_000)]
    for p in pieces:
        b.keep(p)
    assert len(b.chunks) <= 20_000 // 256 + 256
    assert "".join(b.chunks) == "".join(pieces)
