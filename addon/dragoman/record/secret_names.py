"""The one list of credential names that recordings redact (headers, query parameters, JSON body fields).

A name is compared in its *normal form*: lower case, camelCase split (``apiKey`` -> ``api_key``), and
``-``, ``.`` and spaces read as ``_`` (``x-api-key`` -> ``x_api_key``). Then:

* ``CREDENTIAL_NAMES``: a name equal to one of these is a credential, wherever it appears
  (``api_key``, ``access_token``, ``client_secret``, ``password``...);
* ``CREDENTIAL_SUFFIXES``: a name ending in ``_`` + one of these is a credential too (``x_api_key``,
  ``openai_api_key``, ``github_access_token``, ``db_password``, ``aws_secret_access_key``...);
* ``HEADER_NAMES``: headers that carry credentials under a name that does not say so (``authorization``,
  ``cookie``...);
* ``QUERY_NAMES``: query parameters that are credentials only in a URL (Google's ``?key=``, ``?token=``,
  a signed URL's ``sig``/``signature``): as body fields these names are ordinary LLM data (a logprobs
  entry's ``token``, a thinking block's ``signature``, a tool's ``key`` argument), so they are not redacted
  there.

Deliberately NOT credentials: ``token`` or ``key`` alone in a body, and anything plural or usage-like
(``max_tokens``, ``input_tokens``, ``cache_read_input_tokens``, ``prompt_cache_key``, ``idempotency_key``,
``signature``, ``encrypted_content``): a body field is redacted by these rules only when its value is a
string or a number, so a tool schema's ``properties.password`` (an object) stays intact.
``dragoman_redact`` adds names of any kind (see ``dragoman.record.redact``).
"""

from __future__ import annotations

import re
from functools import lru_cache

CREDENTIAL_NAMES = frozenset(
    {
        "api_key",
        "apikey",
        "api_token",
        "api_secret",
        "access_token",
        "refresh_token",
        "id_token",
        "auth_token",
        "session_token",
        "bearer_token",
        "security_token",
        "client_secret",
        "secret",
        "secret_key",
        "private_key",
        "access_key",
        "password",
        "passwd",
        "passphrase",
        "credential",
        "credentials",
    }
)
CREDENTIAL_SUFFIXES = (
    "api_key",
    "apikey",
    "api_token",
    "api_secret",
    "access_token",
    "refresh_token",
    "id_token",
    "auth_token",
    "session_token",
    "bearer_token",
    "security_token",
    "secret",
    "secret_key",
    "secret_access_key",
    "private_key",
    "password",
    "passwd",
    "passphrase",
)
HEADER_NAMES = frozenset({"authorization", "proxy_authorization", "cookie", "set_cookie"})
QUERY_NAMES = frozenset({"key", "token", "auth", "sig", "signature", "code"})

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEP = re.compile(r"[-.\s]+")


@lru_cache(maxsize=4096)
def normal(name: str) -> str:
    """``X-Api-Key`` -> ``x_api_key``, ``clientSecret`` -> ``client_secret``."""
    return _SEP.sub("_", _CAMEL.sub("_", name.strip())).lower()


@lru_cache(maxsize=4096)
def is_credential(name: str) -> bool:
    """A credential's name in any place (body field, header, query parameter)."""
    n = normal(name)
    return n in CREDENTIAL_NAMES or any(n.endswith("_" + s) for s in CREDENTIAL_SUFFIXES)


@lru_cache(maxsize=4096)
def is_secret_header(name: str) -> bool:
    return normal(name) in HEADER_NAMES or is_credential(name)


@lru_cache(maxsize=4096)
def is_secret_query(name: str) -> bool:
    return normal(name) in QUERY_NAMES or is_credential(name)
