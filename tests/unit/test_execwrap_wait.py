"""The exec keeper's exit code once it is asked to end: the command's own status,
whether an orphan or the command is reaped first, and wherever it is reaped.

Each case runs in a process of its own: the keeper reaps any child (``waitpid(-1)``),
which must not be the test runner's."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PRELUDE = textwrap.dedent(
    """
    import os, subprocess, sys, time
    from runner.executors import execwrap

    def zombie(argv):
        proc = subprocess.Popen(argv)
        for _ in range(500):
            with open(f"/proc/{proc.pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return proc
            time.sleep(0.01)
        raise SystemExit("the child did not exit")
    """
)


def _run(body: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(body)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_an_orphan_reaped_first_while_ending_does_not_hide_the_commands_status() -> None:
    # The older child is reaped first by waitpid(-1): an orphan that ended before the command.
    got = _run(
        """
        orphan = zombie(["true"])
        command = zombie(["sh", "-c", "exit 5"])
        execwrap._ENDING = True
        print(execwrap._wait(command))
        """
    )
    assert got == "5"


def test_the_commands_status_is_kept_when_ending_all_reaps_it() -> None:
    # SIGTERM's handler SIGKILLs and reaps everything below; the command had exited 3.
    got = _run(
        """
        import signal
        command = zombie(["sh", "-c", "exit 3"])
        orphan = zombie(["true"])
        execwrap._end(signal.SIGTERM, None)
        print(execwrap._wait(command))
        """
    )
    assert got == "3"


def test_a_command_killed_while_ending_exits_137() -> None:
    got = _run(
        """
        import signal
        command = subprocess.Popen(["sleep", "60"])
        execwrap._end(signal.SIGTERM, None)
        print(execwrap._wait(command))
        """
    )
    assert got == "137"


def test_a_command_that_ends_on_its_own_gives_its_code() -> None:
    got = _run(
        """
        command = subprocess.Popen(["sh", "-c", "exit 9"])
        print(execwrap._wait(command))
        """
    )
    assert got == "9"
