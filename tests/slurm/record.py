"""Record what the real Slurm prints, for the unit tests of runner/slurm's readers.

Run as root where tests/slurm/setup.sh has started Slurm (it cancels the jobs it
made before and after, and takes about a minute):

    .venv/bin/python -m tests.slurm.record

It sets up two scenes and writes, into tests/slurm/recorded/:

- ``queue.json``, ``queue.format``, ``queue.start``: ``squeue --json``,
  ``squeue --Format=<runner.slurm.squeue_format()>`` and ``squeue --start`` with
  jobs done, failed, killed, running (one a gang), the head waiting for
  Resources, one behind it (Priority), one held and one requeued;
- ``unlimited.json``, ``unlimited.format``: a head behind a job without a time
  limit (Slurm's estimate is a year away);
- ``commands.json``: what sbatch, scontrol and squeue print when they refuse;
- ``meta.json``: the Slurm version, when, and which job is which.

Only the scene's jobs are kept from squeue's output; nothing else is changed.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from runner.slurm import BatchJob, SlurmClient, build_batch, squeue_format
from tests.slurm.helpers import RECORDED, cancel_test_jobs, settings, spec, wait_job
from tests.support.harness import wait_for

PREFIX = "slurmrec-"
ENV = {**os.environ, "TZ": "UTC", "SLURM_TIME_FORMAT": "standard"}


def main() -> None:
    client = SlurmClient()
    logs = Path(tempfile.mkdtemp(prefix="slurm-record-"))
    logs.chmod(0o777)
    cancel_test_jobs(client, (PREFIX,))
    RECORDED.mkdir(exist_ok=True)
    roles = record_queue(client, logs)
    cancel_test_jobs(client, (PREFIX,))
    roles |= record_unlimited(client, logs)
    cancel_test_jobs(client, (PREFIX,))
    write("commands.json", json.dumps(record_commands(client, logs), indent=2) + "\n")
    meta = {"slurm": client.version(), "recorded_at": round(time.time()), "jobs": roles}
    write("meta.json", json.dumps(meta, indent=2) + "\n")


def record_queue(client: SlurmClient, logs: Path) -> dict[str, int]:
    def submit(role: str, command: str = "sleep 600", **fields: Any) -> int:
        run = spec(PREFIX + role, command, **fields)
        ids[role] = client.submit(build_batch(run, settings(logs), workspace="vision"))
        return ids[role]

    ids: dict[str, int] = {}
    for role, command in (("done", "echo done"), ("exit3", "exit 3"), ("killed", "kill -9 $$")):
        submit(role, command, gpus=1, time_limit=60)
    for role in ("done", "exit3", "killed"):
        wait_for(lambda r=role: finished(client, ids[r]), 30, f"{role} to finish")
    wait_job(client, submit("blocker", gpus=4, time_limit=180, priority=5), state="RUNNING")
    wait_job(client, submit("gang", gpus=1, workers=2, time_limit=240), state="RUNNING")
    wait_job(client, submit("requeued"), state="RUNNING")
    client.requeue(ids["requeued"])
    wait_job(client, submit("head", "true", gpus=6, time_limit=120), reason="Resources")
    wait_job(
        client, submit("behind", "true", gpus=2, time_limit=600, priority=-3), reason="Priority"
    )
    held = submit("held", "true", gpus=1, time_limit=60)
    run(["scontrol", "hold", str(held)])
    wait_job(client, held, reason="JobHeldAdmin")
    wait_job(client, ids["requeued"], reason="BeginTime")
    save("queue", ids)
    start = run(["squeue", "--start", f"--jobs={ids['head']},{ids['behind']}"])
    write("queue.start", start.stdout)
    return ids


def record_unlimited(client: SlurmClient, logs: Path) -> dict[str, int]:
    ids = {}
    for role, gpus, limit in (("endless", 4, None), ("waits", 8, 60)):
        run = spec(PREFIX + role, "sleep 600", gpus=gpus, time_limit=limit)
        ids[role] = client.submit(build_batch(run, settings(logs), workspace="vision"))
    wait_job(client, ids["endless"], state="RUNNING")
    wait_job(client, ids["waits"], reason="Resources")
    save("unlimited", ids)
    return ids


def record_commands(client: SlurmClient, logs: Path) -> dict[str, dict[str, Any]]:
    """What the commands print when they fail (and one partition, for its GraceTime)."""
    nobody = ["runuser", "-u", "nobody", "--"]
    job = build_batch(spec(PREFIX + "nobody", "sleep 60", gpus=1), settings(logs), workspace="w")
    mine = BatchJob(
        job.name, tuple(o for o in job.options if not o.startswith("--nice")), job.script
    )
    job_id = int(run([*nobody, *mine.argv()], stdin=mine.script).stdout.split(";")[0])
    cases = {
        "sbatch_bad_partition": (
            ["sbatch", "--parsable", "--partition=nowhere", "--wrap=true"],
            None,
        ),
        "sbatch_negative_nice": (
            [*nobody, "sbatch", "--nice=-5", "--chdir=/tmp", "--wrap=true"],
            None,
        ),
        "scontrol_negative_nice": (
            [*nobody, "scontrol", "update", f"jobid={job_id}", "nice=-3"],
            None,
        ),
        "sbatch_ok": (
            ["sbatch", "--parsable", "--hold", "--output=/dev/null", "--wrap=true"],
            None,
        ),
        "scontrol_partition": (["scontrol", "--oneliner", "show", "partition", "low"], None),
        "squeue_bad_option": (["squeue", "--no-such-option"], None),
    }
    recorded = {}
    for case, (argv, stdin) in cases.items():
        done = run(argv, stdin=stdin, check=False)
        recorded[case] = {
            "argv": argv,
            "code": done.returncode,
            "stdout": done.stdout,
            "stderr": done.stderr,
        }
    held = recorded["sbatch_ok"]["stdout"].strip().split(";")[0]
    client.cancel(int(held))
    client.cancel(job_id)
    return recorded


def finished(client: SlurmClient, job_id: int) -> bool:
    time.sleep(0.2)
    job = client.job(job_id)
    return job is not None and job.state not in ("PENDING", "RUNNING", "COMPLETING")


def save(scene: str, ids: dict[str, int]) -> None:
    wanted = set(ids.values())
    document = json.loads(run(["squeue", "--json"]).stdout)
    document["jobs"] = [job for job in document["jobs"] if job["job_id"] in wanted]
    write(f"{scene}.json", json.dumps(document, indent=2) + "\n")
    argv = ["squeue", "--noheader", "--states=all", f"--Format={squeue_format()}"]
    lines = run(argv).stdout.splitlines(keepends=True)
    write(
        f"{scene}.format", "".join(line for line in lines if int(line.split("\x1f")[0]) in wanted)
    )


def run(
    argv: list[str], stdin: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, check=check, env=ENV)


def write(name: str, text: str) -> None:
    (RECORDED / name).write_text(text)
    print(f"wrote {RECORDED / name}")


if __name__ == "__main__":
    main()
