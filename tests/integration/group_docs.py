"""Group documents (schedules, replica groups, sweeps) for the tests of groups on a real
daemon, and the workspace they are submitted to."""

from __future__ import annotations

from typing import Any

WORKSPACE = """
[workspaces.vision]
members = ["root"]
max_priority = 10
"""


def group_doc(kind: str, name: str, template: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"kind": kind, "name": name, "template": template, **extra}
