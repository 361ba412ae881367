"""The one way to talk to the daemon: HTTP/JSON over its Unix socket.

``Client`` is synchronous and uses only the standard library (astraeus_tui/wire.py, the
transport every answered request goes through) and msgspec; ``AsyncClient`` (aiohttp)
serves the dashboard. Both make their calls from one table of the daemon's endpoints
(astraeus_tui/endpoints.py); the streams (logs, events, the change stream, exec) are
their own. The fast commands (cli/fast/) call ``wire`` directly with plain
JSON, so they load neither msgspec nor runner.schema. Run, group,
event and GPU objects come back as the typed Structs of runner/schema.py (a field a
newer daemon adds is ignored); the other answers (status, workspaces, why, preview)
as the JSON's dicts.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from astraeus_tui.endpoints import AwaitedEndpoints, Endpoint, Endpoints
from astraeus_tui.wire import (
    ApiError,
    exchange,
    raise_for,
    socket_path,
    stream,
    target,
    unreachable,
)
from astraeus_tui.wire import quoted as quote
from runner.schema import Change, Event, Snapshot

__all__ = ["ApiError", "AsyncClient", "Client", "default_socket"]

T = TypeVar("T")


def default_socket() -> Path:
    return Path(socket_path())


_path, _raise_for = target, raise_for


class Client(Endpoints):
    """The daemon's endpoints (astraeus_tui/endpoints.py), each answered at once."""

    def __init__(self, socket_path: Path | None = None, timeout: float | None = 30) -> None:
        self.socket_path = socket_path or default_socket()
        self.timeout = timeout

    def request(
        self, method: str, path: str, body: object = None, *,
        query: dict[str, Any] | None = None, raw: bytes | None = None,
        content_type: str = "application/json",
    ) -> Any:  # fmt: skip
        return json.loads(
            self.answer(method, path, body, query=query, raw=raw, content_type=content_type)
            or b"null"
        )

    def answer(
        self, method: str, path: str, body: object = None, *,
        query: dict[str, Any] | None = None, raw: bytes | None = None,
        content_type: str = "application/json",
    ) -> bytes:  # fmt: skip
        """The answer's body as the daemon sent it."""
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        return exchange(self.socket_path, method, _path(path, query), data, content_type,
                        self.timeout)  # fmt: skip

    def typed(
        self, kind: type[T], method: str, path: str, body: object = None, *,
        query: dict[str, Any] | None = None, raw: bytes | None = None,
        content_type: str = "application/json",
    ) -> T:  # fmt: skip
        """The answer decoded into ``kind`` (runner/schema.py)."""
        data = self.answer(method, path, body, query=query, raw=raw, content_type=content_type)
        return msgspec.json.decode(data, type=kind)

    def get(self, path: str, query: dict[str, Any] | None = None) -> bytes:
        """A GET's body, over a plain socket (HTTP/1.1, one request, the connection closed
        after it)."""
        return exchange(self.socket_path, "GET", _path(path, query), None, "", self.timeout)

    def stream(self, path: str, query: dict[str, Any] | None = None) -> Iterator[bytes]:
        """The body as it arrives, line by line."""
        return stream(self.socket_path, _path(path, query), self.timeout)

    def ask(self, endpoint: Endpoint[Any, T], *args: Any, **kwargs: Any) -> T:
        """``endpoint``'s call (astraeus_tui/endpoints.py) with these arguments, answered."""
        call = endpoint.call(*args, **kwargs)
        data = self.answer(call.method, call.path, call.body, query=call.query, raw=call.raw,
                           content_type=call.content_type)  # fmt: skip
        return call.read(data)

    def logs(self, name: str, follow: bool = False, tail: int = 0) -> Iterator[bytes]:
        return self.stream(f"/v1/runs/{quote(name)}/logs", {"follow": follow, "tail": tail or None})

    def events(self, run: str | None = None, follow: bool = False) -> Iterator[Event]:
        decoder = msgspec.json.Decoder(Event)
        for line in self.stream("/v1/events", {"run": run, "follow": follow}):
            if line.strip():
                yield decoder.decode(line)


_STREAM: dict[str, type[Snapshot] | type[Change]] = {"snapshot": Snapshot, "change": Change}
STREAM_CHUNK = 1 << 20  # bytes read at a time from the change stream


async def _sse_lines(content: Any) -> AsyncIterator[bytes]:
    """The stream's lines without their newline, however long: a snapshot of 10,000 runs
    is one line of megabytes, past what aiohttp's ``readline`` takes (LineTooLong)."""
    pending = bytearray()
    async for chunk in content.iter_chunked(STREAM_CHUNK):
        start, end = 0, chunk.find(b"\n")
        while end >= 0:
            if pending:
                pending += chunk[start:end]
                yield bytes(pending)
                pending.clear()
            else:
                yield chunk[start:end]
            start, end = end + 1, chunk.find(b"\n", end + 1)
        pending += chunk[start:]
    if pending:
        yield bytes(pending)


class DashboardApi(AwaitedEndpoints):
    """What the dashboard needs of a daemon: every endpoint (astraeus_tui/endpoints.py),
    awaited, and the streams. ``AsyncClient`` asks the daemon; ``EscapedApi`` and a
    test's fake answer in their own way (``ask``)."""

    async def close(self) -> None:
        raise NotImplementedError

    def changes(self) -> AsyncIterator[tuple[str, Snapshot | Change]]:
        raise NotImplementedError

    async def events(self, run: str | None = None) -> list[Event]:
        raise NotImplementedError

    def logs(self, name: str, tail: int = 200, follow: bool = True) -> AsyncIterator[str]:
        raise NotImplementedError


class AsyncClient(DashboardApi):
    """The dashboard's client: the daemon's endpoints, awaited, the streams, and exec."""

    def __init__(self, socket_path: Path | None = None) -> None:
        self.socket_path = socket_path or default_socket()
        self._session: Any = None

    async def _get_session(self) -> Any:
        if self._session is None:
            import aiohttp  # lazy: only the dashboard needs it

            # reuse a connection only well within the daemon's idle timeout (default 5 s)
            connector = aiohttp.UnixConnector(path=str(self.socket_path), keepalive_timeout=2)
            self._session = aiohttp.ClientSession(connector=connector)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def ask(self, endpoint: Endpoint[Any, T], *args: Any, **kwargs: Any) -> T:
        call = endpoint.call(*args, **kwargs)
        data = await self.answer(call.method, call.path, call.body, query=call.query,
                                 raw=call.raw, content_type=call.content_type)  # fmt: skip
        return call.read(data)

    async def answer(
        self, method: str, path: str, body: object = None, *,
        query: dict[str, Any] | None = None, raw: bytes | None = None,
        content_type: str = "application/json",
    ) -> bytes:  # fmt: skip
        """The answer's body as the daemon sent it."""
        from aiohttp import ClientConnectorError, ClientError

        session = await self._get_session()
        payload = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        headers = {"Content-Type": content_type} if payload is not None else {}
        try:
            async with session.request(
                method, "http://localhost" + _path(path, query), data=payload, headers=headers
            ) as response:
                data: bytes = await response.read()
                if response.status >= 400:
                    _raise_for(response.status, data)
                return data
        except ClientConnectorError as e:  # not sent
            raise unreachable(self.socket_path, e.os_error) from e
        except (ClientError, OSError) as e:  # sent on a connection that broke: maybe done
            raise ApiError(
                0, "LOST_DAEMON",
                f"the connection to the daemon broke before its answer ({e or type(e).__name__}):"
                " what was asked may have been done; look before asking again",
            ) from e  # fmt: skip

    async def changes(self) -> AsyncIterator[tuple[str, Snapshot | Change]]:
        """(event, data) from the daemon's SSE stream: a snapshot, then changes."""
        session = await self._get_session()
        async with session.get("http://localhost/v1/stream", timeout=None) as response:
            if response.status >= 400:
                _raise_for(response.status, await response.read())
            event = ""
            async for line in _sse_lines(response.content):
                if line.startswith(b"event: "):
                    event = line[7:].decode()
                elif line.startswith(b"data: ") and event in _STREAM:
                    yield event, msgspec.json.decode(line[6:], type=_STREAM[event])

    async def text(self, path: str, **query: Any) -> str:
        return (await self.answer("GET", path, query=query)).decode(errors="replace")

    async def lines(self, path: str, **query: Any) -> AsyncIterator[str]:
        """A streamed body, line by line, as it arrives (logs, events)."""
        session = await self._get_session()
        async with session.get("http://localhost" + _path(path, query), timeout=None) as response:
            if response.status >= 400:
                _raise_for(response.status, await response.read())
            async for raw in response.content:
                yield raw.decode(errors="replace")

    def exec(
        self, name: str, argv: list[str], *, worker: int | None = None, tty: bool = False,
        rows: int = 24, cols: int = 80,
    ) -> ExecChannel:  # fmt: skip
        """A command inside the run's worker (``GET /v1/runs/{name}/exec``), to be entered
        with ``async with``."""
        first = {"argv": argv, "worker": worker, "tty": tty, "rows": rows, "cols": cols}
        return ExecChannel(self, f"/v1/runs/{quote(name, safe='')}/exec", first)

    def terminal(self, name: str, *, rows: int = 24, cols: int = 80) -> ExecChannel:
        """An interactive run's terminal (``GET /v1/runs/{name}/terminal``), from its wait
        in the queue to its end; to be entered with ``async with``."""
        path = f"/v1/runs/{quote(name, safe='')}/terminal"
        return ExecChannel(self, path, {"rows": rows, "cols": cols})

    async def events(self, run: str | None = None) -> list[Event]:
        """The event log so far (of one run), oldest first."""
        text = await self.text("/v1/events", run=run)
        decoder = msgspec.json.Decoder(Event)
        return [decoder.decode(line) for line in text.splitlines() if line.strip()]

    def logs(self, name: str, tail: int = 200, follow: bool = True) -> AsyncIterator[str]:
        return self.lines(f"/v1/runs/{quote(name)}/logs", tail=tail or None, follow=follow)


WAITING = -1  # ExecChannel.output's channel for a waiting run's state and reason
STARTED = -2  # and for the run's start: its terminal is the client's from now on


class ExecChannel:
    """One exec session's WebSocket (docs/api.md): bytes in, output and the exit out."""

    def __init__(self, client: AsyncClient, path: str, first: dict[str, Any]) -> None:
        self._client, self._path, self._first = client, path, first
        self._ws: Any = None
        self._open: Any = None

    async def __aenter__(self) -> ExecChannel:
        session = await self._client._get_session()
        try:
            self._open = session.ws_connect("http://localhost" + self._path, max_msg_size=0)
            self._ws = await self._open.__aenter__()
        except OSError as e:
            raise unreachable(self._client.socket_path, getattr(e, "os_error", e)) from e
        await self._ws.send_str(json.dumps(self._first))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._open is not None:
            await self._open.__aexit__(*exc)

    async def send(self, data: bytes) -> None:
        if not self._ws.closed:
            await self._ws.send_bytes(b"\0" + data)

    async def send_eof(self) -> None:
        if not self._ws.closed:
            await self._ws.send_str(json.dumps({"eof": True}))

    async def resize(self, rows: int, cols: int) -> None:
        if not self._ws.closed:
            await self._ws.send_str(json.dumps({"resize": [rows, cols]}))

    async def output(self) -> AsyncIterator[tuple[int, bytes | dict[str, Any]]]:
        """(1 or 2, bytes) as the command writes them; ends with the command. A run's
        terminal also gives (WAITING, {"state", "reason"}) while the run waits to start,
        then (STARTED, {"worker"}).
        Afterwards ``exit_code`` is the command's and ``ended`` the run's state and reason."""
        import aiohttp

        self.exit_code: int | None = None
        self.ended: dict[str, Any] = {}
        async for message in self._ws:
            if message.type is aiohttp.WSMsgType.BINARY and message.data:
                yield message.data[0], message.data[1:]
            elif message.type is aiohttp.WSMsgType.TEXT:
                said = json.loads(message.data)
                if "error" in said:
                    e = said["error"]
                    raise ApiError(e.get("status", 0), e.get("code", ""), e.get("message", ""))
                if "waiting" in said:
                    yield WAITING, said["waiting"]
                if "started" in said:
                    yield STARTED, said["started"]
                if "ended" in said:
                    self.ended = said["ended"]
                if "exit_code" in said:
                    self.exit_code = said["exit_code"]
                    self.ended = {k: v for k, v in said.items() if k != "exit_code"}
