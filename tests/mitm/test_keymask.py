"""``KeyMask``: configured keys masked in whole bodies and in bodies that arrive in pieces (every split)."""

from __future__ import annotations

import pytest

from conftest import chunkings
from dragoman.mitm.keymask import MASK
from dragoman.mitm.keymask import KeyMask

KEY = "sk-ant-api03-SECRET-0123456789"
OTHER = "sk-proj-OTHER-SECRET-abcdef"


def test_whole_body_masked_everywhere():
    keys = KeyMask([KEY, OTHER])
    body = f'{{"error":{{"message":"invalid key {KEY} (also {OTHER}, {KEY})"}}}}'.encode()
    out = keys.mask(body)
    assert KEY.encode() not in out and OTHER.encode() not in out
    assert out.count(MASK) == 3


def test_nothing_to_mask_returns_the_same_bytes():
    keys = KeyMask([KEY])
    body = b'{"ok": true}'
    assert keys.mask(body) is body
    assert not KeyMask([])
    assert not KeyMask(["", "short"])  # below MIN_LENGTH: never masked, it would mangle text


def test_a_key_inside_a_longer_key_is_masked_whole():
    keys = KeyMask([KEY, KEY + "-LONGER"])
    assert keys.mask((KEY + "-LONGER").encode()) == MASK


def test_mask_text():
    assert KeyMask([KEY]).mask_text(f"bad {KEY} é") == f"bad {MASK.decode()} é"


STREAM = (
    b'event: message_start\ndata: {"type":"message_start"}\n\n'
    + f'event: error\ndata: {{"type":"error","error":{{"message":"key {KEY} rejected"}}}}\n\n'.encode()
    + f"data: {KEY[:5]} is not a key, but {KEY} is\n\n".encode()
)


@pytest.mark.parametrize("name, pieces", chunkings(STREAM))
def test_stream_masks_a_key_split_across_chunks(name, pieces):
    masker = KeyMask([KEY, OTHER]).stream()
    out = b"".join(masker.feed(p) for p in pieces) + masker.flush()
    assert out == KeyMask([KEY]).mask(STREAM)
    assert KEY.encode() not in out


def test_stream_holds_nothing_back_at_an_event_boundary():
    masker = KeyMask([KEY]).stream()
    event = b'data: {"type":"ping"}\n\n'
    assert masker.feed(event) == event
    assert masker.feed(b"data: s") == b"data: "  # "s" may begin the key: held until the next piece
    assert masker.feed(b"k-other\n\n") == b"sk-other\n\n"
    assert masker.flush() == b""
