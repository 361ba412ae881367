"""`astra doctor`'s checks against real temporary configs, folders, sockets and databases."""

from __future__ import annotations

import grp
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.config.load import Drive
from runner.daemon.doctor import (
    SYSTEM_CONFIG,
    Check,
    Setup,
    check_bubblewrap,
    check_config,
    check_docker,
    check_drive,
    check_metrics,
    check_notify_secrets,
    check_nvidia_runtime,
    check_nvml,
    check_socket,
    check_state_db,
    run_checks,
)
from runner.executors.base import ExecutorError
from runner.gpus import Inventory, simulated_inventory
from runner.store.db import Store

GOOD = '[machine]\nexecutor = "process"\ngpus = 2\n[admins]\nusers = ["root"]\n'
REAL = Inventory(gpus=simulated_inventory(2, "x").gpus, simulated=False, source="nvml",
                 driver_version="550.54")  # fmt: skip


def setup_in(folder: Path, config: str | None = GOOD, named: bool = False) -> Setup:
    home = folder / "home"
    home.mkdir(exist_ok=True)
    if config is not None:
        (folder / "config.toml").write_text(config)
    return Setup(folder / "config.toml", home, folder / "astraeus.sock", named)


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="doctor-"))  # short: a socket path has 108 bytes
    yield folder
    shutil.rmtree(folder)


def listening(path: Path, mode: int = 0o660, gid: int = -1) -> socket.socket:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()
    os.chmod(path, mode)
    if gid >= 0:
        os.chown(path, -1, gid)
    return server


def test_setup_from_the_environment_and_the_system_layout(tmp_path: Path) -> None:
    env = {"ASTRAEUS_HOME": str(tmp_path), "ASTRAEUS_CONFIG": "/etc/a.toml",
           "ASTRAEUS_SOCKET": "/run/a.sock"}  # fmt: skip
    assert Setup.from_env(env) == Setup(Path("/etc/a.toml"), tmp_path, Path("/run/a.sock"), True)
    plain = Setup.from_env({"ASTRAEUS_HOME": str(tmp_path)})
    assert plain == Setup(tmp_path / "config.toml", tmp_path, tmp_path / "astraeus.sock", False)
    assert Setup.from_env(env, system=True).config == SYSTEM_CONFIG


def test_config(tmp_path: Path) -> None:
    check, config = check_config(setup_in(tmp_path))
    assert check.status == "ok" and config is not None and config.machine.gpus == 2
    bad = setup_in(tmp_path, "[machine]\ngpus = -1\n")
    check, config = check_config(bad)
    assert (check.status, config) == ("fail", None)
    assert "machine.gpus" in check.message and "restart" in check.fix
    (tmp_path / "config.toml").write_text(GOOD)
    (tmp_path / "config.toml").chmod(0o666)
    check, _ = check_config(setup_in(tmp_path, None))
    assert check.status == "fail" and "may be changed by others" in check.message
    assert "chmod 644" in check.fix


def test_a_missing_config_is_a_warning_unless_it_was_named(tmp_path: Path) -> None:
    assert check_config(setup_in(tmp_path, None))[0].status == "warn"
    check, _ = check_config(setup_in(tmp_path, None, named=True))
    assert check.status == "fail" and check.fix.startswith("install one: cp config/astraeus.toml")


def test_state_db(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    assert check_state_db(home).status == "warn"
    Store(home / "state.db").close()
    home.chmod(0o700)
    assert check_state_db(home) == Check("state.db", "ok", f"{home / 'state.db'} reads: 0 run(s)")
    (home / "state.db").chmod(0o644)
    home.chmod(0o755)
    assert check_state_db(home).status == "warn"
    (home / "state.db").write_bytes(b"not a database" * 100)
    check = check_state_db(home)
    assert check.status == "fail" and "cannot be read" in check.message


def test_socket(sock_dir: Path) -> None:
    path = sock_dir / "s.sock"
    assert check_socket(path, None).status == "warn"
    path.write_text("")
    assert check_socket(path, None).status == "fail"
    path.unlink()
    server = listening(path)
    try:
        assert check_socket(path, None).status == "ok"
        assert "the daemon answers" in check_socket(path, None).message
        path.chmod(0o666)
        check = check_socket(path, None)
        assert check.status == "fail" and "mode 0666, not 0660" in check.message
        path.chmod(0o660)
        assert check_socket(path, "no-such-group-here").fix.startswith("groupadd")
        other = next(g for g in grp.getgrall() if g.gr_gid != path.stat().st_gid)
        check = check_socket(path, other.gr_name)
        assert check.status == "fail" and f"not {other.gr_name}" in check.message
    finally:
        server.close()
    assert check_socket(path, None).status == "warn"  # stale: nothing listens


def test_drives(tmp_path: Path) -> None:
    folder = tmp_path / "srv" / "ckpt"
    folder.mkdir(parents=True)
    assert check_drive(Drive("ckpt", folder)).status == "ok"
    folder.chmod(0o777)
    check = check_drive(Drive("ckpt", folder))
    assert check.status == "warn" and check.fix.startswith(f"chmod o-w {folder}")
    link = tmp_path / "srv" / "link"
    link.symlink_to(folder)
    check = check_drive(Drive("ckpt", link))
    assert check.status == "fail" and "is a symlink" in check.message
    assert check.fix == "configure the real path"
    folder.parent.chmod(0o777)
    assert check_drive(Drive("ckpt", folder)).fix == "chmod go-w it"
    check = check_drive(Drive("ckpt", tmp_path / "gone"))
    assert check.status == "fail" and "[drives.ckpt] path" in check.fix


def test_docker() -> None:
    def down() -> object:
        raise ExecutorError("Docker engine not reachable: connection refused")

    assert check_docker("process", down)[0].status == "ok"
    assert check_docker("docker", down)[0].status == "fail"
    check, engine = check_docker("auto", down)
    assert (check.status, engine) == ("warn", None) and "local processes" in check.message
    fake = object()
    assert check_docker("auto", lambda: fake) == (Check("docker", "ok", "the engine answers"), fake)


def test_nvidia_runtime_and_nvml() -> None:
    class Engine:
        nvidia = False

    assert check_nvidia_runtime(None, REAL).status == "ok"
    assert check_nvidia_runtime(Engine(), REAL).status == "fail"
    assert check_nvidia_runtime(Engine(), simulated_inventory(2, "sim")).status == "ok"
    Engine.nvidia = True
    assert check_nvidia_runtime(Engine(), REAL).status == "ok"
    assert check_nvml(None, lambda _: REAL)[0].status == "ok"
    assert check_nvml(4, lambda _: REAL)[0].status == "warn"
    no_nvml = simulated_inventory(2, "simulated: NVML not available")
    assert check_nvml(None, lambda _: no_nvml)[0].status == "warn"
    assert check_nvml(2, lambda _: no_nvml)[0].status == "ok"


def test_bubblewrap() -> None:
    assert check_bubblewrap(False, 3).status == "ok"
    assert check_bubblewrap(True, 1, lambda _: None).status == "fail"
    assert check_bubblewrap(True, 0, lambda _: None).status == "warn"
    check = check_bubblewrap(True, 1, lambda _: "/bin/false")
    assert check.status == "fail" and "cannot make a sandbox" in check.message
    if shutil.which("bwrap"):
        assert check_bubblewrap(True, 1).status == "ok"


def test_run_checks_names_every_check(tmp_path: Path) -> None:
    drive = tmp_path / "drive"
    drive.mkdir()
    setup = setup_in(tmp_path, GOOD + f'[drives.ckpt]\npath = "{drive}"\n')
    rows = run_checks(setup, read=lambda _: REAL)
    names = [r.name for r in rows]
    assert names == ["config", "docker", "nvidia runtime", "nvml", "bubblewrap", "drive ckpt",
                     "cgroups", "socket", "state.db"]  # fmt: skip
    assert all(r.fix or r.status == "ok" for r in rows if r.name != "state.db")


def run_doctor(setup: Setup) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ASTRAEUS_HOME": str(setup.home), "ASTRAEUS_CONFIG": str(setup.config),
           "ASTRAEUS_SOCKET": str(setup.socket)}  # fmt: skip
    return subprocess.run([sys.executable, "-m", "astraeus_tui.cli.main", "doctor"], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def test_astra_doctor_exits_non_zero_on_a_failure_and_says_what_to_fix(tmp_path: Path) -> None:
    fine = run_doctor(setup_in(tmp_path))
    assert fine.returncode == 0, fine.stdout + fine.stderr
    assert fine.stdout.splitlines()[0].startswith("ok    config")
    broken = run_doctor(setup_in(tmp_path, GOOD.replace("gpus = 2", "gpus = -1")))
    assert broken.returncode == 1
    assert broken.stdout.splitlines()[0].startswith("FAIL  config")
    assert "fix: fix that key, then restart the daemon" in broken.stdout
    assert broken.stderr.strip() == "1 problem(s) to fix"


def test_a_system_config_without_a_socket_group_is_a_warning(tmp_path: Path) -> None:
    rows = {r.name: r for r in run_checks(setup_in(tmp_path, named=True), read=lambda _: REAL)}
    assert rows["socket group"].status == "warn" and "socket_group" in rows["socket group"].fix


def test_metrics_says_whose_listener_answers() -> None:
    """Nothing on the port: a warning; another program on it (a local user who took the
    port first): a failure; the daemon's text answering: ok."""
    import socket
    import threading

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    assert check_metrics("127.0.0.1", port).status == "warn"
    for answer, status in ((b"HTTP/1.0 200 OK\r\n\r\nhello", "fail"),
                           (b"HTTP/1.0 200 OK\r\n\r\nastraeus_gpus 2\n", "ok")):  # fmt: skip
        with socket.socket() as squat:
            squat.bind(("127.0.0.1", 0))
            squat.listen()

            def serve(listener: socket.socket = squat, text: bytes = answer) -> None:
                conn, _ = listener.accept()
                with conn:
                    conn.recv(4096)
                    conn.sendall(text)

            thread = threading.Thread(target=serve)
            thread.start()
            assert check_metrics("127.0.0.1", squat.getsockname()[1]).status == status
            thread.join(5)


def test_a_secret_in_a_readable_config_is_a_warning(tmp_path: Path) -> None:
    inline = GOOD + '\n[[notify]]\nurl = "slack://T1/B2/C3token"\n'
    inline += '[[notify]]\nurl = "json://10.0.0.1/hook"\n'  # no secret in it
    setup = setup_in(tmp_path, inline)
    (tmp_path / "config.toml").chmod(0o644)
    [warning] = check_notify_secrets(setup.config)
    assert (
        warning.status == "warn" and "notify[0].url (slack://…) holds a secret" in warning.message
    )
    assert "url_file" in warning.fix and "install -m 600" in warning.fix
    assert "notify secrets" in {row.name for row in run_checks(setup, read=lambda _: REAL)}
    (tmp_path / "config.toml").chmod(0o640)  # not readable by every user
    assert check_notify_secrets(setup.config) == []
