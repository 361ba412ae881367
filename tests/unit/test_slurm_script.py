"""runner.slurm.script: a run spec as sbatch options and a batch script."""

from __future__ import annotations

import shlex
import subprocess
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.model import GIB
from runner.runspec.sbatch import parse_sbatch
from runner.slurm import (
    SlurmError,
    SlurmSettings,
    SlurmTarget,
    build_batch,
    nice_for,
    pyxis_image,
    time_minutes,
    workspace_of_comment,
)
from tests.unit.slurm_helpers import run_spec

ROOT = SlurmSettings(privileged=True)


def options(**task: Any) -> tuple[str, ...]:
    """The resource options of a one-worker run (between --comment and --nice)."""
    built = build_batch(run_spec(**task), ROOT, workspace="w").options
    return built[2 : built.index("--nice=0")]


def resources(**asked: Any) -> dict[str, Any]:
    return {"requested_resources": asked}


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        ({}, ("--nodes=1",)),
        (resources(gpu_requests={"count": 2}), ("--nodes=1", "--gres=gpu:2")),
        (resources(cpu_cores=1.5), ("--nodes=1", "--cpus-per-task=2")),
        (resources(memory_bytes=GIB), ("--nodes=1", "--mem=1024M")),
        (resources(memory_bytes=GIB + 1), ("--nodes=1", "--mem=1025M")),
        (
            resources(gpu_requests={"count": 2}, per_gpu={"cpu_cores": 4, "memory_bytes": 8 * GIB}),
            ("--nodes=1", "--gres=gpu:2", "--cpus-per-task=8", "--mem=16384M"),
        ),
        ({"time_limit_seconds": 90}, ("--nodes=1", "--time=2")),
        ({"time_limit_seconds": 3600}, ("--nodes=1", "--time=60")),
    ],
)
def test_resources_and_time(task: dict[str, Any], expected: tuple[str, ...]) -> None:
    assert options(**task) == expected


def test_a_run_that_asks_no_memory_never_asks_for_mem_0() -> None:
    assert not any(o.startswith(("--mem", "--mem-per-cpu")) for o in options())


def test_a_gang_is_tasks_with_gpus_each() -> None:
    task = resources(gpu_requests={"count": 2}, cpu_cores=4, memory_bytes=8 * GIB)
    job = build_batch(run_spec(workers=3, **task), ROOT, workspace="w")
    assert job.options[2:6] == (
        "--ntasks=3", "--gpus-per-task=2", "--cpus-per-task=4", "--mem-per-cpu=2048M",
    )  # fmt: skip
    assert "export ASTRAEUS_WORKER_COUNT=3" in job.script
    assert "ASTRAEUS_WORKER_INDEX=0" not in job.script  # each task takes SLURM_PROCID
    assert 'export ASTRAEUS_WORKER_INDEX="$SLURM_PROCID"; exec "$@"' in _step(job.script)


def test_independent_workers_are_refused() -> None:
    with pytest.raises(SlurmError, match="gang = false"):
        build_batch(run_spec(workers=2, gang=False), ROOT, workspace="w")


def test_the_whole_command_line() -> None:
    settings_ = SlurmSettings(
        workspaces={"vision": SlurmTarget(partition="gpu", account="vis")},
        log_dir="/shared/logs/",
        workdir="/shared/work",
        privileged=True,
    )
    job = build_batch(run_spec(priority=5), settings_, workspace="vision", uid=1000, gid=100)
    assert job.argv() == (
        "sbatch", "--parsable", "--job-name=ft", "--comment=astraeus:vision", "--partition=gpu",
        "--account=vis", "--nodes=1", "--nice=-5", "--requeue", "--export=NONE",
        "--output=/shared/logs/ft.log", "--open-mode=append", "--chdir=/shared/work",
        "--uid=1000", "--gid=100",
    )  # fmt: skip


def test_the_output_file_is_named_by_the_run_s_id_when_given() -> None:
    """A name used again by a later run never appends to an earlier run's output."""
    settings_ = SlurmSettings(log_dir="/shared/logs")
    uid = "0192f0c1a2b3c4d5e6f708192a3b4c5d"
    job = build_batch(run_spec(), settings_, workspace="w", log_name=uid)
    assert f"--output=/shared/logs/{uid}.log" in job.argv()


def test_partitions_by_workspace_then_by_priority() -> None:
    settings_ = SlurmSettings(
        workspaces={"vision": SlurmTarget(partition="vision")},
        default=SlurmTarget(partition="low"),
        priority_partitions=((100, "high"), (500, "urgent")),
        privileged=True,
    )

    def partition(workspace: str, priority: int) -> str:
        built = build_batch(run_spec(priority=priority), settings_, workspace=workspace)
        return next(o for o in built.options if o.startswith("--partition=")).partition("=")[2]

    assert [partition("other", 0), partition("vision", 99)] == ["low", "vision"]
    assert [partition("vision", 100), partition("other", 500)] == ["high", "urgent"]


def test_no_partition_or_account_leaves_them_to_slurm() -> None:
    built = build_batch(run_spec(), ROOT, workspace="w").options
    assert not any(o.startswith(("--partition", "--account", "--output", "--chdir")) for o in built)
    assert (
        "--no-requeue"
        in build_batch(run_spec(), SlurmSettings(requeue=False), workspace="w").options
    )


@pytest.mark.parametrize(("priority", "nice"), [(0, 0), (-100, 100), (1000, -1000)])
def test_priority_is_minus_nice(priority: int, nice: int) -> None:
    assert nice_for(priority, privileged=True) == nice


def test_only_root_or_an_operator_may_ask_for_a_positive_priority() -> None:
    assert nice_for(-5, privileged=False) == 5
    with pytest.raises(SlurmError) as caught:
        build_batch(run_spec(priority=5), SlurmSettings(), workspace="w")
    assert str(caught.value).startswith("priority 5 needs nice -5, and Slurm lets only root")


def test_the_script_exports_the_environment_and_runs_one_step() -> None:
    spec = run_spec(env={"FOO": "a b", "ASTRAEUS_RUN_NAME": "spoofed"}, args=["-c", "echo 'hi'"])
    lines = build_batch(spec, ROOT, workspace="vision").script.splitlines()
    assert lines[0] == "#!/bin/bash"
    exports = [line for line in lines if line.startswith("export ")]
    assert exports == [
        "export FOO='a b'",
        "export ASTRAEUS_RUN_NAME=ft",
        "export ASTRAEUS_WORKSPACE=vision",
        "export ASTRAEUS_GPU_COUNT=0",
        "export ASTRAEUS_WORKER_COUNT=1",
        "export ASTRAEUS_WORKER_INDEX=0",
        'export ASTRAEUS_RESTART_COUNT="${SLURM_RESTART_COUNT:-0}"',
    ]
    assert shlex.split(_step("\n".join(lines))) == [
        "srun", "--export=ALL", "--kill-on-bad-exit=1", "--", "python", "-c", "echo 'hi'",
    ]  # fmt: skip


def test_the_script_is_valid_bash_and_waits_for_a_preemption_requeue() -> None:
    script = build_batch(run_spec(), ROOT, workspace="w").script
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)
    assert "PreemptTime=[0-9]" in script and script.rstrip().endswith('exit "$status"')


def test_with_pyxis_the_step_runs_in_the_image_with_the_drives() -> None:
    drives = [
        {"name": "ckpt", "mount_path": "/ckpt", "mode": "ReadWrite"},
        {"name": "data", "mount_path": "/data", "mode": "ReadOnly"},
    ]
    settings_ = SlurmSettings(pyxis=True, drives={"ckpt": "/lustre/ckpt", "data": "/lustre/data"})
    step = shlex.split(
        _step(build_batch(run_spec(datavolume_refs=drives), settings_, workspace="w").script)
    )
    assert step[3:5] == [
        "--container-image=nvcr.io#nvidia/pytorch:24.08-py3",
        "--container-mounts=/lustre/ckpt:/ckpt,/lustre/data:/data:ro",
    ]


def test_without_pyxis_the_image_is_not_used_and_drives_stay_where_they_are() -> None:
    shared = {"name": "ckpt", "mount_path": "/lustre/ckpt", "mode": "ReadWrite"}
    settings_ = SlurmSettings(drives={"ckpt": "/lustre/ckpt"})
    script = build_batch(run_spec(datavolume_refs=[shared]), settings_, workspace="w").script
    assert "--container" not in script
    moved = {**shared, "mount_path": "/ckpt"}
    with pytest.raises(SlurmError, match="use its shared path /lustre/ckpt as the mount path"):
        build_batch(run_spec(datavolume_refs=[moved]), settings_, workspace="w")


def test_with_pyxis_a_run_naming_no_image_runs_on_the_node() -> None:
    """``local`` (no image named, no default_image) is not a container image for pyxis."""
    script = build_batch(run_spec(image="local"), SlurmSettings(pyxis=True), workspace="w").script
    assert "--container" not in script


def test_a_drive_without_a_shared_path_is_refused() -> None:
    drive = {"name": "ckpt", "mount_path": "/ckpt", "mode": "ReadWrite"}
    with pytest.raises(SlurmError, match="drive ckpt has no shared path"):
        build_batch(run_spec(datavolume_refs=[drive]), SlurmSettings(pyxis=True), workspace="w")


@pytest.mark.parametrize(
    ("image", "pyxis"),
    [
        ("nvcr.io/nvidia/pytorch:24.08-py3", "nvcr.io#nvidia/pytorch:24.08-py3"),
        ("localhost:5000/train", "localhost:5000#train"),
        ("ubuntu:24.04", "ubuntu:24.04"),
        ("library/ubuntu", "library/ubuntu"),
        ("nvcr.io#nvidia/pytorch", "nvcr.io#nvidia/pytorch"),
    ],
)
def test_pyxis_image_names(image: str, pyxis: str) -> None:
    assert pyxis_image(image) == pyxis


@pytest.mark.parametrize(("seconds", "minutes"), [(1, 1), (60, 1), (61, 2), (86400, 1440)])
def test_time_limits_are_whole_minutes_rounded_up(seconds: int, minutes: int) -> None:
    assert time_minutes(seconds) == minutes


def test_the_comment_carries_the_workspace() -> None:
    assert workspace_of_comment("astraeus:vision") == "vision"
    assert workspace_of_comment("astraeus:") is None
    assert workspace_of_comment("someone's note") is None


@settings(max_examples=60, deadline=None)
@given(
    gpus=st.integers(0, 8),
    cores=st.integers(0, 64),
    memory_mib=st.just(0) | st.integers(6, 1 << 20),  # none, or at least Docker's 6MiB
    limit=st.none() | st.integers(1, 30 * 86400),
    priority=st.integers(-1000, 1000),
)
def test_the_batch_header_reads_back_as_the_same_run(
    gpus: int, cores: int, memory_mib: int, limit: int | None, priority: int
) -> None:
    """What runner.runspec.sbatch reads from the #SBATCH header is the run (times in minutes)."""
    task: dict[str, Any] = resources(
        gpu_requests={"count": gpus}, cpu_cores=cores, memory_bytes=memory_mib << 20
    )
    if limit is not None:
        task["time_limit_seconds"] = limit
    spec = run_spec(priority=priority, **task)
    rendered = build_batch(spec, ROOT, workspace="w").render()
    known = ("--job-name", "--gres", "--cpus-per-task", "--mem=", "--time", "--nice")
    header = [line for line in rendered.splitlines() if line.startswith("#SBATCH ")]
    kept = [line for line in header if line.removeprefix("#SBATCH ").startswith(known)]
    back = parse_sbatch("\n".join(["#!/bin/bash", "#SBATCH --container-image=i", *kept, "true"]))
    assert (back.name, back.priority) == (spec.name, spec.priority)
    assert back.worker_resources() == spec.worker_resources()
    minutes = None if limit is None else -(-limit // 60) * 60
    assert back.task.time_limit_seconds == minutes


def _step(script: str) -> str:
    return next(line for line in script.splitlines() if line.startswith("srun "))


def test_shards_map_onto_slurm_shards_and_bytes_are_refused_in_one_line() -> None:
    assert options(**resources(gpu_requests={"count": 1, "shards": 2})) == (
        "--nodes=1", "--gres=shard:2")  # fmt: skip
    script = "#!/bin/bash\n#SBATCH --gres=shard:3\npython train.py\n"
    spec = parse_sbatch(script, name_hint="s")
    assert "--gres=shard:3" in build_batch(spec, ROOT, workspace="w").options
    with pytest.raises(SlurmError, match=r"not memory_bytes$"):
        build_batch(run_spec(**resources(gpu_requests={"count": 1, "memory_bytes": GIB})), ROOT,
                    workspace="w")  # fmt: skip
    with pytest.raises(SlurmError, match="one worker on one GPU"):
        build_batch(run_spec(**resources(gpu_requests={"count": 2, "shards": 1})), ROOT,
                    workspace="w")  # fmt: skip
