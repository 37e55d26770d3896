"""A local estimate of the input tokens of an Anthropic Messages request (``POST /v1/messages/count_tokens``
when the upstream is not Anthropic and cannot count for us).

It is an estimate, documented as such (the answer carries ``x-dragoman-estimate: true``):

- text: 1 token per 4 ASCII characters, 1 per CJK/wide character, 1 per 2 other non-ASCII characters;
  JSON (tool schemas, tool inputs, unknown blocks) is counted as its compact serialisation;
- framing: 3 tokens per request, 4 per message and per content block, 8 per tool definition;
- tools: name, description and ``input_schema`` of each tool, plus Anthropic's tool-use system prompt
  (346 tokens with ``tool_choice`` auto/none, 313 with any/tool);
- images: ``width * height / 750`` after Anthropic's downscaling (long edge <= 1568 px, <= 1.15 megapixels),
  the size read from the base64 PNG/JPEG/GIF/WebP header; URL/file images and unreadable ones count as
  1600 (the maximum);
- PDFs: 2000 tokens per page (pages counted in the document), text documents as text;
- thinking blocks count only in the last assistant message (Anthropic ignores earlier turns' thinking).

Pure: no I/O. ``estimate_input_tokens(body)`` takes the parsed JSON request.
"""

from __future__ import annotations

import base64
import binascii
import logging
import math
import re
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

import orjson

logger = logging.getLogger(__name__)

REQUEST_OVERHEAD = 3
MESSAGE_OVERHEAD = 4
BLOCK_OVERHEAD = 4
TOOL_OVERHEAD = 8
TOOL_PROMPT_AUTO = 346
TOOL_PROMPT_FORCED = 313
IMAGE_MAX_TOKENS = 1600
IMAGE_MAX_EDGE = 1568
IMAGE_MAX_PIXELS = 1_150_000
IMAGE_PIXELS_PER_TOKEN = 750
PDF_PAGE_TOKENS = 2000
#: base64 characters decoded to find an image's size (JPEG headers may sit behind EXIF data)
IMAGE_HEADER_B64 = 262_144

_ASCII_BYTES = bytes(range(0x80))
_WIDE = re.compile(r"[\u1100-\u11ff\u2e80-\ua4cf\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\U00020000-\U0003ffff]")
_PDF_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")


def text_tokens(text: str) -> int:
    """Tokens of a piece of text (see the module docstring for the rule)."""
    if not text:
        return 0
    if text.isascii():
        return math.ceil(len(text) / 4)
    return _MIXED.get(text)


def _mixed_text_tokens(text: str) -> int:
    """``text_tokens`` of a text with non-ASCII characters."""
    rest = non_ascii_chars(text)
    non_ascii = len(rest)
    wide = len(_WIDE.findall(rest))
    ascii_chars = len(text) - non_ascii
    return math.ceil(ascii_chars / 4 + wide + (non_ascii - wide) / 2)


def non_ascii_chars(text: str) -> str:
    """The non-ASCII characters of ``text``, in order (``text`` with every ASCII run removed): its UTF-8 bytes
    without those below 0x80, which are exactly its ASCII characters (every byte of a multi-byte sequence is
    0x80 or above), decoded again; lone surrogates travel as themselves (``surrogatepass``). C loops only: about
    twice as fast as a regex removing the ASCII runs, on a Claude Code tool description (issue 31)."""
    raw = text.encode("utf-8", "surrogatepass").translate(None, _ASCII_BYTES)
    return raw.decode("utf-8", "surrogatepass")


class TextCounts:
    """``count(text)`` remembered per text, for the last texts counted up to ``budget`` characters in all (the
    least recently used forgotten first; a text longer than an eighth of it is counted, not kept). A client
    sends the same tool descriptions, system prompt and history with every request (a Claude Code request's
    tools alone hold ~45,000 characters, most descriptions with a non-ASCII character): found again by
    equality of the whole text (its hash, then a compare), never by identity or a digest, so a remembered count
    is the count of exactly that text. Thread-safe."""

    def __init__(self, count: Callable[[str], int], budget: int) -> None:
        self.count, self.budget = count, budget
        self.chars = 0
        self._known: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, text: str) -> int:
        with self._lock:
            n = self._known.get(text)
            if n is not None:
                self._known.move_to_end(text)
                return n
        n = self.count(text)
        if len(text) <= self.budget // 8:
            with self._lock:
                if text not in self._known:
                    self._known[text] = n
                    self.chars += len(text)
                    while self.chars > self.budget:
                        old, _ = self._known.popitem(last=False)
                        self.chars -= len(old)
        return n

    def __len__(self) -> int:
        return len(self._known)


#: the counts of the texts with non-ASCII characters (ASCII text is counted from its length alone): at most
#: 2 MB of text (1M characters; 4 MB in the rare text with a character beyond U+FFFF)
_MIXED = TextCounts(_mixed_text_tokens, 1 << 20)


def json_tokens(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, str):
        return text_tokens(value)
    try:
        raw = orjson.dumps(value)
    except TypeError:
        return text_tokens(str(value))
    # ASCII JSON (the usual tool schema): as many characters as bytes, counted without decoding
    return math.ceil(len(raw) / 4) if raw.isascii() else text_tokens(raw.decode())


# -- images ----------------------------------------------------------------------------------------


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG, GIF, WebP or JPEG header, or None."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        w, h = struct.unpack(">II", data[16:24])
        return w, h
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        w, h = struct.unpack("<HH", data[6:10])
        return w, h
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP" and len(data) >= 30:
        kind = data[12:16]
        if kind == b"VP8 ":
            w, h = struct.unpack("<HH", data[26:30])
            return w & 0x3FFF, h & 0x3FFF
        if kind == b"VP8L":
            b = data[21:25]
            w = 1 + (((b[1] & 0x3F) << 8) | b[0])
            h = 1 + (((b[3] & 0xF) << 10) | (b[2] << 2) | ((b[1] & 0xC0) >> 6))
            return w, h
        if kind == b"VP8X":
            w = 1 + int.from_bytes(data[24:27], "little")
            h = 1 + int.from_bytes(data[27:30], "little")
            return w, h
        return None
    if data[:2] == b"\xff\xd8":
        return _jpeg_size(data)
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    i = 2
    n = len(data)
    while i + 9 < n:
        if data[i] != 0xFF:
            i += 1
            continue
        marker = data[i + 1]
        if marker == 0xFF:
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            i += 2
            continue
        length = struct.unpack(">H", data[i + 2 : i + 4])[0]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            h, w = struct.unpack(">HH", data[i + 5 : i + 9])
            return w, h
        i += 2 + length
    return None


def image_tokens_for_size(width: int, height: int) -> int:
    """Anthropic's rule: downscale to a long edge of 1568 px and 1.15 MP, then pixels / 750."""
    if width <= 0 or height <= 0:
        return IMAGE_MAX_TOKENS
    scale = min(1.0, IMAGE_MAX_EDGE / max(width, height), math.sqrt(IMAGE_MAX_PIXELS / (width * height)))
    w = max(1, int(width * scale))
    h = max(1, int(height * scale))
    return min(IMAGE_MAX_TOKENS, math.ceil(w * h / IMAGE_PIXELS_PER_TOKEN))


def _b64_prefix(data: str, chars: int) -> bytes:
    head = data[:chars]
    head = head[: len(head) - len(head) % 4]
    try:
        return base64.b64decode(head, validate=False)
    except (binascii.Error, ValueError):
        return b""


def image_tokens(source: Any) -> int:
    if not isinstance(source, Mapping) or source.get("type") != "base64":
        return IMAGE_MAX_TOKENS
    data = source.get("data")
    if not isinstance(data, str):
        return IMAGE_MAX_TOKENS
    size = image_size(_b64_prefix(data, IMAGE_HEADER_B64))
    if size is None:
        return IMAGE_MAX_TOKENS
    return image_tokens_for_size(*size)


def document_tokens(block: Mapping[str, Any]) -> int:
    source = block.get("source")
    extra = text_tokens(str(block.get("title") or "")) + text_tokens(str(block.get("context") or ""))
    if not isinstance(source, Mapping):
        return extra + PDF_PAGE_TOKENS
    kind = source.get("type")
    if kind == "text":
        return extra + text_tokens(str(source.get("data") or ""))
    if kind == "content":
        return extra + content_tokens(source.get("content"))
    if kind == "base64" and isinstance(source.get("data"), str):
        try:
            raw = base64.b64decode(source["data"], validate=False)
        except (binascii.Error, ValueError):
            raw = b""
        pages = len(_PDF_PAGE.findall(raw))
        return extra + PDF_PAGE_TOKENS * max(1, pages)
    return extra + PDF_PAGE_TOKENS


# -- content ---------------------------------------------------------------------------------------


def block_tokens(block: Any, keep_thinking: bool = True) -> int:
    if isinstance(block, str):
        return text_tokens(block)
    if not _mapping(block):
        return 0
    kind = block.get("type")
    if kind == "text":
        return BLOCK_OVERHEAD + text_tokens(str(block.get("text") or ""))
    if kind == "image":
        return BLOCK_OVERHEAD + image_tokens(block.get("source"))
    if kind == "document":
        return BLOCK_OVERHEAD + document_tokens(block)
    if kind == "tool_use" or kind == "server_tool_use":
        return BLOCK_OVERHEAD + text_tokens(str(block.get("name") or "")) + json_tokens(block.get("input"))
    if kind == "tool_result":
        return BLOCK_OVERHEAD + content_tokens(block.get("content"))
    if kind == "thinking":
        return BLOCK_OVERHEAD + text_tokens(str(block.get("thinking") or "")) if keep_thinking else 0
    if kind == "redacted_thinking":
        return BLOCK_OVERHEAD + len(str(block.get("data") or "")) // 4 if keep_thinking else 0
    # search results, server tool results, tool references, ...: their JSON without the cache marker
    rest = {k: v for k, v in block.items() if k != "cache_control"}
    return BLOCK_OVERHEAD + json_tokens(rest)


def content_tokens(content: Any, keep_thinking: bool = True) -> int:
    if content is None:
        return 0
    if isinstance(content, str):
        return text_tokens(content)
    if isinstance(content, list):
        return sum(block_tokens(b, keep_thinking) for b in content)
    return json_tokens(content)


def tool_tokens(tool: Any) -> int:
    if not _mapping(tool):
        return 0
    if "input_schema" in tool or tool.get("type") in (None, "custom"):
        return (
            TOOL_OVERHEAD
            + text_tokens(str(tool.get("name") or ""))
            + text_tokens(str(tool.get("description") or ""))
            + json_tokens(tool.get("input_schema"))
        )
    # server tools (web_search, bash, text_editor, ...): their definition as JSON
    return TOOL_OVERHEAD + json_tokens({k: v for k, v in tool.items() if k != "cache_control"})


def _mapping(value: object) -> bool:
    """``isinstance(value, Mapping)``, a parsed JSON object (a ``dict``) answered without the ABC check."""
    return type(value) is dict or isinstance(value, Mapping)


def estimate_input_tokens(body: Mapping[str, Any]) -> int:
    """The estimated ``input_tokens`` of an Anthropic Messages (or count_tokens) request body."""
    total = REQUEST_OVERHEAD
    total += content_tokens(body.get("system"))
    messages = body.get("messages")
    if isinstance(messages, list):
        last_assistant = max(
            (i for i, m in enumerate(messages) if _mapping(m) and m.get("role") == "assistant"),
            default=-1,
        )
        for i, msg in enumerate(messages):
            if not _mapping(msg):
                continue
            total += MESSAGE_OVERHEAD + content_tokens(msg.get("content"), keep_thinking=i == last_assistant)
    tools = body.get("tools")
    if isinstance(tools, list) and tools:
        total += sum(tool_tokens(t) for t in tools)
        choice = body.get("tool_choice")
        forced = isinstance(choice, Mapping) and choice.get("type") in ("any", "tool")
        total += TOOL_PROMPT_FORCED if forced else TOOL_PROMPT_AUTO
    return total
