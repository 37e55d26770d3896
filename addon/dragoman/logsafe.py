"""``logsafe``: client-supplied text (model names, paths, header values, client and route names, file names)
made safe for ONE log line (issue 23, item 5).

Every character that is not printable (CR, LF, TAB, ESC and the other C0/C1 controls, DEL, U+2028/U+2029,
format characters such as bidi overrides) is written as its Python escape (``\\n``, ``\\x1b``, ``\\u2028``), so
a newline or control character in a model name can neither start a forged log line nor move the terminal's
cursor. Long values are cut (``limit``) with ``...``. Printable text, non-ASCII letters included, is unchanged.
Sans-I/O: used by ``dragoman.mitm``, ``.routing``, ``.ledger`` and ``.record`` alike.
"""

from __future__ import annotations

LIMIT = 300


def logsafe(value: object, limit: int = LIMIT) -> str:
    text = value if isinstance(value, str) else str(value)
    if len(text) > limit:
        text = text[:limit] + "..."
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
