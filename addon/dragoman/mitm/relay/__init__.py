"""Failover before the first byte: the loopback relay and its own HTTP/1.1 client.

``relay`` (the loopback server a routed flow is pointed at), ``exchange`` (one routed exchange: attempts across
keys and upstreams until one answers), ``upstream_http`` and ``http1`` (the client side and its framing),
``held`` (chunked request bodies collected under the body cap, then answered through the relay); ``headers``
(reads and edits of a mitmproxy ``Headers`` in one scan: every flow's rewriting uses them, relayed or not).
"""
