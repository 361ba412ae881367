"""The service's reads apply their visibility rule themselves (runner/service/reads.py):
a real daemon and its SQLite store, read as a member of one workspace and as an admin."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from runner.service.reads import LOGS_PRIVATE
from runner.service.runs import Caller, ServiceError
from tests.support.harness import Harness, sleeper, spec

CONFIG = """
[workspaces.vision]
members = ["root"]

[workspaces.nlp]
members = ["root"]
"""

ALICE = Caller(5001, 5001, "alice", False, frozenset({"vision"}))  # a member of vision only


@pytest.fixture
def h(make_daemon: Callable[..., Harness]) -> Harness:
    h = make_daemon(CONFIG, gpus=2)
    h.submit(spec("v-1", sleeper(), gpus=1, workspace="vision"))
    h.submit(spec("n-1", sleeper(), gpus=1, workspace="nlp"))
    h.wait_state("v-1", "Running")
    h.wait_state("n-1", "Running")
    return h


def test_another_workspaces_run_is_listed_but_its_details_are_private(h: Harness) -> None:
    service = h.daemon.service
    assert {r.name for r in service.list_runs(ALICE)} == {"v-1", "n-1"}
    assert [r.name for r in service.list_runs(ALICE, workspace="nlp")] == ["n-1"]
    assert service.get_run(ALICE, "v-1").name == "v-1"
    with pytest.raises(ServiceError) as denied:
        service.get_run(ALICE, "n-1")
    assert (denied.value.status, denied.value.code) == (403, "FORBIDDEN")
    with pytest.raises(ServiceError) as logs:
        service.get_run(ALICE, "n-1", LOGS_PRIVATE)
    assert logs.value.message == LOGS_PRIVATE
    with pytest.raises(ServiceError) as missing:
        service.get_run(ALICE, "nothing")
    assert (missing.value.status, missing.value.code) == (404, "NOT_FOUND")
    with pytest.raises(ServiceError):
        service.workers_history(ALICE, "n-1")
    assert [w.run for w in service.workers_history(h.root, "n-1")] == ["n-1"]


def test_events_are_shown_only_to_those_who_see_their_workspace(h: Harness) -> None:
    service = h.daemon.service
    mine, last = service.events_for(ALICE)
    everything, admin_last = service.events_for(h.root)
    assert mine and {e.workspace for e in mine} == {"vision"}
    assert {e.workspace for e in everything} == {"vision", "nlp"}
    assert last == admin_last == everything[-1].id  # hidden events are read past, not again
    assert service.events_for(ALICE, "n-1")[0] == []
    assert service.events_for(ALICE, after=last) == ([], last)


def test_gpu_holders_and_usage(h: Harness) -> None:
    service = h.daemon.service
    seen = {w.run: visible for w, visible in service.gpu_holders(ALICE)}
    assert seen == {"v-1": True, "n-1": False}
    used = service.usage_now()
    assert (used["vision"].gpus, used["nlp"].gpus) == (1, 1)
