"""What a shared run is told at its start, and what a machine refuses at submit."""

from __future__ import annotations

from runner.engine.sharing import shared_refusal
from runner.engine.starts import mps_limit
from runner.model import GIB, RunSpec
from runner.planner.plan import Machine
from runner.runspec.parse import parse_spec

FIELD = "spec.task_template.requested_resources.gpu_requests"


def _spec(request: dict[str, object]) -> RunSpec:
    task = {"image": "local", "command": "true",
            "requested_resources": {"gpu_requests": request}}  # fmt: skip
    return parse_spec({"metadata": {"name": "s"}, "spec": {"task_template": task}})


def test_the_mps_limit_names_each_visible_device_from_0() -> None:
    assert mps_limit(20 * GIB, 1) == "0=20G"
    assert mps_limit(3 * GIB // 2, 2) == "0=1536MB,1=1536MB"


def test_a_machine_refuses_what_none_of_its_gpus_can_hold() -> None:
    machine = Machine((0, 1), 8000, 64 * GIB, gpu_memory=(80 * GIB, 40 * GIB))
    assert shared_refusal(_spec({"count": 1, "memory_bytes": 80 * GIB}), machine) is None
    assert shared_refusal(_spec({"count": 2, "memory_bytes": 60 * GIB}), machine) == (
        f"{FIELD}.count: asks for 60GiB on each of 2 GPUs, this machine has 1 GPU(s) that large"
    )
    # a shard is the smallest GPU's memory / gpu_shards (8): 5 GiB here
    assert shared_refusal(_spec({"count": 1, "shards": 16}), machine) is None
    assert shared_refusal(_spec({"count": 1, "shards": 17}), machine) == (
        f"{FIELD}.shards: asks for 85GiB on each GPU, the largest GPU here has 80GiB"
    )
    none = Machine((), 8000, 64 * GIB)
    refused = shared_refusal(_spec({"count": 1, "shards": 1}), none)
    assert refused == f"{FIELD}.shards: this machine has no GPU to take shards of"
    assert shared_refusal(_spec({"count": 1}), none) is None  # whole GPUs: the planner's
