"""``data:`` URLs, as the OpenAI protocols carry inline images and files (and Anthropic accepts back as
base64 sources): split one, build one."""

from __future__ import annotations


def split_data_url(url: str) -> tuple[str | None, str] | None:
    """``data:<media>;base64,<data>`` -> (media_type or None, data); None when not a base64 data URL."""
    if not url.startswith("data:"):
        return None
    head, sep, data = url[5:].partition(",")
    if not sep or not head.endswith(";base64"):
        return None
    return head[: -len(";base64")] or None, data


def data_url(media_type: str | None, data: str) -> str:
    """A base64 ``data:`` URL (``application/octet-stream`` when the media type is unknown)."""
    return f"data:{media_type or 'application/octet-stream'};base64,{data}"
