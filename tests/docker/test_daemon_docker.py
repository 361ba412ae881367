"""The daemon on the real Docker engine: drives, SIGTERM and resume, adoption, errors."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.daemon.daemon import instance_id
from tests.docker.helpers import IMAGE, SKIP_REASON, engine_client
from tests.integration.conftest import served  # noqa: F401 (the fixture)
from tests.support.harness import wait_for
from tests.support.served import Served
from tests.support.terminal import shell_in_terminal

pytestmark = pytest.mark.skipif(engine_client() is None, reason=SKIP_REASON)
Start = Callable[..., Served]

# Counts steps, saves its step to the drive on SIGTERM, resumes from it.
CHECKPOINTING = """
D=/ckpt/$SLURM_JOB_NAME; mkdir -p $D; step=0
if [ -f $D/step ]; then step=$(cat $D/step); echo "resuming at step $step"; fi
trap 'echo $step > $D/step.tmp && mv $D/step.tmp $D/step; echo "SIGTERM at step $step"; exit 0' TERM
while true; do echo "step $step"; step=$((step+1)); sleep 0.2; done
"""


def spec(name: str, script: str, **extra: Any) -> str:
    task = {"image": extra.pop("image", IMAGE), "command": "sh", "args": ["-c", script],
            "requested_resources": {"gpu_requests": {"count": extra.pop("gpus", 1)}}}  # fmt: skip
    if "drives" in extra:
        task["datavolume_refs"] = extra.pop("drives")
    return json.dumps({"metadata": {"name": name}, "spec": {**extra, "task_template": task}})


def docker_config(drive: Path) -> str:
    return (
        '[workspaces.default]\nmembers = ["*"]\nmax_priority = 10\n'
        f'[drives.checkpoints]\npath = "{drive}"\n'
    )


@pytest.fixture
def docker_daemon(served: Start, tmp_path: Path) -> Iterator[Served]:  # noqa: F811 (the fixture)
    drive = tmp_path / "drive"
    drive.mkdir()
    daemon = served(docker_config(drive), gpus=2, grace=5, executor="docker")
    yield daemon
    # containers outlive their daemon by design (it adopts them); not this test's.
    daemon.stop()  # first, or it would start a lost worker again
    client = engine_client()
    label = f"io.astraeus.instance={instance_id(daemon.home)}"
    for container in client.containers.list(all=True, filters={"label": label}):
        container.remove(force=True)


def test_preempted_container_saves_on_sigterm_and_resumes(docker_daemon: Served) -> None:
    d = docker_daemon
    ckpt = [{"name": "checkpoints", "mount_path": "/ckpt", "mode": "ReadWrite"}]
    sub = d.astra("submit", "-", input=spec("ft", CHECKPOINTING, gpus=2, priority=-100,
                                            drives=ckpt))  # fmt: skip
    assert sub.returncode == 0, sub.stderr
    wait_for(lambda: "step 5" in d.astra("logs", "ft").stdout, 30)
    d.astra("submit", "-", input=spec("urgent", "echo urgent done", gpus=2, priority=5))
    wait_for(lambda: d.json("show", "urgent")["state"] == "Succeeded", 40)
    ft = wait_for(lambda: (r := d.json("show", "ft"))["state"] == "Running" and r, 40)
    assert ft["preemptions"] == 1 and ft["restarts"] == 0
    saved = int((d.home.parent / "drive" / "ft" / "step").read_text())
    logs = wait_for(lambda: (t := d.astra("logs", "ft").stdout).count("resuming") and t, 30)
    assert f"SIGTERM at step {saved}" in logs
    assert f"resuming at step {saved}" in logs
    assert not any(e["message"].startswith("Sent SIGKILL") for e in ft["events"])


def test_containers_are_labelled_and_adopted_after_kill_9(docker_daemon: Served) -> None:
    d = docker_daemon
    client = engine_client()
    d.astra("submit", "-", input=spec("long", "trap 'exit 0' TERM; while true; do sleep 0.2; done"))
    wait_for(lambda: d.json("show", "long")["state"] == "Running", 30)
    uid = d.json("show", "long")["uid"]
    name = f"astraeus-{instance_id(d.home)}-{uid}-1-0"
    before = client.api.inspect_container(name)
    labels = before["Config"]["Labels"]
    assert labels["io.astraeus.run"] == "long" and labels["io.astraeus.attempt"] == "1"
    assert labels["io.astraeus.run-uid"] == uid
    assert labels["io.astraeus.instance"] == instance_id(d.home)
    host = before["HostConfig"]
    assert host["Privileged"] is False and "no-new-privileges" in host["SecurityOpt"]
    # a container with this daemon's labels that the state database does not know
    stray = client.containers.run(
        IMAGE, ["sleep", "300"], detach=True, name=f"astraeus-{instance_id(d.home)}-stray-1-0",
        labels={"io.astraeus.schema": "1", "io.astraeus.run": "stray",
                "io.astraeus.attempt": "1", "io.astraeus.worker": "0",
                "io.astraeus.instance": instance_id(d.home)},
    )  # fmt: skip
    try:
        d.kill9()
        d.restart()
        after = client.api.inspect_container(name)
        assert (
            after["State"]["Running"]
            and after["State"]["StartedAt"] == before["State"]["StartedAt"]
        )
        assert [w["attempt"] for w in d.json("show", "long")["workers_history"]] == [1]
        wait_for(lambda: not client.api.inspect_container(stray.id)["State"]["Running"], 20)
    finally:
        stray.remove(force=True)
        d.astra("delete", "long")
        wait_for(lambda: d.json("show", "long")["state"] == "Cancelled", 30)


def test_a_name_used_again_never_shows_the_forgotten_runs_output(docker_daemon: Served) -> None:
    d = docker_daemon
    client = engine_client()
    label = f"io.astraeus.instance={instance_id(d.home)}"
    assert d.astra("submit", "-", input=spec("r", "echo old-secret-4711", gpus=0)).returncode == 0
    old = wait_for(lambda: (r := d.json("show", "r"))["state"] == "Succeeded" and r, 30)
    assert d.astra("logs", "r").stdout == "old-secret-4711\n"
    assert (d.home / "logs" / old["uid"] / "1-0.log").is_file()
    assert d.astra("delete", "r").stdout == "r: forgotten\n"
    wait_for(lambda: not (d.home / "logs" / old["uid"]).exists(), 30, "the old log folder")
    assert client.containers.list(all=True, filters={"label": label}) == []
    assert d.astra("submit", "-", input=spec("r", "echo new; sleep 60", gpus=0)).returncode == 0
    new = wait_for(lambda: (r := d.json("show", "r"))["state"] == "Running" and r, 30)
    assert new["uid"] != old["uid"]
    wait_for(lambda: d.astra("logs", "r").stdout == "new\n", 20, "the new run's output")
    (container,) = client.containers.list(all=True, filters={"label": label})
    assert container.name == f"astraeus-{instance_id(d.home)}-{new['uid']}-1-0"
    assert old["uid"] not in container.name
    d.astra("delete", "r")
    wait_for(lambda: d.json("show", "r")["state"] == "Cancelled", 30)
    assert "old-secret" not in d.astra("logs", "r").stdout


def test_a_missing_image_fails_the_run_clearly(docker_daemon: Served) -> None:
    d = docker_daemon
    d.astra("submit", "-", input=spec("ghost", "true", image="nowhere/none:1"))
    run = wait_for(lambda: (r := d.json("show", "ghost"))["state"] == "Failed" and r, 30)
    assert run["reason"] == (
        "Could not start worker 0: image nowhere/none:1 is not on this machine "
        "(docker pull it first)"
    )
    assert run["restarts"] == 0


def test_a_host_command_is_refused_when_the_daemon_runs_containers(
    docker_daemon: Served,
) -> None:
    result = docker_daemon.astra("run", "--name", "on-host", "--", "true")
    assert result.returncode != 0
    assert result.stderr.strip() == (
        "422 INVALID_SPEC: spec.task_template.image: local runs on the host, which this daemon"
        " does not do (executor docker): name a container image, or set [machine] default_image"
        ' (or executor = "process" to run commands on the host)'
    )


def test_a_run_naming_no_image_gets_the_default_image(served: Start, tmp_path: Path) -> None:  # noqa: F811
    drive = tmp_path / "drive"
    drive.mkdir()
    image = f'default_image = "{IMAGE}"'
    d = served(docker_config(drive), gpus=0, grace=5, executor="docker", machine=image)
    try:
        assert d.astra("run", "--name", "plain", "--", "echo", "hi").returncode == 0
        run = wait_for(lambda: (r := d.json("show", "plain"))["state"] == "Succeeded" and r, 30)
        assert run["spec"]["spec"]["task_template"]["image"] == IMAGE  # stored resolved
        assert d.astra("logs", "plain").stdout == "hi\n"
    finally:
        d.stop()
        label = f"io.astraeus.instance={instance_id(d.home)}"
        for container in engine_client().containers.list(all=True, filters={"label": label}):
            container.remove(force=True)


def test_exec_runs_in_the_container_as_its_user_with_its_environment(
    docker_daemon: Served,
) -> None:
    d = docker_daemon
    sub = d.astra("submit", "-", input=spec("ex", "sleep 120", gpus=1))
    assert sub.returncode == 0, sub.stderr
    wait_for(lambda: d.json("show", "ex")["state"] == "Running", 30)
    shown = (
        "echo run=$ASTRAEUS_RUN_NAME worker=$ASTRAEUS_WORKER_INDEX; id -u; echo oops >&2; exit 6"
    )
    result = d.astra("exec", "ex", "--", "sh", "-c", shown)
    assert (result.returncode, result.stdout, result.stderr) == (
        6,
        "run=ex worker=0\n0\n",
        "oops\n",
    )
    fed = d.astra("exec", "-i", "ex", "--", "sh", "-c", "read a; echo got $a", input="x y\n")
    assert (fed.returncode, fed.stdout) == (0, "got x y\n"), fed.stderr
    shell_in_terminal(d, "ex", b"# ")  # busybox's sh, as root


def test_a_container_starts_in_its_image_s_folder_and_environment_unless_asked(
    docker_daemon: Served,
) -> None:
    """The submit folder and the caller's environment are the process executor's: a
    container starts in its image's working directory with its image's environment, plus
    what --chdir and --export name."""
    d = docker_daemon
    d.env = {**d.env, "FOO": "1", "BAR": "2"}  # the submitting shell's
    probe = ["--image", IMAGE, "--gpus", "0", "--", "sh", "-c", "pwd; echo FOO=$FOO BAR=$BAR"]
    assert d.astra("run", "--name", "plain", *probe).returncode == 0
    assert d.astra("run", "--name", "asked", "-D", "/tmp", "--export=FOO", *probe).returncode == 0
    for name in ("plain", "asked"):
        wait_for(lambda n=name: d.json("show", n)["state"] == "Succeeded", 40, name)
    assert d.astra("logs", "plain").stdout == "/\nFOO= BAR=\n"
    assert d.astra("logs", "asked").stdout == "/tmp\nFOO=1 BAR=\n"
    # the shell's environment is not kept with a container's run: it would never be used
    assert "submit_env" not in d.json("show", "plain")["spec"]["spec"]["task_template"]
    assert "environment:" not in d.astra("show", "plain").stdout
