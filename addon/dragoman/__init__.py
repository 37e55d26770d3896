"""Dragoman: translate LLM API traffic between Anthropic Messages, OpenAI Chat Completions and OpenAI Responses.

The package is layered (each layer imports only the ones before it):
``sse`` <- ``ir`` <- ``protocols`` <- ``translate`` <- ``mitm`` / ``cli``.
Only ``dragoman.mitm`` imports mitmproxy; everything else is sans-I/O.
"""

__version__ = "0.1.0"
