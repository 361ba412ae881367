"""The one way to talk to the daemon: HTTP/JSON over its Unix socket.

``Client`` is synchronous and uses only the standard library (astraeus_tui/wire.py, the
transport every answered request goes through) and msgspec; ``AsyncClient`` (aiohttp)
serves the dashboard. The fast commands (cli/fast/) call ``wire`` directly with plain
JSON, so they load neither msgspec nor runner.schema. Run, group,
event and GPU objects come back as the typed Structs of runner/schema.py (a field a
newer daemon adds is ignored); the other answers (status, workspaces, why, preview)
as the JSON's dicts.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Protocol, TypeVar

import msgspec

from astraeus_tui.wire import (
    ApiError,
    dechunk,
    exchange,
    raise_for,
    socket_path,
    stream,
    target,
    unreachable,
)
from astraeus_tui.wire import quoted as quote
from runner.schema import (
    Batch,
    Change,
    Event,
    GpuList,
    Group,
    GroupDetail,
    GroupList,
    History,
    Run,
    RunDetail,
    RunList,
    RunTelemetry,
    Snapshot,
    Telemetry,
    Usage,
)

__all__ = ["ApiError", "AsyncClient", "Client", "default_socket"]

T = TypeVar("T")


def default_socket() -> Path:
    return Path(socket_path())


_unreachable, _dechunk, _path, _raise_for = unreachable, dechunk, target, raise_for


class Client:
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

    # ------------------------------------------------------------ calls

    def runs(self, **query: Any) -> list[Run]:
        """The queue (``fields="name,state"``: only those fields sent, the rest default)."""
        return msgspec.json.decode(self.get("/v1/runs", query), type=RunList).runs

    def submit(self, document: object) -> Run:
        return self.typed(Run, "POST", "/v1/runs", document)

    def submit_text(self, text: str, content_type: str) -> Run:
        return self.typed(Run, "POST", "/v1/runs", raw=text.encode(), content_type=content_type)

    def submit_batch(self, ndjson: bytes) -> Batch:
        """Many run documents, one JSON document a line: each one's run or refusal."""
        return self.typed(Batch, "POST", "/v1/runs:batch", raw=ndjson,
                          content_type="application/x-ndjson")  # fmt: skip

    def show(self, name: str) -> RunDetail:
        return self.typed(RunDetail, "GET", f"/v1/runs/{quote(name)}")

    def why(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self.request("GET", f"/v1/runs/{quote(name)}/why")
        return result

    def preview(self, document: object) -> dict[str, Any]:
        result: dict[str, Any] = self.request("POST", "/v1/preview", document)
        return result

    def set_priority(self, name: str, priority: int) -> Run:
        return self.typed(Run, "PATCH", f"/v1/runs/{quote(name)}", {"priority": priority})

    def update(self, name: str, change: dict[str, Any]) -> Run:
        """Edit a run (astra update): time_limit_seconds, gpus, cpu_cores, memory, priority."""
        return self.typed(Run, "PATCH", f"/v1/runs/{quote(name)}", change)

    def drain(self, reason: str, gpus: list[int] | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"reason": reason, **({"gpus": gpus} if gpus is not None else {})}
        result: dict[str, Any] = self.request("POST", "/v1/drain", body)
        return result

    def drains(self) -> dict[str, Any]:
        """``GET /v1/drain``: the machine's drain and each drained GPU's."""
        result: dict[str, Any] = self.request("GET", "/v1/drain")
        return result

    def resume(self, gpus: list[int] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = self.request(
            "POST", "/v1/resume", {} if gpus is None else {"gpus": gpus}
        )
        return result

    def delete(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self.request("DELETE", f"/v1/runs/{quote(name)}")
        return result

    def control(self, name: str, action: str) -> dict[str, Any]:
        """``hold``, ``release`` or ``requeue`` the run: ``{"name", "outcome"}``."""
        result: dict[str, Any] = self.request("POST", f"/v1/runs/{quote(name)}/{action}")
        return result

    def logs(self, name: str, follow: bool = False, tail: int = 0) -> Iterator[bytes]:
        return self.stream(f"/v1/runs/{quote(name)}/logs", {"follow": follow, "tail": tail or None})

    def events(self, run: str | None = None, follow: bool = False) -> Iterator[Event]:
        decoder = msgspec.json.Decoder(Event)
        for line in self.stream("/v1/events", {"run": run, "follow": follow}):
            if line.strip():
                yield decoder.decode(line)

    def status(self) -> dict[str, Any]:
        result: dict[str, Any] = self.request("GET", "/v1/status")
        return result

    def gpus(self) -> GpuList:
        return self.typed(GpuList, "GET", "/v1/gpus")

    def workspaces(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.request("GET", "/v1/workspaces")["workspaces"]
        return result

    def change_workspace(self, name: str, change: dict[str, Any]) -> list[dict[str, Any]]:
        result = self.request("PATCH", f"/v1/workspaces/{quote(name)}", change)
        workspaces: list[dict[str, Any]] = result["workspaces"]
        return workspaces

    def shutdown(self) -> None:
        self.request("POST", "/v1/shutdown", {})

    def groups(self, kind: str | None = None) -> list[Group]:
        return self.typed(GroupList, "GET", "/v1/groups", query={"kind": kind}).groups

    def create_group(self, document: object) -> Group:
        return self.typed(Group, "POST", "/v1/groups", document)

    def group(self, name: str) -> GroupDetail:
        return self.typed(GroupDetail, "GET", f"/v1/groups/{quote(name)}")

    def change_group(self, name: str, change: dict[str, Any]) -> Group:
        return self.typed(Group, "PATCH", f"/v1/groups/{quote(name)}", change)

    def delete_group(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self.request("DELETE", f"/v1/groups/{quote(name)}")
        return result

    def usage(self, since: str | None = None, by: str | None = None) -> Usage:
        return self.typed(Usage, "GET", "/v1/usage", query={"since": since, "by": by})

    def history(
        self, since: str | None = None, workspace: str | None = None, limit: int | None = None
    ) -> History:
        query = {"since": since, "workspace": workspace, "limit": limit}
        return self.typed(History, "GET", "/v1/history", query=query)

    def history_json(self, since: str | None = None, limit: int | None = None) -> dict[str, Any]:
        """``GET /v1/history`` as the daemon sent it, ``{"since", "runs"}``: each run as its
        JSON object, every field it has (a replay reads them: ``astra sim --history``)."""
        result: dict[str, Any] = self.request(
            "GET", "/v1/history", query={"since": since, "limit": limit}
        )
        return result

    def telemetry(self, history: bool | str = False) -> Telemetry:
        """``history``: True, the last hour's samples; a duration (``6h``, ``7d``), that far."""
        query = {"history": (1 if history is True else history) or None}
        return self.typed(Telemetry, "GET", "/v1/telemetry", query=query)

    def run_telemetry(self, name: str, history: str | None = None) -> RunTelemetry:
        """One run's use and its samples over its life (``history``: only that far back)."""
        path = f"/v1/runs/{quote(name)}/telemetry"
        return self.typed(RunTelemetry, "GET", path, query={"history": history})


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


class AsyncClient:
    """The dashboard's client: the same calls, awaited, plus the change stream."""

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

    async def request(
        self, method: str, path: str, body: object = None, *, raw: bytes | None = None,
        content_type: str = "application/json", **query: Any,
    ) -> Any:  # fmt: skip
        data = await self.answer(method, path, body, raw=raw, content_type=content_type, **query)
        return json.loads(data or b"null")

    async def answer(
        self, method: str, path: str, body: object = None, *, raw: bytes | None = None,
        content_type: str = "application/json", **query: Any,
    ) -> bytes:  # fmt: skip
        """The answer's body as the daemon sent it."""
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
        except OSError as e:
            raise ApiError(0, "NO_DAEMON", f"no daemon answers on {self.socket_path}: {e}") from e

    async def typed(
        self, kind: type[T], method: str, path: str, body: object = None, **query: Any
    ) -> T:
        """The answer decoded into ``kind`` (runner/schema.py)."""
        return msgspec.json.decode(await self.answer(method, path, body, **query), type=kind)

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
        session = await self._get_session()
        async with session.get("http://localhost" + _path(path, query)) as response:
            data: bytes = await response.read()
            if response.status >= 400:
                _raise_for(response.status, data)
            return data.decode(errors="replace")

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

    # ------------------------------------------------------------ calls

    async def status(self) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("GET", "/v1/status")
        return result

    async def gpus(self) -> GpuList:
        return await self.typed(GpuList, "GET", "/v1/gpus")

    async def workspaces(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = (await self.request("GET", "/v1/workspaces"))["workspaces"]
        return result

    async def show(self, name: str) -> RunDetail:
        return await self.typed(RunDetail, "GET", f"/v1/runs/{quote(name)}")

    async def why(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("GET", f"/v1/runs/{quote(name)}/why")
        return result

    async def preview(self, document: object) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("POST", "/v1/preview", document)
        return result

    async def submit(self, document: object) -> Run:
        return await self.typed(Run, "POST", "/v1/runs", document)

    async def submit_text(self, text: str, content_type: str) -> Run:
        data = await self.answer("POST", "/v1/runs", raw=text.encode(), content_type=content_type)
        return msgspec.json.decode(data, type=Run)

    async def set_priority(self, name: str, priority: int) -> Run:
        return await self.typed(Run, "PATCH", f"/v1/runs/{quote(name)}", {"priority": priority})

    async def update(self, name: str, change: dict[str, Any]) -> Run:
        return await self.typed(Run, "PATCH", f"/v1/runs/{quote(name)}", change)

    async def delete(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("DELETE", f"/v1/runs/{quote(name)}")
        return result

    async def control(self, name: str, action: str) -> dict[str, Any]:
        """``hold``, ``release`` or ``requeue`` the run: ``{"name", "outcome"}``."""
        result: dict[str, Any] = await self.request("POST", f"/v1/runs/{quote(name)}/{action}")
        return result

    async def events(self, run: str | None = None) -> list[Event]:
        """The event log so far (of one run), oldest first."""
        text = await self.text("/v1/events", run=run)
        decoder = msgspec.json.Decoder(Event)
        return [decoder.decode(line) for line in text.splitlines() if line.strip()]

    def logs(self, name: str, tail: int = 200, follow: bool = True) -> AsyncIterator[str]:
        return self.lines(f"/v1/runs/{quote(name)}/logs", tail=tail or None, follow=follow)

    async def groups(self) -> list[Group]:
        return (await self.typed(GroupList, "GET", "/v1/groups")).groups

    async def group(self, name: str) -> GroupDetail:
        return await self.typed(GroupDetail, "GET", f"/v1/groups/{quote(name)}")

    async def change_group(self, name: str, change: dict[str, Any]) -> Group:
        return await self.typed(Group, "PATCH", f"/v1/groups/{quote(name)}", change)

    async def delete_group(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("DELETE", f"/v1/groups/{quote(name)}")
        return result

    async def usage(
        self, since: str | None = None, by: str | None = None, daily: bool = False
    ) -> Usage:
        return await self.typed(Usage, "GET", "/v1/usage", since=since, by=by, daily=daily)

    async def telemetry(self, history: str | None = None) -> Telemetry:
        return await self.typed(Telemetry, "GET", "/v1/telemetry", history=history)

    async def run_telemetry(self, name: str) -> RunTelemetry:
        return await self.typed(RunTelemetry, "GET", f"/v1/runs/{quote(name)}/telemetry")


class DashboardApi(Protocol):
    """What the dashboard needs of a daemon: ``AsyncClient``, or a test's fake."""

    async def close(self) -> None: ...
    def changes(self) -> AsyncIterator[tuple[str, Snapshot | Change]]: ...
    async def status(self) -> dict[str, Any]: ...
    async def gpus(self) -> GpuList: ...
    async def workspaces(self) -> list[dict[str, Any]]: ...
    async def show(self, name: str) -> RunDetail: ...
    async def why(self, name: str) -> dict[str, Any]: ...
    async def preview(self, document: object) -> dict[str, Any]: ...
    async def submit(self, document: object) -> Run: ...
    async def submit_text(self, text: str, content_type: str) -> Run: ...
    async def set_priority(self, name: str, priority: int) -> Run: ...
    async def update(self, name: str, change: dict[str, Any]) -> Run: ...
    async def delete(self, name: str) -> dict[str, Any]: ...
    async def control(self, name: str, action: str) -> dict[str, Any]: ...
    async def events(self, run: str | None = None) -> list[Event]: ...
    def logs(self, name: str, tail: int = 200, follow: bool = True) -> AsyncIterator[str]: ...
    async def groups(self) -> list[Group]: ...
    async def group(self, name: str) -> GroupDetail: ...
    async def change_group(self, name: str, change: dict[str, Any]) -> Group: ...
    async def delete_group(self, name: str) -> dict[str, Any]: ...
    async def usage(
        self, since: str | None = None, by: str | None = None, daily: bool = False
    ) -> Usage: ...
    async def telemetry(self, history: str | None = None) -> Telemetry: ...
    async def run_telemetry(self, name: str) -> RunTelemetry: ...


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
            raise ApiError(
                0, "NO_DAEMON", f"no daemon answers on {self._client.socket_path}: {e}"
            ) from e
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
