"""Malformed requests on the real socket, one hole each (all were 500s, or worse, before).

Before these fixes: a deep JSON or TOML body was a 500 (RecursionError); a JSON body
with a duplicate key was accepted (the last value won) and the run written; any content
type was read as JSON; PATCH /v1/workspaces answered 500 to a body that was not JSON or
UTF-8 and to a quota that was not an object; `after=` and `tail=` that were not numbers
were 500s, and ones past what SQLite holds failed the stream after a 200; an error
message could span lines.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from runner.api.app import errors
from tests.hostile.helpers import db_state, error_of, raw, request_bytes, status_of
from tests.support.served import Served

SPEC = b'{"metadata": {"name": "ok", "workspace": "vision"}, "spec": {"task_template": {"image": "local", "command": "true", "requested_resources": {"gpu_requests": {"count": 5}}}}}'  # noqa: E501  (5 GPUs of 2: never starts)
DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.fixture
def untouched(lab: Served) -> Iterator[None]:
    before, config = db_state(lab.home), (lab.home / "config.toml").read_bytes()
    yield
    assert db_state(lab.home) == before
    assert (lab.home / "config.toml").read_bytes() == config


def ask(lab: Served, method: str, path: str, body: bytes = b"", kind: str | None = None) -> str:
    response = raw(lab.socket, request_bytes(method, path, body, kind))
    return error_of(response)


@pytest.mark.parametrize(
    ("method", "path", "kind", "code"),
    [
        ("POST", "/v1/runs", "application/json", "422 INVALID_SPEC"),
        ("POST", "/v1/runs", "application/toml", "422 INVALID_SPEC"),
        ("PATCH", "/v1/runs/ok", "application/json", "422 INVALID_SPEC"),
        ("PATCH", "/v1/workspaces/vision", "application/json", "422 INVALID_CONFIG"),
        ("POST", "/v1/preview", "application/json", "422 INVALID_SPEC"),
    ],
)
def test_deep_bodies_are_422_not_500(
    lab: Served, untouched: None, method: str, path: str, kind: str, code: str
) -> None:
    body = b"x = " + DEEP if kind == "application/toml" else DEEP
    assert ask(lab, method, path, body, kind).startswith(f"{code}: <document>: not valid")


def test_duplicate_keys_are_refused_not_last_wins(lab: Served, untouched: None) -> None:
    body = SPEC.replace(b'"workspace": "vision"', b'"workspace": "vision", "workspace": "nlp"')
    line = ask(lab, "POST", "/v1/runs", body, "application/json")
    assert line == "422 INVALID_SPEC: <document>: duplicate key 'workspace'"


@pytest.mark.parametrize(
    "kind",
    ["application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "text/plain",
     "application/xml", "application/octet-stream", ""],
)  # fmt: skip
def test_other_content_types_are_415(lab: Served, untouched: None, kind: str) -> None:
    line = ask(lab, "POST", "/v1/runs", SPEC, kind)
    assert line.startswith("415 UNSUPPORTED_MEDIA_TYPE: Content-Type ")
    assert line.endswith(": send application/json or application/toml")
    line = ask(lab, "PATCH", "/v1/workspaces/vision", b'{"weight": 2}', kind)
    assert line.startswith("415 UNSUPPORTED_MEDIA_TYPE")


def test_a_body_without_a_content_type_is_json(lab: Served) -> None:
    response = raw(lab.socket, request_bytes("POST", "/v1/runs", SPEC, None))
    assert status_of(response) == 201
    assert lab.astra("delete", "ok").returncode == 0
    assert lab.astra("delete", "ok").returncode == 0  # cancelled, then forgotten


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "<document>: not valid JSON: Expecting value (line 1, column 1)"),
        (b'{"weight": "\xff"}', "<document>: not UTF-8 (byte 12)"),
        (b'{"weight": NaN}', "<document>: not valid JSON: NaN is not a number JSON allows"),
        (b'{"quota": [1]}', "quota: must be an object of limits"),
        (b'{"quota": "8"}', "quota: must be an object of limits"),
        (b'{"quota": null}', "quota: must be an object of limits"),
        (b'{"max_priority": 1, "max_priority": 1000}', "<document>: duplicate key"),
    ],
)
def test_workspace_changes_that_are_not_json_objects_are_422(
    lab: Served, untouched: None, body: bytes, message: str
) -> None:
    line = ask(lab, "PATCH", "/v1/workspaces/vision", body, "application/json")
    assert line.startswith(f"422 INVALID_CONFIG: {message}")


@pytest.mark.parametrize(
    "path",
    ["/v1/events?after=abc", "/v1/events?after=-1", "/v1/events?after=%C2%B2",
     "/v1/runs/x/logs?tail=lots", "/v1/runs/x/logs?tail=1e3"],
)  # fmt: skip
def test_query_numbers_that_are_not_numbers_are_400(lab: Served, path: str) -> None:
    assert ask(lab, "GET", path).startswith("400 BAD_REQUEST: ")


@pytest.mark.parametrize(
    "path",
    ["/v1/events?after=99999999999999999999999",
     "/v1/events?follow=1&after=000000000000000000000099999999999999999999",
     "/v1/runs/x/logs?tail=99999999999999999999999"],
)  # fmt: skip
def test_query_numbers_past_what_sqlite_holds_are_400(lab: Served, path: str) -> None:
    key = "tail" if "tail=" in path else "after"
    assert ask(lab, "GET", path) == (
        f"400 BAD_REQUEST: {key}: must be a whole number from 0 to 9223372036854775807"
    )


def test_the_largest_number_sqlite_holds_is_served_and_one_more_is_not(lab: Served) -> None:
    before = (lab.home / "serve.log").read_text()
    response = raw(lab.socket, request_bytes("GET", "/v1/events?after=9223372036854775807"))
    assert status_of(response) == 200
    assert response.endswith(b"\r\n\r\n0\r\n\r\n")  # chunked, and no event in it
    response = raw(lab.socket, request_bytes("GET", "/v1/events?after=9223372036854775808"))
    assert status_of(response) == 400
    assert (lab.home / "serve.log").read_text() == before  # no traceback


def test_error_messages_stay_on_one_line(lab: Served) -> None:
    line = ask(lab, "GET", "/v1/runs/a%0Ab%0D%1B[31mc")
    assert line == "404 NOT_FOUND: no run a\\nb\\r\\x1b[31mc"


def test_an_unexpected_failure_is_one_json_line() -> None:
    async def broken(request: web.Request) -> web.Response:
        raise RuntimeError("a bug\nover lines")

    async def go() -> tuple[int, dict[str, object]]:
        app = web.Application(middlewares=[errors])
        app.router.add_get("/", broken)
        async with TestClient(TestServer(app)) as client:
            response = await client.get("/")
            return response.status, await response.json()

    status, body = asyncio.run(go())
    assert status == 500
    assert body == {"error": {"status": 500, "code": "INTERNAL",
                              "message": "the daemon failed: RuntimeError"}}  # fmt: skip


def test_a_body_over_4_mib_is_413_and_the_daemon_goes_on(lab: Served, untouched: None) -> None:
    body = SPEC[:-1] + b', "x": "' + b"x" * (4 * 1024 * 1024) + b'"}'
    assert ask(lab, "POST", "/v1/runs", body, "application/json").startswith(
        "413 REQUEST_ENTITY_TOO_LARGE"
    )
    huge = request_bytes("POST", "/v1/runs", b"", "application/json").replace(
        b"Content-Length: 0", b"Content-Length: 1099511627776"
    )
    assert status_of(raw(lab.socket, huge + b"{" * 1000, half_close=True)) in (0, 413)
    assert status_of(raw(lab.socket, request_bytes("GET", "/v1/status", b"", None))) == 200
