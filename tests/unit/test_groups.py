"""Group documents: what is refused (one line naming the field), what sweeps expand to."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from runner.runspec.groups import (
    GroupSpec,
    group_to_dict,
    next_fire,
    parse_group,
    replica_backoff,
    replica_slot,
    schedule_run_name,
    sweep_document,
    sweep_runs,
)
from runner.runspec.parse import SpecError


def template(**spec: Any) -> dict[str, Any]:
    task = {"image": "local", "command": "train", "args": ["--lr={lr}", "--out=/o/{lr}-{bs}"],
            "env": {"KEEP": "1", "lr": "overridden"}}  # fmt: skip
    return {"metadata": {"name": "t"}, "spec": {"task_template": task, **spec}}


def doc(kind: str, **extra: Any) -> dict[str, Any]:
    return {"kind": kind, "name": "g", "template": template(), **extra}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"kind": "job", "template": template()}, "kind: must be one of sweep, replicas, schedule"),
        ({"kind": "sweep"}, "template: required"),
        (doc("sweep"), "<document>: a sweep needs a grid or a list"),
        (doc("sweep", grid={"a": [1]}, list=[{"a": 1}]), "<document>: a sweep needs a grid or"),
        (doc("sweep", grid={"a": []}), "grid.a: must not be empty"),
        (doc("sweep", grid={"1a": [1]}), "grid.1a: a parameter name must be"),
        (doc("sweep", grid={"ASTRAEUS_X": [1]}), "grid.ASTRAEUS_X: a parameter name must be"),
        (doc("sweep", grid={"a": [[1]]}), "grid.a[0]: must be a string, number or true/false"),
        (doc("sweep", grid={"a": list(range(40)), "b": list(range(40))}), "makes more than 1000"),
        (doc("sweep", list=[]), "list: makes no runs"),
        (doc("sweep", list=[{"a": None}]), "list[0].a: must be a string, number"),
        (doc("sweep", list=[{"a": 1}], replicas=2), "replicas: is not a setting of a sweep"),
        ({**doc("sweep", grid={"a": list(range(10))}), "name": "x" * 62}, "name: too long"),
        (doc("replicas"), "replicas: required"),
        (doc("replicas", replicas=257), "replicas: must be between 0 and 256"),
        (doc("replicas", replicas=1, cron="* * * * *"), "cron: is not a setting of a replicas"),
        (doc("schedule"), "cron: required"),
        (doc("schedule", cron="every day"), "cron: is not a cron expression"),
        (doc("schedule", cron="0 3 * * *", policy="later"), "policy: must be one of skip, queue"),
        ({**doc("schedule", cron="0 3 * * *"), "name": "n" * 48}, "name: too long"),
        ({"kind": "sweep", "template": {"spec": {}}, "list": [{}]}, "name: required"),
        ({**doc("replicas", replicas=1), "template": template(priority=2000)}, "template.spec.p"),
        ({**doc("schedule", cron="* * * * *"), "template": template(after=["a"])}, "cannot wait"),
        ({**doc("replicas", replicas=1), "template": template(workers=2, gang=False)}, "one unit"),
    ],
)
def test_bad_group_documents_are_refused_naming_the_field(document: object, message: str) -> None:
    with pytest.raises(SpecError) as refused:
        parse_group(document)
    assert message in str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_grid_makes_every_combination_in_order_with_env_and_arguments() -> None:
    group = parse_group(doc("sweep", grid={"lr": [0.1, 0.01], "bs": [32, True]}))
    runs = sweep_runs(group)
    assert [r.name for r in runs] == ["g-0", "g-1", "g-2", "g-3"]
    env = dict(runs[1].task.env)
    assert env["lr"] == "0.1" and env["bs"] == "true" and env["KEEP"] == "1"
    assert env["ASTRAEUS_SWEEP_INDEX"] == env["SLURM_ARRAY_TASK_ID"] == "1"
    assert runs[2].task.args == ("--lr=0.01", "--out=/o/0.01-32")
    assert group_to_dict(parse_group(group_to_dict(group))) == group_to_dict(group)


def test_a_list_sweep_and_the_name_defaulting_to_the_templates() -> None:
    document = {"kind": "sweep", "template": template(), "list": [{"lr": "a"}, {"lr": "b"}]}
    group = parse_group(document)
    assert group.name == "t"
    assert [dict(r.task.env)["lr"] for r in sweep_runs(group)] == ["a", "b"]


def test_a_sweep_whose_arguments_grow_too_long_is_refused() -> None:
    big = "x" * 4000
    document = doc("sweep", list=[{"lr": big, "bs": 1}])
    document["template"]["spec"]["task_template"]["args"] = ["{lr}" * 40]
    with pytest.raises(SpecError) as refused:
        parse_group(document)
    assert str(refused.value).startswith("run 0 (g-0): spec.task_template.args[0]:")


def test_a_run_spec_with_a_sweep_section_is_a_sweep() -> None:
    run = template()
    run["spec"]["sweep"] = {"grid": {"lr": [1, 2]}}
    original = copy.deepcopy(run)
    group = sweep_document(run)
    assert run == original
    assert group is not None and group["kind"] == "sweep"
    assert isinstance(parse_group(group), GroupSpec)
    assert sweep_document(template()) is None
    run["spec"]["sweep"] = {"grid": {"lr": []}}
    with pytest.raises(SpecError, match=r"^spec\.sweep\.grid\.lr: must not be empty$"):
        sweep_document(run)
    run["spec"]["sweep"] = {"range": [1]}
    with pytest.raises(SpecError, match=r"^spec\.sweep\.range: unknown key"):
        sweep_document(run)


def test_replica_names_slots_and_back_off() -> None:
    assert replica_slot("pool", "pool-12") == 12
    assert replica_slot("pool", "pool-01") is None
    assert replica_slot("pool", "pool-a-1") is None
    assert replica_slot("pool", "poolx-1") is None
    assert [replica_backoff(n) for n in (0, 1, 2, 3, 10)] == [0, 1, 2, 4, 60]


def test_schedule_times_and_run_names() -> None:
    t0 = 1_800_000_000.0  # a whole minute
    assert next_fire("* * * * * */2", t0) == t0 + 2
    assert next_fire("*/5 * * * *", t0) % 300 == 0 and 0 < next_fire("*/5 * * * *", t0) - t0 <= 300
    assert schedule_run_name("nightly", t0).startswith("nightly-20")
    assert len(schedule_run_name("nightly", t0)) == len("nightly-") + 15


def test_a_schedule_keeps_its_local_hour_across_daylight_saving(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TZ", "Europe/Berlin")
    before = datetime(2026, 3, 28, 12, 0, tzinfo=UTC).timestamp()  # CET, UTC+1
    after = next_fire("0 3 * * *", before)  # Sunday 29 March: CEST, UTC+2
    assert datetime.fromtimestamp(after, UTC) == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    monkeypatch.setenv("TZ", "No/Such_Zone")
    assert next_fire("* * * * * */2", 1_800_000_000.0) == 1_800_000_002.0  # falls back
