"""The Docker engine stops, restarts or hangs under a live daemon (real dockerd).

The tests run their own dockerd (the same binary tests/docker/setup.sh starts), on its
own socket, data root, exec root and bridge, and stop and start *that* one: the
machine's engine, which other tests and people use, is never touched. Root, dockerd,
``ip`` and the test image on the machine's engine are needed; skipped otherwise.

- Stopped (SIGTERM, or SIGKILL) and started again without live-restore: the engine ends
  the containers, so their workers are lost and the runs restart (a program that exits
  0 on SIGTERM does not pass for finished); the daemon reconnects by itself, answers
  meanwhile, and loses no run, including one submitted during the outage.
- With ``--live-restore`` the containers, and the copy of their logs, simply go on.
- Hung (SIGSTOP): the loop notices within the quick-call timeout, nothing is lost.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import docker
import pytest

from runner.executors.docker.engine import QUICK_TIMEOUT
from tests.docker.helpers import IMAGE, engine_client
from tests.faults.conftest import MakeDaemon
from tests.faults.daemon import DaemonProcess, document, pids_alive, wait_for


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "starting a dockerd of its own needs root"
    if shutil.which("dockerd") is None or shutil.which("ip") is None:
        return "dockerd or ip (iproute2) is not installed: run tests/docker/setup.sh"
    main = engine_client()
    if main is None:
        return "no Docker engine to take the test image from: run tests/docker/setup.sh"
    try:
        main.images.get(IMAGE)
    except docker.errors.ImageNotFound:
        return f"test image {IMAGE} is missing: run tests/docker/setup.sh"
    return None


SKIP = _skip_reason()
pytestmark = pytest.mark.skipif(SKIP is not None, reason=SKIP or "")


class Engine:
    """A dockerd of the tests' own, in ``root``."""

    def __init__(self, root: Path, bridge: str) -> None:
        self.root = root
        self.bridge = bridge
        self.host = f"unix://{root / 'docker.sock'}"
        self.log = root / "dockerd.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, live_restore: bool = False) -> None:
        args = [
            "dockerd", "--host", self.host, "--data-root", str(self.root / "data"),
            "--exec-root", str(self.root / "exec"), "--pidfile", str(self.root / "docker.pid"),
            "--bridge", self.bridge, "--iptables=false", "--ip-masq=false", "--ip-forward=false",
        ]  # fmt: skip
        if live_restore:
            args.append("--live-restore")
        self._forget_dead()
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                args, stdout=out, stderr=out, stdin=subprocess.DEVNULL, start_new_session=True
            )
        wait_for(self.answers, 60, "the test dockerd to answer")

    def _forget_dead(self) -> None:
        """Pid files of a dockerd, or its containerd, killed with -9 (maybe a zombie yet)."""
        for pidfile in (self.root / "docker.pid", self.root / "exec/containerd/containerd.pid"):
            with contextlib.suppress(OSError, ValueError):
                if not pids_alive([int(pidfile.read_text().strip())]):
                    pidfile.unlink()

    def answers(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"dockerd exited: {self.log.read_text()[-2000:]}")
        with contextlib.suppress(Exception):
            client = self.client(timeout=3)
            try:
                return bool(client.ping())
            finally:
                client.close()
        return False

    def client(self, timeout: float = 30) -> Any:
        return docker.DockerClient(base_url=self.host, timeout=timeout)

    def stop(self, signum: int = signal.SIGTERM) -> None:
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGCONT)  # a paused one could not stop
            os.kill(self.proc.pid, signum)
        self.proc.wait(90)

    def pause(self, paused: bool) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP if paused else signal.SIGCONT)

    def shutdown(self) -> None:
        """After the tests: no container, no dockerd, no containerd, no mount left."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(Exception):
                client = self.client()
                for c in client.containers.list(all=True):
                    c.remove(force=True)
                client.close()
            with contextlib.suppress(Exception):
                self.stop()
        for pid in self._processes():  # a containerd or shim left by a dockerd killed -9
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for line in Path("/proc/mounts").read_text().splitlines()[::-1]:
            target = line.split()[1]
            if target.startswith(str(self.root)):
                subprocess.run(["umount", "-l", target], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)

    def _processes(self) -> list[int]:
        """Processes whose command line names this engine's own folder."""
        mine = os.fsencode(self.root)
        found = []
        for entry in Path("/proc").iterdir():
            with contextlib.suppress(OSError):
                if entry.name.isdigit() and mine in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
        return found


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    # a bridge of its own (never docker0: an engine started with --bridge=none deletes it)
    bridge = f"astf-{random.randrange(1 << 32):08x}"
    address = f"10.231.{random.randrange(256)}.1/24"
    for cmd in (
        ["ip", "link", "add", bridge, "type", "bridge"],
        ["ip", "addr", "add", address, "dev", bridge],
        ["ip", "link", "set", bridge, "up"],
    ):
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            subprocess.run(["ip", "link", "del", bridge], capture_output=True)
            pytest.skip(f"cannot make a bridge for the test dockerd: {done.stderr.strip()}")
    # short: containerd's socket lives under the exec root (108 bytes at most)
    own = Engine(Path(tempfile.mkdtemp(prefix="astf-", dir="/tmp")), bridge)
    try:
        own.start()
        main = engine_client()
        assert main is not None
        image = b"".join(main.images.get(IMAGE).save(named=IMAGE))
        client = own.client()
        client.images.load(image)
        client.close()
        own.stop()
        yield own
    finally:
        own.shutdown()
        subprocess.run(["ip", "link", "del", bridge], capture_output=True)


@pytest.fixture
def on_engine(engine: Engine, make_daemon: MakeDaemon) -> Iterator[tuple[Engine, MakeDaemon]]:
    """The engine, and daemons that use it; afterwards their runs end, then the engine stops."""
    daemons: list[DaemonProcess] = []

    def make(**kw: Any) -> DaemonProcess:
        daemons.append(make_daemon(executor="docker", env={"DOCKER_HOST": engine.host}, **kw))
        return daemons[-1]

    yield engine, make
    if engine.proc is None or engine.proc.poll() is not None:
        return
    for d in daemons:  # while the engine answers: their containers go with them
        d.stop_all_runs()
        d.stop()
    with contextlib.suppress(Exception):
        client = engine.client()
        for c in client.containers.list(all=True):
            c.remove(force=True)
        client.close()
    engine.stop()


def shell(name: str, script: str, **extra: Any) -> dict[str, Any]:
    return document(name, ["sh", "-c", script], image=IMAGE, **extra)


# exits 0 on SIGTERM, as a checkpointing trainer does (config/examples/train.py)
SAVER = "trap 'echo saved; exit 0' TERM; echo started; while true; do sleep 0.2; done"
PLAIN = "trap 'exit 143' TERM; while true; do sleep 0.2; done"
COUNTER = "i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.2; done"


def attempts(d: DaemonProcess, name: str) -> list[int]:
    return [w["attempt"] for w in d.run(name)["workers_history"]]


def restarted(d: DaemonProcess, name: str) -> bool:
    """Running again in a later attempt. A start that met the engine still shutting down
    (the loop saw the containers end before it saw the engine gone) never started: its
    attempt ends as such, no restart spent, and the next one runs."""
    history = d.run(name)["workers_history"]
    newest = history[-1]
    return (
        newest["attempt"] > 1
        and newest["state"] == "Running"
        and all("never started" in (w["error"] or "") for w in history[1:-1])
    )


def outage_noticed(d: DaemonProcess) -> bool:
    return any("engine does not answer" in e for e in d.status()["errors"])


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["stopped", "killed"])
def test_an_engine_restart_loses_workers_but_no_run(
    on_engine: tuple[Engine, MakeDaemon], how: int
) -> None:
    engine, make = on_engine
    engine.start()
    d = make(gpus=2, grace=2).start()
    d.submit(shell("saver", SAVER, gpus=1))
    d.submit(shell("plain", PLAIN, gpus=1))
    d.wait_state("saver", "Running")
    d.wait_state("plain", "Running")
    engine.stop(how)
    t = time.monotonic()
    d.submit(shell("during", "sleep 1", gpus=0))  # acknowledged while the engine is away
    assert time.monotonic() - t < 5
    wait_for(lambda: outage_noticed(d), 20, "the daemon to notice the engine is away")
    ticks = d.status()["ticks"]
    wait_for(lambda: d.status()["ticks"] > ticks + 2, 10, "the loop to go on")
    engine.start()
    for name in ("saver", "plain"):
        try:
            wait_for(partial(restarted, d, name), 60, f"{name} to start again")
        except AssertionError as exc:
            run = d.run(name)  # what it became instead, for the failure to say
            seen = (run["state"], run["workers_history"], run["events"])
            raise AssertionError(f"{exc}: {seen}") from None
        run = d.wait_state(name, "Running")
        assert run["restarts"] == 1, run["events"]
        lost = [e["message"] for e in run["events"] if e["message"].startswith("Restarting")]
        assert lost and "was lost: something other than Astraeus stopped" in lost[0], lost
    d.wait_state("during", "Succeeded", timeout=60)
    assert d.alive()
    for name in ("saver", "plain"):
        d.client().request("DELETE", f"/v1/runs/{name}")
        d.wait_state(name, "Cancelled")


def test_with_live_restore_runs_go_on_and_their_logs_too(
    on_engine: tuple[Engine, MakeDaemon],
) -> None:
    engine, make = on_engine
    engine.start(live_restore=True)
    d = make(gpus=1, grace=2).start()
    d.submit(shell("counter", COUNTER, gpus=1))
    d.wait_state("counter", "Running")
    log = d.home / "logs" / d.run("counter")["uid"] / "1-0.log"
    wait_for(lambda: log.exists() and "tick 3\n" in log.read_text(), 30, "the first lines")
    client = engine.client()
    (container,) = client.containers.list()
    started = container.attrs["State"]["StartedAt"]
    client.close()
    engine.stop()
    wait_for(lambda: outage_noticed(d), 20, "the daemon to notice the engine is away")
    time.sleep(1)
    engine.start(live_restore=True)
    last = int(log.read_text().split()[-1])
    wait_for(lambda: f"tick {last + 10}\n" in log.read_text(), 30, "the log to go on")
    run = d.run("counter")
    assert run["state"] == "Running" and run["restarts"] == 0
    assert attempts(d, "counter") == [1]
    client = engine.client()
    assert client.containers.get(container.id).attrs["State"]["StartedAt"] == started
    client.close()
    d.client().request("DELETE", "/v1/runs/counter")
    d.wait_state("counter", "Cancelled")


def test_a_hung_engine_does_not_hold_the_loop(on_engine: tuple[Engine, MakeDaemon]) -> None:
    engine, make = on_engine
    engine.start()
    d = make(gpus=1, grace=2).start()
    d.submit(shell("steady", COUNTER, gpus=1))
    d.wait_state("steady", "Running")
    engine.pause(True)
    try:
        t = time.monotonic()
        for _ in range(5):
            d.status()  # the API answers meanwhile
            assert time.monotonic() - t < 5
        wait_for(lambda: outage_noticed(d), QUICK_TIMEOUT + 10, "the loop to give up waiting")
        ticks = d.status()["ticks"]
        wait_for(lambda: d.status()["ticks"] > ticks + 2, 10, "the loop to go on")
    finally:
        engine.pause(False)
    time.sleep(2)
    run = d.run("steady")
    assert run["state"] == "Running" and run["restarts"] == 0  # a hang stops nothing
    assert attempts(d, "steady") == [1]
    d.client().request("DELETE", "/v1/runs/steady")
    d.wait_state("steady", "Cancelled")


def test_a_start_that_meets_a_stopped_engine_waits_for_it(
    on_engine: tuple[Engine, MakeDaemon],
) -> None:
    """Nothing runs, so the first call to find the engine gone is the start itself."""
    engine, make = on_engine
    engine.start()
    d = make(gpus=1, grace=2).start()
    engine.stop()
    d.submit(shell("patient", "echo done", gpus=1))
    wait_for(lambda: outage_noticed(d), 20, "the daemon to notice the engine is away")
    assert d.run("patient")["state"] in ("Queued", "Starting")
    engine.start()
    run = d.wait_state("patient", "Succeeded", timeout=60)
    assert run["restarts"] == 0


def test_a_container_stopped_from_outside_is_a_lost_worker(
    on_engine: tuple[Engine, MakeDaemon],
) -> None:
    """``docker stop`` by hand: exit 0 on SIGTERM, yet not finished (its kill event says)."""
    engine, make = on_engine
    engine.start()
    d = make(gpus=1, grace=2).start()
    d.submit(shell("saver", SAVER, gpus=1))
    d.wait_state("saver", "Running")
    client = engine.client()
    (container,) = client.containers.list()
    container.stop(timeout=5)
    client.close()
    wait_for(lambda: attempts(d, "saver") == [1, 2], 30, "saver to start again")
    run = d.wait_state("saver", "Running")
    assert run["restarts"] == 1
    assert any("was lost: something other than Astraeus" in e["message"] for e in run["events"])
