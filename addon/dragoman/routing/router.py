"""First-match routing on the model the client asked for."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from dragoman.ir.limits import ModelLimits
from dragoman.routing.spec import Config
from dragoman.routing.spec import Route
from dragoman.routing.spec import Upstream
from dragoman.translate.plan import map_model

WILDCARDS = frozenset("*?[")


@dataclass(frozen=True, slots=True)
class Candidate:
    """One entry of a route's ``to``, resolved for one request."""

    upstream: Upstream
    model: str

    def __str__(self) -> str:
        return f"{self.upstream.name}/{self.model}"


class Router:
    __slots__ = ("config",)

    def __init__(self, config: Config) -> None:
        self.config = config

    def route(self, model: str) -> Route | None:
        for route in self.config.routes:
            if fnmatch.fnmatchcase(model, route.match):
                return route
        return None

    def candidates(self, route: Route, model: str) -> list[Candidate]:
        out = []
        for target in route.to:
            upstream = self.config.upstreams[target.upstream]
            chosen = target.model if target.model is not None else map_model(list(route.model_map), model)
            out.append(Candidate(upstream, chosen))
        return out

    def limits_for(self, model: str) -> ModelLimits | None:
        """The declared limits (routes file ``models:``) of the first target ``model`` is routed to."""
        route = self.route(model)
        if route is None:
            return None
        first = self.candidates(route, model)[0]
        return self.config.model_limits(first.upstream.name, first.model)

    def listed_models(self) -> list[str]:
        """Every ``match`` without wildcards and every explicit ``UPSTREAM/MODEL`` model, in file order."""
        seen: dict[str, None] = {}
        for route in self.config.routes:
            if not WILDCARDS & set(route.match):
                seen.setdefault(route.match, None)
            for target in route.to:
                if target.model is not None:
                    seen.setdefault(target.model, None)
        for route in self.config.routes:
            for rule in route.model_map:
                seen.setdefault(rule.model, None)
        return list(seen)
