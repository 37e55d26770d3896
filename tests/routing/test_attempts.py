"""Attempts, pools, error classes and the router, with an explicit clock (no I/O)."""

from __future__ import annotations

import pytest

from dragoman.protocols import Protocol
from dragoman.routing.attempts import Attempts
from dragoman.routing.classify import ErrorClass
from dragoman.routing.classify import classify
from dragoman.routing.classify import retry_after
from dragoman.routing.pool import KeyPool
from dragoman.routing.router import Candidate
from dragoman.routing.router import Router
from dragoman.routing.spec import Config
from dragoman.routing.spec import KeyRef
from dragoman.routing.spec import Limits
from dragoman.routing.spec import Route
from dragoman.routing.spec import Target
from dragoman.routing.spec import Upstream
from dragoman.routing.url import parse_upstream


def upstream(name: str, nkeys: int, protocol: Protocol = Protocol.OPENAI_CHAT) -> Upstream:
    keys = tuple(KeyRef(f"{name}-k{i}", f"key #{i + 1}") for i in range(nkeys))
    return Upstream(name, protocol, parse_upstream(f"http://{name}.test/v1"), keys)


def setup(*ups: Upstream, limits: Limits | None = None) -> Attempts:
    pools = {u.name: KeyPool(u.name, u.keys) for u in ups}
    return Attempts([Candidate(u, "m") for u in ups], pools, limits or Limits())


@pytest.mark.parametrize(
    ("status", "body", "cls"),
    [
        (429, b"", ErrorClass.KEY),
        (401, b"", ErrorClass.KEY),
        (403, b"", ErrorClass.KEY),
        (402, b"", ErrorClass.KEY),
        (400, b'{"error":{"message":"Your credit balance is too low"}}', ErrorClass.KEY),
        (500, b"", ErrorClass.UPSTREAM),
        (503, b"", ErrorClass.UPSTREAM),
        (529, b"", ErrorClass.UPSTREAM),
        (400, b'{"error":{"message":"bad"}}', ErrorClass.REQUEST),
        (404, b"", ErrorClass.REQUEST),
        (413, b"", ErrorClass.REQUEST),
        (422, b"", ErrorClass.REQUEST),
    ],
)
def test_classify(status, body, cls):
    assert classify(status, body) is cls


def test_retry_after_forms():
    assert retry_after({"retry-after": "30"}, 0) == 30
    assert retry_after({"retry-after-ms": "1500"}, 0) == 1.5
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:30 GMT"}, 1445412500.0) == 10
    assert retry_after({"retry-after": "soon"}, 0) is None
    assert retry_after({}, 0) is None


def test_429_rotates_to_the_next_key_and_the_cooled_key_rests():
    up = upstream("a", 2)
    att = setup(up)
    first = att.next(0.0)
    assert first.key_index == 0
    att.failed(first, ErrorClass.KEY, 0.1, 429, retry_after=30)
    second = att.next(0.2)
    assert second.candidate.upstream is up and second.key_index == 1
    att.succeeded(second, 0.3, 200)
    assert att.next(0.4) is None
    # a new request inside the retry-after: key 0 is not tried
    again = Attempts(att.candidates, att.pools, Limits())
    assert again.next(10.0).key_index == 1
    # after it: key 0 is back in turn
    later = Attempts(att.candidates, att.pools, Limits())
    assert later.next(31.0).key_index == 0


def test_401_benches_the_key_for_long():
    att = setup(upstream("a", 2), limits=Limits(bench=3600))
    first = att.next(0.0)
    att.failed(first, ErrorClass.KEY, 0.0, 401)
    pool = att.pools["a"]
    assert not pool.available(0, 3599.0) and pool.available(0, 3600.0)


def test_upstream_failure_moves_to_the_next_entry_without_trying_other_keys():
    a, b = upstream("a", 2), upstream("b", 1, Protocol.ANTHROPIC_MESSAGES)
    att = setup(a, b)
    first = att.next(0.0)
    att.failed(first, ErrorClass.UPSTREAM, 0.0, 503)
    second = att.next(0.0)
    assert second.candidate.upstream is b
    assert [o.upstream for o in att.outcomes] == ["a"]


def test_request_failure_stops_everything():
    att = setup(upstream("a", 2), upstream("b", 1))
    first = att.next(0.0)
    att.failed(first, ErrorClass.REQUEST, 0.0, 400)
    assert att.next(0.0) is None
    assert len(att.outcomes) == 1


def test_max_attempts_and_deadline_bound_the_whole():
    att = setup(upstream("a", 5), limits=Limits(max_attempts=2))
    for _ in range(2):
        att.failed(att.next(0.0), ErrorClass.KEY, 0.0, 429)
    assert att.next(0.0) is None
    att = setup(upstream("a", 1), upstream("b", 1), limits=Limits(deadline=10))
    att.failed(att.next(0.0), ErrorClass.UPSTREAM, 11.0, 503)
    assert att.next(11.0) is None
    assert "deadline" in att.skipped[-1]


def test_all_keys_resting_gives_no_attempt_and_the_wait():
    att = setup(upstream("a", 1))
    att.failed(att.next(0.0), ErrorClass.KEY, 0.0, 429, retry_after=20)
    fresh = Attempts(att.candidates, att.pools, Limits())
    assert fresh.next(5.0) is None
    assert fresh.resting_for(5.0) == 15.0
    assert "every key is resting" in fresh.skipped[0]


def test_keyless_upstream_is_tried_once_with_the_clients_key():
    att = setup(upstream("a", 0), upstream("b", 0))
    first = att.next(0.0)
    assert first.key_index is None and first.key is None
    att.failed(first, ErrorClass.KEY, 0.0, 429)
    assert att.next(0.0).candidate.upstream.name == "b"


def test_pool_state_is_bounded_and_survives_reload():
    pool = KeyPool("a", (KeyRef("x", "k1"), KeyRef("y", "k2")))
    for i in range(10_000):
        pool.rest(i % 2, float(i), 1.0, "HTTP 429")
    assert len(pool._until) == 2  # one float per key, whatever the traffic
    pool.rest(0, 0.0, 100_000.0, "HTTP 401")
    new = KeyPool("a", (KeyRef("y", "k2"), KeyRef("x", "k1"), KeyRef("z", "k3")))
    new.carry_from(pool)
    assert not new.available(1, 50_000.0) and new.available(2, 0.0)


def test_router_first_match_targets_and_listed_models():
    ups = {"a": upstream("a", 1), "b": upstream("b", 0)}
    cfg = Config(
        ups,
        (
            Route("claude-haiku-*", (Target("a", "deepseek-chat"),)),
            Route("gpt-4o", (Target("b"),)),
            Route("*", (Target("b", "openrouter/x"), Target("a"))),
        ),
    )
    r = Router(cfg)
    assert r.route("claude-haiku-4-5").match == "claude-haiku-*"
    cands = r.candidates(r.route("something"), "something")
    assert [str(c) for c in cands] == ["b/openrouter/x", "a/something"]
    assert r.listed_models() == ["deepseek-chat", "gpt-4o", "openrouter/x"]
