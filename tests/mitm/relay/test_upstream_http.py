"""The relay's upstream client keeps connections alive: reused when an answer was read to its end, never when it
was cut, announced ``connection: close``, or idled too long; a connection the server closed while idle is
replaced once, for the same request (issue 31)."""

from __future__ import annotations

import asyncio

import pytest

from dragoman.mitm.relay import upstream_http
from dragoman.mitm.relay.upstream_http import UpstreamConnectError
from dragoman.mitm.relay.upstream_http import open_request
from dragoman.routing.url import UpstreamURL


class Server:
    """An HTTP/1.1 server on 127.0.0.1 answering each request with ``answer(n)``; counts connections."""

    def __init__(self, answer, close_after: int | None = None) -> None:
        self.answer = answer
        self.close_after = close_after  # close the connection after this many answers on it
        self.connections = 0
        self.requests = 0
        self.bodies: list[bytes] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        served = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                self.bodies.append(await reader.readexactly(length))
                self.requests += 1
                data = self.answer(self.requests)
                if data is None:  # hang up without answering
                    break
                writer.write(data)
                await writer.drain()
                served += 1
                if self.close_after is not None and served >= self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def __aenter__(self) -> UpstreamURL:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return UpstreamURL("http", "127.0.0.1", port, "")

    async def __aexit__(self, *exc) -> None:
        upstream_http.close_idle()
        self.server.close()


def length_answer(n: int) -> bytes:
    body = f'{{"n": {n}}}'.encode()
    return b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)


def chunked_answer(n: int) -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"


async def ask(url: UpstreamURL, body: bytes = b"{}", read: bool = True) -> bytes:
    resp = await open_request(
        url, "/v1/x", [("content-type", "application/json")], body, connect_timeout=5, first_byte_timeout=5
    )
    out = await resp.read() if read else (await resp.next_chunk() or b"")
    resp.close()
    return out


def run(coro):
    return asyncio.run(coro)


@pytest.mark.parametrize("answer", [length_answer, chunked_answer], ids=["content-length", "chunked"])
def test_an_answer_read_to_its_end_gives_its_connection_back(answer):
    srv = Server(answer)

    async def main():
        async with srv as url:
            outs = [await ask(url, b'{"i": %d}' % i) for i in range(5)]
        return outs

    outs = run(main())
    assert srv.requests == 5 and srv.connections == 1
    assert srv.bodies == [b'{"i": %d}' % i for i in range(5)]
    assert outs[0] in (b'{"n": 1}', b"hello")


def test_connection_close_and_http10_answers_are_not_reused():
    def close_answer(n: int) -> bytes:
        return b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok"

    def old_answer(n: int) -> bytes:
        return b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok"

    for answer in (close_answer, old_answer):
        srv = Server(answer)

        async def main(srv=srv):
            async with srv as url:
                for _ in range(3):
                    assert await ask(url) == b"ok"

        run(main())
        assert srv.connections == 3, answer.__name__


def test_an_answer_left_unread_closes_its_connection():
    def long_answer(n: int) -> bytes:
        return b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1\r\na\r\n1\r\nb\r\n0\r\n\r\n"

    srv = Server(long_answer)

    async def main():
        async with srv as url:
            assert await ask(url, read=False) == b"a"  # one piece of two, then closed
            assert await ask(url, read=False) == b"a"

    run(main())
    assert srv.connections == 2


def test_a_connection_the_server_closed_while_idle_is_replaced_for_the_same_request():
    srv = Server(length_answer, close_after=1)  # the server ends each connection after one answer

    async def main():
        async with srv as url:
            first = await ask(url, b"1")
            await asyncio.sleep(0.05)  # the server's close arrives while the connection idles in the pool
            second = await ask(url, b"2")
            return first, second

    first, second = run(main())
    assert (first, second) == (b'{"n": 1}', b'{"n": 2}')
    assert srv.connections == 2 and srv.bodies == [b"1", b"2"]  # sent once each


def test_a_server_hanging_up_on_a_reused_connection_gets_the_request_again_once():
    answers = {1: length_answer(1), 2: None, 3: length_answer(3)}
    srv = Server(lambda n: answers[n])

    async def main():
        async with srv as url:
            assert await ask(url, b"a") == b'{"n": 1}'
            return await ask(url, b"b")

    assert run(main()) == b'{"n": 3}'
    assert srv.bodies == [b"a", b"b", b"b"] and srv.connections == 2


def test_a_new_connection_closed_without_an_answer_is_a_connect_error():
    srv = Server(lambda n: None)

    async def main():
        async with srv as url:
            with pytest.raises(UpstreamConnectError, match="closed the connection before answering"):
                await ask(url)

    run(main())
    assert srv.requests == 1  # not repeated: the connection was new


def test_a_connection_idle_too_long_is_not_reused(monkeypatch):
    monkeypatch.setattr(upstream_http, "POOL_IDLE", 0.0)
    srv = Server(length_answer)

    async def main():
        async with srv as url:
            await ask(url)
            await ask(url)

    run(main())
    assert srv.connections == 2


def test_the_pool_is_bounded_per_origin(monkeypatch):
    monkeypatch.setattr(upstream_http, "POOL_SIZE", 2)
    srv = Server(length_answer)

    async def main():
        async with srv as url:
            resps = [
                await open_request(url, "/x", [], b"{}", connect_timeout=5, first_byte_timeout=5) for _ in range(4)
            ]
            for r in resps:
                await r.read()
                r.close()
            key = next(iter(upstream_http._idle))
            return len(upstream_http._idle[key])

    assert run(main()) == 2
    assert srv.connections == 4
