"""Astraeus side by side with gflow and Slurm, measured in one run on this machine.

Run by hand, never as a test: ``.venv/bin/python bench/compare.py``. For each
system present it measures, as whole processes (median of ``--repeat`` runs):

* ``ls`` (``astra ls``, ``gqueue``, ``squeue``) with ``--waiting`` runs waiting
  (one blocker holding every GPU, the rest asking for one GPU each); ``--big``
  adds the same at 10,000;
* serial submits per second, one process each (``astra run --gpus 1 -- true``,
  ``gbatch --gpus 1 true``, ``sbatch --hold --wrap true``): every one waits, as the
  queue does;
* an idle submit until the program's first line (the submit command included);
* ``--help``, and shell completion of the first word (Astraeus only);
* bulk submits (Astraeus: ``astra submit --ndjson FILE`` of ``--bulk`` specs, and
  ``astra submit`` of as many spec files; each run durable before the answer), set
  against each peer's serial rate;
* the daemon's resident memory with the queue full (Slurm: slurmctld).

Astraeus runs a real daemon (process executor, 8 simulated GPUs) in a temporary
state directory. gflow (``pip install runqd``) is installed into a scratch venv
under /tmp when ``--install-gflow`` is given or it is absent, and its daemon runs
with a temporary HOME. Slurm is measured when ``sinfo`` answers; every job this
script submits there is held and cancelled by id at the end. The machine may be
busy: read the ratios (Astraeus / peer), measured in the same run, more than the
milliseconds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

GFLOW_VENV = Path("/tmp/astraeus-bench-gflow")
CONFIG = '[machine]\nexecutor = "process"\ngpus = 8\nmax_submit_per_user = 100000\n'
MEASURES = ("ls", "ls_big", "submits_per_s", "bulk_per_s", "bulk_files_per_s", "first_line_ms",
            "help_ms", "complete_ms", "rss_mb")  # fmt: skip
PEER_KEY = {"bulk_per_s": "submits_per_s", "bulk_files_per_s": "submits_per_s"}  # peers: serial
LABELS = {
    "ls": "ls with {waiting} waiting (ms)",
    "ls_big": "ls with {big} waiting (ms)",
    "submits_per_s": "serial submits, one process each (/s)",
    "first_line_ms": "idle submit -> program's first line (ms)",
    "bulk_per_s": "bulk submit, NDJSON of {bulk} (/s; peers: serial)",
    "bulk_files_per_s": "bulk submit, {bulk} spec files (/s; peers: serial)",
    "help_ms": "--help (ms)",
    "complete_ms": "shell completion, first word (ms)",
    "rss_mb": "daemon memory with {waiting} waiting (MB)",
}
Results = dict[str, float | None]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--waiting", type=int, default=2000, help="runs waiting for ls (2000)")
    p.add_argument("--big", action="store_true", help="also ls with 10,000 waiting")
    p.add_argument("--big-size", type=int, default=10000, help=argparse.SUPPRESS)
    p.add_argument("--repeat", type=int, default=7, help="runs per median (7)")
    p.add_argument("--submits", type=int, default=30, help="serial submits timed (30)")
    p.add_argument("--bulk", type=int, default=2000, help="runs in a bulk submit (2000)")
    p.add_argument("--install-gflow", action="store_true", help="(re)install runqd first")
    p.add_argument("--no-gflow", action="store_true")
    p.add_argument("--no-slurm", action="store_true")
    return p.parse_args(argv)


def timed(cmd: list[str], env: dict[str, str] | None = None) -> float:
    """Wall milliseconds of one whole process; it must succeed."""
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return (time.perf_counter() - t0) * 1000


def median_ms(cmd: list[str], repeat: int, env: dict[str, str] | None = None) -> float:
    timed(cmd, env)  # warm the page cache
    return statistics.median(timed(cmd, env) for _ in range(repeat))


def submit_rate(make: Callable[[int], list[str]], n: int, env: dict[str, str] | None) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        subprocess.run(make(i), env=env, check=True, capture_output=True)
    return n / (time.perf_counter() - t0)


def first_line_ms(submit: Callable[[str], list[str]], env: dict[str, str] | None,
                  repeat: int, tmp: Path, timeout: float = 30) -> float:  # fmt: skip
    """From the submit command's start to the moment the program wrote its first line."""
    samples = []
    for i in range(repeat):
        mark = tmp / f"first-line-{i}-{time.monotonic_ns()}"
        t0 = time.time()
        subprocess.run(submit(f"date +%s.%N > {mark}.tmp && mv {mark}.tmp {mark}"),
                       env=env, check=True, capture_output=True)  # fmt: skip
        deadline = time.monotonic() + timeout
        while not mark.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"the program never ran ({mark})")
            time.sleep(0.002)
        samples.append((float(mark.read_text()) - t0) * 1000)
    return statistics.median(samples)


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def parallel(n: int, work: Callable[[int], None], threads: int = 8) -> None:
    def part(k: int) -> None:
        for i in range(k, n, threads):
            work(i)

    pool = [threading.Thread(target=part, args=(k,)) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()


# --- Astraeus -------------------------------------------------------------------------


@contextmanager
def astraeus_daemon(home: Path) -> Iterator[subprocess.Popen[bytes]]:
    from astraeus_tui.client import ApiError, Client

    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(CONFIG)
    env = {**os.environ, "ASTRAEUS_HOME": str(home), "ASTRAEUS_LOG": "WARNING"}
    proc = subprocess.Popen([sys.executable, "-m", "astraeus_tui.cli.main", "serve"], env=env)
    try:
        for _ in range(400):
            try:
                Client(home / "astraeus.sock").status()
                break
            except ApiError:
                time.sleep(0.05)
        else:
            raise RuntimeError("the Astraeus daemon did not start")
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        for meta in (home / "workers").glob("*/meta.json"):  # its workers outlive it: end them
            pgid = json.loads(meta.read_text()).get("child_pgid")
            if pgid:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)


def astraeus_fill(home: Path, n: int, prefix: str) -> None:
    from astraeus_tui.client import Client

    def doc(name: str, gpus: int, command: str) -> dict[str, object]:
        task = {"command": command, "args": ["3600"] if command == "sleep" else [],
                "requested_resources": {"gpu_requests": {"count": gpus}}}  # fmt: skip
        return {"metadata": {"name": name}, "spec": {"task_template": task}}

    Client(home / "astraeus.sock").submit(doc(f"{prefix}-blocker", 8, "sleep"))
    parallel(n, lambda i: Client(home / "astraeus.sock").submit(doc(f"{prefix}-{i}", 1, "true")))


def bulk_rates(astra: list[str], env: dict[str, str], n: int, tmp: Path) -> tuple[float, float]:
    """Runs a second through `astra submit --ndjson FILE` and `astra submit FILE...`, each
    run acknowledged after its commit (the command's whole wall time)."""
    task = {"command": "true", "requested_resources": {"gpu_requests": {"count": 1}}}
    lines = [json.dumps({"metadata": {"name": f"bulk-{i}"}, "spec": {"task_template": task}})
             for i in range(n)]  # fmt: skip
    (tmp / "bulk.ndjson").write_text("\n".join(lines) + "\n")
    folder = tmp / "bulk-files"
    folder.mkdir()
    files = []
    for i in range(n):
        files.append(str(folder / f"spec-{i}.toml"))
        Path(files[-1]).write_text(f'[metadata]\nname = "file-{i}"\n[spec.task_template]\n'
                                   'command = "true"\n[spec.task_template.requested_resources]\n'
                                   'gpu_requests = {count = 1}\n')  # fmt: skip
    rates = []
    for cmd in (
        [*astra, "submit", "--ndjson", str(tmp / "bulk.ndjson")],
        [*astra, "submit", *files],
    ):
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
        rates.append(n / (time.perf_counter() - t0))
    return rates[0], rates[1]


def installed() -> dict[str, str]:
    """The environment of a user's shell: bytecode written and read, as an installed copy
    has it (a development shell's PYTHONDONTWRITEBYTECODE compiles a dozen modules again
    on every call)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def settle(pid: int, limit: float = 60) -> None:
    """Until the daemon has planned what it was given (under 10 % CPU over a second):
    ``ls`` times the answer to a queue, not a daemon still busy with the fill."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        before = cpu_seconds(pid)
        time.sleep(1)
        if cpu_seconds(pid) - before < 0.1:
            return


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure_astraeus(args: argparse.Namespace, tmp: Path) -> Results:
    astra = [str(Path(sys.executable).with_name("astra"))]
    out: Results = {}
    with astraeus_daemon(tmp / "idle") as _:
        env = {**installed(), "ASTRAEUS_HOME": str(tmp / "idle"), "COLUMNS": "160"}
        out["first_line_ms"] = first_line_ms(
            lambda sh: [*astra, "run", "--", "sh", "-c", sh], env, args.repeat, tmp
        )
        out["help_ms"] = median_ms([*astra, "--help"], args.repeat, env)
        complete = {"_ASTRA_COMPLETE": "complete_bash", "COMP_WORDS": "astra s", "COMP_CWORD": "1"}
        out["complete_ms"] = median_ms(astra, args.repeat, {**env, **complete})
    home = tmp / "full"
    with astraeus_daemon(home) as proc:
        env = {**installed(), "ASTRAEUS_HOME": str(home), "COLUMNS": "160"}
        astraeus_fill(home, args.waiting, "w")
        settle(proc.pid)
        out["ls"] = median_ms([*astra, "ls"], args.repeat, env)
        out["rss_mb"] = rss_mb(proc.pid)
        out["submits_per_s"] = submit_rate(
            lambda i: [*astra, "run", "--name", f"s-{i}", "--gpus", "1", "--", "true"],
            args.submits,
            env,
        )
        out["bulk_per_s"], out["bulk_files_per_s"] = bulk_rates(astra, env, args.bulk, tmp)
        if args.big:  # up to big_size waiting in all: the serial and bulk submits count
            astraeus_fill(home, args.big_size - args.waiting - args.submits - 2 * args.bulk, "b")
            settle(proc.pid)
            out["ls_big"] = median_ms([*astra, "ls"], args.repeat, env)
    return out


# --- gflow ----------------------------------------------------------------------------


def gflow_bin(args: argparse.Namespace) -> Path | None:
    found = shutil.which("gbatch")
    if found and not args.install_gflow:
        return Path(found).parent
    if args.install_gflow or not (GFLOW_VENV / "bin" / "gbatch").exists():
        subprocess.run([sys.executable, "-m", "venv", str(GFLOW_VENV)], check=True)
        pip = [str(GFLOW_VENV / "bin" / "pip"), "install", "-q", "runqd"]
        if subprocess.run(pip).returncode != 0:
            return None
    return GFLOW_VENV / "bin"


def measure_gflow(args: argparse.Namespace, tmp: Path, bin_dir: Path) -> Results:
    home = tmp / "gflow-home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    env.pop("XDG_CONFIG_HOME", None), env.pop("XDG_DATA_HOME", None)
    g = lambda name: str(bin_dir / name)  # noqa: E731
    proc = subprocess.Popen([g("gflowd"), "-q"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    out: Results = {}
    try:
        for _ in range(200):
            if subprocess.run([g("gqueue")], env=env, capture_output=True).returncode == 0:
                break
            time.sleep(0.05)
        out["help_ms"] = median_ms([g("gbatch"), "--help"], args.repeat, env)
        try:
            out["first_line_ms"] = first_line_ms(lambda sh: [g("gbatch"), sh], env,
                                                 args.repeat, tmp)  # fmt: skip
        except RuntimeError:
            out["first_line_ms"] = None  # it runs jobs in tmux; none may be usable here
        subprocess.run([g("gcancel"), "--help"], env=env, capture_output=True)
        parallel(
            args.waiting,
            lambda i: subprocess.run(
                [g("gbatch"), "--gpus", "1", "true"], env=env, check=True, capture_output=True
            ),
        )
        out["ls"] = median_ms([g("gqueue")], args.repeat, env)
        out["rss_mb"] = rss_mb(proc.pid)
        out["submits_per_s"] = submit_rate(lambda i: [g("gbatch"), "--gpus", "1", "true"],
                                           args.submits, env)  # fmt: skip
        if args.big:
            parallel(
                args.big_size - args.waiting,
                lambda i: subprocess.run(
                    [g("gbatch"), "--gpus", "1", "true"], env=env, check=True, capture_output=True
                ),
            )
            out["ls_big"] = median_ms([g("gqueue")], args.repeat, env)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
    return out


# --- Slurm ----------------------------------------------------------------------------


def slurm_up() -> bool:
    if not shutil.which("sinfo"):
        return False
    try:
        return subprocess.run(["sinfo"], capture_output=True, timeout=5).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def slurm_room(margin: int = 50) -> int | None:
    """How many more jobs slurmctld takes (MaxJobCount less those it holds), or None."""
    config = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True)
    limit = next((line.split("=", 1)[1].strip() for line in config.stdout.splitlines()
                  if line.startswith("MaxJobCount")), "")  # fmt: skip
    if not limit.isdigit():
        return None
    jobs = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True)
    return max(0, int(limit) - len(jobs.stdout.split()) - margin)


def measure_slurm(args: argparse.Namespace, tmp: Path) -> Results:
    ids: list[str] = []
    lock = threading.Lock()

    refused: list[str] = []

    def held(strict: bool = True) -> None:
        done = subprocess.run(["sbatch", "--parsable", "--hold", "-J", "astraeus-bench",
                               "-o", "/dev/null", "--wrap", "true"],
                              check=strict, capture_output=True, text=True)  # fmt: skip
        with lock:
            if done.returncode:  # past MaxJobCount (10,000 by default): squeue lists fewer
                refused.append(done.stderr.strip())
            else:
                ids.append(done.stdout.strip().split(";")[0])

    out: Results = {}
    try:
        out["help_ms"] = median_ms(["sbatch", "--help"], args.repeat)
        out["first_line_ms"] = first_line_ms(
            lambda sh: ["sbatch", "-o", "/dev/null", "-J", "astraeus-bench", "--wrap", sh],
            None,
            args.repeat,
            tmp,
            timeout=60,
        )
        parallel(args.waiting, lambda i: held())
        out["ls"] = median_ms(["squeue"], args.repeat)
        pid = subprocess.run(["pgrep", "-o", "slurmctld"], capture_output=True, text=True)
        out["rss_mb"] = rss_mb(int(pid.stdout.split()[0])) if pid.stdout.strip() else None
        t0 = time.perf_counter()
        for _ in range(args.submits):
            held()
        out["submits_per_s"] = args.submits / (time.perf_counter() - t0)
        if args.big:
            big = args.big_size - args.waiting
            room = slurm_room()
            if room is not None and big > room:  # past MaxJobCount sbatch sleeps and retries
                print(f"Slurm has room for {room} more jobs (MaxJobCount): ls of fewer",
                      file=sys.stderr)  # fmt: skip
                big = room
            parallel(big, lambda i: held(strict=False))
            if refused:
                print(f"Slurm refused {len(refused)} of the big fill: {refused[0][:120]}",
                      file=sys.stderr)  # fmt: skip
            out["ls_big"] = median_ms(["squeue"], args.repeat)
    finally:
        for k in range(0, len(ids), 500):
            subprocess.run(["scancel", *ids[k : k + 500]], capture_output=True)
    return out


# --- the table ------------------------------------------------------------------------


def cell(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 10 else f"{value:.1f}"


def ratio(ours: float | None, theirs: float | None) -> str:
    if not ours or not theirs:
        return "-"
    return f"{ours / theirs:.2f}"


def table(results: dict[str, Results], args: argparse.Namespace) -> str:
    """A Markdown table: one row a measure, one column a system, then Astraeus / peer."""
    peers = [name for name in results if name != "Astraeus"]
    head = ["measure", *results, *(f"Astraeus/{p}" for p in peers)]
    rows = [head, ["---"] * len(head)]
    sizes = {"waiting": f"{args.waiting:,}", "big": f"{args.big_size:,}", "bulk": f"{args.bulk:,}"}
    for key in MEASURES:
        if key == "ls_big" and not args.big:
            continue
        ours = results.get("Astraeus", {}).get(key)
        theirs = PEER_KEY.get(key, key)
        row = [LABELS[key].format(**sizes), cell(ours),
               *(cell(results[p].get(theirs)) for p in peers)]  # fmt: skip
        rows.append(row + [ratio(ours, results[p].get(theirs)) for p in peers])
    return "\n".join("| " + " | ".join(r) + " |" for r in rows)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    results: dict[str, Results] = {}
    with tempfile.TemporaryDirectory(prefix="astraeus-compare-") as name:
        tmp = Path(name)
        results["Astraeus"] = measure_astraeus(args, tmp)
        if not args.no_gflow and (bin_dir := gflow_bin(args)) is not None:
            results["gflow"] = measure_gflow(args, tmp, bin_dir)
        if not args.no_slurm and slurm_up():
            try:  # a peer that fails (slurmctld refusing jobs) leaves the others' table
                results["Slurm"] = measure_slurm(args, tmp)
            except (subprocess.CalledProcessError, RuntimeError) as e:
                print(f"Slurm not measured: {e}", file=sys.stderr)
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}; medians of {args.repeat} runs")  # fmt: skip
    print(table(results, args))


if __name__ == "__main__":
    main()
