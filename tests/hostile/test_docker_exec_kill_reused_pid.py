"""Ending a Docker exec session must never signal a process that only reuses its pid.

``docker exec``'s inspect keeps the exec's host pid after it ended; the daemon ends
every session after its command ended, as root. The pid is made to be reused on purpose
(``/proc/sys/kernel/ns_last_pid``) by another user's process, which must live on.
"""

from __future__ import annotations

import os
import time
import uuid

import pytest

from runner.executors.docker.exec import docker_enter
from runner.sessions import EnterRequest
from tests.docker.helpers import IMAGE, SKIP_REASON, engine_client
from tests.support.pid_reuse import LAST_PID, with_pid

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not LAST_PID.exists(), reason="choosing the next pid needs root"
)


def test_a_finished_docker_exec_s_kill_spares_the_process_that_took_its_pid() -> None:
    client = engine_client()
    if client is None:
        pytest.skip(SKIP_REASON)
    container = client.containers.run(
        IMAGE, ["sleep", "60"], name=f"astra-rdx-{uuid.uuid4().hex[:6]}", detach=True
    )
    try:
        session = docker_enter(client.api, container.id, "nobody", EnterRequest(("true",)))
        while session.read()[1]:
            pass
        assert session.wait() == 0
        pid = client.api.exec_inspect(session._id)["Pid"]
        assert isinstance(pid, int) and pid > 0, "Docker keeps the ended exec's pid"
        victim = with_pid(pid)
        if victim is None:
            pytest.skip(f"other processes kept taking pid {pid}")
        try:
            session.kill()  # as the API ends every session after its command
            time.sleep(0.2)
            alive = victim.poll() is None
        finally:
            victim.kill()
            victim.wait()
        assert alive, "the session signalled a process that reused the exec's pid"
    finally:
        container.remove(force=True)


def test_a_running_docker_exec_is_still_ended_by_its_kill() -> None:
    client = engine_client()
    if client is None:
        pytest.skip(SKIP_REASON)
    container = client.containers.run(
        IMAGE, ["sleep", "60"], name=f"astra-rdx-{uuid.uuid4().hex[:6]}", detach=True
    )
    try:
        session = docker_enter(client.api, container.id, "nobody", EnterRequest(("sleep", "30")))
        start = time.monotonic()  # at once: Docker may not have made its process yet
        session.kill()
        assert session.wait() == 137
        assert time.monotonic() - start < 10
    finally:
        container.remove(force=True)
