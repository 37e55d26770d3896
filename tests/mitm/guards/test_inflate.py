"""``inflate``: every mitmproxy encoding decoded piece by piece, refused beyond the size or ratio cap."""

from __future__ import annotations

import gzip
import zlib

import brotli
import pytest

from dragoman.mitm.guards import inflate as inflate_mod
from dragoman.mitm.guards.inflate import BadEncoding
from dragoman.mitm.guards.inflate import TooLarge
from dragoman.mitm.guards.inflate import inflate

BODY = b'{"model":"m","messages":[{"role":"user","content":"hello"}]}' * 200


def zstd_compress(data: bytes) -> bytes:
    kind, mod = inflate_mod._zstd_module()
    return mod.compress(data) if kind == "std" else mod.ZstdCompressor().compress(data)


ENCODED = {
    "gzip": gzip.compress,
    "x-gzip": gzip.compress,
    "deflate": zlib.compress,
    "br": brotli.compress,
    "zstd": zstd_compress,
}


@pytest.mark.parametrize("name", list(ENCODED))
def test_round_trip(name):
    assert inflate(ENCODED[name](BODY), name, 1 << 20, 100) == BODY


@pytest.mark.parametrize("name", list(ENCODED))
def test_size_cap(name):
    bomb = ENCODED[name](b"\0" * (16 << 20))
    assert len(bomb) < 64 * 1024
    with pytest.raises(TooLarge, match="inflates beyond 4194304 bytes"):
        inflate(bomb, name, 4 << 20, 0)


def test_ratio_cap_applies_beyond_the_floor_only():
    bomb = gzip.compress(b"\0" * (4 << 20), 9)
    with pytest.raises(TooLarge, match="more than 100 times"):
        inflate(bomb, "gzip", 64 << 20, 100)
    small = gzip.compress(b"\0" * (512 << 10), 9)  # ratio ~1000, but under the 1 MiB floor
    assert len(inflate(small, "gzip", 64 << 20, 100)) == 512 << 10
    assert len(inflate(bomb, "gzip", 64 << 20, 0)) == 4 << 20  # 0: no ratio cap


def test_raw_deflate_and_concatenated_members():
    raw = zlib.compressobj(6, zlib.DEFLATED, -15)
    data = raw.compress(BODY) + raw.flush()
    assert inflate(data, "deflate", 1 << 20, 0) == BODY
    assert inflate(gzip.compress(BODY) + gzip.compress(BODY), "gzip", 1 << 20, 0) == BODY * 2
    assert inflate(zstd_compress(BODY) + zstd_compress(BODY), "zstd", 1 << 20, 0) == BODY * 2


def test_stacked_encodings_are_undone_last_first():
    data = brotli.compress(gzip.compress(BODY))
    assert inflate(data, "gzip, br", 1 << 20, 0) == BODY
    assert inflate(BODY, "identity", 1 << 20, 0) == BODY


@pytest.mark.parametrize(
    "data,name",
    [(b"not gzip at all", "gzip"), (gzip.compress(BODY)[:-12], "gzip"), (b"\xff\xff", "br"), (b"xx", "zstd")],
)
def test_bad_data_is_bad_encoding(data, name):
    with pytest.raises(BadEncoding):
        inflate(data, name, 1 << 20, 0)


def test_unknown_encoding():
    with pytest.raises(BadEncoding, match="unsupported content-encoding 'compress'"):
        inflate(b"x", "compress", 1 << 20, 0)


def test_brotli_without_an_output_bound(monkeypatch):
    """brotli < 1.2 (Python 3.11 with mitmproxy 11): fed in small input steps, still capped."""
    monkeypatch.setattr(inflate_mod, "_brotli_has_limit", lambda: False)
    assert inflate(brotli.compress(BODY), "br", 1 << 20, 0) == BODY
    with pytest.raises(TooLarge):
        inflate(brotli.compress(b"\0" * (8 << 20)), "br", 1 << 20, 0)
