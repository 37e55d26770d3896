"""Gemini's ``Schema`` (an OpenAPI 3.0 subset: upper-case ``type``, ``nullable``) <-> JSON Schema.

``parameters`` / ``responseSchema`` use Gemini's subset; ``parametersJsonSchema`` / ``responseJsonSchema`` take
JSON Schema, which is what the encoder sends. Decoding (either kind: Gemini CLI writes ``"OBJECT"`` in its
``responseJsonSchema`` too) lower-cases ``type`` names and turns ``nullable: true`` into a ``"null"`` type,
recursively; ``propertyOrdering`` (Gemini-only) is removed.
"""

from __future__ import annotations

from typing import Any

_NESTED = ("properties", "$defs", "definitions")
_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


def to_json_schema(s: Any) -> Any:
    if not isinstance(s, dict):
        return s
    out: dict[str, Any] = {}
    for k, v in s.items():
        if k == "type" and isinstance(v, str):
            out[k] = v.lower()
        elif k in _NESTED and isinstance(v, dict):
            out[k] = {name: to_json_schema(sub) for name, sub in v.items()}
        elif k in _LISTS and isinstance(v, list):
            out[k] = [to_json_schema(sub) for sub in v]
        elif k in ("items", "additionalProperties", "not") and isinstance(v, dict):
            out[k] = to_json_schema(v)
        elif k in ("nullable", "propertyOrdering"):
            continue
        else:
            out[k] = v
    if s.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out
