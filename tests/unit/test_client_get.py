"""``Client.get`` (astraeus_tui/client.py): one HTTP/1.1 GET over a plain Unix socket, as
`astra ls` reads the queue, against a real socket answering as an HTTP server may; and the
dashboard's ``AsyncClient`` where that socket breaks off."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from astraeus_tui.client import ApiError, AsyncClient, Client


@pytest.fixture
def answer(tmp_path: Path) -> Iterator[tuple[Path, list[bytes], list[bytes]]]:
    """A socket that answers each connection with the next bytes of ``answers``."""
    path = tmp_path / "s.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(4)
    answers: list[bytes] = []
    requests: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(4096)
                requests.append(data)
                conn.sendall(answers.pop(0))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield path, answers, requests
    server.close()


def test_a_body_by_length_or_in_chunks_and_an_error_as_its_one_line(
    answer: tuple[Path, list[bytes], list[bytes]],
) -> None:
    path, answers, requests = answer
    client = Client(path, timeout=5)
    answers.append(b'HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{"runs":[]}')
    assert client.get("/v1/runs", {"fields": "name,state", "all": True}) == b'{"runs":[]}'
    assert requests[-1].startswith(b"GET /v1/runs?fields=name%2Cstate&all=1 HTTP/1.1\r\n")
    assert b"Connection: close\r\n" in requests[-1]
    answers.append(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                   b"4\r\n{\"ru\r\n7;x=1\r\nns\":[]}\r\n0\r\n\r\n")  # fmt: skip
    assert client.get("/v1/runs") == b'{"runs":[]}'
    error = (
        b'{"error": {"status": 400, "code": "BAD_REQUEST", "message": "fields: no run field x"}}'
    )
    answers.append(
        b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n\r\n%s" % (len(error), error)
    )
    with pytest.raises(ApiError) as refused:
        client.get("/v1/runs", {"fields": "x"})
    assert str(refused.value) == "400 BAD_REQUEST: fields: no run field x"


def test_no_daemon_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ApiError) as missing:
        Client(tmp_path / "none.sock").get("/v1/runs")
    assert missing.value.code == "NO_DAEMON" and "astra up" in str(missing.value)


@pytest.mark.parametrize(
    "cut",
    [b"", b'HTTP/1.1 201 Created\r\nContent-Length: 90\r\n\r\n{"name"'],
    ids=["closed", "cut short"],
)
def test_the_dashboard_says_a_connection_broken_before_the_answer_in_one_line(
    answer: tuple[Path, list[bytes], list[bytes]], cut: bytes
) -> None:
    """A connection that breaks after the request was sent (closed with no answer, or in the
    middle of one) is an ``ApiError`` that says the request may have been done, as every
    dashboard action catches: never an error of the HTTP library, which a worker of the
    dashboard would end on without a word (the New run form stayed open, silent)."""
    path, answers, requests = answer
    answers.append(cut)

    def submit(to: Path) -> None:
        async def main() -> None:
            client = AsyncClient(to)
            try:
                await client.submit({"name": "x"})
            finally:
                await client.close()

        asyncio.run(main())

    with pytest.raises(ApiError) as broken:
        submit(path)
    assert requests[-1].startswith(b"POST /v1/runs HTTP/1.1\r\n")
    assert broken.value.code == "LOST_DAEMON", broken.value
    assert "may have been done" in str(broken.value) and "\n" not in str(broken.value)
    with pytest.raises(ApiError) as missing:
        submit(path.with_name("none.sock"))
    assert missing.value.code == "NO_DAEMON" and "astra up" in str(missing.value)


def test_a_stream_comes_line_by_line_by_length_or_in_chunks(
    answer: tuple[Path, list[bytes], list[bytes]],
) -> None:
    """``Client.stream`` (logs, events followed): lines split across chunks come whole,
    the last one without its newline too; a refusal is its one line."""
    path, answers, requests = answer
    client = Client(path, timeout=5)
    answers.append(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                   b"6\r\none\ntw\r\n8;x=1\r\no\nthree\n\r\n4\r\nfour\r\n0\r\n\r\n")  # fmt: skip
    assert list(client.stream("/v1/events", {"follow": True})) == [
        b"one\n", b"two\n", b"three\n", b"four",
    ]  # fmt: skip
    assert requests[-1].startswith(b"GET /v1/events?follow=1 HTTP/1.1\r\n")
    answers.append(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\na\nb\n")
    assert list(client.stream("/v1/runs/x/logs")) == [b"a\n", b"b\n"]
    error = b'{"error": {"status": 404, "code": "NOT_FOUND", "message": "no run x"}}'
    answers.append(b"HTTP/1.1 404 Not Found\r\nContent-Length: %d\r\n\r\n%s" % (len(error), error))
    with pytest.raises(ApiError) as refused:
        list(client.stream("/v1/runs/x/logs"))
    assert str(refused.value) == "404 NOT_FOUND: no run x"
