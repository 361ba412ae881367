"""A run's command, args and env together are bounded (64 KiB): a larger spec, a group
template or a sweep's run is refused in one line through the socket, and nothing is
written."""

from __future__ import annotations

from typing import Any

import pytest

from astraeus_tui.client import ApiError, Client
from tests.hostile.helpers import db_state
from tests.support.served import Served

BOUND = "spec.task_template: command, args and env must be at most 65536 characters together"
TAIL = ": put larger inputs in a file on a drive"


def run_doc(name: str, args: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    task: dict[str, Any] = {"image": "local", "command": "true", "args": args}
    if env:
        task["env"] = env
    return {"metadata": {"name": name, "workspace": "vision"}, "spec": {"task_template": task}}


def refused(lab: Served, call: Any) -> str:
    before = db_state(lab.home)
    with pytest.raises(ApiError) as error:
        call(Client(lab.socket))
    assert db_state(lab.home) == before  # nothing written
    return str(error.value)


def test_a_run_over_64_kib_is_refused(lab: Served) -> None:
    doc = run_doc("big", ["x" * 40_000], {f"V{i}": "y" * 3000 for i in range(10)})
    got = 4 + 40_000 + 10 * (2 + 3000)  # "true", the argument, the variables' names and values
    message = refused(lab, lambda c: c.submit(doc))
    largest = ("; the largest variables: V0 (3002), V1 (3002), V2 (3002) (astra run"
               " --export=NONE, or --export naming only some, carries fewer)")  # fmt: skip
    assert message == f"422 INVALID_SPEC: {BOUND} (64 KiB), got {got}{TAIL}{largest}"


def test_a_group_template_over_64_kib_is_refused(lab: Served) -> None:
    group = {"kind": "replicas", "name": "bigpool", "replicas": 1,
             "template": run_doc("bigpool", ["x" * 70_000])}  # fmt: skip
    message = refused(lab, lambda c: c.create_group(group))
    assert message == f"422 INVALID_SPEC: template.{BOUND} (64 KiB), got 70004{TAIL}"


def test_a_sweep_whose_values_make_a_run_too_large_is_refused_whole(lab: Served) -> None:
    template = run_doc("bigsweep", ["x" * 60_000, "{V}"])
    group = {"kind": "sweep", "template": template, "list": [{"V": "a"}, {"V": "b" * 3000}]}
    message = refused(lab, lambda c: c.create_group(group))
    assert message.startswith(f"422 INVALID_SPEC: run 1 (bigsweep-1): {BOUND} (64 KiB), got ")


def test_a_sweep_s_parameters_are_bounded_in_all(lab: Served) -> None:
    values = [{"A": "v" * 2000, "B": str(i)} for i in range(600)]  # 1.2 MB, each run small
    group = {"kind": "sweep", "template": run_doc("manyvals", ["{A}"]), "list": values}
    message = refused(lab, lambda c: c.create_group(group))
    assert message.startswith(
        "422 INVALID_SPEC: list: its parameters, one set per run, must be at most 1048576"
        " characters in all (1 MiB), got "
    )
