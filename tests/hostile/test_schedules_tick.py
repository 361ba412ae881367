"""A schedule never stops the scheduler: real Unix users against one daemon.

Alice (vision) makes a schedule whose cron names a year: its one firing is a few seconds
away. Once it has fired it has no next time; it ends with an event, and the tick goes on
planning everyone's runs (Bob's, in nlp), also after a restart. A date that never comes
is refused at create in one line. (A group whose handling fails in the tick is set aside:
tests/integration/test_groups.py.)
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.support.harness import spec, wait_for
from tests.support.served import Served
from tests.support.tenants import as_user, two_tenants, users_fixture

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="creating Unix users needs root")

GROUP, ALICE, BOB = "astra-hs", "astra-hs-a", "astra-hs-b"
SLEEP = ["sleep", "600"]  # the users cannot run this checkout's interpreter
CONFIG = two_tenants(GROUP, ALICE, BOB)


users = users_fixture(GROUP, ALICE, BOB)


def _once_at(when: datetime) -> str:
    """A cron (minute hour day month weekday second year) matching ``when`` only."""
    return f"{when.minute} {when.hour} {when.day} {when.month} * {when.second} {when.year}"


def _schedule(name: str, cron: str, workspace: str) -> dict[str, Any]:
    return {"kind": "schedule", "name": name, "cron": cron,
            "template": spec(name, ["true"], workspace=workspace)}  # fmt: skip


def _events(d: Served, group: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = d.json("schedule", "show", group)["events"]
    return events


def test_a_schedule_out_of_firings_ends_and_every_run_is_still_planned(
    served: Callable[..., Served], users: dict[str, pwd.struct_passwd]
) -> None:
    d = served(CONFIG, gpus=2)
    soon = datetime.now().astimezone() + timedelta(seconds=4)
    once = _schedule("once", _once_at(soon), "vision")
    made = as_user(users[ALICE], d.socket, lambda c: c.create_group(once))
    assert "ok" in made, made
    wait_for(lambda: any(e["kind"] == "Ended" for e in _events(d, "once")), 30, "its end")
    ended = next(e for e in _events(d, "once") if e["kind"] == "Ended")
    assert ended["code"] == "ENDED" and "fires no more" in ended["message"]
    fired = [e for e in _events(d, "once") if e["kind"] == "Fired"]
    assert len(fired) == 1
    for round_ in ("after", "restarted"):
        if round_ == "restarted":
            d.kill9()
            d.restart()
        name = f"bob-{round_}"
        answer = as_user(users[BOB], d.socket, lambda c, n=name: c.submit(spec(n, SLEEP)))
        assert "ok" in answer, answer
        wait_for(lambda n=name: d.json("show", n)["state"] == "Running", 30, f"{name} to run")
    assert d.json("schedule", "ls")[0]["next_at"] is None


def test_a_date_that_never_comes_is_refused_in_one_line(
    served: Callable[..., Served], users: dict[str, pwd.struct_passwd]
) -> None:
    d = served(CONFIG, gpus=2)
    for cron in ("0 0 31 2 *", "0 0 1 1 * 0 2020"):
        never = _schedule("never", cron, "vision")
        made = as_user(users[ALICE], d.socket, lambda c, x=never: c.create_group(x))
        assert made == {"error": f"422 INVALID_SPEC: cron: '{cron}' never fires again"}
    assert d.json("schedule", "ls") == []


def test_a_schedules_firing_names_are_its_own(
    served: Callable[..., Served], users: dict[str, pwd.struct_passwd]
) -> None:
    """Another namespace cannot take the name a firing will use; a name its own
    namespace took first gets a suffix, and the firing starts anyway."""
    d = served(CONFIG, gpus=2)
    soon = (datetime.now().astimezone() + timedelta(seconds=5)).replace(microsecond=0)
    name = "nightly" + soon.strftime("-%Y%m%d-%H%M%S")
    nightly = _schedule("nightly", _once_at(soon), "vision")
    assert "ok" in as_user(users[ALICE], d.socket, lambda c: c.create_group(nightly))
    for taken in (name, f"{name}-2"):
        squat = as_user(users[BOB], d.socket, lambda c, n=taken: c.submit(spec(n, SLEEP)))
        assert squat.get("error") == (
            f"409 NAME_IN_USE: {taken} is a name kept for a schedule's runs"
            " (nightly-YYYYMMDD-HHMMSS): choose another"
        ), squat
    own = as_user(users[ALICE], d.socket,
                  lambda c: c.submit(spec(name, SLEEP, workspace="vision")))  # fmt: skip
    assert "ok" in own, own
    wait_for(lambda: any(e["kind"] == "Fired" for e in _events(d, "nightly")), 30, "a firing")
    fired = next(e for e in _events(d, "nightly") if e["kind"] == "Fired")
    assert fired["message"] == f"Submitted {name}-2 ({name} was taken)"
    assert d.json("show", f"{name}-2")["workspace"] == "vision"
