"""The ``process`` executor: each worker is a supervised tree of processes on this machine.

The embedded default when Docker is not reachable. ``ProcessExecutor(state_dir)`` keeps
one folder per worker, ``state_dir/<launch.key>/``, which is also the worker's handle:

- ``launch.json``  what to run, written here, read and deleted by the supervisor;
- ``meta.json``    run, attempt, worker, supervisor, command (and bubblewrap) pids with
  their start times (from ``/proc/<pid>/stat``, so a recycled pid is never taken for the worker);
- ``exit.json``    exit code (128 + N when killed by signal N), signal, time, error;
- ``supervisor.log``  what the supervisor itself had to say.

A worker runs under ``python -S -P -m runner.executors.supervise`` (see that module) in a
session of its own, so it outlives the daemon; a restarted daemon adopts it by listing the
folders. That supervisor is a fork of a warm one (:mod:`runner.executors.launcher`, started
with the daemon), so a start does not wait for an interpreter and its imports; without
one, each supervisor is an interpreter of its own.
``start`` returns once the command runs. A command that cannot be executed does not make
``start`` fail: the worker exits at once with 127 (not found) or 126 (not executable) and
its status carries the reason, as Docker reports a missing executable.

Every process of the worker is stopped, also one that left the command's process group
(``setsid()``, ``setpgid()``) or was orphaned by a double fork: the supervisor is a child
subreaper, so they all stay its descendants, and :meth:`ProcessExecutor.signal` sends to
the group and then to each descendant found in ``/proc`` (:mod:`runner.executors.tree`).
When the command exits, what it leaves behind gets SIGKILL at once, as a container's
processes do when its first process exits, and the worker is reported exited, with the
command's exit status, only once none of them is left. A supervisor killed with -9 takes
the command along, and cleanup kills its group; processes that had left the group are
then out of reach.

Who runs it: when the daemon is root and the member is not, the command runs as the
member's uid:gid, its supplementary groups as a login gives them (``su - member``) and
no-new-privileges; a daemon that is not
root runs every command as itself. The command gets ``launch.env`` plus PATH, HOME, USER
and ``CUDA_VISIBLE_DEVICES`` (the worker's GPUs; empty for none) where missing, its home
(or /tmp) as working directory, and stdout+stderr appended to ``launch.log_path``
through the supervisor, within ``launch.log_limit`` and ``launch.log_reserve``.

Drives need bubblewrap: the command runs as ``bwrap --dev-bind / / … --bind SRC DST``.
The mount paths are paths in the member's own view of the machine: the supervisor places
them as the member, never with root's rights (see :mod:`runner.executors.sandbox`).
The sandbox keeps the host's PID namespace (in a new one, the host's ``/proc`` would name
other processes than the program's pids), so its processes are stopped like any worker's;
bubblewrap itself gets only SIGKILL, as a SIGTERM would end it and, through
``--die-with-parent``, the command at once.

Not enforced: ``cpu_milli`` and ``memory`` limits (use Docker for those), and GPU isolation
beyond ``CUDA_VISIBLE_DEVICES``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path
from signal import SIGKILL, SIGTERM

from runner.drives import login_groups
from runner.executors.base import (
    Capabilities,
    ExecutorError,
    ListedWorker,
    Mount,
    Observed,
    WorkerLaunch,
    WorkerStatus,
)
from runner.executors.cgroups import (
    Cgroups,
    Detected,
    Limits,
    WorkerGroup,
    cpu_list,
    cpu_text,
    detect,
)
from runner.executors.enter import ProcessSession, enter, write_enter
from runner.executors.launcher import (
    MODULE,
    Launcher,
    LauncherGone,
    LauncherTimeout,
    launches_for,
)
from runner.executors.terminal import TerminalSession
from runner.executors.tree import (
    cmdlines,
    descendants,
    is_alive,
    kill_descendants,
    proc_stat,
    process_name,
    signal_descendants,
)
from runner.executors.workerfiles import (
    EXIT,
    LAUNCH,
    META,
    SUPERVISOR_LOG,
    Job,
    read_json,
    write_json_atomic,
)
from runner.sessions import EnterRequest

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
NO_BWRAP = (
    "this run mounts drives, which the process executor needs bubblewrap (bwrap) for: "
    "install bubblewrap or use Docker"
)
SUPERVISOR_GONE = "the worker's supervisor is gone"
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


class ProcessExecutor:
    """Workers as local processes, each worker's watched by a supervisor process of its own."""

    name = "process"
    capabilities = Capabilities(
        enters=True, terminals=True
    )  # host GPU numbers; the supervisor writes the log

    def __init__(
        self, state_dir: Path, start_timeout: float = 15.0, warm: bool = True,
        cgroups: Detected | None = None, instance: str = "", devices: Path = Path("/dev"),
        pinning: bool = False, nodes: Path = Path("/sys/devices/system/node"),
    ) -> None:  # fmt: skip
        self.state_dir = Path(state_dir)
        self.start_timeout = start_timeout
        self.warm = warm  # supervisors forked from a warm launcher (runner/executors/launcher.py)
        self._launcher: Launcher | None = None
        # where workers' cgroups are made (runner/executors/cgroups.py), in a folder named
        # by the daemon's instance; found when first asked, unless given
        self._cgroups = cgroups
        self.instance = instance
        self.devices = devices  # where the GPUs' device nodes are (nvidia<n>)
        self.pinning = pinning  # [machine] cpu_pinning: whole cores, near the GPUs
        self.nodes = nodes  # the NUMA nodes' folders (node<n>/cpulist)

    def cgroups(self) -> Detected:
        """The cgroups workers are held in, or why there are none (found once)."""
        if self._cgroups is None:
            # named by the daemon's instance; an executor without one, by its folder
            folder = str(self.state_dir.resolve()).encode()
            name = self.instance or hashlib.sha256(folder).hexdigest()[:8]
            self._cgroups = detect(name, cpuset=self.pinning)
        return self._cgroups

    def not_enforced(self) -> str | None:
        """What a run is not held to here, and why; None when everything it asks is."""
        found = self.cgroups()
        said = []
        if found.cgroups is None:
            said.append(f"memory and CPU asks not enforced: {found.why_not}")
        else:
            missing = [n for n in ("memory", "CPU") if n not in found.cgroups.enforces()]
            if missing:
                said.append(f"{' and '.join(missing)} asks not enforced")
        gpus = any(_gpu_node(n) is not None for n in _listed(self.devices))
        if gpus and shutil.which("bwrap") is None:
            said.append("GPUs not isolated: bubblewrap is not installed")
        return "; ".join(said) or None

    def reachable(self) -> bool:
        """Always: the processes run on this machine, with no engine between."""
        return True

    def follow_logs(self, handle: str, log_path: Path | None = None) -> bool:
        """Nothing to resume: a worker's supervisor writes its log, daemon or not."""
        return False

    def start(self, launch: WorkerLaunch) -> str:
        """Start the worker; return once its command runs (or could not be executed)."""
        hidden = self._other_gpus(launch)
        if hidden and not launch.mounts and shutil.which("bwrap") is None:
            hidden = []  # no bubblewrap: the GPUs are not isolated (not_enforced says so)
        sandbox = _sandbox(launch.mounts) if launch.mounts or hidden else []
        handle = launch.key
        folder = self._folder(handle)
        if folder.exists():
            if self.status(handle).state is Observed.RUNNING:
                raise ExecutorError(f"worker {handle} is already running")
            shutil.rmtree(folder)
        self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        folder.mkdir(mode=0o700)
        group = self._group_for(launch)
        job = _job(launch, sandbox, group)._replace(hidden=hidden)._asdict()
        write_enter(folder, job)
        write_json_atomic(folder / LAUNCH, job)
        try:
            self._run_supervisor(handle, folder)
        except ExecutorError:
            if group is not None:
                group.remove()
            raise
        return handle

    def _other_gpus(self, launch: WorkerLaunch) -> list[str]:
        """The devices folder and its GPU nodes this worker must not see: every
        ``nvidia<n>`` but its own GPUs' (all of them for a run asking none); [] when there
        is none to hide."""
        mine = set(launch.gpu_minors if launch.gpu_minors is not None else launch.gpus)
        others = sorted(n for n in _listed(self.devices)
                        if _gpu_node(n) is not None and _gpu_node(n) not in mine)  # fmt: skip
        return [str(self.devices), *others] if others else []

    def _group_for(self, launch: WorkerLaunch) -> WorkerGroup | None:
        """The worker's cgroup, made with what it asked; None where none can be made."""
        found = self.cgroups()
        if found.cgroups is None:
            return None
        limits = Limits(memory=launch.memory, cpu_milli=launch.cpu_milli,
                        cpus=self._cores_for(found.cgroups, launch))  # fmt: skip
        try:
            return found.cgroups.make(launch.key, limits)
        except OSError as exc:
            raise ExecutorError(
                f"could not make the cgroup of worker {launch.key}: {exc.strerror or exc}"
            ) from None

    def _cores_for(self, cgroups: Cgroups, launch: WorkerLaunch) -> str:
        """With cpu_pinning, as many whole cores as it asks (rounded up) that no other
        pinned worker holds, those on its GPUs' NUMA nodes first; "" when it asks none,
        or too few are free (it then shares every core, held to its share)."""
        if not self.pinning or launch.cpu_milli <= 0 or cgroups.cpuset is None:
            return ""
        wanted = -(-launch.cpu_milli // 1000)
        free = cgroups.cores() - cgroups.pinned()
        near: set[int] = set()
        for node in launch.gpu_numa:
            near |= cpu_list(_read_text(self.nodes / f"node{node}" / "cpulist"))
        chosen = sorted(free & near)[:wanted]
        chosen += sorted(free - near)[: wanted - len(chosen)]
        return cpu_text(chosen) if len(chosen) == wanted else ""

    def signal(self, handle: str, signum: int) -> None:
        """Send ``signum`` to every process of the worker; a gone worker is fine.

        In its cgroup: SIGTERM to every process in it (bubblewrap aside, as below), and
        SIGKILL to all at once, none forking away meanwhile (runner/executors/cgroups.py);
        the supervisor is told of a stop as below. Where no cgroup could be made, the
        processes are found by walking /proc: the command's process group gets it
        first, as one; then each other descendant
        of the supervisor (a process that left the group, an orphan reparented to the
        supervisor) gets it once. SIGKILL walks again until no live process is left
        unsignalled. Bubblewrap itself only ever gets SIGKILL: a SIGTERM would end it,
        and the command with it at once (``--die-with-parent``), skipping the grace.
        """
        folder = self._folder(handle)
        meta = read_json(folder / META)
        if meta is None or (folder / EXIT).exists():
            return
        cgroup = WorkerGroup.from_json(meta.get("cgroup"))
        if cgroup is not None:
            self._signal_cgroup(meta, cgroup, signum, handle)
            return
        refused: list[str] = []
        try:
            group = _signal_group(meta, signum)
        except PermissionError as exc:  # no member got it: each is signalled below
            group, refused = None, [f"its process group: {exc.strerror}"]
        root, start = meta.get("supervisor_pid"), meta.get("supervisor_start")
        if meta.get("subreaper") is True and isinstance(root, int) and is_alive(root, start):
            if signum == SIGKILL:
                refused += kill_descendants(root)[1]
            else:
                if signum == SIGTERM:  # a stop: the supervisor gives leftovers the grace
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(root, SIGTERM)
                spare = meta.get("sandbox_pid")
                spared = [spare] if isinstance(spare, int) else []
                refused += signal_descendants(root, signum, spared, skip_group=group)
        if refused:
            raise ExecutorError(f"cannot signal worker {handle}: {refused[0]}")

    def _signal_cgroup(
        self, meta: dict[str, object], cgroup: WorkerGroup, signum: int, handle: str
    ) -> None:
        root, start = meta.get("supervisor_pid"), meta.get("supervisor_start")
        if signum == SIGTERM and isinstance(root, int) and is_alive(root, start):
            with contextlib.suppress(ProcessLookupError):  # a stop: leftovers get the grace
                os.kill(root, SIGTERM)
        if signum == SIGKILL:
            refused = cgroup.kill()
        else:
            spare = meta.get("sandbox_pid")
            refused = cgroup.signal(signum, spare if isinstance(spare, int) else None)
        if refused:
            raise ExecutorError(f"cannot signal worker {handle}: {refused[0]}")

    def remaining(self, handle: str) -> tuple[str, ...]:
        """The names of the worker's processes still alive, oldest first (bubblewrap
        aside): what a stop's SIGKILL is about to end."""
        meta = read_json(self._folder(handle) / META)
        if meta is None:
            return ()
        root, start = meta.get("supervisor_pid"), meta.get("supervisor_start")
        if not isinstance(root, int) or not is_alive(root, start):
            return ()
        spare = meta.get("sandbox_pid")
        cgroup = WorkerGroup.from_json(meta.get("cgroup"))
        pids = cgroup.pids() if cgroup is not None else [p.pid for p in descendants(root)]
        names = (process_name(pid) for pid in pids if pid != spare)
        return tuple(dict.fromkeys(n for n in names if n))

    def status(self, handle: str) -> WorkerStatus:
        folder = self._folder(handle)
        if not folder.is_dir():
            return WorkerStatus(Observed.MISSING, error="the worker's folder is gone")
        meta = read_json(folder / META)
        alive = meta is not None and is_alive(
            meta.get("supervisor_pid"), meta.get("supervisor_start")
        )
        if alive and not (folder / EXIT).exists():
            return WorkerStatus(Observed.RUNNING)
        result = read_json(folder / EXIT)  # read after the liveness check: no race
        if result is None:
            if meta is None and self._starting_elsewhere(folder):
                return WorkerStatus(Observed.RUNNING)  # a daemon died inside start()
            return WorkerStatus(Observed.MISSING, error=SUPERVISOR_GONE)
        code = result.get("exit_code")
        error = result.get("error")
        return WorkerStatus(
            Observed.EXITED,
            exit_code=code if isinstance(code, int) else None,
            error=error if isinstance(error, str) else None,
        )

    def list_workers(self) -> list[ListedWorker]:
        """Every worker folder with a ``meta.json``: running, or exited and not cleaned up."""
        if not self.state_dir.is_dir():
            return []
        found = []
        for folder in sorted(self.state_dir.iterdir()):
            meta = read_json(folder / META)
            if meta is None or not folder.is_dir():
                continue
            run, attempt, worker = meta.get("run"), meta.get("attempt"), meta.get("worker")
            if isinstance(run, str) and isinstance(attempt, int) and isinstance(worker, int):
                found.append(ListedWorker(folder.name, run, attempt, worker))
        return found

    def cleanup(self, handle: str) -> None:
        """Forget an exited (or lost) worker: end what is left of it, remove its folder."""
        folder = self._folder(handle)
        if not folder.exists():
            return
        state = self.status(handle).state
        if state is Observed.RUNNING:
            raise ExecutorError(f"worker {handle} is still running: stop it before cleanup")
        if state is Observed.MISSING:
            self.signal(handle, SIGKILL)  # a lost supervisor may leave the command's children
        cgroup = WorkerGroup.from_json((read_json(folder / META) or {}).get("cgroup"))
        if cgroup is not None:
            cgroup.remove()
        shutil.rmtree(folder, ignore_errors=True)

    def enter(self, handle: str, request: EnterRequest) -> ProcessSession:
        """Run a command inside the live worker (see :mod:`runner.executors.enter`)."""
        if self.status(handle).state is not Observed.RUNNING:
            raise ExecutorError("the worker is not running")
        return enter(self._folder(handle), request)

    def terminal(self, handle: str) -> TerminalSession:
        """Attach to the interactive worker's terminal (see :mod:`runner.executors.terminal`)."""
        if self.status(handle).state is not Observed.RUNNING:
            raise ExecutorError("the worker is not running")
        try:
            return TerminalSession(self._folder(handle), lambda: self._exit_code(handle))
        except OSError as e:
            raise ExecutorError(f"the worker has no terminal: {e.strerror}") from e

    def _exit_code(self, handle: str) -> int | None:
        status = self.status(handle)
        if status.state is Observed.RUNNING:
            return None
        return status.exit_code if status.exit_code is not None else 1

    def _folder(self, handle: str) -> Path:
        if not handle or "/" in handle or handle.startswith(".") or "\0" in handle:
            raise ExecutorError(f"not a process worker handle: {handle!r}")
        return self.state_dir / handle

    def _run_supervisor(self, handle: str, folder: Path) -> None:
        """Start the supervisor and wait for its word that the command runs: forked from
        the warm launcher, or, without one, an interpreter of its own."""
        try:
            code = self._launched(folder)
            if code is None:
                code = self._own_interpreter(folder)
        except TimeoutError:
            raise ExecutorError(
                f"could not start worker {handle}: its supervisor did not answer "
                f"within {self.start_timeout:g} s"
            ) from None
        if code != 0:
            why = _last_line(folder / SUPERVISOR_LOG) or f"its supervisor exited with {code}"
            raise ExecutorError(f"could not start worker {handle}: {why}")

    def _launched(self, folder: Path) -> int | None:
        """The exit status of ``folder``'s supervisor forked from the launcher; None when
        no launcher took the folder (none, or one gone before it read it). TimeoutError
        (LauncherTimeout) when it did not answer in time."""
        launcher = self._warm_launcher()
        if launcher is None:
            return None
        try:
            return launcher.start(folder, self.start_timeout)
        except LauncherGone:  # nothing was started: a supervisor of its own starts it
            self._launcher = None
            return None
        except LauncherTimeout:  # a TimeoutError; start() ended it, the next start makes one
            self._launcher = None
            raise

    def _own_interpreter(self, folder: Path) -> int:
        """The exit status of ``folder``'s supervisor in an interpreter of its own.
        TimeoutError when it did not answer in time (it is killed)."""
        # -S: no site. The supervisor needs the standard library and this package (on
        # PYTHONPATH) only; site's scan of site-packages and its .pth files would be on
        # every start's path (a sitecustomize on PYTHONPATH still runs: supervise.py).
        argv = [sys.executable, "-S", "-P", "-m", MODULE, str(folder)]
        with open(folder / SUPERVISOR_LOG, "ab") as log:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=_supervisor_env(),
                cwd="/",
                start_new_session=True,
            )
        try:
            return proc.wait(self.start_timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise TimeoutError from None

    def close(self) -> None:
        """The launcher ends (after any start in hand); workers go on. A later start
        makes another."""
        launcher, self._launcher = self._launcher, None
        if launcher is not None:
            launcher.close()
        if self._cgroups is not None and self._cgroups.cgroups is not None:
            self._cgroups.cgroups.forget()  # its folders, once no worker is left in them

    def warm_up(self) -> None:
        """Start the launcher now (the daemon does, as it starts): the first run too starts
        without an interpreter's start-up."""
        if self.warm:
            self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._warm_launcher()

    def _warm_launcher(self) -> Launcher | None:
        """The launcher, started when there is none (or it ended); None when not warm or it
        cannot start (each start then has an interpreter of its own)."""
        if not self.warm:
            return None
        if self._launcher is not None and self._launcher.alive():
            return self._launcher
        try:
            self._launcher = Launcher(self.state_dir, _supervisor_env())
        except OSError:
            self._launcher = None
        return self._launcher

    def _starting_elsewhere(self, folder: Path) -> bool:
        """Whether a supervisor of ``folder`` that has not written ``meta.json`` yet may
        still come: one in an interpreter of its own starting, or an earlier daemon's
        launcher with a start in hand. Only a daemon killed inside :meth:`start` leaves
        such a worker for another daemon to see. Read from ``/proc/*/cmdline``: the
        supervisor's own word is not written yet."""
        own = None if self._launcher is None else self._launcher.pid
        want, module = os.fsencode(folder), MODULE.encode()
        return any(
            (want in argv and module in argv)
            or (pid != own and launches_for(pid, argv, self.state_dir))
            for pid, argv in cmdlines()
        )


def _supervisor_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
    return env


def _signal_group(meta: dict[str, object], signum: int) -> int | None:
    """Signal the command's process group; its id, or None when it is gone."""
    pgid, start = meta.get("child_pgid"), meta.get("child_start")
    if not isinstance(pgid, int):
        return None
    seen = proc_stat(pgid)
    if seen is not None and seen[1] != start:
        return None  # the pid now belongs to another process: the worker's group is gone
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return None
    return pgid


def _job(launch: WorkerLaunch, sandbox: list[str], group: WorkerGroup | None = None) -> Job:
    switch = os.geteuid() == 0 and launch.uid != 0
    uid = launch.uid if switch else os.geteuid()
    home = _home(uid)
    env = dict(launch.env)
    env.setdefault("PATH", DEFAULT_PATH)
    env.setdefault("HOME", home or "/tmp")
    with contextlib.suppress(KeyError):
        env.setdefault("USER", pwd.getpwuid(uid).pw_name)
    env.setdefault("CUDA_VISIBLE_DEVICES", ",".join(launch.gpu_names))
    cwd = home if home and _owned_dir(home, uid) else "/tmp"
    drives = [(m.source, m.target, m.read_only) for m in launch.mounts]
    return Job(
        run=launch.run,
        attempt=launch.attempt,
        worker=launch.worker,
        argv=list(launch.argv),
        env=env,
        cwd=cwd,
        uid=launch.uid if switch else None,
        gid=launch.gid if switch else None,
        log_path=str(launch.log_path),
        sandbox=sandbox,
        drives=drives,
        log_limit=launch.log_limit,
        log_reserve=launch.log_reserve,
        interactive=launch.interactive,
        groups=login_groups(uid, launch.gid) if switch else [],
        folder=launch.working_dir or launch.submit_dir or "",
        folder_asked=launch.working_dir is not None,
        cgroup=None if group is None else group.to_json(),
        memory=launch.memory,
    )


def _read_text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _listed(folder: Path) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def _gpu_node(name: str) -> int | None:
    """``nvidia3`` -> 3: a GPU's device node (not ``nvidiactl``, ``nvidia-uvm``…)."""
    digits = name[6:]
    return int(digits) if name.startswith("nvidia") and digits.isdigit() else None


def _home(uid: int) -> str | None:
    try:
        return pwd.getpwuid(uid).pw_dir
    except KeyError:
        return None


def _owned_dir(path: str, uid: int) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    return os.path.isdir(path) and st.st_uid == uid


def _last_line(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


# -- drives through bubblewrap ------------------------------------------------------------


def _sandbox(mounts: tuple[Mount, ...]) -> list[str]:
    """bubblewrap's path, for the supervisor to place the drives with; what root may check.

    The drives' sources are the config's folders, checked here. Their targets are paths in
    the member's view: the supervisor resolves them as the member (runner/executors/sandbox.py).
    """
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise ExecutorError(NO_BWRAP)
    for mount in mounts:
        if not os.path.isabs(mount.target) or os.path.normpath(mount.target) == "/":
            raise ExecutorError(f"drive mount path {mount.target!r} must be an absolute folder")
        if not os.path.isdir(mount.source):
            raise ExecutorError(f"drive folder {mount.source} does not exist on this machine")
    return [bwrap]
