"""The Docker executor's pure parts, without an engine (never skipped).

``container_kwargs`` is everything the executor asks Docker for, so the
security stance and the GPU hand-over (NVIDIA device requests) are checked
here on any machine; a fake client checks that ``start`` passes them on.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from unittest import mock

import docker
import pytest

from runner.executors.base import (
    ExecutorError,
    ListedWorker,
    Mount,
    Observed,
    WorkerLaunch,
    WorkerStatus,
)
from runner.executors.docker.containers import (
    container_kwargs,
    listed_worker,
    log_bounds,
    status_from_state,
)
from runner.executors.docker.errors import describe
from runner.executors.docker.executor import DockerExecutor
from runner.executors.docker.logs import split_timestamp


def launch(**fields: Any) -> WorkerLaunch:
    values: dict[str, Any] = {
        "run": "ft",
        "attempt": 2,
        "worker": 1,
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "argv": ("python", "train.py", "--lr", "3e-4"),
        "uid": 1000,
        "gid": 1001,
    }
    values.update(fields)
    return WorkerLaunch(**values)


# ---------------------------------------------------------------- container_kwargs


def test_identity_labels_and_command() -> None:
    uid = "0192f0c1a2b3c4d5e6f708192a3b4c5d"
    kw = container_kwargs(launch(instance="0a1b2c3d", run_uid=uid, log_limit=8 << 20), nvidia=False)
    assert kw["image"] == "nvcr.io/nvidia/pytorch:24.05-py3"
    assert kw["name"] == f"astraeus-0a1b2c3d-{uid}-2-1"  # by the run's id: never reused
    assert kw["labels"] == {
        "io.astraeus.run": "ft",
        "io.astraeus.run-uid": uid,
        "io.astraeus.attempt": "2",
        "io.astraeus.worker": "1",
        "io.astraeus.schema": "1",
        "io.astraeus.log": "/dev/null",
        "io.astraeus.instance": "0a1b2c3d",
        "io.astraeus.log-limit": "8388608",
        "io.astraeus.log-reserve": "0",
    }
    assert log_bounds(kw["labels"]) == (8 << 20, 0)
    assert kw["entrypoint"] == ["python"]
    assert kw["command"] == ["train.py", "--lr", "3e-4"]
    # the engine's own copy of the output is bounded by the same limit
    assert kw["log_config"] == {
        "Type": "json-file",
        "Config": {"max-size": "131072k", "max-file": "2"},
    }
    assert kw["detach"] is True
    assert kw["auto_remove"] is False


def test_empty_argv_keeps_the_image_default() -> None:
    kw = container_kwargs(launch(argv=()), nvidia=False)
    assert "entrypoint" not in kw
    assert "command" not in kw


def test_no_image_is_an_error() -> None:
    with pytest.raises(ExecutorError, match="no image"):
        container_kwargs(launch(image=None), nvidia=False)


def test_security_options() -> None:
    kw = container_kwargs(launch(uid=0, gid=0), nvidia=True)
    assert kw["user"] == "0:0"
    assert kw["privileged"] is False
    assert kw["security_opt"] == ["no-new-privileges"]
    assert kw["cap_drop"] == ["ALL"]
    for key in ("network_mode", "pid_mode", "ipc_mode", "userns_mode", "cap_add", "devices"):
        assert key not in kw
    assert "volumes" not in kw


def test_user_is_the_callers_uid_and_gid() -> None:
    assert container_kwargs(launch(), nvidia=False)["user"] == "1000:1001"


def test_limits_only_when_asked() -> None:
    kw = container_kwargs(launch(), nvidia=False)
    assert "nano_cpus" not in kw and "mem_limit" not in kw
    kw = container_kwargs(launch(cpu_milli=2500, memory=3 << 30), nvidia=False)
    assert kw["nano_cpus"] == 2_500_000_000
    assert kw["mem_limit"] == 3 << 30
    assert kw["memswap_limit"] == 3 << 30
    assert kw["shm_size"] == 3 << 30


def test_drives_are_bind_mounts() -> None:
    mounts = (Mount("/srv/drives/ckpt/ft", "/ckpt"), Mount("/srv/data", "/data", read_only=True))
    kw = container_kwargs(launch(mounts=mounts), nvidia=False)
    assert [dict(m) for m in kw["mounts"]] == [
        {"Target": "/ckpt", "Source": "/srv/drives/ckpt/ft", "Type": "bind", "ReadOnly": False},
        {"Target": "/data", "Source": "/srv/data", "Type": "bind", "ReadOnly": True},
    ]


def test_nvidia_runtime_gets_a_device_request_and_renumbered_cuda_devices() -> None:
    kw = container_kwargs(launch(gpus=(2, 5), env={"CUDA_VISIBLE_DEVICES": "2,5"}), nvidia=True)
    (request,) = kw["device_requests"]
    assert isinstance(request, docker.types.DeviceRequest)
    assert request.driver == "nvidia"
    assert request.device_ids == ["2", "5"]
    assert request.capabilities == [["gpu"]]
    assert request.count == 0  # the ids say which, not a count
    assert kw["environment"]["NVIDIA_VISIBLE_DEVICES"] == "2,5"
    assert kw["environment"]["CUDA_VISIBLE_DEVICES"] == "0,1"


def test_without_nvidia_runtime_gpus_are_named_in_the_environment() -> None:
    kw = container_kwargs(launch(gpus=(2, 5), env={"A": "1"}), nvidia=False)
    assert "device_requests" not in kw
    assert kw["environment"] == {
        "A": "1",
        "NVIDIA_VISIBLE_DEVICES": "2,5",
        "CUDA_VISIBLE_DEVICES": "2,5",
    }
    kept = container_kwargs(launch(gpus=(2,), env={"CUDA_VISIBLE_DEVICES": "0"}), nvidia=False)
    assert kept["environment"]["CUDA_VISIBLE_DEVICES"] == "0"


@pytest.mark.parametrize("nvidia", [True, False])
def test_a_cpu_run_cannot_ask_for_all_gpus(nvidia: bool) -> None:
    kw = container_kwargs(launch(env={"NVIDIA_VISIBLE_DEVICES": "all"}), nvidia=nvidia)
    assert "device_requests" not in kw
    assert kw["environment"]["NVIDIA_VISIBLE_DEVICES"] == "void"
    assert kw["environment"]["CUDA_VISIBLE_DEVICES"] == ""


def test_the_launch_env_is_not_mutated() -> None:
    env = {"A": "1"}
    container_kwargs(launch(env=env, gpus=(0,)), nvidia=False)
    assert env == {"A": "1"}


# ---------------------------------------------------------------- DockerExecutor with a fake client


def fake_client(runtimes: dict[str, Any] | None = None) -> mock.MagicMock:
    client = mock.MagicMock(name="DockerClient")
    client.info.return_value = {"Runtimes": runtimes or {"runc": {"path": "runc"}}}
    client.api.inspect_container.side_effect = docker.errors.NotFound("no such container")
    return client


def test_start_passes_a_device_request_with_the_nvidia_runtime() -> None:
    client = fake_client()
    executor = DockerExecutor(client, nvidia=True)
    assert executor.start(launch(gpus=(0, 3))) == "astraeus-ft-2-1"
    client.api.inspect_image.assert_called_once_with("nvcr.io/nvidia/pytorch:24.05-py3")
    kwargs = client.containers.create.call_args.kwargs
    assert kwargs == container_kwargs(launch(gpus=(0, 3)), nvidia=True)
    assert kwargs["device_requests"][0]["DeviceIDs"] == ["0", "3"]
    assert kwargs["device_requests"][0]["Driver"] == "nvidia"
    client.containers.create.return_value.start.assert_called_once_with()


def test_nvidia_runtime_is_detected_from_engine_info() -> None:
    assert DockerExecutor(fake_client({"nvidia": {}, "runc": {}})).nvidia is True
    assert DockerExecutor(fake_client()).nvidia is False
    assert DockerExecutor(fake_client(), nvidia=True).nvidia is True


def test_a_missing_image_is_never_pulled() -> None:
    client = fake_client()
    client.api.inspect_image.side_effect = docker.errors.ImageNotFound("No such image")
    with pytest.raises(ExecutorError) as caught:
        DockerExecutor(client, nvidia=False).start(launch(image="nvcr.io/x:1"))
    assert str(caught.value) == "image nvcr.io/x:1 is not on this machine (docker pull it first)"
    client.containers.create.assert_not_called()
    client.images.pull.assert_not_called()
    client.api.pull.assert_not_called()


def test_a_failed_start_removes_the_container_and_says_why() -> None:
    client = fake_client()
    container = client.containers.create.return_value
    response = mock.MagicMock(status_code=500, reason="Server Error")
    container.start.side_effect = docker.errors.APIError(
        "500", response=response, explanation="OCI runtime create failed:\n  no such file"
    )
    with pytest.raises(ExecutorError) as caught:
        DockerExecutor(client, nvidia=False).start(launch())
    assert str(caught.value) == (
        "docker: cannot start container astraeus-ft-2-1: OCI runtime create failed: no such file"
    )
    container.remove.assert_called_once_with(force=True)


def test_connection_errors_become_executor_errors() -> None:
    client = fake_client()
    client.api.containers.side_effect = docker.errors.DockerException("connection refused")
    with pytest.raises(ExecutorError) as caught:
        DockerExecutor(client, nvidia=False).list_workers()
    assert str(caught.value) == "docker: cannot list containers: connection refused"


def test_a_list_that_finds_no_engine_makes_it_unreachable(tmp_path: Path) -> None:
    """A real client on a socket nobody serves (an engine that stopped): the refused
    connection says the engine is away, so the loop waits instead of failing a tick."""
    client = docker.DockerClient(base_url=f"unix://{tmp_path / 'gone.sock'}", version="1.41")
    executor = DockerExecutor(client, nvidia=False)
    assert executor.reachable()
    with pytest.raises(ExecutorError, match="docker: cannot list containers: "):
        executor.list_workers()
    assert not executor.reachable()
    client.close()


def test_an_impossible_log_folder_fails_before_any_container_exists(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    client = fake_client()
    with pytest.raises(ExecutorError, match="cannot create the log folder of astraeus-ft-2-1"):
        DockerExecutor(client, nvidia=False).start(launch(log_path=tmp_path / "a-file" / "w.log"))
    client.containers.create.assert_not_called()


def test_log_path_devnull_starts_no_follower() -> None:
    client = fake_client()
    executor = DockerExecutor(client, nvidia=False)
    executor.start(launch())
    client.api.logs.assert_not_called()
    assert executor.drain_logs("astraeus-ft-2-1", 0)


# ---------------------------------------------------------------- state, listing, timestamps


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ({"Status": "running", "Running": True}, WorkerStatus(Observed.RUNNING)),
        ({"Status": "paused", "Running": True, "Paused": True}, WorkerStatus(Observed.RUNNING)),
        ({"Status": "exited", "ExitCode": 3}, WorkerStatus(Observed.EXITED, 3)),
        (
            {"Status": "exited", "ExitCode": 137, "OOMKilled": True},
            WorkerStatus(Observed.EXITED, 137, "out of memory"),
        ),
        (
            {"Status": "exited", "ExitCode": 127, "Error": 'exec: "python": not found\n'},
            WorkerStatus(Observed.EXITED, 127, 'exec: "python": not found'),
        ),
        (
            {"Status": "dead", "ExitCode": 0},
            WorkerStatus(Observed.EXITED, 0, "container is dead"),
        ),
        (
            {"Status": "created", "ExitCode": 0},
            WorkerStatus(Observed.EXITED, None, "container was created but never started"),
        ),
    ],
)
def test_status_from_state(state: dict[str, Any], expected: WorkerStatus) -> None:
    assert status_from_state(state) == expected


def test_listed_worker_from_a_summary() -> None:
    labels = {"io.astraeus.run": "ft", "io.astraeus.attempt": "2", "io.astraeus.worker": "1"}
    summary: dict[str, Any] = {"Id": "abc", "Names": ["/astraeus-ft-2-1"], "Labels": labels}
    assert listed_worker(summary) == ListedWorker("astraeus-ft-2-1", "ft", 2, 1)
    assert listed_worker({**summary, "Names": []}) == ListedWorker("abc", "ft", 2, 1)
    assert listed_worker({**summary, "Labels": {"io.astraeus.run": "ft"}}) is None
    bad = {**summary, "Labels": {**labels, "io.astraeus.attempt": "x"}}
    assert listed_worker(bad) is None


def test_split_timestamp() -> None:
    second = int(datetime(2026, 11, 29, 10, 2, 20, tzinfo=UTC).timestamp()) * 10**9
    ns, payload = split_timestamp(b"2026-11-29T10:02:20.612118308Z epoch 1 loss 0.3\n")
    assert ns == second + 612_118_308
    assert payload == b"epoch 1 loss 0.3\n"
    ns, _ = split_timestamp(b"2026-11-29T11:02:20.5+01:00 x\n")
    assert ns == second + 500_000_000
    assert split_timestamp(b"2026-11-29T10:02:20Z x") == (second, b"x")
    assert split_timestamp(b"no timestamp\n") == (None, b"no timestamp\n")


def test_describe_is_one_line() -> None:
    assert describe(ValueError("a\n  b\tc")) == "a b c"
    assert describe(ValueError("")) == "ValueError"


def test_a_shared_run_gets_exactly_its_gpu_and_its_mps_limit() -> None:
    """A run sharing GPU 3 by memory: the same device request as a whole GPU's, and with
    ``[machine] mps`` its limit for the one device it sees (numbered 0 in there)."""
    import json

    from runner.engine.starts import worker_env
    from runner.runspec.parse import parse_spec
    from tests.unit.store_rows import run_row

    doc = {"metadata": {"name": "ft"}, "spec": {"task_template": {
        "image": "x", "command": "true", "requested_resources": {
            "gpu_requests": {"count": 1, "memory_bytes": 20 << 30}}}}}  # fmt: skip
    run = run_row("ft", "vision", "Queued", spec_text=json.dumps(doc))
    env = worker_env(run, parse_spec(doc), 0, (3,), True, mps_share=20 << 30)
    kw = container_kwargs(launch(gpus=(3,), env=env), nvidia=True)
    (request,) = kw["device_requests"]
    assert request.device_ids == ["3"]
    assert kw["environment"]["CUDA_VISIBLE_DEVICES"] == "0"
    assert kw["environment"]["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=20G"
