"""One request must not fill the disk.

A real daemon (``astra serve``) on its socket: a sweep's runs share their template in
the state database.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from astraeus_tui.client import Client
from tests.hostile.helpers import db_state
from tests.integration.harness import wait_for
from tests.integration.served import Served

ROOT_ONLY = """
[workspaces.vision]
members = ["root"]
"""


def run_doc(name: str, args: list[str] | None = None) -> dict[str, Any]:
    """A run that asks for more GPUs than the machine has: it stays Queued."""
    task = {"image": "local", "command": "true", "args": args or [],
            "requested_resources": {"gpu_requests": {"count": 4}}}  # fmt: skip
    return {"metadata": {"name": name, "workspace": "vision"}, "spec": {"task_template": task}}


def state_size(home: Path) -> int:
    return sum(p.stat().st_size for p in home.glob("state.db*"))


# --------------------------------------------------------------- the template once


def test_a_sweep_of_1000_over_a_60_kib_template_keeps_the_template_once(
    served: Callable[..., Served],
) -> None:
    lab = served(ROOT_ONLY, gpus=2)
    client = Client(lab.socket, timeout=120)
    template = run_doc("wide", ["{I}", "x" * 60_000])
    group = {"kind": "sweep", "template": template, "list": [{"I": i} for i in range(1000)]}
    client.create_group(group)
    listed = client.runs()
    assert len(listed) == 1000
    size = state_size(lab.home)
    assert size < 20 * 1024 * 1024, f"state.db and its WAL take {size} bytes"
    shown = client.show("wide-737")
    task = shown["spec"]["spec"]["task_template"]
    assert task["args"] == ["737", "x" * 60_000]  # its own values, the template's rest
    assert task["env"]["I"] == task["env"]["ASTRAEUS_SWEEP_INDEX"] == "737"
    assert shown["state"] == "Queued"
    client.delete_group("wide")  # its runs are cancelled, kept: their spec with them
    wait_for(lambda: client.show("wide-3")["state"] == "Cancelled")
    assert client.show("wide-3")["spec"]["spec"]["task_template"]["args"][0] == "3"
    for i in range(1000):
        client.delete(f"wide-{i}")  # forgotten: the template goes with the last one
    assert db_state(lab.home)["templates"] == []
