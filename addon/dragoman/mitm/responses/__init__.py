"""The Responses API's state in the addon: the response store's hooks (``state``), the stateful endpoints
(``api``) and Responses over WebSocket (``socket``, with its loopback peer ``ws_sink`` and one turn's run
``ws_turn``). The store itself and its rules are ``dragoman.state`` (no mitmproxy)."""
