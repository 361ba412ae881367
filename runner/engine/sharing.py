"""Shared GPUs at submit: a request this machine's GPUs can hold, refused in one line
otherwise (the planner places it: runner/planner/pool.py)."""

from __future__ import annotations

from runner.model import RunSpec, format_size
from runner.planner.plan import Machine

_FIELD = "spec.task_template.requested_resources.gpu_requests"


def shared_refusal(spec: RunSpec, machine: Machine) -> str | None:
    """Why this machine can never hold ``spec``'s shared GPU request, or None."""
    task = spec.task
    if not task.shared:
        return None
    sizes = machine.sizes()
    if task.gpu_shards and not machine.shard_bytes:
        return f"{_FIELD}.shards: this machine has no GPU to take shards of"
    share = task.share_bytes(machine.shard_bytes)
    largest = max(sizes.values(), default=0)
    field = f"{_FIELD}.memory_bytes" if task.gpu_share else f"{_FIELD}.shards"
    if share > largest:
        has = f"the largest GPU here has {format_size(largest)}" if sizes else "no GPU here"
        return f"{field}: asks for {format_size(share)} on each GPU, {has}"
    big = sum(1 for n in sizes.values() if n >= share)
    if task.gpus > big:
        return (
            f"{_FIELD}.count: asks for {format_size(share)} on each of {task.gpus} GPUs, "
            f"this machine has {big} GPU(s) that large"
        )
    return None
