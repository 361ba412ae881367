"""The Docker executor against a real engine and the busybox test image.

Run ``tests/docker/setup.sh`` as root first; without an engine this module is
skipped. Programs are busybox shell scripts: ``trap`` stands in for a Python
SIGTERM handler (a trap runs between two ``sleep`` calls).
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

from runner.executors.base import Capabilities, ExecutorError, ListedWorker, Mount, Observed
from runner.executors.docker.executor import DockerExecutor
from tests.docker.helpers import (
    SKIP_REASON,
    LaunchFactory,
    engine_client,
    read_log,
    wait_exited,
    wait_until,
)

_probe = engine_client()
if _probe is None:
    pytest.skip(SKIP_REASON, allow_module_level=True)
_probe.close()

# the trap is set before "started" is said: a SIGTERM to the container's first process
# before it is set would be ignored
TERM_TRAP = "trap 'echo term; exit 0' TERM; echo started; while true; do sleep 0.2; done"
TICKER = (
    "trap 'echo term; exit 0' TERM; echo started; i=0; "
    "while true; do i=$((i+1)); echo tick $i; sleep 0.1; done"
)


def inspect(client: Any, handle: str) -> dict[str, Any]:
    attrs: dict[str, Any] = client.api.inspect_container(handle)
    return attrs


def started(log_path: Path) -> bool:
    """Wait until the script has printed ``started`` (its trap is then set)."""
    return wait_until(lambda: "started" in read_log(log_path))


# ---------------------------------------------------------------- capabilities


def test_capabilities_follow_the_engines_runtimes(docker_client: Any) -> None:
    """It copies the logs itself and runs commands in a worker (exec); GPUs are
    renumbered only with the NVIDIA runtime; no terminals (interactive runs)."""
    nvidia = "nvidia" in (docker_client.info().get("Runtimes") or {})
    detected = DockerExecutor(docker_client)
    assert detected.capabilities == Capabilities(remaps_gpus=nvidia, copies_logs=True, enters=True)
    assert detected.reachable() is True
    forced = DockerExecutor(docker_client, nvidia=True)
    assert forced.capabilities == Capabilities(remaps_gpus=True, copies_logs=True, enters=True)


# ---------------------------------------------------------------- exit codes, env, logs


@pytest.mark.parametrize("code", [0, 3])
def test_exit_code_is_reported(
    executor: DockerExecutor, make_launch: LaunchFactory, code: int
) -> None:
    handle = executor.start(make_launch(f"exit {code}"))
    status = wait_exited(executor, handle)
    assert status.state is Observed.EXITED
    assert status.exit_code == code
    assert status.error is None


def test_image_default_command_when_argv_is_empty(
    executor: DockerExecutor, make_launch: LaunchFactory
) -> None:
    status = wait_exited(executor, executor.start(make_launch(None)))  # /bin/sh, no stdin
    assert (status.state, status.exit_code) == (Observed.EXITED, 0)


def test_env_and_gpu_variables_without_nvidia_runtime(
    executor: DockerExecutor, make_launch: LaunchFactory
) -> None:
    launch = make_launch("env", gpus=(1, 3), env={"ASTRAEUS_RUN_NAME": "demo", "X": "a b"})
    wait_exited(executor, executor.start(launch))
    lines = read_log(launch.log_path).splitlines()
    assert "ASTRAEUS_RUN_NAME=demo" in lines
    assert "X=a b" in lines
    assert "NVIDIA_VISIBLE_DEVICES=1,3" in lines
    assert "CUDA_VISIBLE_DEVICES=1,3" in lines


def test_stdout_and_stderr_land_in_the_log_file(
    executor: DockerExecutor, make_launch: LaunchFactory, tmp_path: Path
) -> None:
    log_path = tmp_path / "deep" / "er" / "worker.log"
    launch = make_launch("echo out-line; echo err-line >&2; id -u", log_path=log_path)
    wait_exited(executor, executor.start(launch))
    lines = read_log(log_path).splitlines()
    assert {"out-line", "err-line", "65534"} <= set(lines)


def test_missing_image_is_a_prompt_clear_error(
    executor: DockerExecutor, make_launch: LaunchFactory
) -> None:
    launch = make_launch("true", image="astraeus-test:not-on-this-machine")
    began = time.monotonic()
    with pytest.raises(ExecutorError) as caught:
        executor.start(launch)
    assert time.monotonic() - began < 5
    message = str(caught.value)
    assert "image astraeus-test:not-on-this-machine is not on this machine" in message
    assert "docker pull" in message
    assert executor.status(launch.key).state is Observed.MISSING


# ---------------------------------------------------------------- drives


def test_drive_write_has_the_callers_uid_and_read_only_refuses(
    executor: DockerExecutor, make_launch: LaunchFactory, tmp_path: Path
) -> None:
    rw, ro = tmp_path / "rw", tmp_path / "ro"
    rw.mkdir()
    ro.mkdir()
    rw.chmod(0o777)
    ro.chmod(0o777)
    (ro / "input.txt").write_text("from the host\n")
    script = (
        "cat /data/in/input.txt > /data/out/copy.txt && "
        "echo written > /data/out/new.txt && "
        "if echo nope > /data/in/sneaky.txt; then exit 9; fi; echo refused"
    )
    launch = make_launch(
        script,
        uid=1000,
        gid=1000,
        mounts=(Mount(str(rw), "/data/out"), Mount(str(ro), "/data/in", read_only=True)),
    )
    status = wait_exited(executor, executor.start(launch))
    assert (status.state, status.exit_code) == (Observed.EXITED, 0), read_log(launch.log_path)
    assert (rw / "copy.txt").read_text() == "from the host\n"
    stat = (rw / "new.txt").stat()
    assert (stat.st_uid, stat.st_gid) == (1000, 1000)
    assert not (ro / "sneaky.txt").exists()
    assert "Read-only file system" in read_log(launch.log_path)


# ---------------------------------------------------------------- labels, adoption, signals


def test_labels_listing_and_adoption_by_a_restarted_daemon(
    executor: DockerExecutor, make_launch: LaunchFactory, docker_client: Any, run_name: str
) -> None:
    launch = make_launch(TERM_TRAP, attempt=2, worker=1)
    handle = executor.start(launch)
    assert handle == launch.key == f"astraeus-{run_name}-2-1"
    labels = inspect(docker_client, handle)["Config"]["Labels"]
    assert labels["io.astraeus.run"] == run_name
    assert labels["io.astraeus.attempt"] == "2"
    assert labels["io.astraeus.worker"] == "1"
    assert labels["io.astraeus.schema"] == "1"
    assert started(launch.log_path)
    executor.stop_following()  # the first daemon goes away; the container stays

    restarted = DockerExecutor(engine_client(), nvidia=False)
    try:
        assert ListedWorker(handle, run_name, 2, 1) in restarted.list_workers()
        assert restarted.status(handle).state is Observed.RUNNING
        assert restarted.follow_logs(handle)
        restarted.signal(handle, signal.SIGTERM)
        status = wait_exited(restarted, handle)
    finally:
        restarted.close()
    assert (status.state, status.exit_code) == (Observed.EXITED, 0)
    assert read_log(launch.log_path).splitlines() == ["started", "term"]


def test_a_container_log_is_cut_to_log_limit_keeping_the_newest_lines(
    executor: DockerExecutor, make_launch: LaunchFactory
) -> None:
    launch = make_launch("seq 1 400000", log_limit=1 << 20)  # about 2.6 MB of output
    handle = executor.start(launch)
    assert wait_exited(executor, handle, timeout=60).exit_code == 0
    assert executor.drain_logs(handle, 30)
    content = launch.log_path.read_bytes()
    assert len(content) <= 1 << 20
    first, _, rest = content.partition(b"\n")
    assert first.startswith(b"[astraeus: ") and first.endswith(b"log_limit is 1MiB]"), first
    numbers = [int(n) for n in rest.splitlines()]
    assert numbers == list(range(numbers[0], 400001))


def test_resumed_logs_neither_lose_nor_repeat_lines(
    executor: DockerExecutor, make_launch: LaunchFactory
) -> None:
    launch = make_launch(TICKER)
    handle = executor.start(launch)
    assert wait_until(lambda: "tick 3" in read_log(launch.log_path))
    executor.stop_following()
    time.sleep(0.5)  # ticks that nobody follows
    second = DockerExecutor(engine_client(), nvidia=False)
    try:
        assert second.follow_logs(handle, launch.log_path)
        assert second.follow_logs(handle, launch.log_path)  # a second call is harmless
        time.sleep(0.3)
        second.signal(handle, signal.SIGTERM)
        assert wait_exited(second, handle).exit_code == 0
    finally:
        second.close()
    lines = read_log(launch.log_path).splitlines()
    assert lines[0] == "started" and lines[-1] == "term"
    ticks = [int(line.split()[1]) for line in lines[1:-1]]
    assert ticks == list(range(1, len(ticks) + 1)), lines
    assert len(ticks) >= 6


def test_sigterm_reaches_the_program_which_exits_0(
    executor: DockerExecutor, make_launch: LaunchFactory
) -> None:
    launch = make_launch(TERM_TRAP)
    handle = executor.start(launch)
    assert started(launch.log_path)
    executor.signal(handle, signal.SIGTERM)
    status = wait_exited(executor, handle, timeout=5)
    assert (status.state, status.exit_code) == (Observed.EXITED, 0)
    assert read_log(launch.log_path).splitlines() == ["started", "term"]
    executor.signal(handle, signal.SIGTERM)  # an exited worker is fine
    executor.signal("astraeus-test-no-such-container", signal.SIGKILL)  # so is a gone one


def test_sigkill_ends_a_program_that_ignores_sigterm(
    executor: DockerExecutor, make_launch: LaunchFactory
) -> None:
    launch = make_launch("trap '' TERM; echo started; while true; do sleep 0.2; done")
    handle = executor.start(launch)
    assert started(launch.log_path)
    executor.signal(handle, signal.SIGTERM)
    time.sleep(1.0)
    assert executor.status(handle).state is Observed.RUNNING
    executor.signal(handle, signal.SIGKILL)
    status = wait_exited(executor, handle, timeout=5)
    assert (status.state, status.exit_code) == (Observed.EXITED, 137)


def test_out_of_memory_is_reported(executor: DockerExecutor, make_launch: LaunchFactory) -> None:
    # the shell is the only process that grows, so it is the one the kernel kills
    script = 'x=0123456789abcdef; while true; do x="$x$x"; done'
    launch = make_launch(script, memory=16 << 20)
    status = wait_exited(executor, executor.start(launch), timeout=30)
    assert (status.state, status.exit_code) == (Observed.EXITED, 137)
    assert status.error == "out of memory", read_log(launch.log_path)


# ---------------------------------------------------------------- names, cleanup


def test_a_live_container_with_the_same_key_is_refused_an_exited_one_replaced(
    executor: DockerExecutor, make_launch: LaunchFactory
) -> None:
    launch = make_launch(TERM_TRAP)
    handle = executor.start(launch)
    with pytest.raises(ExecutorError, match="already running"):
        executor.start(launch)
    executor.signal(handle, signal.SIGKILL)
    wait_exited(executor, handle)
    assert executor.start(make_launch("exit 5")) == handle
    assert wait_exited(executor, handle).exit_code == 5


def test_cleanup_removes_the_container_and_tolerates_a_gone_one(
    executor: DockerExecutor, make_launch: LaunchFactory
) -> None:
    handle = executor.start(make_launch("echo bye"))
    wait_exited(executor, handle)
    executor.cleanup(handle)
    assert executor.status(handle).state is Observed.MISSING
    assert handle not in {w.handle for w in executor.list_workers()}
    executor.cleanup(handle)


def test_cleanup_of_a_running_worker_is_an_error(
    executor: DockerExecutor, make_launch: LaunchFactory
) -> None:
    launch = make_launch(TERM_TRAP)
    handle = executor.start(launch)
    assert started(launch.log_path)
    with pytest.raises(ExecutorError, match=handle):
        executor.cleanup(handle)
    assert executor.status(handle).state is Observed.RUNNING


def test_unknown_handle_is_missing(executor: DockerExecutor) -> None:
    assert executor.status("astraeus-test-never-existed").state is Observed.MISSING
    assert not executor.follow_logs("astraeus-test-never-existed")


# ---------------------------------------------------------------- security and limits


def test_host_config_is_locked_down_and_limits_are_set(
    executor: DockerExecutor, make_launch: LaunchFactory, docker_client: Any
) -> None:
    launch = make_launch(TERM_TRAP, cpu_milli=500, memory=64 << 20, uid=1234, gid=4321)
    handle = executor.start(launch)
    attrs = inspect(docker_client, handle)
    host = attrs["HostConfig"]
    assert host["Privileged"] is False
    assert "no-new-privileges" in host["SecurityOpt"]
    assert host["CapDrop"] == ["ALL"]
    assert not host.get("CapAdd")
    assert host["NetworkMode"] != "host"
    assert host["PidMode"] == ""
    assert host["IpcMode"] != "host"
    assert host["UsernsMode"] == ""
    assert not host.get("Devices")
    assert not host.get("Binds")
    assert host["NanoCpus"] == 500_000_000
    assert host["Memory"] == 64 << 20
    assert host["AutoRemove"] is False
    assert attrs["Config"]["User"] == "1234:4321"
    assert started(launch.log_path)
    executor.signal(handle, signal.SIGKILL)


def test_connect_answers_or_fails_promptly(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    DockerExecutor.connect().close()
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    began = time.monotonic()
    with pytest.raises(ExecutorError, match="Docker engine not reachable"):
        DockerExecutor.connect(timeout=2)
    assert time.monotonic() - began < 5
