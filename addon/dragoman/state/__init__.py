"""The Responses state store: what Dragoman answered on the Responses API, kept so ``previous_response_id``,
``GET/DELETE /v1/responses/{id}`` and ``input_items`` work toward any upstream. The pure rules (records,
chains, pages) live in ``record``; the backends (SQLite by default, Redis for several instances) do I/O
but never import mitmproxy, like the usage ledger's."""

from dragoman.state.open import open_store
from dragoman.state.record import StoredResponse
from dragoman.state.store import DEFAULT_STORE
from dragoman.state.store import ResponseStore
from dragoman.state.store import StoreError

__all__ = ["DEFAULT_STORE", "ResponseStore", "StoreError", "StoredResponse", "open_store"]
