"""``POST /v1/runs:batch``: many run documents in one request, one transaction.

The body is NDJSON (``application/x-ndjson``: one JSON run document a line, blank lines
skipped) or a JSON array of documents (``application/json``). Each document is checked as
``POST /v1/runs`` checks it, in order; the valid ones are committed together before the
answer, and each refusal is reported at its index with nothing of it stored (docs/api.md).
"""

from __future__ import annotations

import asyncio

import msgspec
from aiohttp import web

from runner import schema
from runner.api.context import BODY_TIME, MAX_BODY, daemon_of, peer_caller
from runner.api.guard import too_late
from runner.api.served import Daemon
from runner.api.views import run_view
from runner.runspec.documents import decode_document
from runner.runspec.parse import SpecError, one_line
from runner.service.runs import Caller, ServiceError, Submitted

MAX_BATCH = 10_000  # documents in one request
MAX_BATCH_BODY = 8 * 1024 * 1024  # bytes in one request: its documents decoded stay bounded
NDJSON_TYPES = ("application/x-ndjson", "application/jsonl")
ARRAY_TYPES = ("application/json",)
_CHUNK = 1 << 16


async def submit_batch(request: web.Request) -> web.Response:
    daemon, caller = daemon_of(request), peer_caller(request)
    documents = await read_batch(request)
    outcomes = await asyncio.to_thread(daemon.service.submit_batch, documents, caller)
    answer = batch_answer(daemon, caller, outcomes)
    return web.Response(body=msgspec.json.encode(answer), content_type="application/json")


def batch_answer(daemon: Daemon, caller: Caller, outcomes: list[Submitted]) -> schema.Batch:
    shown, now = daemon.loop.shown, daemon.loop.clock()
    results = []
    for index, o in enumerate(outcomes):
        if o.row is not None and o.spec is not None:
            run = run_view(o.row, o.spec, caller.viewer, shown, (), now)
            results.append(schema.BatchItem(index=index, run=run))
        else:
            e = o.error or ServiceError(500, "INTERNAL", "no outcome")
            error = schema.BatchError(status=e.status, code=e.code, message=one_line(e.message))
            results.append(schema.BatchItem(index=index, error=error))
    accepted = sum(1 for r in results if r.run is not None)
    return schema.Batch(accepted=accepted, refused=len(results) - accepted, results=results)


async def read_batch(request: web.Request) -> list[object]:
    """The body's documents; a line or element that is not a document is its refusal
    (a ServiceError in its place). The whole request is refused past the bounds."""
    kind = request.content_type if "Content-Type" in request.headers else NDJSON_TYPES[0]
    if kind not in NDJSON_TYPES + ARRAY_TYPES:
        raise ServiceError(
            415, "UNSUPPORTED_MEDIA_TYPE",
            f"Content-Type {kind}: send application/x-ndjson or application/json (an array)",
        )  # fmt: skip
    raw = await _read_bounded(request)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ServiceError(422, "INVALID_SPEC", f"<batch>: not UTF-8 (byte {e.start})") from None
    if kind in ARRAY_TYPES:
        if len(raw) > MAX_BODY:  # an array is one document, bounded as every body is
            raise ServiceError(
                413, "REQUEST_ENTITY_TOO_LARGE",
                f"an array of run documents is at most {MAX_BODY // (1024 * 1024)} MiB:"
                " send NDJSON (application/x-ndjson) for more",
            )  # fmt: skip
        try:
            array = decode_document(text, "json")
        except SpecError as e:
            raise ServiceError(422, "INVALID_SPEC", str(e)) from None
        if not isinstance(array, list):
            raise ServiceError(422, "INVALID_SPEC", "<batch>: must be an array of run documents")
        _check_count(len(array))
        return array
    lines = [line for line in text.split("\n") if line.strip()]
    _check_count(len(lines))
    documents: list[object] = []
    for line in lines:
        try:
            documents.append(decode_document(line, "json"))
        except SpecError as e:
            documents.append(ServiceError(422, "INVALID_SPEC", str(e)))
    return documents


def _check_count(count: int) -> None:
    if count > MAX_BATCH:
        raise ServiceError(
            413, "REQUEST_ENTITY_TOO_LARGE",
            f"a batch holds at most {MAX_BATCH} run documents, got {count}: send it in parts",
        )  # fmt: skip


async def _read_bounded(request: web.Request) -> bytes:
    """The body, at most MAX_BATCH_BODY bytes, within what is left of the request's time."""
    too_large = ServiceError(
        413, "REQUEST_ENTITY_TOO_LARGE",
        f"a batch is at most {MAX_BATCH_BODY // (1024 * 1024)} MiB: send it in parts",
    )  # fmt: skip
    if (request.content_length or 0) > MAX_BATCH_BODY:
        raise too_large
    parts, size = [], 0
    try:
        async with asyncio.timeout(request.get(BODY_TIME)):
            while chunk := await request.content.read(_CHUNK):
                size += len(chunk)
                if size > MAX_BATCH_BODY:
                    raise too_large
                parts.append(chunk)
    except TimeoutError:
        message = too_late(daemon_of(request).config.api)
        raise ServiceError(408, "REQUEST_TIMEOUT", message) from None
    return b"".join(parts)
