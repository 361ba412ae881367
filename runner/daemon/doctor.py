"""``astra doctor``: is this machine set up to run Astraeus? Each check says what to fix.

Every check returns :class:`Check` rows, ``(name, status, message, fix)`` with status
``ok``, ``warn`` (works, but not as it should) or ``fail`` (something will not work).
They read files, sockets and engines but change nothing. :func:`run_checks` runs them
all for the set-up the environment names (``ASTRAEUS_CONFIG``, ``ASTRAEUS_HOME``,
``ASTRAEUS_SOCKET``), or for the lab-server layout with ``system=True``.
"""

from __future__ import annotations

import grp
import os
import shutil
import socket
import stat
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple

from runner.config.files import default_home
from runner.config.load import Config, ConfigError, Drive, load_config
from runner.engine.starts import drive_source
from runner.executors.base import ExecutorError
from runner.gpus import Inventory, read_inventory
from runner.store.db import StoreError, read_only_run_count

Status = Literal["ok", "warn", "fail"]
CONFIG_ENV, SOCKET_ENV = "ASTRAEUS_CONFIG", "ASTRAEUS_SOCKET"
SYSTEM_CONFIG = Path("/etc/astraeus/config.toml")
SYSTEM_HOME = Path("/var/lib/astraeus")
SYSTEM_SOCKET = Path("/run/astraeus/astraeus.sock")
RESTART = "restart the daemon (systemctl restart astraeus, or astra down && astra serve)"


class Check(NamedTuple):
    name: str
    status: Status
    message: str
    fix: str = ""


@dataclass(frozen=True)
class Setup:
    """Where the daemon keeps its config, state and socket."""

    config: Path
    home: Path
    socket: Path
    config_named: bool  # the config's path was given (ASTRAEUS_CONFIG or system mode)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, system: bool = False) -> Setup:
        env = os.environ if env is None else env
        if system:
            return cls(SYSTEM_CONFIG, SYSTEM_HOME, SYSTEM_SOCKET, True)
        home = default_home(env)
        config = env.get(CONFIG_ENV, "")
        sock = env.get(SOCKET_ENV, "")
        return cls(
            Path(config) if config else home / "config.toml",
            home,
            Path(sock) if sock else home / "astraeus.sock",
            bool(config),
        )


def _mode(st: os.stat_result) -> str:
    return f"{stat.S_IMODE(st.st_mode):04o}"


# ------------------------------------------------------------------ config and state


def check_config(setup: Setup) -> tuple[Check, Config | None]:
    path = setup.config
    if not path.exists():
        if setup.config_named:
            fix = f"install one: cp config/astraeus.toml {path} (then edit it)"
            return Check("config", "fail", f"{path} does not exist", fix), None
        note = "the daemon writes the shipped default there when it first starts"
        return Check("config", "warn", f"{path} does not exist yet: {note}", ""), None
    try:
        config = load_config(path)
    except ConfigError as e:
        return Check("config", "fail", str(e), f"fix that key, then {RESTART}"), None
    st = path.stat()
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) or st.st_uid not in (0, os.geteuid()):
        why = f"{path} (mode {_mode(st)}, uid {st.st_uid}) may be changed by others"
        fix = f"chown root {path} && chmod 644 {path}: whoever writes it makes themselves admin"
        return Check("config", "fail", why, fix), config
    summary = f"{len(config.workspaces)} workspace(s), {len(config.drives)} drive(s)"
    return Check("config", "ok", f"{path} parses: {summary}"), config


def check_state_db(home: Path) -> Check:
    db = home / "state.db"
    if not db.exists():
        return Check("state.db", "warn", f"{db} does not exist yet (the first start makes it)")
    try:
        runs = read_only_run_count(db)
    except StoreError as e:
        fix = "restore it from a backup or move it away; the daemon refuses a foreign state.db"
        return Check("state.db", "fail", f"{db} cannot be read: {e}", fix)
    st, home_st = db.stat(), home.stat()
    if st.st_mode & stat.S_IROTH and home_st.st_mode & stat.S_IXOTH:
        why = f"{db} is readable by everyone: run specs (their env values) are private"
        return Check("state.db", "warn", why, f"chmod 700 {home}")
    return Check("state.db", "ok", f"{db} reads: {runs} run(s)")


def check_socket(path: Path, group: str | None) -> Check:
    if not path.exists():
        why = f"no socket at {path}: the daemon is not running"
        return Check("socket", "warn", why, "start it: systemctl start astraeus, or astra serve")
    st = path.stat()
    if not stat.S_ISSOCK(st.st_mode):
        return Check("socket", "fail", f"{path} is not a socket", f"remove it, then {RESTART}")
    if stat.S_IMODE(st.st_mode) != 0o660:
        why = f"{path} has mode {_mode(st)}, not 0660: who may knock is not what the config says"
        return Check("socket", "fail", why, RESTART)
    if group is not None:
        problem = _socket_group_problem(path, st, group)
        if problem is not None:
            return problem
    where = f"{path}: mode 0660, group {_group_name(st.st_gid)}"
    refused = _knock(path)
    if refused is not None:
        why = f"{where}, but connecting fails ({refused}): a stale socket from a dead daemon?"
        return Check("socket", "warn", why, "start the daemon: systemctl start astraeus")
    return Check("socket", "ok", f"{where}; the daemon answers")


def _socket_group_problem(path: Path, st: os.stat_result, group: str) -> Check | None:
    try:
        gid = grp.getgrnam(group).gr_gid
    except KeyError:
        return Check("socket", "fail", f"[api] socket_group {group!r} is not a group here",
                     f"groupadd {group}, add the members to it, then {RESTART}")  # fmt: skip
    if st.st_gid != gid:
        why = f"{path} belongs to group {_group_name(st.st_gid)}, not {group}"
        return Check("socket", "fail", why, RESTART)
    if not path.parent.stat().st_mode & (stat.S_IXGRP | stat.S_IXOTH):
        why = f"{path.parent} cannot be entered by group {group}: members cannot reach the socket"
        return Check("socket", "fail", why, f"chmod 755 {path.parent}")
    return None


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def _knock(path: Path) -> str | None:
    """Why connecting to the socket fails, or None when something listens."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2)
    try:
        probe.connect(str(path))
    except OSError as e:
        return e.strerror or str(e)
    finally:
        probe.close()
    return None


# ------------------------------------------------------------------ drives


def check_drive(drive: Drive) -> Check:
    name = f"drive {drive.name}"
    try:
        path = drive_source(drive.name, str(drive.path))
    except ExecutorError as e:
        hint = str(e).rpartition("(")[2].rstrip(")") if str(e).endswith(")") else ""
        fix = hint or f"make {drive.path} a real directory, as [drives.{drive.name}] path says"
        return Check(name, "fail", f"{e}: runs that mount it cannot start", fix)
    st = os.stat(path)
    owner = f"mode {_mode(st)}, owner {st.st_uid}:{_group_name(st.st_gid)}"
    if st.st_mode & stat.S_IWOTH:
        why = f"{path} ({owner}) is writable by every user, not only the workspace's"
        fix = f"chmod o-w {path}; give the workspace's members a group with write access"
        return Check(name, "warn", why, fix)
    return Check(name, "ok", f"{path}: a directory, {owner}")


def check_drives(config: Config) -> list[Check]:
    return [check_drive(d) for _name, d in sorted(config.drives.items())]


# ------------------------------------------------------------------ engines and GPUs


Connect = Callable[[], Any]


def _connect_docker() -> Any:
    from runner.executors.docker.executor import DockerExecutor  # lazy: the docker SDK

    return DockerExecutor.connect(timeout=3)


def check_docker(executor: str, connect: Connect = _connect_docker) -> tuple[Check, Any]:
    """(the check, a connected DockerExecutor or None)."""
    if executor == "process":
        return Check("docker", "ok", 'not used: executor = "process" in the config'), None
    try:
        docker = connect()
    except (ExecutorError, ImportError) as e:
        fix = "start Docker (systemctl start docker) and run the daemon as root"
        if executor == "docker":
            return Check("docker", "fail", f'executor = "docker" but: {e}', fix), None
        note = "runs will be local processes, without containers"
        return Check("docker", "warn", f"{e}: {note}", fix), None
    return Check("docker", "ok", "the engine answers"), docker


def check_nvidia_runtime(docker: Any, inventory: Inventory) -> Check:
    if docker is None:
        return Check("nvidia runtime", "ok", "not needed: no Docker engine in use")
    if docker.nvidia:  # a connected DockerExecutor: it read the engine's runtimes
        return Check("nvidia runtime", "ok", "the engine has the nvidia runtime")
    fix = "install nvidia-container-toolkit; nvidia-ctk runtime configure --runtime=docker;"
    fix += " systemctl restart docker"
    if inventory.simulated:
        return Check("nvidia runtime", "ok", "none in the engine; none needed: GPUs are simulated")
    why = f"the engine has no nvidia runtime: containers cannot use the {inventory.count} GPU(s)"
    return Check("nvidia runtime", "fail", why, fix)


def _mig_profile(name: str) -> str:
    """``MIG 3g.40gb`` from NVML's name of a MIG instance (``NVIDIA H100 … MIG 3g.40gb``)."""
    at = name.rfind("MIG ")
    return name[at:] if at >= 0 else "MIG"


def check_nvml(
    configured: int | None, read: Callable[[int | None], Inventory] = read_inventory
) -> tuple[Check, Inventory]:
    inventory = read(None)
    if not inventory.simulated:
        driver = inventory.driver_version or "unknown"
        message = f"NVML reads {inventory.count} GPU(s), driver {driver}"
        migs = [f"{g.mig} {_mig_profile(g.name)}" for g in inventory.gpus if g.mig is not None]
        if migs:
            message += "; MIG instances, each a GPU of its own: " + ", ".join(migs)
        if configured is not None:
            message += f"; but the config simulates {configured} (gpus = {configured})"
            return Check("nvml", "warn", message, 'set gpus = "auto" in [machine]'), inventory
        return Check("nvml", "ok", message), inventory
    if configured is not None:
        message = f"GPUs simulated by the config (gpus = {configured}); {inventory.source}"
        return Check("nvml", "ok", message), inventory
    fix = "install the NVIDIA driver and nvidia-ml-py, or set gpus = N in [machine] to simulate"
    return Check("nvml", "warn", f"NVML not readable: {inventory.source}", fix), inventory


def check_bubblewrap(
    uses_processes: bool, drives: int, which: Callable[[str], str | None] = shutil.which
) -> Check:
    if not uses_processes:
        return Check("bubblewrap", "ok", "not needed: runs are containers")
    bwrap = which("bwrap")
    if bwrap is None:
        status: Status = "fail" if drives else "warn"
        why = "bwrap is not installed: local runs cannot mount drives"
        return Check(
            "bubblewrap", status, why, "apt install bubblewrap (or dnf install bubblewrap)"
        )
    try:
        done = subprocess.run([bwrap, "--dev-bind", "/", "/", "true"], capture_output=True,
                              text=True, timeout=10)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as e:
        return Check("bubblewrap", "fail", f"{bwrap} does not run: {e}", "reinstall bubblewrap")
    if done.returncode != 0:
        why = f"{bwrap} cannot make a sandbox: {done.stderr.strip()[:200]}"
        return Check("bubblewrap", "fail", why, "allow user namespaces, or run the daemon as root")
    return Check("bubblewrap", "ok", f"{bwrap} makes sandboxes")


def check_cgroups(uses_processes: bool, root: Path | None = None) -> Check:
    """Whether local runs are held to their memory and CPU asks (runner/executors/cgroups.py)."""
    if not uses_processes:
        return Check("cgroups", "ok", "not needed: the container engine holds each run")
    from runner.executors.cgroups import ROOT, probe

    status, message = probe(root or ROOT)
    fix = "run the daemon as root, on a machine whose cgroupfs it may write"
    return Check("cgroups", "ok" if status == "ok" else "warn", message,
                 fix if status != "ok" else "")  # fmt: skip


# ------------------------------------------------------------------ all of them


def run_checks(
    setup: Setup,
    *,
    connect: Connect = _connect_docker,
    read: Callable[[int | None], Inventory] = read_inventory,
) -> list[Check]:
    config_check, config = check_config(setup)
    rows = [config_check]
    executor = config.machine.executor if config is not None else "auto"
    docker_check, docker = check_docker(executor, connect)
    nvml_check, inventory = check_nvml(config.machine.gpus if config else None, read)
    rows += [docker_check, check_nvidia_runtime(docker, inventory), nvml_check]
    drives = check_drives(config) if config is not None else []
    rows += [check_bubblewrap(docker is None, len(drives)), *drives]
    rows.append(check_cgroups(docker is None))
    rows.append(check_socket(setup.socket, config.socket_group if config else None))
    if setup.config_named and config is not None and config.socket_group is None:
        why = "no [api] socket_group: the socket is root's alone, members cannot use it"
        rows.append(Check("socket group", "warn", why, 'set socket_group = "astraeus" in [api]'))
    if config is not None and config.metrics.address is not None:
        rows.append(check_metrics(*config.metrics.address))
    rows.append(check_state_db(setup.home))
    if config is not None:
        rows += check_notify_secrets(setup.config)
    return rows


def check_notify_secrets(path: Path) -> list[Check]:
    """A ``[[notify]] url`` that holds a secret (a token, a password) in a config that
    every user may read: a warning, with where it belongs instead."""
    import tomllib

    from runner.notify.targets import holds_secret, label

    try:
        st = path.stat()
        entries = tomllib.loads(path.read_text()).get("notify", [])
    except (OSError, ValueError):
        return []
    if not st.st_mode & stat.S_IROTH or not isinstance(entries, list):
        return []
    rows = []
    for i, entry in enumerate(entries):
        url = entry.get("url") if isinstance(entry, dict) else None
        if isinstance(url, str) and holds_secret(url):
            why = (f"{path} (mode {_mode(st)}) is readable by every user, and notify[{i}].url"
                   f" ({label(url)}) holds a secret")  # fmt: skip
            fix = (f"put the URL in a file only root reads and name it: install -m 600 /dev/null"
                   f" /etc/astraeus/notify.d/{i}; url_file = \"/etc/astraeus/notify.d/{i}\""
                   " (or url_env), then " + RESTART)  # fmt: skip
            rows.append(Check("notify secrets", "warn", why, fix))
    return rows


def check_metrics(host: str, port: int) -> Check:
    """``[api] metrics_address``: the daemon's listener answers there, not another
    program's (a local user who took the port first keeps only the scrapes away)."""
    where = f"{host}:{port}"
    try:
        with socket.create_connection((host, port), timeout=2) as probe:
            probe.sendall(f"GET /metrics HTTP/1.0\r\nHost: {where}\r\n\r\n".encode())
            head = probe.recv(4096)
    except OSError as e:
        why = (
            f"nothing answers on {where} ({e.strerror or e}): the daemon is down or cannot bind it"
        )
        fix = "GET /v1/status's metrics says why; a port below 1024 keeps a squatter out"
        return Check("metrics", "warn", why, fix)
    if b"astraeus_" not in head and b"text/plain; version=0.0.4" not in head:
        why = f"another program listens on {where}: the daemon cannot serve /metrics there"
        return Check("metrics", "fail", why, "free the port, or choose one below 1024")
    return Check("metrics", "ok", f"the daemon serves /metrics on {where}")
