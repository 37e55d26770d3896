"""OpenRouter's ``reasoning_details`` in Chat answers (``lint.chat``): a list of entries, each with an int
``index`` and a known ``type``; streamed pieces of one entry share its index and concatenate as the official
SDK's accumulator does (strict: a string field other than the text appears only once per entry)."""

from __future__ import annotations

from typing import Any

from dragoman.lint import Summary
from dragoman.lint import is_int
from dragoman.lint import need

DETAIL_TYPES = {"reasoning.text", "reasoning.summary", "reasoning.encrypted"}


def feed_details(rd: Any, acc: dict[int, dict[str, Any]], where: str, strict: bool) -> None:
    """Merge one chunk's (or a whole message's) ``reasoning_details`` into ``acc`` (index -> entry)."""
    need(isinstance(rd, list), f"{where}: reasoning_details must be a list")
    for e in rd:
        need(isinstance(e, dict) and is_int(e.get("index")), f"{where}: reasoning_details[] needs an int index")
        i = e["index"]
        if i not in acc:
            need(e.get("type") in DETAIL_TYPES, f"{where}: reasoning_details type {e.get('type')!r} unknown")
            if strict:
                need(i == len(acc), f"{where}: new reasoning_details index {i}, expected {len(acc)}")
            acc[i] = dict(e)
            continue
        entry = acc[i]
        for k, v in e.items():
            if k in ("index", "type") or v is None:
                need(k != "type" or v in (None, entry["type"]), f"{where}: reasoning_details {i} changed type")
                continue
            if k == "text" or entry.get(k) in (None, ""):
                need(k != "text" or isinstance(v, str), f"{where}: reasoning_details text must be a string")
                entry[k] = (entry.get(k) or "") + v if k == "text" else v
            else:  # strict: the official SDK's accumulator would concatenate it
                need(not strict or v == "", f"{where}: reasoning_details {i} repeats {k!r}")


def summarize_details(acc: dict[int, dict[str, Any]], s: Summary, strict: bool) -> None:
    entries = [acc[i] for i in sorted(acc)]
    for e in entries:
        if e["type"] == "reasoning.text" and isinstance(e.get("signature"), str):
            s.signatures.append(e["signature"])
        elif e["type"] == "reasoning.encrypted":
            need(isinstance(e.get("data"), str) and e["data"], "reasoning.encrypted entry without data")
            s.redacted += 1
    if strict and entries:
        text = "".join(e.get("text") or "" for e in entries if e["type"] == "reasoning.text")
        need(text == s.thinking, "reasoning_details text differs from the reasoning text")
