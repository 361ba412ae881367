"""runner.slurm.jobs: squeue's output, recorded from Slurm 22.05 (tests/slurm/record.py)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from runner.slurm import (
    SlurmError,
    SlurmJob,
    parse_squeue_format,
    parse_squeue_json,
    start_estimate,
)
from runner.slurm.jobs import decode_exit_status, gpu_count, gpu_indices, parse_timestamp
from tests.unit.slurm_helpers import NOW, QUEUE, RECORDED, UNLIMITED, recorded


@pytest.mark.parametrize("scene", ["queue", "unlimited"])
def test_json_and_format_read_the_same_jobs(scene: str) -> None:
    by_json, by_format = recorded(scene)
    assert by_json.keys() == by_format.keys()
    for role, job in by_json.items():  # the format has no GPU indices, no state description
        seen = replace(by_format[role], gpu_indices=job.gpu_indices, description=job.description)
        assert seen == job, role


@pytest.mark.parametrize(
    ("role", "state", "reason", "exit_code", "restarts"),
    [
        ("done", "COMPLETED", "None", 0, 0),
        ("exit3", "FAILED", "NonZeroExitCode", 3, 0),
        ("killed", "FAILED", "NonZeroExitCode", 137, 0),
        ("blocker", "RUNNING", "None", 0, 0),
        ("requeued", "PENDING", "BeginTime", 0, 1),
        ("head", "PENDING", "Resources", 0, 0),
        ("behind", "PENDING", "Priority", 0, 0),
        ("held", "PENDING", "JobHeldAdmin", 0, 0),
    ],
)
def test_states_reasons_exit_codes_and_restarts(
    role: str, state: str, reason: str, exit_code: int, restarts: int
) -> None:
    job = QUEUE[role]
    assert (job.state, job.reason, job.exit_code, job.restarts) == (
        state,
        reason,
        exit_code,
        restarts,
    )


def test_what_astraeus_wrote_comes_back() -> None:
    blocker = QUEUE["blocker"]
    assert blocker.name == "slurmrec-blocker" and blocker.comment == "astraeus:vision"
    assert (blocker.nice, QUEUE["behind"].nice, QUEUE["head"].nice) == (-5, 3, 0)
    assert (blocker.gpus, blocker.time_limit_seconds, blocker.partition) == (4, 180, "low")
    assert blocker.end == blocker.start + 180  # type: ignore[operator]


def test_gpus_asked_and_held() -> None:
    assert len(QUEUE["blocker"].gpu_indices) == 4
    gang = QUEUE["gang"]
    assert (gang.gpus, gang.tasks, len(gang.gpu_indices)) == (2, 2, 2)
    assert set(gang.gpu_indices).isdisjoint(QUEUE["blocker"].gpu_indices)
    assert (QUEUE["head"].gpus, QUEUE["head"].gpu_indices) == (6, ())


def test_the_estimates_are_what_squeue_start_shows() -> None:
    shown = {}
    for line in (RECORDED / "queue.start").read_text().splitlines()[1:]:
        words = line.split()
        shown[int(words[0])] = parse_timestamp(words[5])
    for role in ("head", "behind"):
        job = QUEUE[role]
        assert start_estimate(job, NOW) == job.start == shown[job.job_id]
    assert QUEUE["head"].start == QUEUE["blocker"].end, "the head starts as the blocker ends"


def test_behind_work_without_a_limit_there_is_no_estimate() -> None:
    endless, waits = UNLIMITED["endless"], UNLIMITED["waits"]
    assert endless.state == "RUNNING" and endless.time_limit_seconds is None
    assert waits.reason == "Resources" and waits.start is not None
    assert waits.start - NOW > 300 * 86400  # Slurm: "in a year"
    assert start_estimate(waits, NOW) is None


def test_only_pending_jobs_have_an_estimate() -> None:
    assert start_estimate(QUEUE["blocker"], NOW) is None
    assert start_estimate(QUEUE["held"], NOW) is None  # held: no start time at all


def test_newer_slurm_json_is_read_too() -> None:
    """Slurm 23.02+ (data_parser) wraps numbers and lists states; shape from its docs."""
    number = lambda n: {"set": True, "infinite": False, "number": n}  # noqa: E731
    entry = {
        "job_id": 42,
        "name": "ft",
        "job_state": ["PENDING"],
        "state_reason": "Resources",
        "partition": "low",
        "nice": -5,
        "priority": number(100),
        "submit_time": number(1000),
        "start_time": number(2000),
        "end_time": number(5600),
        "time_limit": number(60),
        "restart_cnt": 2,
        "exit_code": {
            "status": ["SIGNALED"],
            "return_code": number(0),
            "signal": {"id": number(9)},
        },
        "tres_per_node": "gres/gpu:a100:2",
        "tasks": number(1),
        "node_count": number(1),
        "comment": "astraeus:vision",
    }
    (job,) = parse_squeue_json(json.dumps({"jobs": [entry], "errors": []}))
    assert job == SlurmJob(
        job_id=42, name="ft", state="PENDING", reason="Resources", partition="low",
        comment="astraeus:vision", nice=-5, priority=100, submitted=1000.0, start=2000.0,
        end=5600.0, time_limit_seconds=3600, restarts=2, exit_code=137, gpus=2,
    )  # fmt: skip
    unset = {**entry, "time_limit": {"set": True, "infinite": True, "number": 0}}
    assert parse_squeue_json(json.dumps({"jobs": [unset]}))[0].time_limit_seconds is None


@pytest.mark.parametrize(
    ("status", "code"), [(0, 0), (768, 3), (35072, 137), (9, 137), (15, 143), (256, 1)]
)
def test_raw_wait_statuses_read_as_the_shell_shows_them(status: int, code: int) -> None:
    assert decode_exit_status(status) == code


@pytest.mark.parametrize(
    ("tres", "gpus"),
    [
        ("gres:gpu:2", 2),
        ("gres/gpu:a100=4", 4),
        ("gres:gpu:1g.5gb:3", 3),
        ("cpu=4,mem=1G,gres/gpu=2", 2),
        ("gres:nic:1,gres:gpu:2", 2),
        ("N/A", 0),
        ("", 0),
    ],
)
def test_gpu_count(tres: str, gpus: int) -> None:
    assert gpu_count(tres) == gpus


@pytest.mark.parametrize(
    ("detail", "indices"),
    [
        (["gpu:2(IDX:0-1)"], (0, 1)),
        (["gpu:a100:3(IDX:0,2-3)"], (0, 2, 3)),
        (["gpu:1(IDX:5)", "gpu:1(IDX:6)"], (5, 6)),
        (["nic:1(IDX:0)"], ()),
        (["gpu:1(IDX:N/A)"], ()),
        ([], ()),
    ],
)
def test_gpu_indices(detail: list[str], indices: tuple[int, ...]) -> None:
    assert gpu_indices(detail) == indices


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("squeue: error: ", "squeue --json printed something that is not JSON"),
        ("[]", "squeue --json printed no list of jobs"),
        ('{"jobs": [], "errors": [{"error": "Unable to contact slurm controller"}]}',
         "squeue --json: Unable to contact slurm controller"),
    ],
)  # fmt: skip
def test_bad_json_is_one_slurm_error(text: str, message: str) -> None:
    with pytest.raises(SlurmError) as caught:
        parse_squeue_json(text)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_a_line_that_does_not_match_the_format_is_refused() -> None:
    with pytest.raises(SlurmError, match="does not match its format"):
        parse_squeue_format("JOBID STATE\n")
    assert parse_squeue_format("\n") == []
