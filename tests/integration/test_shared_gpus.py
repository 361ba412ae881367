"""Shared GPUs end to end: a real daemon on simulated GPUs (80 GiB each), real processes."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runner.model import WorkerState
from runner.reasons import ReasonCode
from runner.service.runs import ServiceError
from tests.support.harness import Harness, spec, wait_for
from tests.support.served import Served

Make = Callable[..., Harness]
Start = Callable[..., Served]

PRIORITIES = """
[workspaces.default]
members = ["root"]
max_priority = 10
"""

# prints what CUDA is told, then runs until stopped
SHOW = (
    "import os, time; print('visible', os.environ['CUDA_VISIBLE_DEVICES'],"
    " os.environ.get('CUDA_MPS_PINNED_DEVICE_MEM_LIMIT', '-'), flush=True); time.sleep(600)"
)


def _gpus(h: Harness, name: str) -> tuple[int, ...]:
    (worker,) = [w for w in h.daemon.store.workers.of(name) if w.state in WorkerState.LIVE]
    return worker.gpus


def shared(name: str, gib: int, *, count: int = 1, priority: int = 0) -> dict[str, Any]:
    doc = spec(name, [sys.executable, "-c", SHOW], priority=priority)
    request = {"count": count, "memory_bytes": gib * 1024**3, "shared": True}
    doc["spec"]["task_template"]["requested_resources"]["gpu_requests"] = request
    return doc


def test_two_shared_runs_share_a_gpu_and_a_third_waits_for_memory(make_daemon: Make) -> None:
    h = make_daemon(gpus=2, machine="mps = true")
    h.submit(shared("a", 30))
    h.submit(shared("b", 40))
    for name in ("a", "b"):
        h.wait_state(name, "Running")
        wait_for(lambda name=name: "visible" in h.log(name), message=f"{name}'s output")  # type: ignore[misc]
    gpus = {name: _gpus(h, name) for name in ("a", "b")}
    assert gpus["a"] == gpus["b"]  # packed onto one GPU, the other left whole
    (g,) = gpus["a"]
    assert f"visible {g} 0=30G" in h.log("a") and f"visible {g} 0=40G" in h.log("b")
    # the other GPU is whole: an exclusive run takes it; a second one waits
    h.submit(spec("whole", [sys.executable, "-c", SHOW], gpus=1))
    h.wait_state("whole", "Running")
    h.submit(shared("c", 20))  # 70 of 80 GiB promised: 10 free on the shared GPU
    h.submit(spec("whole2", [sys.executable, "-c", SHOW], gpus=1))
    wait_for(lambda: (r := h.run("c").reason) is not None and r.code == ReasonCode.GPU_MEMORY_WAIT)
    assert "needs 20GiB on 1 GPU, the most free on one GPU is 10GiB" in h.reason("c")
    assert h.state("whole2") == "Queued"  # never on the GPU with shared work
    h.daemon.service.delete("b", h.root)
    h.wait_state("c", "Running")
    assert _gpus(h, "c") == (g,)
    assert h.state("whole2") == "Queued"  # a and c still share it


def test_a_higher_priority_shared_run_preempts_a_shared_run(make_daemon: Make) -> None:
    h = make_daemon(PRIORITIES, gpus=1, grace=1)
    h.submit(shared("low", 50))
    h.wait_state("low", "Running")
    h.submit(shared("small", 20))
    h.wait_state("small", "Running")  # 70 of 80: both on the one GPU
    h.submit(shared("urgent", 50, priority=5))
    h.wait_state("urgent", "Running", timeout=30)
    assert h.state("small") == "Running"  # one victim is enough: the fewest
    assert h.run("low").preemptions == 1
    assert h.state("low") == "Queued"


def test_a_shared_run_over_its_quota_preempts_its_own_newest_shared_run(
    make_daemon: Make,
) -> None:
    """In-quota preemption by GPU memory: 50 + 20 held of a 100 GiB quota, 40 more asked
    at a higher priority; the newest one that makes room within the quota stops."""
    quota = (
        PRIORITIES
        + 'preempt_within_quota = true\n[workspaces.default.quota]\ngpu_memory = "100GiB"\n'
    )
    h = make_daemon(quota, gpus=2, grace=1)
    h.submit(shared("low", 50))
    h.wait_state("low", "Running")
    h.submit(shared("small", 20))
    h.wait_state("small", "Running")
    h.submit(shared("urgent", 40, priority=5))
    h.wait_state("urgent", "Running", timeout=30)
    assert h.run("small").preemptions == 1 and h.state("small") == "Queued"
    assert h.state("low") == "Running"  # one victim is enough: the fewest
    wait_for(lambda: (r := h.run("small").reason) is not None and r.code == ReasonCode.QUOTA_WAIT)
    assert "gpu_memory" in h.reason("small")  # 90 + 20 > 100: it waits for its quota


def test_bad_shared_requests_are_refused_in_one_line_and_nothing_is_written(
    make_daemon: Make,
) -> None:
    h = make_daemon(gpus=2)
    cases = [
        ({"count": 1, "shared": True}, "gpu_requests.shared: a shared GPU needs memory_bytes"),
        ({"count": 1, "memory_bytes": 100 * 1024**3},
         "memory_bytes: asks for 100GiB on each GPU, the largest GPU here has 80GiB"),
        ({"count": 3, "memory_bytes": 1024**3},
         "count: asks for 1GiB on each of 3 GPUs, this machine has 2 GPU(s) that large"),
        ({"count": 1, "memory_bytes": 1024**3, "min_per_machine": 1},
         "a shared request runs on one machine"),
    ]  # fmt: skip
    for request, message in cases:
        doc = shared("bad", 1)
        doc["spec"]["task_template"]["requested_resources"]["gpu_requests"] = request
        with pytest.raises(ServiceError) as e:
            h.submit(doc)
        assert e.value.status == 422 and message in str(e.value)
        assert "\n" not in str(e.value)
        assert h.daemon.store.runs.get("bad") is None


def test_gpu_mem_and_shards_from_the_cli_survive_a_restart(served: Start, tmp_path: Path) -> None:
    d = served(gpus=1)
    program = [sys.executable, "-c", SHOW]
    made = d.astra("run", "--name", "flag", "--gpu-mem", "30GiB", "--", *program)
    assert made.returncode == 0, made.stderr
    script = tmp_path / "job.sbatch"
    script.write_text(
        f'#!/bin/bash\n#SBATCH -J shards\n#SBATCH --gres=shard:2\n{program[0]} -c "{SHOW}"\n'
    )
    made = d.astra("submit", str(script))
    assert made.returncode == 0, made.stderr
    for name in ("flag", "shards"):
        wait_for(lambda name=name: d.json("show", name)["state"] == "Running")  # type: ignore[misc]
    assert d.json("show", "flag")["gpu_memory_bytes"] == 30 * 1024**3
    assert d.json("show", "shards")["gpu_memory_bytes"] == 20 * 1024**3  # 2 of 8 shards of 80
    assert "gpu_memory:         30GiB on each GPU (shared)" in d.astra("show", "flag").stdout
    shown = d.astra("gpus").stdout
    assert "shared by 2 worker(s)" in shown
    assert any(
        line in shown
        for line in (
            "gpu 0 shared: flag 30GiB, shards 20GiB, 30GiB free",
            "gpu 0 shared: shards 20GiB, flag 30GiB, 30GiB free",
        )
    ), shown
    gpu = d.json("gpus")["gpus"][0]
    assert sorted((s["run"], s["bytes"]) for s in gpu["shares"]) == [
        ("flag", 30 * 1024**3), ("shards", 20 * 1024**3)]  # fmt: skip
    doc = shared("preview", 10)
    (tmp_path / "preview.json").write_text(json.dumps(doc))
    preview = d.astra("submit", "--dry-run", str(tmp_path / "preview.json"))
    assert "Would start now at once, on GPU 0 (10GiB on each, shared)." in preview.stdout
    d.kill9()
    d.restart()
    # adopted, still packed: 50 of 80 GiB promised, a 30 GiB run starts, then 40 GiB waits
    assert d.json("show", "flag")["state"] == "Running"
    assert d.astra("run", "--name", "fits", "--gpu-mem", "30GiB", "--", *program).returncode == 0
    wait_for(lambda: d.json("show", "fits")["state"] == "Running")
    assert d.astra("run", "--name", "big", "--gpu-mem", "40GiB", "--", *program).returncode == 0
    wait_for(lambda: d.json("show", "big")["reason_code"] == "GPU_MEMORY_WAIT")
    assert "the most free on one GPU is 0B" in d.json("show", "big")["reason"]
    # an edit keeps it shared, and is judged as a submit would be
    assert d.astra("update", "big", "--gpus", "1").returncode == 0
    assert d.json("show", "big")["gpu_memory_bytes"] == 40 * 1024**3
    refused = d.astra("update", "big", "--gpus", "2")
    assert refused.returncode != 0 and refused.stderr.count("\n") == 1, refused.stderr
    assert "asks for 40GiB on each of 2 GPUs, this machine has 1 GPU(s) that large" in (
        refused.stderr
    )
    for name in ("flag", "shards", "big", "fits"):
        d.astra("delete", name)


def test_a_shared_simulated_gpus_memory_follows_its_runs_shares(make_daemon: Make) -> None:
    """The sampler hands each run's share (from its spec) to the simulation: the shared
    GPU uses 60–90 % of 30 + 20 GiB, not of its 80 GiB; each run's GPU memory is its own."""
    h = make_daemon(gpus=2, machine="telemetry_seconds = 0.2")
    h.submit(shared("a", 30))
    h.submit(shared("b", 20))
    for name in ("a", "b"):
        h.wait_state(name, "Running")
    (g,) = _gpus(h, "a")
    sampler = h.daemon.sampler
    assert sampler is not None

    def both() -> bool:
        latest = sampler.latest()
        return latest is not None and len(latest.runs) == 2

    wait_for(both, 30, "both shared runs measured")
    latest = sampler.latest()
    assert latest is not None
    gib = 1024**3
    (gpu,) = [x for x in latest.gpus if x.index == g]
    assert gpu.memory_used is not None and 0.6 * 50 * gib <= gpu.memory_used <= 0.9 * 50 * gib
    own = {r.run: r.gpu_memory_bytes for r in latest.runs}
    assert own["a"] is not None and 0.6 * 30 * gib <= own["a"] <= 0.9 * 30 * gib
    assert own["b"] is not None and 0.6 * 20 * gib <= own["b"] <= 0.9 * 20 * gib
