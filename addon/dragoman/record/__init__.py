"""Recordings of exchanges: the ``Exchange`` model (``model``), request keys for replay matching (``keys``)
and redaction of secrets (``redact``).

Sans-I/O: may import ``dragoman.protocols``, ``dragoman.ir``, pydantic; never mitmproxy, asyncio or files
(reading and writing recordings lives in ``dragoman.mitm.recording.files``).
"""
