"""Recording exchanges to disk and replaying them through the live path.

``recorder`` (the addon: client request, upstream request, both answers, chunk timing), ``build`` and ``spool``
(turning a flow into a record, streamed bodies spooled chunk by chunk), ``writer`` (the writer thread, off the
event loop), ``files`` (where sessions live on disk), ``replayer`` (answering from recordings). The record format
itself is ``dragoman.record``.
"""
