"""One run, one start or one notification that fails in the scheduler's tick is set
aside with an event; every other run is still planned and started (a failure is
injected per kind into a real daemon; schedules and groups: test_groups.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from runner.engine import loop as loop_module
from runner.engine.snapshot import SpecCache
from runner.reasons import ReasonCode
from runner.store import outbox as outbox_module
from tests.support.harness import PY, Harness, sleeper, spec, wait_for


@pytest.fixture
def h(make_daemon: Callable[..., Harness]) -> Harness:
    return make_daemon(gpus=2)


def set_aside(h: Harness, name: str) -> list[Any]:
    return [e for e in h.daemon.store.events.all(name) if e.kind == "SetAside"]


def test_a_run_whose_spec_cannot_be_read_is_set_aside(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    parse = SpecCache.get

    def broken(self: SpecCache, run: Any) -> Any:
        if run.name == "unreadable":
            raise ValueError("injected")
        return parse(self, run)

    monkeypatch.setattr(SpecCache, "get", broken)
    h.submit(spec("unreadable", sleeper()))
    h.submit(spec("fine", sleeper()))
    h.wait_state("fine", "Running")
    wait_for(lambda: set_aside(h, "unreadable"), message="its event")
    h.submit(spec("later", sleeper()))
    h.wait_state("later", "Running")  # planned tick after tick
    [event] = set_aside(h, "unreadable")  # once, not once a tick
    assert event.message.code is ReasonCode.SET_ASIDE
    assert "reading its stored spec failed" in event.message.render()
    assert h.run("unreadable").state == "Queued"


def test_a_start_that_fails_is_set_aside_and_the_others_start(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    launch = loop_module.launch_for

    def broken(ctx: Any, start: Any, now: float) -> None:
        if start.run == "unstartable":
            raise RuntimeError("injected")
        launch(ctx, start, now)

    monkeypatch.setattr(loop_module, "launch_for", broken)
    h.submit(spec("unstartable", sleeper()))  # first in the order
    h.submit(spec("fine", sleeper()))
    h.wait_state("fine", "Running")
    wait_for(lambda: set_aside(h, "unstartable"), message="its event")
    assert "starting it failed" in set_aside(h, "unstartable")[0].message.render()


def test_a_notification_that_cannot_be_queued_never_undoes_its_run_s_change(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    targets = outbox_module._run_targets

    def broken(run: Any) -> Any:
        if run.name == "loud":
            raise RuntimeError("injected")
        return targets(run)

    monkeypatch.setattr(outbox_module, "_run_targets", broken)
    doc = spec("loud", [PY, "-c", "pass"])
    doc["spec"]["notify"] = [{"url": "json://127.0.0.1:9/hook", "events": ["succeeded"]}]
    h.submit(doc)
    h.wait_state("loud", "Succeeded")  # its end is recorded, the notification aside
    wait_for(
        lambda: ReasonCode.NOTIFY_FAILED in [e.code for e in h.daemon.store.events.all("loud")]
    )
    failed = [e for e in h.daemon.store.events.all("loud") if e.kind == "NotifyFailed"]
    assert "not queued: the daemon failed to queue it" in failed[0].message.render()
    h.submit(spec("after", sleeper()))
    h.wait_state("after", "Running")
