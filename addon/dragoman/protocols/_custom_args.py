"""Custom (free-form) tools travelling as function tools: the raw input wrapped as ``{"input": "<raw>"}``.

A protocol without custom tools (Chat upstreams, Anthropic) gets a function tool whose one string
parameter ``CUSTOM_TOOL_PARAM`` holds the raw input; decoders unwrap it again using the request's tool list.
"""

from __future__ import annotations

import orjson

from dragoman.ir.request import CUSTOM_TOOL_PARAM


def wrap_custom_args(raw: str) -> str:
    """The raw input of a custom tool call -> the arguments of the function call that carries it."""
    return orjson.dumps({CUSTOM_TOOL_PARAM: raw}).decode()


def unwrap_custom_args(arguments: str) -> str:
    """``{"input": "<raw>"}`` -> the raw input; anything else is returned unchanged."""
    try:
        obj = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return arguments
    if isinstance(obj, dict):
        raw = obj.get(CUSTOM_TOOL_PARAM)
        if isinstance(raw, str):
            return raw
    return arguments
