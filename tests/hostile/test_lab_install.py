"""The lab-server install: the systemd unit, the documented layout, ASTRAEUS_CONFIG."""

from __future__ import annotations

import configparser
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from runner.daemon.doctor import SYSTEM_CONFIG, SYSTEM_HOME, SYSTEM_SOCKET
from tests.support.harness import wait_for

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "config" / "astraeus.service"
# Each would take from local workers what they need (GPUs, /tmp, homes, bubblewrap, JITs,
# their own cgroups).
BREAKS_WORKERS = ("PrivateDevices", "DeviceAllow", "DevicePolicy", "ProtectClock",
                  "PrivateTmp", "ProtectHome", "RestrictNamespaces", "MemoryDenyWriteExecute",
                  "NoNewPrivileges", "ProtectKernelModules", "PrivateUsers", "UMask",
                  "ProtectControlGroups")  # fmt: skip


def unit() -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser(strict=False, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys keep their case
    parser.read(UNIT)
    return parser


def test_the_unit_runs_astra_serve_as_root_in_the_system_layout() -> None:
    service = unit()["Service"]
    assert service["ExecStart"] == "/opt/astraeus/venv/bin/astra serve"
    assert service["User"] == "root"
    env = UNIT.read_text().split("[Service]")[1]
    for name, value in (("ASTRAEUS_HOME", SYSTEM_HOME), ("ASTRAEUS_CONFIG", SYSTEM_CONFIG),
                        ("ASTRAEUS_SOCKET", SYSTEM_SOCKET)):  # fmt: skip
        assert f"Environment={name}={value}\n" in env
    assert (service["RuntimeDirectory"], service["StateDirectory"]) == ("astraeus", "astraeus")
    assert service["StateDirectoryMode"] == "0700"
    assert service["Restart"] == "on-failure"
    assert service["KillMode"] == "process"  # running work outlives a restart
    assert service["ReadWritePaths"] == str(SYSTEM_CONFIG.parent)  # admin changes write it
    assert not set(BREAKS_WORKERS) & set(service)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_systemd_accepts_the_unit(tmp_path: Path) -> None:
    copy = tmp_path / "astraeus.service"  # the program is not installed here
    copy.write_text(UNIT.read_text().replace("/opt/astraeus/venv/bin/astra serve", "/bin/true"))
    done = subprocess.run(["systemd-analyze", "verify", str(copy)], capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr


def test_the_docs_describe_the_same_layout() -> None:
    text = (REPO / "docs" / "lab-server.md").read_text()
    for path in (SYSTEM_CONFIG, SYSTEM_HOME, SYSTEM_SOCKET, "/opt/astraeus/venv"):
        assert str(path) in text
    assert "astra doctor --system" in text and "socket_group" in text


def test_the_daemon_reads_the_config_that_astraeus_config_names(tmp_path: Path) -> None:
    etc, home = tmp_path / "etc", tmp_path / "home"
    etc.mkdir()
    (etc / "config.toml").write_text('[machine]\nexecutor = "process"\ngpus = 3\n')
    sock_dir = Path(tempfile.mkdtemp(prefix="astra-sock-"))
    env = {**os.environ, "ASTRAEUS_HOME": str(home), "ASTRAEUS_CONFIG": str(etc / "config.toml"),
           "ASTRAEUS_SOCKET": str(sock_dir / "s.sock")}  # fmt: skip
    astra = [sys.executable, "-m", "astraeus_tui.cli.main"]
    daemon = subprocess.Popen([*astra, "serve"], env=env, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: (sock_dir / "s.sock").exists() or daemon.poll() is not None, 20)
        gpus = subprocess.run([*astra, "gpus", "--json"], env=env, capture_output=True,
                              text=True, timeout=30)  # fmt: skip
        assert len(json.loads(gpus.stdout)["gpus"]) == 3
        assert not (home / "config.toml").exists()
    finally:
        daemon.terminate()
        daemon.wait(10)
        shutil.rmtree(sock_dir, ignore_errors=True)
