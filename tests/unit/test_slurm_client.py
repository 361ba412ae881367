"""runner.slurm.client: the commands it runs and how their failures read, on a fake runner.

The fake answers with what the real commands printed (tests/slurm/recorded).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

import pytest

from runner.config.slurm import SlurmSettings
from runner.slurm import Finished, SlurmClient, SlurmError, build_batch
from tests.unit.slurm_helpers import IDS, RECORDED, run_spec

COMMANDS = json.loads((RECORDED / "commands.json").read_text())


def recorded(case: str) -> Finished:
    seen = COMMANDS[case]
    return Finished(seen["code"], seen["stdout"], seen["stderr"])


class FakeSlurm:
    """Answers each command by its name (``answers["squeue --json"]``), and remembers the calls."""

    def __init__(self, answers: dict[str, Finished | BaseException]) -> None:
        self.answers = answers
        self.calls: list[tuple[list[str], str | None, float]] = []

    def __call__(self, argv: Sequence[str], stdin: str | None, timeout: float) -> Finished:
        self.calls.append((list(argv), stdin, timeout))
        name = os.path.basename(argv[0])
        for key in (" ".join([name, *argv[1:2]]), name):
            if key in self.answers:
                answer = self.answers[key]
                if isinstance(answer, BaseException):
                    raise answer
                return answer
        raise AssertionError(f"unexpected command {argv}")


def ok(stdout: str) -> Finished:
    return Finished(0, stdout, "")


QUEUE_JSON = ok((RECORDED / "queue.json").read_text())
QUEUE_FORMAT = ok((RECORDED / "queue.format").read_text())


def test_submit_gives_the_script_on_stdin_and_reads_the_job_id() -> None:
    fake = FakeSlurm({"sbatch": recorded("sbatch_ok")})
    job = build_batch(run_spec(), SlurmSettings(), workspace="w")
    assert SlurmClient(runner=fake, timeout=7).submit(job) == 303
    assert fake.calls == [(list(job.argv()), job.script, 7)]
    assert SlurmClient(runner=FakeSlurm({"sbatch": ok("41;cluster\n")})).submit(job) == 41


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("sbatch_bad_partition",
         "sbatch: Batch job submission failed: Invalid partition name specified"),
        ("sbatch_negative_nice", "sbatch: Batch job submission failed: Invalid --nice value"),
        ("scontrol_negative_nice", "scontrol: Access/permission denied for job 302"),
    ],
)  # fmt: skip
def test_refusals_are_one_line_with_the_last_thing_slurm_said(case: str, message: str) -> None:
    fake = FakeSlurm({"sbatch": recorded(case), "scontrol": recorded(case)})
    client = SlurmClient(runner=fake)
    with pytest.raises(SlurmError) as caught:
        if case.startswith("sbatch"):
            client.submit(build_batch(run_spec(), SlurmSettings(), workspace="w"))
        else:
            client.set_nice(302, -3)
    assert (str(caught.value), caught.value.code) == (message, 1)


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (TimeoutError(), "squeue did not answer within 5s"),
        (FileNotFoundError(2, "No such file"), "squeue not found: are Slurm's commands installed?"),
        (PermissionError(13, "Permission denied"), "squeue could not run: Permission denied"),
    ],
)
def test_commands_that_do_not_run_or_answer(error: BaseException, message: str) -> None:
    client = SlurmClient(runner=FakeSlurm({"squeue": error}), timeout=5)
    with pytest.raises(SlurmError) as caught:
        client.jobs()
    assert str(caught.value) == message


def test_jobs_reads_json_and_filters_it_itself() -> None:
    fake = FakeSlurm({"squeue --json": QUEUE_JSON})
    client = SlurmClient(runner=fake)
    assert [job.name for job in client.jobs([IDS["head"], 12345])] == ["slurmrec-head"]
    assert client.job(IDS["behind"]).reason == "Priority"  # type: ignore[union-attr]
    assert client.job(12345) is None
    assert len(client.jobs()) == len(IDS) - 2  # the queue scene: all but the unlimited one's jobs


def test_without_json_the_client_falls_back_to_the_format_for_good() -> None:
    old_slurm = FakeSlurm({"squeue --json": recorded("squeue_bad_option"), "squeue": QUEUE_FORMAT})
    client = SlurmClient(runner=old_slurm)
    assert (
        client.jobs() == SlurmClient(runner=FakeSlurm({"squeue": QUEUE_FORMAT}), json=False).jobs()
    )
    client.jobs()
    asked = [argv[1] for argv, _, _ in old_slurm.calls]
    assert asked == ["--json", "--noheader", "--noheader"]


def test_a_client_told_to_use_json_does_not_fall_back() -> None:
    client = SlurmClient(
        runner=FakeSlurm({"squeue --json": recorded("squeue_bad_option")}), json=True
    )
    with pytest.raises(SlurmError) as caught:
        client.jobs()
    assert str(caught.value) == 'squeue: Try "squeue --help" for more information'


def test_cancel_requeue_nice_priority_and_grace() -> None:
    fake = FakeSlurm({"scancel": ok(""), "scontrol": recorded("scontrol_partition")})
    client = SlurmClient(runner=fake)
    client.cancel(7)
    client.cancel(7, signal="TERM")
    client.requeue(7)
    client.set_priority(7, 10, privileged=True)
    assert client.partition_grace("low") == 2
    assert [argv for argv, _, _ in fake.calls] == [
        ["scancel", "7"],
        ["scancel", "--signal=TERM", "7"],
        ["scontrol", "requeue", "7"],
        ["scontrol", "update", "jobid=7", "nice=-10"],
        ["scontrol", "--oneliner", "show", "partition", "low"],
    ]
    with pytest.raises(SlurmError, match=r"^priority 10 needs nice -10,"):
        client.set_priority(7, 10, privileged=False)


def test_answers_and_version() -> None:
    up = FakeSlurm({"sinfo": ok("slurm-wlm 22.05.8\n")})
    assert SlurmClient(runner=up).answers() and SlurmClient(runner=up).version() == "22.05.8"
    down = FakeSlurm({"sinfo": Finished(1, "", "sinfo: error: Unable to contact slurm controller")})
    assert not SlurmClient(runner=down).answers()
    client = SlurmClient(runner=up, bin_dir="/opt/slurm/bin")
    client.version()
    assert up.calls[-1][0] == ["/opt/slurm/bin/sinfo", "--version"]
