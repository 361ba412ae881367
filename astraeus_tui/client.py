"""The one way to talk to the daemon: HTTP/JSON over its Unix socket.

``Client`` is synchronous and uses only the standard library, so ``astra ls``
starts fast; ``AsyncClient`` (aiohttp) serves the dashboard.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote, urlencode


def default_socket() -> Path:
    if "ASTRAEUS_SOCKET" in os.environ:
        return Path(os.environ["ASTRAEUS_SOCKET"])
    home = Path(os.environ.get("ASTRAEUS_HOME", Path.home() / ".astraeus"))
    return home / "astraeus.sock"


class ApiError(Exception):
    """A refusal from the daemon, or no daemon at all; ``str`` is one line."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message

    def __str__(self) -> str:
        if self.status == 0:
            return self.message
        return f"{self.status} {self.code}: {self.message}"


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: Path, timeout: float | None) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(str(self._path))
        self.sock = sock


def _path(path: str, query: dict[str, Any] | None) -> str:
    if query:
        clean = {k: v for k, v in query.items() if v is not None and v is not False}
        clean = {k: ("1" if v is True else v) for k, v in clean.items()}
        if clean:
            return f"{path}?{urlencode(clean)}"
    return path


def _raise_for(status: int, body: bytes) -> None:
    try:
        error = json.loads(body)["error"]
        raise ApiError(status, error["code"], error["message"])
    except (ValueError, KeyError, TypeError):
        raise ApiError(status, "ERROR", body.decode(errors="replace").strip()[:300]) from None


class Client:
    def __init__(self, socket_path: Path | None = None, timeout: float | None = 30) -> None:
        self.socket_path = socket_path or default_socket()
        self.timeout = timeout

    def _open(
        self, method: str, path: str, body: bytes | None, content_type: str
    ) -> tuple[_UnixConnection, http.client.HTTPResponse]:
        conn = _UnixConnection(self.socket_path, self.timeout)
        headers = {"Content-Type": content_type} if body is not None else {}
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
        except (FileNotFoundError, ConnectionRefusedError) as e:
            conn.close()
            raise ApiError(
                0, "NO_DAEMON",
                f"no daemon answers on {self.socket_path} (start it with `astra up` "
                f"or `astra serve`): {e.strerror}",
            ) from None  # fmt: skip
        except PermissionError:
            conn.close()
            raise ApiError(0, "NO_ACCESS", f"no permission to use {self.socket_path}") from None
        if response.status >= 400:
            data = response.read()
            conn.close()
            _raise_for(response.status, data)
        return conn, response

    def request(
        self, method: str, path: str, body: object = None, *,
        query: dict[str, Any] | None = None, raw: bytes | None = None,
        content_type: str = "application/json",
    ) -> Any:  # fmt: skip
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        conn, response = self._open(method, _path(path, query), data, content_type)
        try:
            return json.loads(response.read() or b"null")
        finally:
            conn.close()

    def stream(self, path: str, query: dict[str, Any] | None = None) -> Iterator[bytes]:
        """The body as it arrives, line by line."""
        conn, response = self._open("GET", _path(path, query), None, "")
        try:
            while line := response.readline():
                yield line
        finally:
            conn.close()

    # ------------------------------------------------------------ calls

    def runs(self, **query: Any) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.request("GET", "/v1/runs", query=query)["runs"]
        return result

    def submit(self, document: object) -> dict[str, Any]:
        result: dict[str, Any] = self.request("POST", "/v1/runs", document)
        return result

    def submit_text(self, text: str, content_type: str) -> dict[str, Any]:
        result: dict[str, Any] = self.request(
            "POST", "/v1/runs", raw=text.encode(), content_type=content_type
        )
        return result

    def show(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self.request("GET", f"/v1/runs/{quote(name)}")
        return result

    def why(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self.request("GET", f"/v1/runs/{quote(name)}/why")
        return result

    def preview(self, document: object) -> dict[str, Any]:
        result: dict[str, Any] = self.request("POST", "/v1/preview", document)
        return result

    def set_priority(self, name: str, priority: int) -> dict[str, Any]:
        result: dict[str, Any] = self.request(
            "PATCH", f"/v1/runs/{quote(name)}", {"priority": priority}
        )
        return result

    def delete(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self.request("DELETE", f"/v1/runs/{quote(name)}")
        return result

    def logs(self, name: str, follow: bool = False, tail: int = 0) -> Iterator[bytes]:
        return self.stream(f"/v1/runs/{quote(name)}/logs", {"follow": follow, "tail": tail or None})

    def events(self, run: str | None = None, follow: bool = False) -> Iterator[dict[str, Any]]:
        for line in self.stream("/v1/events", {"run": run, "follow": follow}):
            if line.strip():
                yield json.loads(line)

    def status(self) -> dict[str, Any]:
        result: dict[str, Any] = self.request("GET", "/v1/status")
        return result

    def gpus(self) -> dict[str, Any]:
        result: dict[str, Any] = self.request("GET", "/v1/gpus")
        return result

    def workspaces(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.request("GET", "/v1/workspaces")["workspaces"]
        return result

    def change_workspace(self, name: str, change: dict[str, Any]) -> list[dict[str, Any]]:
        result = self.request("PATCH", f"/v1/workspaces/{quote(name)}", change)
        workspaces: list[dict[str, Any]] = result["workspaces"]
        return workspaces

    def shutdown(self) -> None:
        self.request("POST", "/v1/shutdown", {})

    def groups(self, kind: str | None = None) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.request("GET", "/v1/groups", query={"kind": kind})[
            "groups"
        ]
        return result

    def create_group(self, document: object) -> dict[str, Any]:
        result: dict[str, Any] = self.request("POST", "/v1/groups", document)
        return result

    def group(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self.request("GET", f"/v1/groups/{quote(name)}")
        return result

    def change_group(self, name: str, change: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self.request("PATCH", f"/v1/groups/{quote(name)}", change)
        return result

    def delete_group(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self.request("DELETE", f"/v1/groups/{quote(name)}")
        return result


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
        session = await self._get_session()
        payload = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        headers = {"Content-Type": content_type} if payload is not None else {}
        try:
            async with session.request(
                method, "http://localhost" + _path(path, query), data=payload, headers=headers
            ) as response:
                data = await response.read()
                if response.status >= 400:
                    _raise_for(response.status, data)
                return json.loads(data or b"null")
        except OSError as e:
            raise ApiError(0, "NO_DAEMON", f"no daemon answers on {self.socket_path}: {e}") from e

    async def changes(self) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """(event, data) from the daemon's SSE stream: a snapshot, then changes."""
        session = await self._get_session()
        async with session.get("http://localhost/v1/stream", timeout=None) as response:
            if response.status >= 400:
                _raise_for(response.status, await response.read())
            event = ""
            async for raw in response.content:
                line = raw.decode().rstrip("\n")
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: "):
                    yield event, json.loads(line[6:])

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

    # ------------------------------------------------------------ calls

    async def status(self) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("GET", "/v1/status")
        return result

    async def gpus(self) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("GET", "/v1/gpus")
        return result

    async def workspaces(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = (await self.request("GET", "/v1/workspaces"))["workspaces"]
        return result

    async def show(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("GET", f"/v1/runs/{quote(name)}")
        return result

    async def why(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("GET", f"/v1/runs/{quote(name)}/why")
        return result

    async def preview(self, document: object) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("POST", "/v1/preview", document)
        return result

    async def submit(self, document: object) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("POST", "/v1/runs", document)
        return result

    async def submit_text(self, text: str, content_type: str) -> dict[str, Any]:
        result: dict[str, Any] = await self.request(
            "POST", "/v1/runs", raw=text.encode(), content_type=content_type
        )
        return result

    async def set_priority(self, name: str, priority: int) -> dict[str, Any]:
        result: dict[str, Any] = await self.request(
            "PATCH", f"/v1/runs/{quote(name)}", {"priority": priority}
        )
        return result

    async def delete(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("DELETE", f"/v1/runs/{quote(name)}")
        return result

    async def events(self, run: str | None = None) -> list[dict[str, Any]]:
        """The event log so far (of one run), oldest first."""
        text = await self.text("/v1/events", run=run)
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def logs(self, name: str, tail: int = 200, follow: bool = True) -> AsyncIterator[str]:
        return self.lines(f"/v1/runs/{quote(name)}/logs", tail=tail or None, follow=follow)

    async def groups(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = (await self.request("GET", "/v1/groups"))["groups"]
        return result

    async def group(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("GET", f"/v1/groups/{quote(name)}")
        return result

    async def change_group(self, name: str, change: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("PATCH", f"/v1/groups/{quote(name)}", change)
        return result

    async def delete_group(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("DELETE", f"/v1/groups/{quote(name)}")
        return result


class DashboardApi(Protocol):
    """What the dashboard needs of a daemon: ``AsyncClient``, or a test's fake."""

    async def close(self) -> None: ...
    def changes(self) -> AsyncIterator[tuple[str, dict[str, Any]]]: ...
    async def status(self) -> dict[str, Any]: ...
    async def gpus(self) -> dict[str, Any]: ...
    async def workspaces(self) -> list[dict[str, Any]]: ...
    async def show(self, name: str) -> dict[str, Any]: ...
    async def why(self, name: str) -> dict[str, Any]: ...
    async def preview(self, document: object) -> dict[str, Any]: ...
    async def submit(self, document: object) -> dict[str, Any]: ...
    async def submit_text(self, text: str, content_type: str) -> dict[str, Any]: ...
    async def set_priority(self, name: str, priority: int) -> dict[str, Any]: ...
    async def delete(self, name: str) -> dict[str, Any]: ...
    async def events(self, run: str | None = None) -> list[dict[str, Any]]: ...
    def logs(self, name: str, tail: int = 200, follow: bool = True) -> AsyncIterator[str]: ...
    async def groups(self) -> list[dict[str, Any]]: ...
    async def group(self, name: str) -> dict[str, Any]: ...
    async def change_group(self, name: str, change: dict[str, Any]) -> dict[str, Any]: ...
    async def delete_group(self, name: str) -> dict[str, Any]: ...
