"""The daemon's endpoints (docs/api.md), each written once: what a call sends and what
its answer is.

Each method of ``Endpoints`` is one endpoint: its parameters are the call's, and it
gives the request as a ``Call``: the method, the path, the body or the query, and what
the answer decodes into (a Struct of runner/schema.py, or ``dict``: the JSON as sent),
with the member the caller gets of it. A face inherits the table and says in ``ask``
how a call is answered: ``Client`` at once, the dashboard's faces (``AsyncClient``,
``EscapedApi``, the tests' fake) awaited. The streams (logs, events, the change stream,
exec) are not here: each reads its answer as it comes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from functools import wraps
from types import MethodType
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, cast, overload

import msgspec

from astraeus_tui.wire import quoted as quote
from runner.schema import (
    Batch,
    GpuList,
    Group,
    GroupDetail,
    GroupList,
    History,
    Run,
    RunDetail,
    RunList,
    RunTelemetry,
    Telemetry,
    Usage,
)

P = ParamSpec("P")
T = TypeVar("T")

JSON = "application/json"


class Call(Generic[T]):
    """One request, and how its answer is read: decoded into ``answer`` (a Struct of
    runner/schema.py; anything else, the JSON as the standard library reads it), then
    its member ``pick`` if one is named; ``None`` for no answer worth keeping."""

    __slots__ = ("answer", "body", "content_type", "method", "path", "pick", "query", "raw")

    @overload
    def __init__(
        self: Call[T], method: str, path: str, answer: type[T], body: object = None, *,
        query: dict[str, Any] | None = None, raw: bytes | None = None, content_type: str = JSON,
    ) -> None: ...  # fmt: skip
    @overload
    def __init__(
        self, method: str, path: str, answer: type[Any], body: object = None, *,
        query: dict[str, Any] | None = None, raw: bytes | None = None, content_type: str = JSON,
        pick: str,
    ) -> None: ...  # fmt: skip
    @overload
    def __init__(self: Call[None], method: str, path: str, answer: None, body: object) -> None: ...
    def __init__(
        self, method: str, path: str, answer: type[Any] | None, body: object = None, *,
        query: dict[str, Any] | None = None, raw: bytes | None = None, content_type: str = JSON,
        pick: str | None = None,
    ) -> None:  # fmt: skip
        self.method, self.path, self.answer, self.body = method, path, answer, body
        self.query, self.raw, self.content_type, self.pick = query, raw, content_type, pick

    def read(self, data: bytes) -> T:
        """The answer's body as the caller gets it."""
        if isinstance(self.answer, type) and issubclass(self.answer, msgspec.Struct):
            found: Any = msgspec.json.decode(data, type=self.answer)
        else:
            found = json.loads(data or b"null")
        if self.answer is None:
            return cast(T, None)  # the answer read, not kept
        if self.pick is not None:
            found = found[self.pick] if isinstance(found, dict) else getattr(found, self.pick)
        return cast(T, found)


class Endpoint(Generic[P, T]):
    """An endpoint as a method of the face that inherits ``Endpoints``: its ``Call``
    made from the arguments and asked of the face (``ask``), answered at once for
    ``Client`` and awaited for a ``DashboardApi``."""

    def __init__(self, build: Callable[Concatenate[Any, P], Call[T]]) -> None:
        self.build, self.name = build, build.__name__
        endpoint = self

        @wraps(build)
        def method(face: Any, /, *args: Any, **kwargs: Any) -> Any:
            return face.ask(endpoint, *args, **kwargs)

        self.method = method

    def call(self, *args: Any, **kwargs: Any) -> Call[T]:
        return self.build(None, *args, **kwargs)

    @overload
    def __get__(
        self, face: None, owner: type[AwaitedEndpoints]
    ) -> Callable[Concatenate[AwaitedEndpoints, P], Coroutine[Any, Any, T]]: ...
    @overload
    def __get__(self, face: None, owner: type[Endpoints]) -> Callable[Concatenate[Any, P], T]: ...
    @overload
    def __get__(
        self, face: AwaitedEndpoints, owner: type[Any]
    ) -> Callable[P, Coroutine[Any, Any, T]]: ...
    @overload
    def __get__(self, face: Endpoints, owner: type[Any]) -> Callable[P, T]: ...
    def __get__(self, face: object, owner: type[Any]) -> Any:
        """As a function's: the function itself from the class, bound from a face."""
        return self.method if face is None else MethodType(self.method, face)


class Endpoints:
    """The table: one method an endpoint, its ``Call``; the faces inherit it."""

    @Endpoint
    def runs(self, /, **query: Any) -> Call[list[Run]]:
        """The queue (``fields="name,state"``: only those fields sent, the rest default)."""
        return Call("GET", "/v1/runs", RunList, query=query, pick="runs")

    @Endpoint
    def submit(self, document: object) -> Call[Run]:
        return Call("POST", "/v1/runs", Run, document)

    @Endpoint
    def submit_text(self, text: str, content_type: str) -> Call[Run]:
        return Call("POST", "/v1/runs", Run, raw=text.encode(), content_type=content_type)

    @Endpoint
    def submit_batch(self, ndjson: bytes) -> Call[Batch]:
        """Many run documents, one JSON document a line: each one's run or refusal."""
        return Call("POST", "/v1/runs:batch", Batch, raw=ndjson,
                    content_type="application/x-ndjson")  # fmt: skip

    @Endpoint
    def show(self, name: str) -> Call[RunDetail]:
        return Call("GET", f"/v1/runs/{quote(name)}", RunDetail)

    @Endpoint
    def why(self, name: str) -> Call[dict[str, Any]]:
        return Call("GET", f"/v1/runs/{quote(name)}/why", dict)

    @Endpoint
    def preview(self, document: object) -> Call[dict[str, Any]]:
        return Call("POST", "/v1/preview", dict, document)

    @Endpoint
    def set_priority(self, name: str, priority: int) -> Call[Run]:
        return Call("PATCH", f"/v1/runs/{quote(name)}", Run, {"priority": priority})

    @Endpoint
    def update(self, name: str, change: dict[str, Any]) -> Call[Run]:
        """Edit a run (astra update): time_limit_seconds, gpus, cpu_cores, memory, priority."""
        return Call("PATCH", f"/v1/runs/{quote(name)}", Run, change)

    @Endpoint
    def delete(self, name: str) -> Call[dict[str, Any]]:
        return Call("DELETE", f"/v1/runs/{quote(name)}", dict)

    @Endpoint
    def control(self, name: str, action: str) -> Call[dict[str, Any]]:
        """``hold``, ``release`` or ``requeue`` the run: ``{"name", "outcome"}``."""
        return Call("POST", f"/v1/runs/{quote(name)}/{action}", dict)

    @Endpoint
    def drain(self, reason: str, gpus: list[int] | None = None) -> Call[dict[str, Any]]:
        body = {"reason": reason, **({"gpus": gpus} if gpus is not None else {})}
        return Call("POST", "/v1/drain", dict, body)

    @Endpoint
    def drains(self) -> Call[dict[str, Any]]:
        """``GET /v1/drain``: the machine's drain and each drained GPU's."""
        return Call("GET", "/v1/drain", dict)

    @Endpoint
    def resume(self, gpus: list[int] | None = None) -> Call[dict[str, Any]]:
        return Call("POST", "/v1/resume", dict, {} if gpus is None else {"gpus": gpus})

    @Endpoint
    def status(self) -> Call[dict[str, Any]]:
        return Call("GET", "/v1/status", dict)

    @Endpoint
    def gpus(self) -> Call[GpuList]:
        return Call("GET", "/v1/gpus", GpuList)

    @Endpoint
    def workspaces(self) -> Call[list[dict[str, Any]]]:
        return Call("GET", "/v1/workspaces", dict, pick="workspaces")

    @Endpoint
    def change_workspace(self, name: str, change: dict[str, Any]) -> Call[list[dict[str, Any]]]:
        return Call("PATCH", f"/v1/workspaces/{quote(name)}", dict, change, pick="workspaces")

    @Endpoint
    def shutdown(self) -> Call[None]:
        return Call("POST", "/v1/shutdown", None, {})

    @Endpoint
    def groups(self, kind: str | None = None) -> Call[list[Group]]:
        return Call("GET", "/v1/groups", GroupList, query={"kind": kind}, pick="groups")

    @Endpoint
    def create_group(self, document: object) -> Call[Group]:
        return Call("POST", "/v1/groups", Group, document)

    @Endpoint
    def group(self, name: str) -> Call[GroupDetail]:
        return Call("GET", f"/v1/groups/{quote(name)}", GroupDetail)

    @Endpoint
    def change_group(self, name: str, change: dict[str, Any]) -> Call[Group]:
        return Call("PATCH", f"/v1/groups/{quote(name)}", Group, change)

    @Endpoint
    def delete_group(self, name: str) -> Call[dict[str, Any]]:
        return Call("DELETE", f"/v1/groups/{quote(name)}", dict)

    @Endpoint
    def usage(
        self, since: str | None = None, by: str | None = None, daily: bool = False
    ) -> Call[Usage]:
        return Call("GET", "/v1/usage", Usage, query={"since": since, "by": by, "daily": daily})

    @Endpoint
    def history(
        self, since: str | None = None, workspace: str | None = None, limit: int | None = None
    ) -> Call[History]:
        query = {"since": since, "workspace": workspace, "limit": limit}
        return Call("GET", "/v1/history", History, query=query)

    @Endpoint
    def history_json(
        self, since: str | None = None, limit: int | None = None
    ) -> Call[dict[str, Any]]:
        """``GET /v1/history`` as the daemon sent it, ``{"since", "runs"}``: each run as its
        JSON object, every field it has (a replay reads them: ``astra sim --history``)."""
        return Call("GET", "/v1/history", dict, query={"since": since, "limit": limit})

    @Endpoint
    def telemetry(self, history: bool | str | None = None) -> Call[Telemetry]:
        """``history``: True, the last hour's samples; a duration (``6h``, ``7d``), that far."""
        query = {"history": (1 if history is True else history) or None}
        return Call("GET", "/v1/telemetry", Telemetry, query=query)

    @Endpoint
    def run_telemetry(self, name: str, history: str | None = None) -> Call[RunTelemetry]:
        """One run's use and its samples over its life (``history``: only that far back)."""
        path = f"/v1/runs/{quote(name)}/telemetry"
        return Call("GET", path, RunTelemetry, query={"history": history})


class AwaitedEndpoints(Endpoints):
    """The table with each answer awaited: the dashboard's faces (``DashboardApi``)."""

    async def ask(self, endpoint: Endpoint[Any, T], /, *args: Any, **kwargs: Any) -> T:
        """``endpoint``'s call with these arguments, answered."""
        raise NotImplementedError
