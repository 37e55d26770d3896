"""Rows, an 80-column table and the detail of one exchange (``dragoman inspect``), as text or JSON."""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from typing import Any

from dragoman.inspect.assemble import Assembled
from dragoman.inspect.assemble import assemble
from dragoman.inspect.compare import MARK
from dragoman.inspect.compare import differences
from dragoman.inspect.compare import two_sides
from dragoman.ir.lossy import LossReport
from dragoman.protocols import Protocol
from dragoman.record.model import Exchange
from dragoman.record.model import HttpResponse

WIDTH = 80
SHORT = {"anthropic": "anth", "openai-chat": "chat", "openai-responses": "resp", "gemini": "gem"}
#: (title, width, align) of each table column; the widths and the 9 separating spaces make 80
COLUMNS = [
    ("#", 3, ">"),
    ("time", 8, "<"),
    ("protocols", 9, "<"),
    ("model", 13, "<"),
    ("route", 8, "<"),
    ("st", 3, ">"),
    ("stop", 9, "<"),
    ("tokens", 9, ">"),
    ("dur", 5, ">"),
    ("lost", 4, ">"),
]


@dataclass(slots=True)
class Sides:
    """An exchange with both answers assembled."""

    ex: Exchange
    upstream: Assembled | None
    client: Assembled | None
    report: LossReport


def sides(ex: Exchange) -> Sides:
    up = _assemble(ex.upstream_response, ex.upstream_protocol)
    cl = _assemble(ex.client_response, ex.client_protocol)
    report = LossReport.from_list(ex.lossy if ex.lossy is not None else ex.dropped)
    return Sides(ex, up, cl, report)


def _assemble(resp: HttpResponse | None, protocol: str | None) -> Assembled | None:
    if resp is None or protocol is None:
        return None
    try:
        proto = Protocol(protocol)
    except ValueError:
        return None  # a protocol this build does not know (a newer recording)
    return assemble(resp.body.raw(), proto, resp.status, resp.header("content-type"))


def row(index: int, s: Sides) -> dict[str, Any]:
    """One exchange's table row, JSON-able."""
    ex = s.ex
    best = s.client if s.client is not None and (s.client.usage or s.client.stop) else s.upstream
    usage = best.usage if best is not None else None
    status = (
        ex.client_response.status
        if ex.client_response
        else (ex.upstream_response.status if ex.upstream_response else None)
    )
    return {
        "index": index,
        "started": ex.started,
        "client": ex.client_protocol,
        "upstream": ex.upstream_protocol,
        "client_model": ex.client_model,
        "upstream_model": ex.upstream_model,
        "route": ex.upstream or ex.route,
        "status": status,
        "stop": best.stop if best is not None else None,
        "error": ex.error or (best.error if best is not None else None),
        "input_tokens": usage.input_tokens if usage else None,
        "output_tokens": usage.output_tokens if usage else None,
        "duration": _duration(ex),
        "stream": ex.stream,
        "lossy": s.report.count,
    }


def _duration(ex: Exchange) -> float | None:
    resp = ex.upstream_response or ex.client_response
    if resp is None:
        return None
    last = resp.chunks[-1][1] if resp.chunks else 0.0
    return round(resp.headers_delay + last, 3)


def table(rows: list[dict[str, Any]]) -> str:
    lines = [_line([c[0] for c in COLUMNS])]
    for r in rows:
        proto = f"{SHORT.get(r['client'] or '', '?')}>{SHORT.get(r['upstream'] or '', '?')}"
        model = r["client_model"] or ""
        if r["upstream_model"] and r["upstream_model"] != model:
            model = f"{model}>{r['upstream_model']}"
        stop = r["stop"] or ("error" if r["error"] else "")
        cells = [
            str(r["index"]),
            (r["started"] or "")[11:19],
            proto,
            model,
            r["route"] or "-",
            "" if r["status"] is None else str(r["status"]),
            stop,
            _tokens(r["input_tokens"], r["output_tokens"]),
            "" if r["duration"] is None else _secs(r["duration"]),
            str(r["lossy"]),
        ]
        lines.append(_line(cells))
    return "\n".join(lines) + "\n"


def _line(cells: list[str]) -> str:
    out = []
    for (_, width, align), cell in zip(COLUMNS, cells, strict=True):
        if len(cell) > width:
            cell = cell[: width - 1] + "~"
        out.append(f"{cell:{align}{width}}")
    return " ".join(out).rstrip()


def _n(v: int | None) -> str:
    if v is None:
        return "?"
    return f"{v / 1000:.0f}k" if v >= 10_000 else str(v)


def _tokens(i: int | None, o: int | None) -> str:
    return "" if i is None and o is None else f"{_n(i)}/{_n(o)}"


def _secs(v: float) -> str:
    return f"{v:.2f}" if v < 10 else f"{v:.0f}s"


# ---------------------------------------------------------------- one exchange


def detail(index: int, s: Sides, name: str) -> dict[str, Any]:
    ex = s.ex
    return {
        **row(index, s),
        "file": name,
        "client_request": _request_summary(ex.client_request.body.parsed()),
        "upstream_url": ex.upstream_request.url if ex.upstream_request else None,
        "upstream_answer": s.upstream.as_dict() if s.upstream else None,
        "client_answer": s.client.as_dict() if s.client else None,
        "report": s.report.as_list(),
        "attempts": ex.attempts or [],
        "client_name": ex.client_name,
    }


def _request_summary(obj: Any) -> dict[str, Any] | None:
    if not isinstance(obj, dict):
        return None
    turns = obj.get("messages") or obj.get("input") or obj.get("contents")
    return {
        "model": obj.get("model"),
        "stream": bool(obj.get("stream")),
        "turns": len(turns) if isinstance(turns, list) else (1 if turns else 0),
        "tools": [
            t.get("name") or (t.get("function") or {}).get("name")
            for t in obj.get("tools") or []
            if isinstance(t, dict)
        ],
    }


def detail_text(d: dict[str, Any], width: int = WIDTH) -> str:
    """One exchange as text; the two sides in columns when ``width`` allows (``compare.two_sides``)."""
    out = [f"exchange {d['index']}", f"  file: {d['file']}"]
    model = (
        d["client_model"]
        if d["client_model"] == d["upstream_model"]
        else f"{d['client_model']} -> {d['upstream_model']}"
    )
    out.append(
        f"  {d['client']} -> {d['upstream']}, model {model}, status {d['status']}, {'stream' if d['stream'] else 'whole'}"
    )
    if d["route"]:
        out.append(f"  route: {d['route']}")
    req = d["client_request"]
    if req:
        tools = ", ".join(t for t in req["tools"] if t) or "none"
        out.append(f"  client request: {req['turns']} turn(s), tools: {tools}")
    if d["upstream_url"]:
        out.append(f"  sent to: {d['upstream_url']}")
    up, cl = d["upstream_answer"], d["client_answer"]
    if up is not None and cl is not None:  # both sides, row by row (``compare``)
        diff = differences(up, cl)
        agree = f"{MARK} marks where they differ: {', '.join(diff)}" if diff else "the two sides agree"
        out.append(f"the answer on both sides ({agree}):")
        out += two_sides(up, cl, width)
    else:
        for title, side in (("upstream answered", up), ("client got", cl)):
            if side is not None:
                out.append(f"{title} ({side['protocol']}):")
                out += side_lines(side)
    out.append(f"lossiness report ({len(d['report'])}):")
    out += [f"  {e['path']}: {e['kind']}, {e['reason']}" for e in d["report"]] or ["  nothing lost"]
    if len(d["attempts"]) > 1 or d["attempts"] and d["route"]:
        out.append("attempts:")
        out += [f"  {_attempt(a)}" for a in d["attempts"]]
    return "\n".join(out) + "\n"


def side_lines(side: dict[str, Any]) -> list[str]:
    lines = []
    if side["problem"]:
        lines.append(f"  UNREADABLE: {side['problem']}")
    if side["thinking"]:
        lines += _wrapped("thinking", side["thinking"])
    if side["text"]:
        lines += _wrapped("text", side["text"])
    for c in side["tool_calls"]:
        args = json.dumps(c["arguments"], ensure_ascii=False) if not isinstance(c["arguments"], str) else c["arguments"]
        lines += _wrapped(f"tool call {c['name']} ({c['id']})", args)
    if side["error"]:
        lines += _wrapped("error", side["error"])
    u = side["usage"]
    usage = "" if u is None else f", usage in {u['input_tokens']} out {u['output_tokens']}"
    if u and u["cache_read_tokens"]:
        usage += f" cache read {u['cache_read_tokens']}"
    lines.append(f"  stop: {side['stop']}{usage}")
    return lines


def _wrapped(label: str, text: str, limit: int = 600) -> list[str]:
    if len(text) > limit:
        text = text[:limit] + f"... ({len(text)} chars)"
    body = textwrap.wrap(" ".join(text.split()), WIDTH - 6) or [""]
    return [f"  {label}:"] + [f"    {b}" for b in body]


def _attempt(a: dict[str, Any]) -> str:
    keys = ("upstream", "model", "key", "status", "class", "seconds")
    return ", ".join(f"{k}={a[k]}" for k in keys if a.get(k) is not None)
