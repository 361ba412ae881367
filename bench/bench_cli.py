"""The commands people run often, end to end: a new process, the socket round trip, the text.

Run by hand, never as a test: ``.venv/bin/python bench/bench_cli.py [--waiting 2000]
[--repeat 21] [--base DIR]``. Starts a daemon (process executor, 8 simulated GPUs) with
one blocker holding every GPU and ``--waiting`` one-GPU runs behind it, then times, as
whole processes, ``astra ls``, ``show``, ``priority``, ``hold``, ``release``, ``run``
and ``delete``, and the bare interpreter beside them (the floor no command goes under):
median wall ms and median CPU ms (the children's rusage: on a busy machine it moves less
than the wall clock).

``--base DIR`` times a second copy of the code (e.g. ``git archive main | tar -x -C
DIR``) the same way, each call interleaved with this checkout's, and prints both side
by side. Both run as ``python -m astraeus_tui.cli.main`` from their own directory (the
console script adds only its few lines). Bytecode is written and used, as an installed
copy has it (``PYTHONDONTWRITEBYTECODE`` is dropped: without it each call compiles a
dozen modules again, ~20 ms). Targets (issue #16): ls <= 50 ms with 2,000
waiting and <= 150 ms with 10,000; the others <= 40 ms a call.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = '[machine]\nexecutor = "process"\ngpus = 8\nmax_submit_per_user = 1000000\n'


def start_daemon(home: Path) -> subprocess.Popen[bytes]:
    from astraeus_tui.client import ApiError, Client

    (home / "config.toml").write_text(CONFIG)
    env = {**os.environ, "ASTRAEUS_HOME": str(home), "ASTRAEUS_LOG": "WARNING"}
    proc = subprocess.Popen([sys.executable, "-m", "astraeus_tui.cli.main", "serve"], env=env)
    for _ in range(400):
        try:
            Client(home / "astraeus.sock").status()
            return proc
        except ApiError:
            time.sleep(0.05)
    raise SystemExit("the daemon did not start")


def end_workers(home: Path) -> None:
    """The workers outlive their daemon (the blocker's ``sleep``): end them."""
    supervisors = []
    for meta in (home / "workers").glob("*/meta.json"):
        found = json.loads(meta.read_text())
        if found.get("child_pgid"):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(found["child_pgid"], signal.SIGKILL)
                supervisors.append(found["supervisor_pid"])
    deadline = time.monotonic() + 10  # each supervisor writes its exit.json, then ends
    while any(Path(f"/proc/{pid}").exists() for pid in supervisors):
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)


def fill(home: Path, waiting: int) -> None:
    from astraeus_tui.client import Client

    client = Client(home / "astraeus.sock", timeout=600)

    def doc(name: str, gpus: int, command: str, args: list[str]) -> dict[str, object]:
        task = {"command": command, "args": args,
                "requested_resources": {"gpu_requests": {"count": gpus}}}  # fmt: skip
        return {"metadata": {"name": name}, "spec": {"task_template": task}}

    client.submit(doc("blocker", 8, "sleep", ["36000"]))
    lines = [json.dumps(doc(f"w-{i}", 1, "true", [])) for i in range(waiting)]
    client.submit_batch(("\n".join(lines) + "\n").encode())


def one(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU milliseconds of one whole process; it must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, check=False)  # fmt: skip
    wall = (time.perf_counter() - t0) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{cmd[3:]} failed: {done.stderr.decode()[-300:]}")
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return wall, cpu


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--waiting", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=21)
    p.add_argument("--base", type=Path, help="another copy of the code, timed beside this one")
    args = p.parse_args()
    roots = [("this", ROOT)] + ([("base", args.base.resolve())] if args.base else [])
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        proc = start_daemon(home)
        try:
            fill(home, args.waiting)
            env = {**os.environ, "ASTRAEUS_HOME": str(home), "COLUMNS": "160"}
            env.pop("PYTHONPATH", None)
            env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed copy has its bytecode
            py = sys.executable
            commands: list[tuple[str, list[str]]] = [
                ("python -c pass", [py, "-c", "pass"]),
                ("ls", ["ls"]),
                ("show", ["show", "w-5"]),
                ("priority", ["priority", "w-7", "0"]),
                ("hold", ["hold", "w-9"]),
                ("release", ["release", "w-9"]),
                ("run", ["run", "--gpus", "1", "--", "true"]),
                ("delete", ["delete", "@"]),
            ]
            print(f"{args.waiting} waiting, medians of {args.repeat} (wall ms / CPU ms)")
            print(f"{'command':16}" + "".join(f"{name:>22}" for name, _ in roots))
            for label, argv in commands:
                samples: dict[str, list[tuple[float, float]]] = {n: [] for n, _ in roots}
                for i in range(args.repeat + 1):
                    for name, root in roots:
                        if argv[0] == py:
                            cmd = argv
                        elif argv[0] == "delete":  # a run of its own each time
                            cmd = [py, "-m", "astraeus_tui.cli.main", "run", "--name",
                                   f"d-{name}-{i}", "--gpus", "1", "--", "true"]  # fmt: skip
                            one(cmd, root, env)
                            cmd = [py, "-m", "astraeus_tui.cli.main", "delete", f"d-{name}-{i}"]
                        else:
                            cmd = [py, "-m", "astraeus_tui.cli.main", *argv]
                        sample = one(cmd, root, env)
                        if i:  # the first warms the page cache
                            samples[name].append(sample)
                cells = ""
                for name, _ in roots:
                    wall = statistics.median(s[0] for s in samples[name])
                    cpu = statistics.median(s[1] for s in samples[name])
                    cells += f"{wall:13.1f} / {cpu:6.1f}"
                print(f"{label:16}{cells}")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
            end_workers(home)


if __name__ == "__main__":
    main()
