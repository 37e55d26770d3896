"""Translation entry points: plan (which codecs), requests, whole responses, streams.

May import: ``dragoman.sse``, ``dragoman.ir``, ``dragoman.protocols``. Never mitmproxy.
"""
