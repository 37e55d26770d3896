"""The answer's way back to the client, once the upstream answered.

A stream's set-up and whole-body translation (``inbound``), the stream callable mitmproxy calls per chunk
(``callables``), and the answers after an upstream fault: the idle watchdog, the error in the client's
protocol (``faults``). Called by the Translate addon's response hooks; imports the per-flow plumbing of
``dragoman.mitm`` and its guards, nothing here imports the Translate addon.
"""
