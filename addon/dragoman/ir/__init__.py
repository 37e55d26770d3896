"""The neutral intermediate representation (IR) between protocols.

Owns: the request model (``request``), the whole-response model (``response``), stream events
(``events``), usage/stop/error value types (``common``), the stop-reason tables (``mapping``) and
the prefix-tagged carrying of opaque reasoning state across protocols (``carry``).
May import: ``dragoman.sse`` only. Never a protocol package, never mitmproxy.

Conventions every codec relies on:
* ``Usage.input_tokens`` is the TOTAL prompt size, cache reads and cache writes included (OpenAI
  convention). Anthropic's encoder subtracts the cache fields; Anthropic's decoder adds them.
* Tool-call arguments travel as a JSON *string* (``arguments``), exactly as the model produced it.
* Block indices in stream events are identity keys chosen by the decoder, unique per stream; encoders
  allocate their own output indices.
"""
