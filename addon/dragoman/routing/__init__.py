"""Routing: which upstream answers a request, with which model and which key (sans-I/O).

``spec``      the parsed configuration (upstreams, routes, client keys, limits): frozen dataclasses
``url``       upstream base URLs and endpoint paths
``keyspec``   literal keys and ``env:NAME``
``load``      the routes file (YAML) and the single-upstream options -> ``spec.Config``, with clear errors
``router``    first-match model routing and the models a config makes reachable
``pool``      per-upstream key pools: rotation, cooldown after 429, benching after 401/403
``classify``  upstream failures -> key-bound / upstream-bound / request-bound
``attempts``  the bounded sequence of attempts for one request (what to try next, when to stop)

May import ``dragoman.protocols`` (the ``Protocol`` enum) and ``dragoman.errors``. Never mitmproxy, asyncio
or sockets: the clock is passed in.
"""
