"""``GET /v1/runs`` (runner/api/lists.py): the queue encoded once from the wire Structs, a
body kept only while nothing it was made from moved, ``?fields=`` for lighter objects."""

from __future__ import annotations

import asyncio
import json
import logging
import pwd
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from astraeus_tui.client import ApiError, Client
from runner import schema
from runner.api.app import start_api
from runner.engine import published
from tests.support.harness import Harness, sleeper, spec, wait_for
from tests.support.served import Served
from tests.support.tenants import ALICE, BOB, CONFIG, as_user, users

# absent before any forecast, but for how many runs finished of how many it needs
FORECAST = ("likely_start", "likely_start_90", "learned_from", "forecast_needs")

__all__ = ["users"]  # the module fixture: real Unix users


def _runs(raw: bytes) -> list[dict[str, object]]:
    runs: list[dict[str, object]] = json.loads(raw)["runs"]
    return runs


def test_the_list_follows_every_change_and_sends_the_fields_asked_for(
    served: Callable[..., Served],
) -> None:
    d = served(gpus=1)
    client = Client(d.socket, timeout=30)
    client.submit(spec("blocker", ["sleep", "60"], gpus=1))
    for name in ("a", "b"):
        client.submit(spec(name, ["true"], gpus=1))
    wait_for(lambda: [(r["name"], r["state"]) for r in _runs(client.answer("GET", "/v1/runs"))]
             == [("blocker", "Running"), ("a", "Queued"), ("b", "Queued")],
             message="the queue in its order, blocker running")  # fmt: skip
    first = client.answer("GET", "/v1/runs")
    assert client.answer("GET", "/v1/runs") == first  # nothing moved: the same bytes
    # the documented keys, in order; idle_since only while idle, gpu_memory_bytes only on
    # a shared request, restart_at only while a failed run waits for its back-off, the
    # forecasts only on a queued run once it has an estimate
    optional = ("idle_since", "gpu_memory_bytes", "restart_at", *FORECAST)
    keys = [f for f in schema.Run.__struct_fields__ if f not in optional]
    for run in _runs(first):
        assert [k for k in run if k not in optional] == keys  # the documented keys
        assert list(run) == [f for f in schema.Run.__struct_fields__ if f in run]  # in order
    client.set_priority("a", -5)  # in the store at once; a goes behind b once planned
    assert {r.name: r.priority for r in client.runs()}["a"] == -5
    wait_for(lambda: [r.name for r in client.runs()][1:] == ["b", "a"], message="replanned")
    client.submit(spec("c", ["true"], gpus=1))
    assert "c" in [r.name for r in client.runs()]
    light = _runs(client.answer("GET", "/v1/runs", query={"fields": "state, name"}))
    assert [list(r) for r in light] == [["name", "state"]] * 4  # in the object's order
    full = {r["name"]: r for r in _runs(client.answer("GET", "/v1/runs"))}
    assert all(r["state"] == full[r["name"]]["state"] for r in light)  # type: ignore[index]
    with pytest.raises(ApiError) as bad:
        client.answer("GET", "/v1/runs", query={"fields": "name,owner_password"})
    assert (bad.value.status, bad.value.code) == (400, "BAD_REQUEST")
    assert bad.value.message == "fields: no run field owner_password"
    client.delete("a")
    wait_for(lambda: "a" not in [r.name for r in client.runs()], message="a deleted")


def test_a_kept_list_is_never_shown_to_another_viewer(
    served: Callable[..., Served], users: dict[str, pwd.struct_passwd]
) -> None:
    lab = served(CONFIG, gpus=2)
    as_user(users[ALICE], lab.socket, lambda c: c.submit(_doc("v-run", "vision")))
    as_user(users[BOB], lab.socket, lambda c: c.submit(_doc("n-run", "nlp")))
    admin = Client(lab.socket, timeout=30)
    names = {r.name for r in admin.runs()}
    assert names == {"v-run", "n-run"}
    # both started (a state moving between two lists would rightly make a new one)
    wait_for(lambda: {r.state for r in admin.runs()} == {"Running"}, 30, "both running")
    assert admin.runs() == admin.runs()  # kept for root's view
    for user, own, other in ((ALICE, "v-run", "n-run"), (BOB, "n-run", "v-run")):
        for _ in range(2):  # the second answer is the kept one
            seen = as_user(users[user], lab.socket, lambda c: [r.name for r in c.runs()])["ok"]
            assert sorted(seen) == sorted([own, "a job in another namespace"])
            assert other not in json.dumps(seen)


@contextmanager
def _api(h: Harness, tmp_path: Path) -> Iterator[Client]:
    """The harness's daemon served on a real socket in this process (its replays can be
    counted), and a client of it."""
    sock = tmp_path / "api.sock"
    loop = asyncio.new_event_loop()
    site = asyncio.run_coroutine_threadsafe(start_api(h.daemon, sock, None), loop)  # type: ignore[arg-type]
    threading.Thread(target=loop.run_forever, daemon=True).start()
    runner = site.result(30)
    try:
        yield Client(sock, timeout=30)
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)


def _doc(name: str, workspace: str) -> dict[str, object]:
    task = {"image": "local", "command": "sleep", "args": ["60"],
            "requested_resources": {"gpu_requests": {"count": 1}}}  # fmt: skip
    return {"metadata": {"name": name, "workspace": workspace}, "spec": {"task_template": task}}


def test_a_plan_or_estimates_equal_to_the_last_are_the_last_objects(
    make_daemon: Callable[..., Harness], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kept list is kept while the published version stands (runner/api/lists.py): a plan
    made again with nothing moved, or estimates computed again to the same values, keep
    the objects and the version before, or every replan and every estimate's age made the
    list again; a plan that moved is a new version."""
    monkeypatch.setattr(published, "ESTIMATE_EVERY", 3600.0)  # none for the clock's sake
    h = make_daemon(gpus=1)
    backend = h.daemon.backend
    backend.status.watchers = 1  # as while a dashboard looks: estimates after each plan
    h.submit(spec("blocker", sleeper(), gpus=1))
    h.wait_state("blocker", "Running")
    for name in ("a", "b"):
        h.submit(spec(name, ["true"], gpus=1))

    def planned() -> bool:
        plan = backend.status.plan
        return plan is not None and plan.order == ("a", "b")

    wait_for(planned, message="a and b planned behind the blocker")
    wait_for(lambda: (p := backend.status.published).current and p.plan is backend.status.plan,
             message="a and b estimated")  # fmt: skip
    shown, at = backend.status.published, backend.status.last_plan_at
    first = shown.plan
    backend.poke()  # plans again at once, nothing moved
    wait_for(lambda: backend.status.last_plan_at != at, message="planned again")
    assert backend.status.plan is first and backend.status.published is shown
    assert set(shown.estimates) == {"a", "b"}
    backend.publisher.made(shown, backend.estimates())  # estimated again, to the same values
    again = backend.status.published
    assert again.estimates is shown.estimates and again.plan is first
    assert again.version == shown.version
    h.submit(spec("c", ["true"], gpus=1, priority=-1))  # the plan moves: a new object
    wait_for(lambda: (p := backend.status.plan) is not None and "c" in p.order, message="c")
    assert backend.status.plan is not first and backend.status.published.version > shown.version
    wait_for(lambda: "c" in backend.status.published.estimates, message="c estimated")
    assert set(backend.status.published.estimates) == {"a", "b", "c"}
    assert backend.status.published.estimates is not shown.estimates
    backend.status.watchers = 0


def test_no_request_replays_the_queue(
    make_daemon: Callable[..., Harness], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Start estimates replay the queue (seconds at 100,000 runs): the back end's helper
    makes them after a plan and publishes them with it (runner/engine/published.py); a
    list, a run's details, ``why`` and every dashboard's ``GET /v1/status`` only read
    them. The API runs in this process on a real socket, so the replays can be counted."""
    monkeypatch.setattr(published, "ESTIMATE_EVERY", 3600.0)  # none for the clock's sake
    h = make_daemon(gpus=1)
    backend = h.daemon.backend
    replays: list[float] = []
    replay = backend.publisher._estimate
    backend.publisher._estimate = lambda: (replays.append(time.monotonic()), replay())[1]
    h.submit(spec("blocker", sleeper(), gpus=1, limit=3600))  # so the others have starts
    h.wait_state("blocker", "Running")
    for name in ("a", "b"):
        h.submit(spec(name, ["true"], gpus=1, limit=600))
    wait_for(lambda: (p := backend.status.plan) is not None and p.order == ("a", "b"), 30, "a, b")
    backend.status.asking = 1  # nobody looks yet: made while a request waits
    backend.status.ask_estimates()
    wait_for(lambda: backend.status.published.current, 30, "a and b estimated")
    backend.status.asking = 0
    with _api(h, tmp_path) as client:
        before = len(replays)
        assert before >= 1  # the helper's, after the plans
        for _ in range(3):
            assert client.status()["head"]["name"] == "a"
            listed = {r.name: r for r in client.runs()}
            assert listed["b"].starts_by is not None
            assert client.why("b")["estimate"]["starts_by"] is not None
            assert client.show("b").starts_by is not None
        assert len(replays) == before  # the requests read what was published
        h.submit(spec("c", ["true"], gpus=1, priority=-1, limit=600))
        assert client.why("c")["estimate"]["starts_by"] is not None  # waits for its plan's
        assert len(replays) > before


def test_a_request_right_after_a_change_waits_for_that_plans_estimates(
    make_daemon: Callable[..., Harness], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A list, ``show`` or ``why`` right after a submit gets fresh estimates of the plan
    of then (``why`` waits for the plan that holds the run), however the helper's replay
    and the plans interleave: a replay that ended after a newer plan once left the
    request waiting out its whole bound, answered with the older estimates."""
    h = make_daemon(gpus=2)
    with _api(h, tmp_path) as client:
        h.submit(spec("blocker", sleeper(), gpus=2, limit=600))
        for i in range(250):  # a replay long enough for plans to come while it runs
            h.submit(spec(f"q{i}", ["true"], gpus=1, limit=60))
        with caplog.at_level(logging.WARNING, logger="runner.api.why"):
            for i in range(20):
                h.submit(spec(f"r{i}", ["true"], gpus=1, limit=60))
                assert {r.name for r in client.runs()} >= {f"r{i}"}
                assert client.why(f"r{i}")["run"] == f"r{i}"  # waits for the plan holding it
                assert client.show(f"r{i}").state == "Queued"
        assert "not made within" not in caplog.text
