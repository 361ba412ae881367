"""kill -9 storms against a real daemon (process executor), and what they must not break.

Used by tests/faults/test_crash_storm.py (a CI-sized storm) and bench/chaos.py (soaks).

:func:`kill_storm`: clients submit runs (and now and then delete one) without pause while
the daemon is killed with SIGKILL at random moments, and, at some restarts, dies by
itself at a test hook (``ASTRAEUS_TEST_CRASH_AT``, see runner/engine/starts.py: between a
worker's start and its record, between Stopping and SIGTERM, between the SIGKILL's record
and the signal). Each kill is a *kill point*. The runs' programs (:data:`PROGRAM`) write
a line to ``marks.txt`` when they start and hold ``flock`` locks for their run worker and
each of their GPUs while they live, so that two live copies of one run worker, or two
live holders of one GPU, are seen by the programs themselves, not only in the database.

Afterwards (:func:`check`): every acknowledged submit exists (unless a delete that was
acknowledged forgot it), no lock was ever found taken, no worker attempt started twice,
each start came after the recorded end of the run's previous attempts, no worker that
the database says never started did start, nothing was lost (process workers outlive
the daemon: a lost one means it was not adopted), every run ended as its program says
(the restart budget spent only by programs that fail), and at each kill point no run
had two live attempts and no GPU was held by two live workers.

:func:`restart_storm`: runs whose program exits 1 at once, each with a restart budget;
the budget must hold exactly while the API keeps answering.
"""

from __future__ import annotations

import contextlib
import random
import sqlite3
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.faults.daemon import CONNECTION_ERRORS, PY, DaemonProcess, document, write_config
from tests.support.harness import NO_BACKOFF

PROGRAM = r"""
import fcntl, os, signal, sys, time
marks, mode, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
run = os.environ["ASTRAEUS_RUN_NAME"]
worker = os.environ["ASTRAEUS_WORKER_INDEX"]

def log_attempt():  # <attempt> of the log <attempt>-<w>.log its supervisor holds open
    folder = f"/proc/{os.getppid()}/fd"
    for fd in os.listdir(folder):
        try:
            target = os.readlink(os.path.join(folder, fd))
        except OSError:
            continue
        if "/logs/" in target and target.endswith(".log"):
            return os.path.basename(target).split("-")[0]
    return "?"

attempt = log_attempt()
gpus = [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g]
out = os.open(os.path.join(marks, "marks.txt"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

def note(*words):
    os.write(out, (" ".join(str(w) for w in words) + "\n").encode())

held = []
def hold(name, what):
    fd = os.open(os.path.join(marks, name), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        note("CONFLICT", what, run, worker, attempt, os.getpid())
    held.append(fd)

def on_term(*_):
    note("term", run, worker, attempt, os.getpid(), repr(time.time()))
    os._exit(0)

signal.signal(signal.SIGTERM, signal.SIG_IGN if mode == "stubborn" else on_term)
hold(f"run-{run}-{worker}.lock", "run")
for g in gpus:
    hold(f"gpu-{g}.lock", "gpu" + g)
note("start", run, worker, attempt, os.getpid(), repr(time.time()))
time.sleep(seconds)
sys.exit(1 if mode == "fail" else 0)
"""

# kind -> (mode, seconds, gpus, cpus, workers, priorities, restart limit, time limit)
Kind = tuple[str, tuple[float, float], int, float, int, tuple[int, ...], int, int | None]
KINDS: dict[str, Kind] = {
    "ok": ("ok", (0.3, 1.5), 1, 0, 1, (-5, 0, 0, 5), 3, None),
    "wide": ("ok", (0.5, 1.5), 2, 0, 1, (0, 5), 3, None),
    "gang": ("ok", (0.5, 1.5), 1, 0, 2, (-5, 0, 5), 3, None),
    "cpu": ("ok", (0.2, 1.0), 0, 2, 1, (0,), 3, None),
    "fail": ("fail", (0.1, 0.3), 1, 0, 1, (-5, 0), 2, None),
    "stubborn": ("stubborn", (1.0, 2.5), 1, 0, 1, (-5,), 3, None),
    "urgent": ("ok", (0.2, 0.6), 2, 0, 1, (10,), 3, None),
    "limited": ("ok", (30, 30), 1, 0, 1, (-5,), 3, 2),
}  # fmt: skip
WEIGHTS = {"ok": 8, "wide": 2, "gang": 2, "cpu": 2, "fail": 2, "stubborn": 1, "urgent": 2,
           "limited": 1}  # fmt: skip
HOOKS = ("after-executor-start", "after-stop-recorded", "after-kill-recorded")
FINISHED = ("Succeeded", "Failed", "Cancelled")


@dataclass
class StormReport:
    kill_points: int = 0
    sigkills: int = 0
    hook_exits: Counter[str] = field(default_factory=Counter)
    kills_in_startup: int = 0  # killed before its socket answered (reconcile, first ticks)
    kills_with_live_workers: int = 0  # adoption exercised
    kills_with_unrecorded_start: int = 0  # a Starting row without a handle at the kill
    kills_with_stopping: int = 0
    submitted: int = 0  # acknowledged (201)
    unacknowledged: int = 0  # the daemon died before answering: may or may not exist
    deleted: int = 0
    forgotten: set[str] = field(default_factory=set)  # deletes that may have forgotten a run
    starts: int = 0  # program starts seen
    adopted_at_kill: int = 0  # live workers at kill points, all of which must be adopted
    states: Counter[str] = field(default_factory=Counter)
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    drain_seconds: float = 0.0
    startup: list[float] = field(default_factory=list)  # spawn to socket answering

    def summary(self) -> str:
        hooks = ", ".join(f"{k} {v}" for k, v in sorted(self.hook_exits.items())) or "none"
        return (
            f"kill points {self.kill_points} (SIGKILL {self.sigkills}, at hooks: {hooks}; "
            f"before the socket answered {self.kills_in_startup}, with live workers "
            f"{self.kills_with_live_workers}, with a start not yet recorded "
            f"{self.kills_with_unrecorded_start}, with workers stopping "
            f"{self.kills_with_stopping}); runs submitted {self.submitted} acknowledged + "
            f"{self.unacknowledged} unanswered, deleted {self.deleted}; program starts "
            f"{self.starts}; workers live at kill points {self.adopted_at_kill}; final states "
            f"{dict(sorted(self.states.items()))}; lost {len(self.lost)}, duplicated "
            f"{len(self.duplicated)}, other problems {len(self.problems)}; "
            f"daemon start to socket {_mean(self.startup):.2f} s on average; "
            f"{self.seconds:.1f} s in all, {self.drain_seconds:.1f} s of it draining"
        )


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


class _Clients:
    """Submitters (and a deleter) running until stopped; they remember what was acknowledged."""

    def __init__(self, daemon: DaemonProcess, marks: Path, program: Path, rng: random.Random):
        self.daemon, self.marks, self.program = daemon, marks, program
        self.rng = random.Random(rng.random())
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.acked: dict[str, str] = {}  # name -> kind
        self.unacked: set[str] = set()
        self.not_sent: set[str] = set()
        self.deletes: dict[str, str | None] = {}  # name -> outcome (None: unanswered)
        self.counter = 0
        self.threads = [threading.Thread(target=self._submitter, args=(i,), daemon=True)
                        for i in range(2)]  # fmt: skip

    def __enter__(self) -> _Clients:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(30)

    def _next(self) -> tuple[str, dict[str, Any]]:
        with self.lock:
            self.counter += 1
            n = self.counter
            kind = self.rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()))[0]
            rng = random.Random(self.rng.random())
        mode, (lo, hi), gpus, cpus, workers, prios, budget, limit = KINDS[kind]
        name = f"{kind}-{n:04d}"
        argv = program_argv(self.program, self.marks, mode, rng.uniform(lo, hi))
        doc = document(name, argv, gpus=gpus, cpus=cpus, priority=rng.choice(prios),
                       workers=workers, restart_limit=budget, limit=limit)  # fmt: skip
        return name, doc

    def _submitter(self, index: int) -> None:
        client_rng = random.Random(index)
        while not self.stop.is_set():
            name, doc = self._next()
            try:
                self.daemon.client(timeout=10).request("POST", "/v1/runs", doc)
            except CONNECTION_ERRORS as e:
                if getattr(e, "status", 0) not in (0, None):
                    raise AssertionError(f"submit of {name} refused: {e}") from e
                with self.lock:  # NO_DAEMON: not sent; else the daemon died while asked
                    (self.not_sent if getattr(e, "code", "") == "NO_DAEMON" else self.unacked).add(
                        name
                    )
                self.stop.wait(0.1)
                continue
            with self.lock:
                self.acked[name] = name.split("-")[0]
            if client_rng.random() < 0.04:
                self._delete_one(client_rng)
            self.stop.wait(client_rng.uniform(0.4, 1.0))

    def _delete_one(self, rng: random.Random) -> None:
        with self.lock:
            candidates = [n for n in self.acked if n not in self.deletes]
        if not candidates:
            return
        name = rng.choice(candidates[-10:])
        with self.lock:
            self.deletes[name] = None
        try:
            result = self.daemon.client(timeout=10).request("DELETE", f"/v1/runs/{name}")
        except CONNECTION_ERRORS as e:
            if getattr(e, "status", 0) not in (0, None):
                raise AssertionError(f"delete of {name} refused: {e}") from e
            return
        with self.lock:
            self.deletes[name] = str(result["outcome"])


def _examine_dead(daemon: DaemonProcess, report: StormReport) -> None:
    """At a kill point (the daemon is dead): no two live attempts, no GPU held twice."""
    db_file = daemon.home / "state.db"
    if not db_file.exists() or db_file.stat().st_size == 0:
        return  # killed before it made its database
    with daemon.database() as db:
        live = db.execute(
            "SELECT run, attempt, worker, state, handle, gpus, killed FROM workers"
            " WHERE state IN ('Starting', 'Running', 'Stopping')"
        ).fetchall()
    attempts: dict[str, set[int]] = {}
    held: dict[int, str] = {}
    for w in live:
        attempts.setdefault(w["run"], set()).add(w["attempt"])
        for gpu in json_list(w["gpus"]):
            if gpu in held:
                report.duplicated.append(
                    f"GPU {gpu} held by live workers of {held[gpu]} and {w['run']} at a kill point"
                )
            held[gpu] = w["run"]
    for run, seen in attempts.items():
        if len(seen) > 1:
            report.duplicated.append(f"{run} has live attempts {sorted(seen)} at a kill point")
    report.adopted_at_kill += len(live)
    report.kills_with_live_workers += bool(live)
    report.kills_with_unrecorded_start += any(
        w["state"] == "Starting" and w["handle"] is None for w in live
    )
    report.kills_with_stopping += any(w["state"] == "Stopping" for w in live)


def program_argv(program: Path, marks: Path, mode: str, seconds: float) -> list[str]:
    """The command of a run of :data:`PROGRAM` (written to ``program``)."""
    return [PY, "-S", str(program), str(marks), mode, f"{seconds:.2f}"]


def marked(marks: Path, what: str = "start", run: str | None = None) -> list[list[str]]:
    """The lines of ``marks.txt`` that start with ``what`` (for ``run``): word lists."""
    path = marks / "marks.txt"
    lines = [line.split() for line in path.read_text().splitlines()] if path.exists() else []
    return [w for w in lines if w and w[0] == what and (run is None or w[1] == run)]


def json_list(text: str) -> list[int]:
    return [int(x) for x in text.strip("[]").split(",") if x.strip()]


def kill_storm(
    workdir: Path, kills: int, seed: int = 1, drain_timeout: float = 120, log: Any = None
) -> StormReport:
    """The storm; returns the report (check it with :func:`check`, done here too)."""
    t0 = time.monotonic()
    rng = random.Random(seed)
    report = StormReport()
    home, marks = workdir / "home", workdir / "marks"
    marks.mkdir(parents=True, exist_ok=True)
    program = workdir / "program.py"
    program.write_text(PROGRAM)
    write_config(home, gpus=8, cores=8, grace=1)
    daemon = DaemonProcess(home, workdir / "serve.log", {"ASTRAEUS_STOP_GRACE": "1"})
    try:
        with _Clients(daemon, marks, program, rng) as clients:
            for point in range(kills):
                _one_kill_point(daemon, rng, point, report)
                if log is not None and (point + 1) % 10 == 0:
                    log(f"  {point + 1} kill points, {len(clients.acked)} runs acknowledged")
        daemon.start()
        t_drain = time.monotonic()
        wait_drained(daemon, drain_timeout)
        report.drain_seconds = time.monotonic() - t_drain
        daemon.stop()
        report.seconds = time.monotonic() - t0
        check(daemon, marks, clients, report)
    finally:
        if daemon.alive():
            daemon.kill9()
        daemon.kill_workers()
    return report


def _one_kill_point(
    daemon: DaemonProcess, rng: random.Random, point: int, report: StormReport
) -> None:
    hook = HOOKS[point // 3 % len(HOOKS)] if point % 3 == 1 else None
    env = {"ASTRAEUS_TEST_CRASH_AT": hook} if hook else {}
    t0 = time.monotonic()
    proc = daemon.spawn(**env)
    if rng.random() < 0.15:  # during its start: reconcile, the first ticks
        time.sleep(rng.uniform(0.05, 0.8))
        if proc.poll() is None and not daemon.socket_answers():
            report.kills_in_startup += 1
    else:
        deadline = time.monotonic() + 30
        while proc.poll() is None and not daemon.socket_answers():
            if time.monotonic() > deadline:
                raise AssertionError(f"the daemon does not answer: {daemon.tail()}")
            time.sleep(0.02)
        report.startup.append(time.monotonic() - t0)
        end = time.monotonic() + (2.5 if hook else rng.uniform(0.05, 0.6))
        while proc.poll() is None and time.monotonic() < end:
            time.sleep(0.01)
    code = proc.poll()
    if code is None:
        daemon.kill9()
        report.sigkills += 1
    elif code == 137 and hook:
        report.hook_exits[hook] += 1
    else:
        raise AssertionError(f"the daemon exited with {code}: {daemon.tail()}")
    report.kill_points += 1
    _examine_dead(daemon, report)


def wait_drained(daemon: DaemonProcess, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        active = daemon.active()
        if not active:
            return
        if time.monotonic() > deadline:
            left = ", ".join(f"{r['name']} {r['state']} ({r['reason']})" for r in active[:10])
            raise AssertionError(f"runs still active after {timeout:g} s: {left}")
        time.sleep(0.2)


# ------------------------------------------------------------------------- the checks


def _marks(marks: Path) -> tuple[list[list[str]], list[str]]:
    starts, conflicts = [], []
    path = marks / "marks.txt"
    for line in path.read_text().splitlines() if path.exists() else []:
        words = line.split()
        if words and words[0] == "start":
            starts.append(words)
        elif words and words[0] == "CONFLICT":
            conflicts.append(line)
    return starts, conflicts


def check(daemon: DaemonProcess, marks: Path, clients: _Clients, report: StormReport) -> None:
    """Fill ``report`` with what went wrong (its lists stay empty when nothing did)."""
    report.submitted, report.unacknowledged = len(clients.acked), len(clients.unacked)
    report.deleted = sum(1 for o in clients.deletes.values() if o is not None)
    report.forgotten = {n for n, o in clients.deletes.items() if o in (None, "forgotten")}
    with daemon.database() as db:
        runs = {r["name"]: r for r in db.execute("SELECT * FROM runs")}
        rows = db.execute("SELECT * FROM workers ORDER BY run, attempt, worker").fetchall()
    for name in clients.acked:
        if name not in runs and name not in report.forgotten:
            report.lost.append(f"{name}: acknowledged, not in the state database")
    report.states = Counter(r["state"] for r in runs.values())
    for name, run in runs.items():
        if run["state"] not in FINISHED:
            report.problems.append(f"{name} is {run['state']} after the drain")
    starts, conflicts = _marks(marks)
    report.starts = len(starts)
    report.duplicated += [f"lock already held: {c}" for c in conflicts]
    by_attempt: dict[tuple[str, int], list[sqlite3.Row]] = {}
    for w in rows:
        by_attempt.setdefault((w["run"], w["attempt"]), []).append(w)
    seen: Counter[tuple[str, str, str]] = Counter()
    for _, run, worker, attempt, _pid, at in starts:
        seen[(run, worker, attempt)] += 1
        if run in report.forgotten and run not in runs:
            continue  # deleted once finished: its rows are gone with it
        _check_start(run, int(worker), int(attempt), float(at), runs, rows, by_attempt, report)
    for (run, worker, attempt), count in seen.items():
        if count > 1:
            report.duplicated.append(f"{run} worker {worker} attempt {attempt} started {count}x")
    for w in rows:
        if w["error"] and ("lost" in w["error"] or "supervisor is gone" in w["error"]):
            report.lost.append(f"{w['run']} attempt {w['attempt']}: {w['error']}")
    _check_outcomes(runs, clients, report)


def _check_start(
    run: str, worker: int, attempt: int, at: float, runs: dict[str, sqlite3.Row],
    rows: list[sqlite3.Row], by_attempt: dict[tuple[str, int], list[sqlite3.Row]],
    report: StormReport,
) -> None:  # fmt: skip
    mine = [w for w in by_attempt.get((run, attempt), []) if w["worker"] == worker]
    if not mine:
        report.duplicated.append(f"{run} worker {worker} attempt {attempt} ran, has no row")
        return
    if mine[0]["stop_reason"] == "never-started":
        report.duplicated.append(
            f"{run} worker {worker} attempt {attempt} started, yet is recorded never-started"
        )
    for w in rows:
        ended = w["finished_at"] is not None and w["finished_at"] <= at
        if w["run"] == run and w["attempt"] < attempt and not ended:
            report.duplicated.append(
                f"{run} attempt {attempt} started at {at:.3f} before the recorded end of "
                f"attempt {w['attempt']} worker {w['worker']} ({w['finished_at']})"
            )


def _check_outcomes(runs: dict[str, sqlite3.Row], clients: _Clients, report: StormReport) -> None:
    """Programs that do not fail never spend the restart budget; failing ones spend it all."""
    for name, kind in clients.acked.items():
        run = runs.get(name)
        if run is None or name in clients.deletes:
            continue
        mode, *_rest = KINDS[kind]
        budget = KINDS[kind][6]
        if mode == "fail":
            if run["state"] != "Failed" or run["restarts"] != budget:
                report.problems.append(
                    f"{name}: {run['state']} after {run['restarts']} restarts, expected Failed "
                    f"after exactly {budget}"
                )
        elif run["restarts"] != 0:
            report.problems.append(f"{name} ({kind}) spent {run['restarts']} restarts")
        elif kind == "limited" and run["state"] != "Failed":
            report.problems.append(f"{name}: {run['state']}, expected Failed (time limit)")
        elif kind != "limited" and run["state"] != "Succeeded":
            report.problems.append(f"{name}: {run['state']}, expected Succeeded")


# ---------------------------------------------------------------- the restart storm


@dataclass
class RestartReport:
    runs: int = 0
    restart_limit: int = 0
    restarts: list[int] = field(default_factory=list)
    states: list[str] = field(default_factory=list)
    restarting_events: list[int] = field(default_factory=list)
    probes: int = 0
    slowest_answer: float = 0.0
    canaries_started: int = 0
    slowest_canary: float = 0.0
    seconds: float = 0.0

    def summary(self) -> str:
        return (
            f"{self.runs} run(s) exiting 1 at once with restart_limit {self.restart_limit}: "
            f"restarts {self.restarts}, states {self.states}; API asked {self.probes} times, "
            f"slowest answer {self.slowest_answer * 1000:.0f} ms; canaries started "
            f"{self.canaries_started}, slowest {self.slowest_canary:.2f} s; "
            f"{self.seconds:.1f} s"
        )


def restart_storm(
    workdir: Path, runs: int, restart_limit: int, timeout: float = 600
) -> RestartReport:
    """``runs`` runs of ``false`` with ``restart_limit``; the API is asked every 0.1 s."""
    t0 = time.monotonic()
    home = workdir / "home"
    write_config(home, gpus=runs + 1, cores=8, grace=1, machine=NO_BACKOFF)  # a storm: at once
    daemon = DaemonProcess(home, workdir / "serve.log").start()
    report = RestartReport(runs=runs, restart_limit=restart_limit)
    stop = threading.Event()
    latencies: list[float] = []

    def probe() -> None:
        client = daemon.client(timeout=30)
        while not stop.is_set():
            t = time.monotonic()
            client.request("GET", "/v1/status")
            client.request("GET", "/v1/runs")
            latencies.append(time.monotonic() - t)
            stop.wait(0.1)

    prober = threading.Thread(target=probe, daemon=True)
    try:
        names = [f"exit-at-once-{i}" for i in range(runs)]
        for name in names:
            daemon.submit(document(name, ["false"], gpus=1, restart_limit=restart_limit))
        prober.start()
        canary = 0
        deadline = time.monotonic() + timeout
        while not all(daemon.run(n)["state"] in FINISHED for n in names):
            if time.monotonic() > deadline:
                raise AssertionError(f"still restarting after {timeout:g} s")
            canary += 1  # the loop still starts other work promptly
            t = time.monotonic()
            daemon.submit(document(f"canary-{canary}", ["true"], gpus=1))
            daemon.wait_state(f"canary-{canary}", "Succeeded", timeout=30)
            report.slowest_canary = max(report.slowest_canary, time.monotonic() - t)
            report.canaries_started += 1
            time.sleep(1)
        stop.set()
        prober.join(30)
        for name in names:
            run = daemon.run(name)
            report.restarts.append(run["restarts"])
            report.states.append(run["state"])
            report.restarting_events.append(
                sum(1 for e in run["events"] if e["message"].startswith("Restarting ("))
            )
        report.probes = len(latencies)
        report.slowest_answer = max(latencies, default=0.0)
        report.seconds = time.monotonic() - t0
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            daemon.stop()
        if daemon.alive():
            daemon.kill9()
        daemon.kill_workers()
    return report
