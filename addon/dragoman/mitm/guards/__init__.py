"""What a request must pass before it costs anything.

Client keys (``client_auth``), browser origins (``cors``), body caps and bounded inflation (``limits``,
``inflate``), the scrub of credentials from flows that can be saved (``scrub``), and keeping one fast stream
from holding up the event loop (``responsive``). Imports the per-flow plumbing of ``dragoman.mitm`` (hosts,
options, inbound answers); nothing here imports the relay or the recorder.
"""
