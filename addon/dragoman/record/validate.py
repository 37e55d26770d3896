"""A recording is input too: ``playable`` checks one exchange before it is replayed (issue 23, item 6).

Refused (``ValueError``; the replayer names the file and leaves it out):
* an upstream status that is not a final HTTP status (200-599);
* a body that is not what it says (``b64`` that is not strict base64);
* a malformed chunk list: offsets that are negative, go backwards, do not start at 0 or run past the body,
  times that are not finite numbers.

Replayed safely (a copy is returned, with one warning per fix):
* headers whose name is not an HTTP token or whose value holds CR, LF, NUL or a character outside Latin-1
  are dropped (they would split or break the response head); a reason phrase with them is replaced;
* delays are clamped: the wait for the headers and every gap between chunks to ``MAX_DELAY_S``, times that
  go backwards to the previous one.
A file too large to load (``dragoman_replay_max_mb``) is refused by the loader before it is parsed.
"""

from __future__ import annotations

import base64
import binascii
import math
import re

from dragoman.record.model import Exchange
from dragoman.record.model import HttpResponse

MAX_DELAY_S = 30.0
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(r"[\r\n\x00]")


def _header_ok(name: str, value: str) -> bool:
    if not _TOKEN.fullmatch(name) or _BAD_VALUE.search(value):
        return False
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        return False
    return True


def _body_size(resp: HttpResponse) -> int:
    if resp.body.b64 is not None:
        try:
            return len(base64.b64decode(resp.body.b64, validate=True))
        except (binascii.Error, ValueError) as e:
            raise ValueError(f"upstream_response.body.b64 is not valid base64 ({e})") from None
    return len(resp.body.raw())


def _check_chunks(resp: HttpResponse, size: int) -> None:
    if resp.chunks is None:
        return
    prev = 0
    for i, (offset, t) in enumerate(resp.chunks):
        if not math.isfinite(t):
            raise ValueError(f"upstream_response.chunks[{i}]: time {t!r} is not a finite number")
        if (i == 0 and offset != 0) or offset < prev or offset > size:
            raise ValueError(
                f"upstream_response.chunks[{i}]: offset {offset} is not within 0..{size} after {prev} "
                "(a chunk list starts at 0 and never goes backwards)"
            )
        prev = offset


def _clamped_times(resp: HttpResponse, warnings: list[str]) -> list[tuple[int, float]] | None:
    if resp.chunks is None:
        return None
    out, prev, fixed = [], 0.0, 0
    for offset, t in resp.chunks:
        new = min(max(t, prev), prev + MAX_DELAY_S)
        fixed += new != t
        out.append((offset, new))
        prev = new
    if fixed:
        warnings.append(f"{fixed} chunk time(s) clamped (no gap over {MAX_DELAY_S:g} s, never backwards)")
    return out


def playable(ex: Exchange) -> tuple[Exchange, list[str]]:
    """``ex`` made safe to replay and what was changed; ``ValueError`` when it cannot be replayed at all."""
    resp = ex.upstream_response
    if resp is None:
        return ex, []
    if not 200 <= resp.status <= 599:
        raise ValueError(f"upstream_response.status {resp.status} is not a final HTTP status (200-599)")
    _check_chunks(resp, _body_size(resp))
    warnings: list[str] = []
    headers = [(k, v) for k, v in resp.headers if _header_ok(k, v)]
    if len(headers) != len(resp.headers):
        warnings.append(f"{len(resp.headers) - len(headers)} header(s) dropped (not a token name, or CR/LF/NUL)")
    reason = resp.reason
    if not _header_ok("x", reason):
        reason = ""
        warnings.append("reason phrase replaced (CR/LF/NUL or not Latin-1)")
    delay = resp.headers_delay if math.isfinite(resp.headers_delay) else 0.0
    delay = min(max(delay, 0.0), MAX_DELAY_S)
    if delay != resp.headers_delay:
        warnings.append(f"headers delay {resp.headers_delay!r} s clamped to {delay:g} s")
    chunks = _clamped_times(resp, warnings)
    if not warnings:
        return ex, []
    safe = resp.model_copy(update={"headers": headers, "reason": reason, "headers_delay": delay, "chunks": chunks})
    return ex.model_copy(update={"upstream_response": safe}), warnings
