"""A group's runs kept as one template and each run's own part (pure).

A sweep, replica group or schedule stores its run template once (a row of
``templates``, kept while its group or any of its runs refers to it). Each run it
makes stores only its *part*: its name and, for a sweep's run, its index and
parameters. The run's spec is the template with its part applied, so a sweep of 1,000
runs over a large template costs the template once, not 1,000 times.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

Params = tuple[tuple[str, str], ...]


def run_part(name: str, index: int | None = None, params: Params = ()) -> dict[str, Any]:
    """What a run of a group keeps of its own: its name (a sweep's: its index and values)."""
    if index is None:
        return {"name": name}
    return {"name": name, "index": index, "params": [list(p) for p in params]}


def run_document(template: Mapping[str, Any], part: Mapping[str, Any]) -> dict[str, Any]:
    """The run document of ``part`` made from ``template`` (a run document; not changed).

    A sweep's run gets its parameters and index as environment variables, and ``{key}``
    in its arguments replaced by the value.
    """
    doc = copy.deepcopy(dict(template))
    doc["metadata"]["name"] = str(part["name"])
    if "index" in part:
        params: Params = tuple((str(k), str(v)) for k, v in part["params"])
        index = str(part["index"])
        extra = (*params, ("ASTRAEUS_SWEEP_INDEX", index), ("SLURM_ARRAY_TASK_ID", index))
        keys = {k for k, _ in extra}
        task = doc["spec"]["task_template"]
        env = {k: v for k, v in task.get("env", {}).items() if k not in keys}
        task["env"] = {**env, **dict(extra)}
        task["args"] = [substitute(a, params) for a in task.get("args", [])]
    return doc


def substitute(arg: str, params: Params) -> str:
    for key, value in params:
        arg = arg.replace("{" + key + "}", value)
    return arg
