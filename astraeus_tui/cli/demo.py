"""`astra demo`: a daemon on simulated GPUs with a story to watch, then the dashboard.

In a temporary ASTRAEUS_HOME (process executor, 4 simulated GPUs, stop grace
8 s, three workspaces, a ``checkpoints`` drive), within a minute:

1. ``ft-lowprio`` (priority -10) fine-tunes with ``config/examples/train.py``,
   saving checkpoints to the drive; ``eval-nightly`` takes two GPUs for 3 min.
2. ``pretrain-7b`` needs three GPUs: it becomes the head, with a shadow time
   (when ``eval-nightly`` ends); ``sweep-lr`` queues behind it.
3. ``quick-test`` (1 GPU, 2 min) ends before the shadow time: it is backfilled.
4. ``urgent-fix`` (priority 10) preempts ``ft-lowprio``, which saves its
   checkpoint within the grace and is queued again, paused.
5. ``urgent-fix`` is done in 25 s; ``ft-lowprio`` starts again in the room the
   head does not need and resumes from its checkpoint.

Quitting the dashboard stops the daemon and its runs and removes the folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from astraeus_tui.cli.common import fail
from astraeus_tui.client import ApiError, Client

TRAIN = Path(__file__).resolve().parents[2] / "config" / "examples" / "train.py"
PY = sys.executable
CONFIG = """\
[machine]
executor = "process"
gpus = {gpus}
cpu_cores = 16
memory = "64GiB"
stop_grace_seconds = {grace}

[admins]
users = ["{user}"]

[workspaces.vision]
members = ["*"]
max_priority = 10
weight = 2.0
quota = {{ gpus = 8 }}

[workspaces.nlp]
members = ["*"]
quota = {{ gpus = 2 }}

[workspaces.default]
members = ["*"]

[drives.checkpoints]
path = "{drive}"
"""


def _run(name: str, argv: list[str], workspace: str, gpus: int, limit: int | None,
         priority: int = 0, **task: Any) -> dict[str, Any]:  # fmt: skip
    template: dict[str, Any] = {
        "image": "local",
        "command": argv[0],
        "args": argv[1:],
        "requested_resources": {"gpu_requests": {"count": gpus}},
        **task,
    }
    if limit:
        template["time_limit_seconds"] = limit
    return {"metadata": {"name": name, "workspace": workspace},
            "spec": {"priority": priority, "task_template": template}}  # fmt: skip


def _work(seconds: int) -> list[str]:
    """A program that works a sixth of a core for ``seconds``: a simulated GPU is busy only
    while its run works (a plain sleep would show its GPUs idle)."""
    loop = (
        f"import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n"
        " t = time.monotonic()\n while time.monotonic() - t < 0.004: pass\n time.sleep(0.02)"
    )
    return [PY, "-c", loop]


class Demo:
    def __init__(self, gpus: int, grace: float) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="astraeus-demo-"))
        self.drive = self.home / "drives" / "checkpoints"
        self.gpus, self.grace = gpus, grace
        self.daemon: subprocess.Popen[bytes] | None = None
        self.client = Client(self.home / "astraeus.sock", timeout=10)
        self.stopping = threading.Event()

    # ------------------------------------------------------------ the daemon

    def start(self) -> None:
        (self.drive / "code").mkdir(parents=True)
        shutil.copy(TRAIN, self.drive / "code" / "train.py")
        user = pwd.getpwuid(os.getuid()).pw_name
        (self.home / "config.toml").write_text(
            CONFIG.format(gpus=self.gpus, grace=self.grace, user=user, drive=self.drive)
        )
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("ASTRAEUS_SOCKET", "ASTRAEUS_STOP_GRACE", "ASTRAEUS_SIM_GPUS")
        }
        env["ASTRAEUS_HOME"] = str(self.home)  # fmt: skip
        log = open(self.home / "daemon.log", "ab")  # noqa: SIM115 (handed to the child)
        self.daemon = subprocess.Popen(
            [PY, "-m", "astraeus_tui.cli.main", "serve"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with contextlib.suppress(ApiError):
                self.client.status()
                return
            if self.daemon.poll() is not None:
                break
            time.sleep(0.1)
        tail = (self.home / "daemon.log").read_text(errors="replace").strip().splitlines()[-1:]
        raise RuntimeError(f"the demo's daemon did not start: {tail[0] if tail else '?'}")

    def stop(self) -> None:
        """The daemon, then every worker it left running, then the folder."""
        self.stopping.set()
        if self.daemon is not None and self.daemon.poll() is None:
            with contextlib.suppress(ApiError, OSError):
                self.client.shutdown()
            try:
                self.daemon.wait(3)
            except subprocess.TimeoutExpired:  # it may wait on a closed change stream
                self.daemon.kill()
                self.daemon.wait()
        for meta in (self.home / "workers").glob("*/meta.json"):
            with contextlib.suppress(ValueError, OSError):
                pgid = json.loads(meta.read_text()).get("child_pgid")
                if pgid:
                    os.killpg(pgid, signal.SIGKILL)
        time.sleep(0.2)
        shutil.rmtree(self.home, ignore_errors=True)

    # ------------------------------------------------------------ the story

    def wait(self, seconds: float) -> None:
        if self.stopping.wait(seconds):
            raise InterruptedError

    def fine_tune(self) -> dict[str, Any]:
        if shutil.which("bwrap"):  # the drive mounted at /ckpt, as in config/examples
            argv = [PY, "/ckpt/code/train.py"]
            extra: dict[str, Any] = {
                "datavolume_refs": [
                    {"name": "checkpoints", "mount_path": "/ckpt", "mode": "ReadWrite"}
                ]
            }
        else:  # no bubblewrap for the process executor: the drive's folder itself
            argv = [PY, str(self.drive / "code" / "train.py")]
            extra = {"env": {"CKPT_DIR": str(self.drive)}}
        argv += ["--steps", "100000", "--step-seconds", "6", "--save-every", "5"]
        return _run("ft-lowprio", argv, "nlp", 1, 1800, priority=-10, **extra)

    def next_step(self, name: str, timeout: float = 15) -> None:
        """Return just after the run prints a new step: SIGTERM then lands early in one."""
        last = None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lines = b"".join(self.client.logs(name, tail=1)).decode(errors="replace").strip()
            if last is not None and lines != last:
                return
            last = lines
            self.wait(0.2)

    def story(self) -> None:
        submit = self.client.submit
        with contextlib.suppress(InterruptedError, ApiError, OSError):
            submit(self.fine_tune())
            submit(_run("eval-nightly", _work(150), "vision", 2, 180))
            self.wait(2)
            submit(_run("pretrain-7b", _work(3600), "vision", 3, 7200))
            submit(_run("sweep-lr", _work(3600), "vision", 2, None))
            self.wait(3)
            submit(_run("quick-test", _work(60), "vision", 1, 120))
            self.wait(10)
            self.next_step("ft-lowprio")
            submit(_run("urgent-fix", _work(25), "vision", 1, 600, priority=10))


def demo(
    gpus: Annotated[int, typer.Option(help="Simulated GPUs.")] = 4,
    grace: Annotated[float, typer.Option(help="Stop grace in seconds.")] = 8,
) -> None:
    """A daemon on simulated GPUs with a story (head, backfill, preemption, resume), then the
    dashboard. Quitting it stops the daemon and removes everything it made."""
    if not TRAIN.is_file():
        fail(f"the demo needs {TRAIN} (run it from a checkout of Astraeus)")
    show = Demo(gpus, grace)
    try:
        show.start()
        threading.Thread(target=show.story, name="demo-story", daemon=True).start()
        from astraeus_tui.app import run_dashboard  # lazy: textual only for the dashboard

        run_dashboard(show.client.socket_path)
    except RuntimeError as e:
        fail(str(e))
    finally:
        show.stop()


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
