"""A mitmproxy flow file (``mitmdump -w``) read as exchanges: the flow's request is what went upstream (the
Translate addon shows the upstream request in the saved flow), its response what the client got, and the
``dragoman`` metadata names the protocols, models, route, attempts and the lossiness report. The client's
own request body is not kept in a flow file; a streamed response's body only when mitmproxy kept it."""

from __future__ import annotations

import io
from datetime import UTC
from datetime import datetime
from typing import Any

from dragoman.mitm.flowstate import METADATA_KEY
from dragoman.record.model import Body
from dragoman.record.model import Exchange
from dragoman.record.model import HttpRequest
from dragoman.record.model import HttpResponse


def read_flows(data: bytes) -> list[Exchange]:
    """Raises ``ValueError`` naming what is wrong when ``data`` is not a flow file."""
    from mitmproxy import http
    from mitmproxy import io as mio
    from mitmproxy.exceptions import FlowReadException

    try:
        flows = list(mio.FlowReader(io.BytesIO(data)).stream())
    except FlowReadException as e:
        raise ValueError(str(e) or "unreadable") from None
    except (ValueError, TypeError, KeyError) as e:
        raise ValueError(f"{type(e).__name__}: {e}") from None
    out = []
    for seq, f in enumerate(flows, 1):
        if isinstance(f, http.HTTPFlow):
            out.append(flow_exchange(f, seq))
    return out


def flow_exchange(f: Any, seq: int = 1) -> Exchange:
    """One ``HTTPFlow`` as an ``Exchange`` (what a flow file holds of it)."""
    meta: dict[str, Any] = f.metadata.get(METADATA_KEY) or {}
    req = f.request
    sent = HttpRequest(
        method=req.method,
        url=req.pretty_url,
        http_version=req.http_version,
        headers=[(k, v) for k, v in req.headers.items(multi=True)],
        body=Body.of(req.get_content(strict=False) or b"", parse_json=True),
    )
    resp = None
    if f.response is not None:
        r = f.response
        end = r.timestamp_end or r.timestamp_start
        resp = HttpResponse(
            status=r.status_code,
            reason=r.reason,
            http_version=r.http_version,
            headers=[(k, v) for k, v in r.headers.items(multi=True)],
            body=Body.of(r.get_content(strict=False) or b"", parse_json=False),
            headers_delay=max(0.0, (end or req.timestamp_start) - req.timestamp_start),
        )
    client = meta.get("client")
    return Exchange(
        seq=seq,
        started=datetime.fromtimestamp(req.timestamp_start, UTC).isoformat(timespec="milliseconds"),
        flow_id=f.id,
        client_protocol=client,
        upstream_protocol=meta.get("target") or client,
        client_model=meta.get("client_model"),
        upstream_model=meta.get("upstream_model"),
        stream=bool(meta.get("stream", False)),
        dropped=list(meta.get("dropped") or []),
        lossy=list(meta.get("lossy") or []) or None,
        client_request=HttpRequest(method=req.method, url=req.pretty_url),
        upstream_request=sent if meta else None,
        client_response=resp,
        error=f.error.msg if f.error else None,
        route=meta.get("route"),
        upstream=meta.get("upstream"),
        attempts=meta.get("attempts"),
        client_name=meta.get("client_name"),
    )
