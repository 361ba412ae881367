"""The checks of tests/gpu/check.sh, run with the Python it installed Astraeus into, against
the daemon it started: one line each (``ok   …``, ``FAIL …: why``, ``skip …: why``), every
one bounded in time; the exit status is 1 when any failed.

    python tests/gpu/checks.py --home H --socket S --work DIR [--budget SECONDS]
                               [--docker-image IMAGE] [--list]

Only the standard library and what Astraeus installs (its client for GET /v1/telemetry,
pynvml for what NVML itself says) are imported; torch is imported only inside the runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from runner.model import RunState

MIB = 1 << 20
GIB = 1 << 30
PREFIX = "gpu-check-"  # every run this script submits is named so
MARK = "ASTRAEUS-CHECK "  # a run's report line in its log: MARK + JSON

# What a run reports: its CUDA_VISIBLE_DEVICES and what torch sees through it. With
# ALLOC, it holds that many bytes on its GPU until RELEASE exists (at most HOLD seconds).
# It exits 0 whatever it found (its report says): a failed run would be restarted.
PROBE = r"""
import json, os, sys, time
report = {"cvd": os.environ.get("CUDA_VISIBLE_DEVICES"), "pid": os.getpid()}
try:
    import torch
except Exception as error:
    report["error"] = f"torch cannot be imported: {error}"
    print("ASTRAEUS-CHECK " + json.dumps(report), flush=True)
    sys.exit(0)
report["torch"] = torch.__version__
try:
    report["count"] = torch.cuda.device_count()
    report["available"] = torch.cuda.is_available()
    if report["available"]:
        props = torch.cuda.get_device_properties(0)
        report["name"] = props.name
        report["memory"] = props.total_memory
        report["uuid"] = str(getattr(props, "uuid", "") or "")
    alloc = int(os.environ.get("CHECK_ALLOC", "0"))
    if alloc:
        block = torch.empty(alloc, dtype=torch.uint8, device="cuda")
        block.fill_(1)
        torch.cuda.synchronize()
        report["allocated"] = alloc
except Exception as error:
    report["error"] = f"{type(error).__name__}: {error}"
print("ASTRAEUS-CHECK " + json.dumps(report), flush=True)
release, hold = os.environ.get("CHECK_RELEASE"), float(os.environ.get("CHECK_HOLD", "0"))
end = time.monotonic() + hold
while release and not os.path.exists(release) and time.monotonic() < end:
    time.sleep(0.2)
"""


class Failed(Exception):
    """A check failed: the message is its one line's reason."""


class Skipped(Exception):
    """A check cannot be made here: the message says why."""


@dataclass
class Context:
    home: Path
    socket: Path
    work: Path
    deadline: float  # monotonic: the whole budget's end
    docker_image: str | None
    python: str = sys.executable
    env: dict[str, str] = field(default_factory=dict)
    gpus: list[dict[str, Any]] = field(default_factory=list)  # GET /v1/gpus, when NVML's
    failures: int = 0

    def left(self, wanted: float) -> float:
        """Seconds a step may take: ``wanted``, or what is left of the budget."""
        left = self.deadline - time.monotonic()
        if left < 1:
            raise Failed("out of time: the script's budget is spent")
        return min(wanted, left)


def astra(
    ctx: Context,
    *args: str,
    timeout: float = 30,
    env: dict[str, str] | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """One `astra` command against the daemon under test, bounded by ``timeout``."""
    argv = [ctx.python, "-m", "astraeus_tui.cli.main", *args]
    try:
        result = subprocess.run(
            argv,
            env=env or ctx.env,
            capture_output=True,
            text=True,
            timeout=ctx.left(timeout),
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise Failed(f"`astra {' '.join(args)}` did not answer in {timeout:.0f} s") from None
    if check and result.returncode != 0:
        said = (result.stderr or result.stdout).strip().splitlines()
        raise Failed(
            f"`astra {' '.join(args[:2])}` exited {result.returncode}: "
            f"{said[-1] if said else 'nothing said'}"
        )
    return result


def astra_json(ctx: Context, *args: str, timeout: float = 30) -> Any:
    out = astra(ctx, *args, "--json", timeout=timeout).stdout
    try:
        return json.loads(out)
    except ValueError:
        raise Failed(f"`astra {' '.join(args)} --json` printed no JSON: {out[:80]!r}") from None


def wait_until(ctx: Context, what: str, test: Callable[[], Any], seconds: float) -> Any:
    """``test()`` until it returns something true, polled; Failed after ``seconds``."""
    end = time.monotonic() + ctx.left(seconds)
    while True:
        found = test()
        if found:
            return found
        if time.monotonic() >= end:
            raise Failed(f"{what}: not after {seconds:.0f} s")
        time.sleep(0.3)


def submit(ctx: Context, name: str, *options: str, alloc: int = 0, hold: float = 0) -> Path:
    """A run of PROBE; returns the file whose creation lets it end (with ``hold``)."""
    release = ctx.work / f"{name}.release"
    env = [f"CHECK_ALLOC={alloc}", f"CHECK_RELEASE={release}", f"CHECK_HOLD={hold}"]
    envs = [x for e in env for x in ("--env", e)]
    astra(ctx, "run", "--name", name, *options, *envs, "--", ctx.python, "-c", PROBE)
    return release


def report_of(ctx: Context, name: str) -> dict[str, Any] | None:
    """The run's report line, once it has printed it."""
    out = astra(ctx, "logs", name, timeout=20, check=False).stdout
    for line in out.splitlines():
        if line.startswith(MARK):
            try:
                found = json.loads(line[len(MARK) :])
            except ValueError:
                return None
            return found if isinstance(found, dict) else None
    return None


def show(ctx: Context, name: str) -> dict[str, Any]:
    found = astra_json(ctx, "show", name)
    if not isinstance(found, dict):
        raise Failed(f"`astra show {name}` is not an object")
    return found


def given_gpus(detail: dict[str, Any]) -> list[int]:
    """The GPUs the run's latest attempt was given (``workers_history``)."""
    workers = detail.get("workers_history") or []
    latest = max((w.get("attempt", 0) for w in workers), default=0)
    return sorted({g for w in workers if w.get("attempt") == latest for g in w.get("gpus") or []})


def finished(ctx: Context, name: str, seconds: float) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        detail = show(ctx, name)
        return detail if detail.get("state") in RunState.FINISHED else None

    return wait_until(ctx, f"{name} to finish", done, seconds)  # type: ignore[no-any-return]


def running(ctx: Context, name: str, seconds: float) -> dict[str, Any]:
    def started() -> dict[str, Any] | None:
        detail = show(ctx, name)
        if detail.get("state") in RunState.FINISHED:
            report = report_of(ctx, name)
            why = (report or {}).get("error") or detail.get("reason") or "no reason given"
            raise Failed(f"{name} ended {detail.get('state')} before it was seen running: {why}")
        return detail if detail.get("state") == RunState.RUNNING else None

    return wait_until(ctx, f"{name} to run", started, seconds)  # type: ignore[no-any-return]


def device_name(gpu: dict[str, Any], indexes_are_cudas: bool) -> str:
    """What CUDA_VISIBLE_DEVICES should say for ``gpu`` (runner.gpus.GpuInfo.device_name)."""
    return str(gpu["index"]) if indexes_are_cudas else str(gpu["uuid"])


def expected_visible(ctx: Context, index: int) -> str:
    """Indexes on a machine without MIG; UUIDs on a machine with a GPU in MIG mode."""
    by_index = {g["index"]: g for g in ctx.gpus}
    plain = not any(g.get("mig") for g in ctx.gpus) and sorted(by_index) == list(
        range(len(ctx.gpus))
    )
    return device_name(by_index[index], plain)


def gib(n: float | None) -> str:
    return "-" if n is None else f"{n / GIB:.1f} GiB"


def bare_uuid(uuid: str) -> str:
    """NVML's ``GPU-…``/``MIG-…`` without its prefix, as torch writes a device's uuid."""
    return uuid.split("-", 1)[1] if uuid[:4] in ("GPU-", "MIG-") else uuid


def cancel_all(ctx: Context) -> None:
    """Every run of this script still queued or running cancelled (bounded; errors
    ignored: check.sh's clean-up stops what is left with the daemon)."""
    try:
        runs = json.loads(astra(ctx, "ls", "--all", "--json", timeout=15, check=False).stdout)
    except (Failed, ValueError):
        return
    for run in runs if isinstance(runs, list) else []:
        name = str(run.get("name", ""))
        if name.startswith(PREFIX) and run.get("state") not in RunState.FINISHED:
            with contextlib.suppress(Failed):
                astra(ctx, "delete", name, timeout=15, check=False)


# ------------------------------------------------------------------ the checks


def check_inventory(ctx: Context) -> str:
    data = astra_json(ctx, "gpus")
    source = data.get("source", "")
    if data.get("simulated") or source != "nvml":
        raise Failed(f"the daemon's GPUs are not NVML's: {source or 'no source given'}")
    gpus = data.get("gpus") or []
    if not gpus:
        raise Failed("NVML reads no GPU")
    ctx.gpus = gpus
    parts = []
    for g in gpus:
        where = f"{g['index']} ({g['mig']})" if g.get("mig") else str(g["index"])
        parts.append(f"{where} {g['name']} {g['memory_total'] // MIB} MiB")
    return f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''} " + "; ".join(parts)


def check_process_run(ctx: Context) -> str:
    name = PREFIX + "torch"
    submit(ctx, name, "--gpus", "1")
    detail = finished(ctx, name, 120)
    report = report_of(ctx, name)
    if report is None:
        tail = astra(ctx, "logs", name, check=False).stdout.strip().splitlines()[-1:]
        raise Failed(f"{name} ended {detail.get('state')} without a report: {tail}")
    if report.get("error"):
        raise Failed(f"in the run: {report['error']} (CUDA_VISIBLE_DEVICES={report.get('cvd')})")
    given = given_gpus(detail)
    if len(given) != 1:
        raise Failed(f"{name} was given GPUs {given}, not one")
    index = given[0]
    want = expected_visible(ctx, index)
    gpu = next(g for g in ctx.gpus if g["index"] == index)
    seen = f"CUDA_VISIBLE_DEVICES={report.get('cvd')}, torch {report.get('torch')} sees"
    if report.get("cvd") != want:
        raise Failed(f"given GPU {index}, {seen} a run told {want!r} would see")
    if report.get("count") != 1 or not report.get("available"):
        raise Failed(
            f"given GPU {index}: {seen} {report.get('count')} GPU(s)"
            f" (available: {report.get('available')})"
        )
    uuid = report.get("uuid") or ""
    if uuid and bare_uuid(uuid) != bare_uuid(gpu["uuid"]):
        raise Failed(f"given GPU {index} ({gpu['uuid']}), torch sees {uuid}")
    if not uuid and report.get("name") not in gpu["name"]:
        raise Failed(f"given GPU {index} ({gpu['name']}), torch sees {report.get('name')}")
    same = "uuid" if uuid else "name"
    return f"{seen} 1 GPU: {report.get('name')} (its {same} is GPU {index}'s)"


ISOLATION = (
    "import os, re\n"
    "nodes = sorted(n for n in os.listdir('/dev') if re.fullmatch(r'nvidia[0-9]+', n))\n"
    "os.environ.pop('CUDA_VISIBLE_DEVICES', None)  # as a run that resets it would\n"
    "try:\n"
    "    import torch\n"
    "    count = torch.cuda.device_count()\n"
    "except Exception as e:\n"
    "    count = repr(e)\n"
    "print('ISOLATION', ','.join(nodes), count)\n"
)


def check_isolation(ctx: Context) -> str:
    """A run asking one GPU finds only its own device node, and CUDA, told nothing by
    CUDA_VISIBLE_DEVICES, finds one GPU: no variable reaches another GPU."""
    if len(ctx.gpus) < 2:
        return f"{len(ctx.gpus)} GPU here: no other GPU to hide (meaningful from 2)"
    name = PREFIX + "isolation"
    astra(ctx, "run", "--name", name, "--gpus", "1", "--", ctx.python, "-c", ISOLATION)
    detail = finished(ctx, name, 120)
    said = [line for line in astra(ctx, "logs", name, check=False).stdout.splitlines()
            if line.startswith("ISOLATION")]  # fmt: skip
    if not said:
        raise Failed(f"{name} ended {detail.get('state')} without a report")
    _, nodes, count = [*said[-1].split(" ", 2), "", ""][:3]
    if len(nodes.split(",")) != 1 or count != "1":
        raise Failed(f"a run given 1 of {len(ctx.gpus)} GPUs sees /dev/{nodes}; torch: {count}")
    return f"a run given 1 of {len(ctx.gpus)} GPUs sees only /dev/{nodes}; torch finds 1"


def check_shared(ctx: Context) -> str:
    helptext = astra(ctx, "run", "--help", timeout=20).stdout
    if "--gpu-mem" not in helptext:
        raise Skipped("this build has no --gpu-mem")
    names = [PREFIX + "share-a", PREFIX + "share-b"]
    releases = [submit(ctx, n, "--gpu-mem", "20GiB", alloc=512 * MIB, hold=120) for n in names]
    try:
        details = [running(ctx, n, 60) for n in names]
        reports = [wait_until(ctx, f"{n}'s report", partial(report_of, ctx, n), 60) for n in names]
        for n, report in zip(names, reports, strict=True):
            if report.get("error") or not report.get("allocated"):
                raise Failed(f"{n}: {report.get('error') or 'allocated nothing'}")
        both = [show(ctx, n) for n in names]
        if any(d.get("state") != RunState.RUNNING for d in both):
            raise Failed(
                "the two runs were not running at once: "
                + ", ".join(f"{n} {d.get('state')}" for n, d in zip(names, both, strict=True))
            )
        gpus = [given_gpus(d) for d in details]
        if len(gpus[0]) != 1 or gpus[0] != gpus[1]:
            raise Failed(f"not on one GPU: {names[0]} on {gpus[0]}, {names[1]} on {gpus[1]}")
        visible = {r.get("cvd") for r in reports}
        if len(visible) != 1:
            raise Failed(f"the runs saw different CUDA_VISIBLE_DEVICES: {sorted(visible)}")
    finally:
        for release in releases:
            release.touch()
    for n in names:
        finished(ctx, n, 60)
    return (
        f"2 runs of --gpu-mem 20GiB at once on GPU {gpus[0][0]}, each holding "
        f"{gib(512 * MIB)} (CUDA_VISIBLE_DEVICES={visible.pop()})"
    )


def nvml_processes(index: int) -> str:
    """What NVML itself lists on the GPU with that index (whole GPUs only): for a message."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            found = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
            return ", ".join(f"{p.pid} ({gib(p.usedGpuMemory)})" for p in found) or "none"
        finally:
            pynvml.nvmlShutdown()
    except Exception as error:
        return f"not readable ({type(error).__name__})"


def check_telemetry(ctx: Context) -> str:
    from astraeus_tui.client import Client

    name = PREFIX + "alloc"
    release = submit(ctx, name, "--gpus", "1", alloc=GIB, hold=120)
    client = Client(ctx.socket, timeout=10)
    try:
        detail = running(ctx, name, 60)
        report = wait_until(ctx, f"{name}'s report", lambda: report_of(ctx, name), 60)
        if report.get("error"):
            raise Failed(f"in the run: {report['error']}")
        last: list[Any] = [None]

        def seen() -> Any:
            for run in client.telemetry().runs:
                if run.name == name:
                    last[0] = run
                    if (run.gpu_memory_bytes or 0) >= GIB:
                        return run
            return None

        try:
            reading = wait_until(ctx, "telemetry", seen, 45)
        except Failed:
            run = last[0]
            index = (given_gpus(detail) or [0])[0]
            said = "no reading of it" if run is None else f"gpu_memory_bytes={run.gpu_memory_bytes}"
            raise Failed(
                f"after 45 s GET /v1/telemetry has {said} for {name} (pid "
                f"{report.get('pid')}); NVML lists on GPU {index}: "
                f"{nvml_processes(index)}"
            ) from None
        top = astra(ctx, "top", "--once", timeout=30).stdout
        if name not in top:
            raise Failed(f"`astra top --once` does not list {name}: {top[-200:]!r}")
    finally:
        release.touch()
    finished(ctx, name, 60)
    return (
        f"{name} holds {gib(reading.gpu_memory_bytes)} on GPU "
        f"{','.join(str(g) for g in reading.gpus)} in GET /v1/telemetry "
        f"(NVML per process, torch allocated {gib(GIB)}); astra top --once lists it"
    )


def check_doctor(ctx: Context) -> str:
    result = astra(ctx, "doctor", "--system", "--json", timeout=60, check=False)
    try:
        checks = json.loads(result.stdout)
    except ValueError:
        raise Failed(
            f"printed no JSON (exit {result.returncode}): "
            f"{(result.stderr or result.stdout).strip()[-120:]}"
        ) from None
    by_name = {c["name"]: c for c in checks}
    nvml = by_name.get("nvml")
    if nvml is None:
        raise Failed("no nvml check in its answer")
    if nvml["status"] != "ok":
        raise Failed(f"nvml {nvml['status']}: {nvml['message']}")
    others = sorted(n for n, c in by_name.items() if c["status"] == "fail")
    layout = f"; not set up here: {', '.join(others)}" if others else ""
    return f"nvml ok: {nvml['message']}{layout}"


def docker_runtime() -> str:
    """Why a container cannot be checked here, or ``""`` when it can."""
    if shutil.which("docker") is None:
        return "no docker here"
    try:
        out = subprocess.run(
            ["docker", "info", "--format", "{{json .Runtimes}}"],
            capture_output=True,
            text=True,
            timeout=15,
        )
    except subprocess.TimeoutExpired:
        return "docker info did not answer in 15 s"
    if out.returncode != 0:
        return f"the docker engine does not answer: {out.stderr.strip()[-100:]}"
    if "nvidia" not in out.stdout:
        return "the docker engine has no nvidia runtime (nvidia-container-toolkit)"
    return ""


def local_image(chosen: str | None) -> str | None:
    """An image to run nvidia-smi in: ``chosen``, or a local one with glibc (no pulls)."""
    if chosen:
        return chosen
    out = subprocess.run(
        ["docker", "images", "--format", "{{.Repository}}:{{.Tag}}"],
        capture_output=True,
        text=True,
        timeout=15,
    )
    images = [i for i in out.stdout.split() if not i.endswith(":<none>")]
    for hint in ("cuda", "pytorch", "ubuntu", "debian"):
        for image in images:
            if hint in image:
                return image
    return None


@contextlib.contextmanager
def docker_daemon(ctx: Context) -> Iterator[dict[str, str]]:
    """A second daemon, on the docker executor, in its own home; stopped on leaving."""
    home = ctx.work / "docker-home"
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text(
        '[machine]\nexecutor = "docker"\ngpus = "auto"\nstop_grace_seconds = 2\n'
    )
    env = dict(ctx.env, ASTRAEUS_HOME=str(home), ASTRAEUS_SOCKET=str(home / "astraeus.sock"))
    with open(home / "serve.log", "ab") as log:
        proc = subprocess.Popen(
            [ctx.python, "-m", "astraeus_tui.cli.main", "serve"],
            env=env,
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
        )
    (ctx.work / "docker-daemon.pid").write_text(str(proc.pid))
    try:
        wait_until(
            ctx,
            "the docker daemon's socket",
            lambda: astra(ctx, "ls", env=env, timeout=10, check=False).returncode == 0,
            30,
        )
        yield env
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def check_docker(ctx: Context) -> str:
    why = docker_runtime()
    if why:
        raise Skipped(why)
    image = local_image(ctx.docker_image)
    if image is None:
        raise Skipped("no local image with nvidia-smi's libc (pass --docker-image IMAGE)")
    with docker_daemon(ctx) as env:
        name = PREFIX + "docker"
        astra(
            ctx,
            "run",
            "--name",
            name,
            "--gpus",
            "1",
            "--image",
            image,
            "--",
            "sh",
            "-c",
            "echo CVD=$CUDA_VISIBLE_DEVICES; nvidia-smi -L 2>&1; true",
            env=env,
        )
        end = time.monotonic() + ctx.left(120)
        while True:
            detail = json.loads(astra(ctx, "show", name, "--json", env=env).stdout)
            if detail.get("state") in RunState.FINISHED:
                break
            if time.monotonic() > end:
                raise Failed(f"{name} did not finish in 120 s: {detail.get('reason')}")
            time.sleep(0.5)
        out = astra(ctx, "logs", name, env=env, check=False).stdout
        gpus = json.loads(astra(ctx, "gpus", "--json", env=env).stdout)["gpus"]
    if detail.get("state") != RunState.SUCCEEDED:
        raise Failed(f"{name} {detail.get('state')}: {detail.get('reason')}; {out[-160:]!r}")
    given = given_gpus(detail)
    if len(given) != 1:
        raise Failed(f"{name} was given GPUs {given}, not one")
    index = given[0]
    uuid = next(g["uuid"] for g in gpus if g["index"] == index)
    listed = [line for line in out.splitlines() if "UUID: " in line]
    if not any(uuid in line for line in listed) or len(listed) != 1:
        raise Failed(f"given GPU {index} ({uuid}), the container lists: {listed}")
    visible = next((ln for ln in out.splitlines() if ln.startswith("CVD=")), "CVD=?")
    return (
        f"{image}: given GPU {index}, the container sees only it ({uuid}), "
        f"CUDA_VISIBLE_DEVICES={visible[4:]}"
    )


CHECKS: list[tuple[str, Callable[[Context], str], bool]] = [
    # (name, check, needs the NVML GPUs the first one found)
    ("nvml inventory", check_inventory, False),
    ("process run sees its GPU", check_process_run, True),
    ("process run sees no other GPU", check_isolation, True),
    ("shared runs", check_shared, True),
    ("telemetry per process", check_telemetry, True),
    ("doctor --system", check_doctor, False),
    ("docker gpu", check_docker, True),
]


def line(status: str, name: str, message: str) -> None:
    """``ok   name: …``, ``FAIL name: …`` or ``skip name: …``: one line, whatever was said."""
    print(f"{status:<4} {name}: {' '.join(message.split())}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path)
    parser.add_argument("--socket", type=Path)
    parser.add_argument("--work", type=Path)
    parser.add_argument("--budget", type=float, default=480)
    parser.add_argument("--docker-image")
    parser.add_argument("--list", action="store_true", help="print the checks' names, run none")
    args = parser.parse_args(argv)
    if args.list:
        for name, _, _ in CHECKS:
            print(name)
        return 0
    if not (args.home and args.socket and args.work):
        parser.error("--home, --socket and --work are needed")
    env = dict(
        os.environ, ASTRAEUS_HOME=str(args.home), ASTRAEUS_SOCKET=str(args.socket), COLUMNS="200"
    )
    ctx = Context(
        args.home,
        args.socket,
        args.work,
        time.monotonic() + args.budget,
        args.docker_image,
        env=env,
    )
    try:
        for name, check, needs_gpus in CHECKS:
            if needs_gpus and not ctx.gpus:
                line("skip", name, "no NVML GPU (see nvml inventory)")
                continue
            started = time.monotonic()
            try:
                message = check(ctx)
            except Skipped as why:
                line("skip", name, str(why))
                continue
            except Failed as why:
                ctx.failures += 1
                line("FAIL", name, str(why))
            except Exception as error:  # a check's own bug: its line says so, the rest go on
                ctx.failures += 1
                line("FAIL", name, f"{type(error).__name__}: {error}")
            else:
                line("ok", name, f"{message} ({time.monotonic() - started:.0f} s)")
            finally:
                cancel_all(ctx)
    finally:
        cancel_all(ctx)
    return 1 if ctx.failures else 0


if __name__ == "__main__":
    sys.exit(main())
