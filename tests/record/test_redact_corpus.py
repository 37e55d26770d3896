"""The built-in credential rules damage no real content: every request and response body in tests/corpus,
the shipped recordings and the captured client requests comes out of ``Redactor.json`` unchanged (the
rules are strict enough), while a credential planted at any depth of the same bodies is caught."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

import corpus_loader
from dragoman.record.redact import REDACTED
from dragoman.record.redact import Redactor

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
CANARY = "canary-SECRET-0f9e8d7c6b5a"


def _payloads(data: bytes) -> list:
    try:
        return [json.loads(data)]
    except ValueError:
        pass
    out = []
    for line in data.splitlines():
        line = line.strip()
        if line.startswith(b"data:"):
            line = line[5:].strip()
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def _documents() -> list[tuple[str, object]]:
    docs: list[tuple[str, object]] = []
    for s in corpus_loader.load_all():
        if s.request is not None:
            docs.append((s.name + ":request", s.request))
        docs += [(f"{s.name}:response", p) for p in _payloads(s.body)]
    files = sorted((ROOT / "recordings").rglob("*.json")) + sorted((TESTS / "protocols").rglob("*.json"))
    docs += [(str(f.relative_to(ROOT)), json.loads(f.read_bytes())) for f in files]
    return docs


DOCS = _documents()


def test_the_corpus_is_there():
    assert len(DOCS) > 100


def test_no_real_body_is_changed():
    changed = [name for name, doc in DOCS if Redactor().json(doc) != doc]
    assert changed == []


def _plant(doc: object) -> int:
    """Put an ``api_key`` holding the canary into every object of ``doc``; how many were planted."""
    n = 0
    if isinstance(doc, dict):
        for v in list(doc.values()):
            n += _plant(v)
        doc["api_key"] = CANARY
        n += 1
    elif isinstance(doc, list):
        for v in doc:
            n += _plant(v)
    return n


@pytest.mark.parametrize("i", range(0, 40, 7))
def test_a_planted_credential_is_caught_at_any_depth(i):
    name, doc = DOCS[i * len(DOCS) // 40]
    planted = copy.deepcopy(doc)
    n = _plant(planted)
    red = Redactor()
    out = json.dumps(red.json(planted))
    assert CANARY not in out, name
    assert out.count(json.dumps(REDACTED)) >= n
    assert CANARY in red.secrets
