"""Fuzzing the API over the real socket: malformed HTTP, random bodies, odd content types.

The daemon never answers 5xx, never dies, and a refusal never writes (the state DB and
the config file are as they were). Its workspaces allow no workers at all, so nothing
a fuzzed submit gets accepted ever starts; accepted runs are deleted at once.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import HealthCheck, currently_in_test_context, event, given, settings
from hypothesis import strategies as st

from tests.hostile.helpers import db_state, raw, request_bytes, status_of
from tests.support.harness import wait_for
from tests.support.served import Served

FUZZ = settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
CONFIG = """
[workspaces.default]
members = ["root"]
quota = { workers = 0 }

[workspaces.vision]
members = ["root"]
max_priority = 10
quota = { workers = 0 }

[workspaces.scratch]
members = ["root"]
"""
TARGET = json.dumps({
    "metadata": {"name": "target", "workspace": "vision"},
    "spec": {"task_template": {"image": "local", "command": "true"}},
}).encode()  # fmt: skip
REFUSED = {400, 403, 404, 405, 409, 413, 415, 422}


@pytest.fixture(scope="module")
def fuzz(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    sock_dir = Path(tempfile.mkdtemp(prefix="astra-sock-"))
    daemon = Served(tmp_path_factory.mktemp("fuzz") / "home", sock_dir / "astraeus.sock")
    daemon.start(CONFIG, gpus=2)
    yield daemon
    daemon.stop()
    shutil.rmtree(sock_dir, ignore_errors=True)


def alive(daemon: Served) -> None:
    assert daemon.proc is not None and daemon.proc.poll() is None
    assert status_of(raw(daemon.socket, request_bytes("GET", "/v1/status", b"", None))) == 200


def planned(daemon: Served, name: str) -> bool:
    """Whether the loop has planned the run (its reason is the planner's, not the submit's
    ``Waiting for the scheduler``): after that the loop writes nothing more of it, so a
    refused request can be compared with the state DB before it (before, the loop's
    write of the reason would be seen as the request's)."""
    body = raw(daemon.socket, request_bytes("GET", f"/v1/runs/{name}", b"", None))
    try:
        return json.loads(body.split(b"\r\n\r\n", 1)[-1])["reason_code"] not in (None, "WAITING")
    except (ValueError, KeyError, TypeError):
        return False


def forget(daemon: Served, name: str) -> None:
    for _ in range(2):  # queued: cancelled; then forgotten
        raw(daemon.socket, request_bytes("DELETE", f"/v1/runs/{name}", b"", None))


def exchange(daemon: Served, data: bytes, *, half_close: bool = False) -> int:
    """Send, and check the answer: never 5xx; a refusal wrote nothing."""
    before = db_state(daemon.home), (daemon.home / "config.toml").read_bytes()
    status = status_of(raw(daemon.socket, data, half_close=half_close, timeout=5))
    if currently_in_test_context():
        event(f"status {status}")  # --hypothesis-show-statistics tells what was answered
    assert status < 500, data[:300]
    if status < 200 or status >= 300:
        assert (db_state(daemon.home), (daemon.home / "config.toml").read_bytes()) == before
    return status


# ------------------------------------------------------------------ malformed HTTP

TOKEN = st.text(st.characters(min_codepoint=0, max_codepoint=0x7F), max_size=12)
METHODS = st.sampled_from(["GET", "POST", "PATCH", "DELETE", "PUT", "HEAD", "OPTIONS",
                           "TRACE", "BREW", "get", ""]) | TOKEN  # fmt: skip
PATHS = st.sampled_from([
    "/v1/runs", "/v1/runs/target", "/v1/runs/target/logs", "/v1/events", "/v1/status",
    "/v1/gpus", "/v1/workspaces", "/v1/workspaces/scratch", "/v1/preview", "*", "",
    "/../../etc/passwd", "//v1//runs", "/v1/runs/%00", "/v1/runs/%ff%fe", "/v1/runs/a/../b",
    "/v1/runs/" + "a" * 5000, "http://other/v1/runs", "/x/" + "%" * 30,
])  # fmt: skip
QUERIES = st.sampled_from(
    [
        "",
        "?all=1",
        "?after=abc",
        "?tail=-1",
        "?state=%ff",
        "?run=target",
        "?workspace=" + "w" * 3000,
        "?&&==",
        "?after=99999999999999999999",
    ]
)
HEADER_NAMES = st.sampled_from([
    "Content-Type", "Content-Length", "Transfer-Encoding", "Host", "Expect", "Upgrade",
    "Content-Encoding", "X-Forwarded-For", "Cookie",
]) | TOKEN  # fmt: skip
HEADER_VALUES = st.sampled_from([
    "application/json", "application/toml", "text/plain", "chunked", "gzip", "-1", "0",
    "99999999999999999999", "100-continue", "websocket", "a" * 9000, "x\r\ny: z", "\x00",
]) | st.text(max_size=20)  # fmt: skip


@st.composite
def http_requests(draw: st.DrawFn) -> tuple[bytes, bool]:
    line = f"{draw(METHODS)} {draw(PATHS)}{draw(QUERIES)} "
    line += draw(st.sampled_from(["HTTP/1.1", "HTTP/1.0", "HTTP/2.0", "HTTP/1.1x", "", "X"]))
    headers = [("Connection", "close")]
    headers += draw(st.lists(st.tuples(HEADER_NAMES, HEADER_VALUES), max_size=5))
    body = draw(st.binary(max_size=200) | st.sampled_from([b"{}", b"[" * 5000, b"\xff" * 8]))
    length = draw(st.sampled_from(["exact", "none", "short", "long", "garbage"]))
    declared = {"exact": str(len(body)), "short": str(len(body) // 2), "long": str(len(body) + 50),
                "garbage": "1e3"}.get(length)  # fmt: skip
    if declared is not None:
        headers.append(("Content-Length", declared))
    head = line + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    data = head.encode("utf-8", errors="surrogateescape") + body
    return data, length != "exact" or draw(st.booleans())


@FUZZ
@given(http_requests())
def test_malformed_http(fuzz: Served, request: tuple[bytes, bool]) -> None:
    data, half_close = request
    exchange(fuzz, data, half_close=half_close)


# ------------------------------------------------------------------ random bodies

KEYS = st.sampled_from([
    "metadata", "spec", "name", "workspace", "task_template", "image", "command", "args",
    "env", "priority", "quota", "gpus", "weight", "max_priority", "workers", "memory",
    "cpu_cores", "datavolume_refs", "mount_path", "privileged",
]) | st.text(max_size=8)  # fmt: skip
SCALARS = (
    st.none() | st.booleans() | st.integers() | st.integers(-(10**30), 10**30) | st.floats()
    | st.text(max_size=12) | st.sampled_from(["local", "vision", "/etc", "..", "64GiB", "10EiB"])
)  # fmt: skip
VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=25,
)  # fmt: skip
KINDS = st.sampled_from(["application/json", "application/toml", None, "text/plain"])


def encoded(value: Any, kind: str | None) -> bytes:
    if kind == "application/toml" and isinstance(value, dict):
        try:
            return tomli_w.dumps(value).encode()
        except (TypeError, ValueError):
            pass
    return json.dumps(value).encode()  # NaN and Infinity as Python writes them


@st.composite
def seeds(draw: st.DrawFn) -> Any:
    doc = json.loads(TARGET)
    doc["metadata"]["name"] = draw(st.sampled_from(["fz", "fz-1"]) | st.text(max_size=6))
    task = doc["spec"]["task_template"]
    for key in draw(st.lists(KEYS, max_size=3)):
        task[key] = draw(VALUES)
    return doc


@FUZZ
@given(VALUES | seeds(), KINDS)
def test_random_submits(fuzz: Served, document: Any, kind: str | None) -> None:
    status = exchange(fuzz, request_bytes("POST", "/v1/runs", encoded(document, kind), kind))
    assert status == 201 or status in REFUSED
    if status == 201:
        forget(fuzz, document["metadata"]["name"])


PRIORITIES = st.integers(-(10**20), 10**20) | st.integers(-1100, 1100) | SCALARS


@FUZZ
@given(st.fixed_dictionaries({"priority": PRIORITIES}) | VALUES, KINDS)
def test_random_priority_changes(fuzz: Served, body: Any, kind: str | None) -> None:
    if status_of(raw(fuzz.socket, request_bytes("POST", "/v1/runs", TARGET))) not in (201, 409):
        pytest.fail("could not submit the target run")
    wait_for(lambda: planned(fuzz, "target"), 30, "the target run planned")
    status = exchange(fuzz, request_bytes("PATCH", "/v1/runs/target", encoded(body, kind), kind))
    assert status == 200 or status in REFUSED


QUOTAS = st.dictionaries(
    st.sampled_from(["gpus", "cpu_cores", "memory", "workers"]) | st.text(max_size=6), SCALARS,
    max_size=4,
)  # fmt: skip
CHANGES = st.fixed_dictionaries(
    {}, optional={"quota": QUOTAS | SCALARS, "max_priority": SCALARS, "weight": SCALARS}
)


@FUZZ
@given(CHANGES | VALUES, KINDS)
def test_random_workspace_changes(fuzz: Served, body: Any, kind: str | None) -> None:
    data = request_bytes("PATCH", "/v1/workspaces/scratch", encoded(body, kind), kind)
    status = exchange(fuzz, data)
    assert status == 200 or status in REFUSED


@FUZZ
@given(HEADER_VALUES | TOKEN)
def test_any_content_type(fuzz: Served, kind: str) -> None:
    body = TARGET.replace(b'"target"', b'"ctype"')
    status = exchange(fuzz, request_bytes("POST", "/v1/runs", body, kind))
    assert status in (201, 400, 415, 422)
    if status == 201:
        forget(fuzz, "ctype")


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/v1/runs"), ("PATCH", "/v1/runs/target"), ("PATCH", "/v1/workspaces/scratch")],
)
def test_bodies_over_4_mib(fuzz: Served, method: str, path: str) -> None:
    body = b'{"x": "' + b"x" * (4 * 1024 * 1024) + b'"}'
    assert exchange(fuzz, request_bytes(method, path, body)) == 413
    lying = request_bytes(method, path, b"{}").replace(b"Length: 2", b"Length: 99999999999")
    assert exchange(fuzz, lying + b'{"x": 1', half_close=True) in (0, 400, 413)


def test_the_daemon_is_alive_after_all_of_it(fuzz: Served) -> None:
    alive(fuzz)
    runs = {r["name"]: r for r in fuzz.json("ls", "--all")}
    assert set(runs) <= {"target"}  # what was accepted was deleted at once
    assert all(r["state"] in ("Queued", "Cancelled") for r in runs.values())
    assert "astraeus.api ERROR" not in (fuzz.home / "serve.log").read_text()  # no 500 at all
