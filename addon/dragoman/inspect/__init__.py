"""Looking at translated exchanges after the fact: ``python -m dragoman inspect`` and the mitmweb view.

Owns: assembling one side of an exchange from its bytes (``assemble``), reading recordings into exchanges
(``load``; a mitmproxy flow file through ``dragoman.mitm.recording.flowfile``, imported only for one), and
the table / detail rendering (``render``). May import: ``dragoman.ir``, ``dragoman.protocols``,
``dragoman.record``, ``dragoman.sse``. Never mitmproxy itself.
"""
