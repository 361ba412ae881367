"""Run Slurm's commands: submit, cancel, change a job's nice, read the queue.

Every command runs with a timeout, ``TZ=UTC`` (squeue prints local times
without a zone) and ``SLURM_TIME_FORMAT=standard``; a failure raises
:class:`SlurmError` with one line: the command and the last thing it said.
The commands are run through a :data:`Runner`, which tests replace.

``squeue --json`` is used where it works (Slurm 22.05 and later, when the
openapi or data_parser plugins are installed); the first failure switches the
client to ``squeue --Format`` for good.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from runner.slurm.errors import SlurmError
from runner.slurm.jobs import SlurmJob, parse_squeue_format, parse_squeue_json, squeue_format
from runner.slurm.script import BatchJob, nice_for


@dataclass(frozen=True, slots=True)
class Finished:
    """What a command did: its exit status and output."""

    code: int
    stdout: str
    stderr: str


Runner = Callable[[Sequence[str], str | None, float], Finished]
"""``runner(argv, stdin, timeout)``: run a command; raise TimeoutError or OSError if it cannot."""


def run_command(argv: Sequence[str], stdin: str | None, timeout: float) -> Finished:
    """The real :data:`Runner`: a subprocess with Slurm's output made predictable."""
    env = {**os.environ, "TZ": "UTC", "SLURM_TIME_FORMAT": "standard"}
    try:
        done = subprocess.run(
            list(argv), input=stdin, capture_output=True, text=True, timeout=timeout, env=env
        )
    except subprocess.TimeoutExpired:
        raise TimeoutError from None
    return Finished(done.returncode, done.stdout, done.stderr)


class SlurmClient:
    """The cluster as seen through its commands. Not thread-safe; cheap to make."""

    def __init__(
        self,
        *,
        runner: Runner = run_command,
        timeout: float = 30.0,
        json: bool | None = None,
        bin_dir: str | None = None,
    ) -> None:
        """``json``: None tries ``squeue --json`` first; ``bin_dir`` holds Slurm's commands."""
        self._runner = runner
        self._timeout = timeout
        self._json = json
        self._bin_dir = bin_dir

    # ------------------------------------------------------------ commands

    def submit(self, job: BatchJob) -> int:
        """Submit with sbatch; the new job's id."""
        out = self._run(job.argv(self._bin("sbatch")), stdin=job.script)
        first = out.strip().split(";")[0]  # --parsable: "id" or "id;cluster"
        if not first.isdigit():
            raise SlurmError(f"sbatch printed no job id: {out.strip()[:80]!r}")
        return int(first)

    def cancel(self, job_id: int, *, signal: str | None = None) -> None:
        """scancel the job (or only send it ``signal``, e.g. ``TERM``)."""
        argv = [self._bin("scancel")]
        if signal:
            argv.append(f"--signal={signal}")
        self._run([*argv, str(job_id)])

    def set_priority(self, job_id: int, priority: int, *, privileged: bool) -> None:
        """Give a job the nice of an Astraeus priority (see :func:`nice_for`)."""
        self.set_nice(job_id, nice_for(priority, privileged=privileged))

    def set_nice(self, job_id: int, nice: int) -> None:
        self._run([self._bin("scontrol"), "update", f"jobid={job_id}", f"nice={nice}"])

    def set_partition(self, job_id: int, partition: str) -> None:
        """Move a pending job to another partition (a running job stays where it is)."""
        self._run([self._bin("scontrol"), "update", f"jobid={job_id}", f"partition={partition}"])

    def requeue(self, job_id: int) -> None:
        """Stop a running job and queue it again (Slurm counts it as a restart)."""
        self._run([self._bin("scontrol"), "requeue", str(job_id)])

    def jobs(self, job_ids: Iterable[int] | None = None) -> list[SlurmJob]:
        """Every job squeue knows (pending, running, and finished ones for MinJobAge)."""
        wanted = None if job_ids is None else set(job_ids)
        found = self._query()
        return found if wanted is None else [job for job in found if job.job_id in wanted]

    def job(self, job_id: int) -> SlurmJob | None:
        found = self.jobs([job_id])
        return found[0] if found else None

    def version(self) -> str:
        """``22.05.8``: the version of Slurm's commands."""
        return self._run([self._bin("sinfo"), "--version"]).split()[-1]

    def partition_grace(self, partition: str) -> int:
        """A partition's GraceTime in seconds: how long a preempted job keeps running."""
        out = self._run([self._bin("scontrol"), "--oneliner", "show", "partition", partition])
        for word in out.split():
            key, _, value = word.partition("=")
            if key == "GraceTime" and value.isdigit():
                return int(value)
        raise SlurmError(f"scontrol show partition {partition} printed no GraceTime")

    def answers(self) -> bool:
        """True when slurmctld answers (``sinfo`` succeeds)."""
        try:
            self._run([self._bin("sinfo"), "--noheader", "--format=%P"])
        except SlurmError:
            return False
        return True

    # ------------------------------------------------------------ plumbing

    def _query(self) -> list[SlurmJob]:
        squeue = self._bin("squeue")
        if self._json is not False:
            try:
                jobs = parse_squeue_json(self._run([squeue, "--json"]))
            except SlurmError:
                if self._json:
                    raise
                self._json = False
            else:
                self._json = True
                return jobs
        argv = [squeue, "--noheader", "--states=all", f"--Format={squeue_format()}"]
        return parse_squeue_format(self._run(argv))

    def _bin(self, name: str) -> str:
        return os.path.join(self._bin_dir, name) if self._bin_dir else name

    def _run(self, argv: Sequence[str], stdin: str | None = None) -> str:
        shown = os.path.basename(argv[0])
        try:
            done = self._runner(argv, stdin, self._timeout)
        except TimeoutError:
            raise SlurmError(f"{shown} did not answer within {self._timeout:g}s") from None
        except FileNotFoundError:
            raise SlurmError(f"{shown} not found: are Slurm's commands installed?") from None
        except OSError as error:
            raise SlurmError(f"{shown} could not run: {error.strerror or error}") from None
        if done.code != 0:
            raise SlurmError(f"{shown}: {_last_words(done)}", done.code)
        return done.stdout


def _last_words(done: Finished) -> str:
    """The last thing a failed command said, without its ``sbatch: error:`` prefix."""
    lines = [line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip()]
    if not lines:
        return f"failed with exit status {done.code}"
    last = lines[-1]
    for prefix in ("sbatch: error: ", "squeue: error: ", "scancel: error: ", "scontrol: error: "):
        last = last.removeprefix(prefix)
    return last.removeprefix("error: ")
