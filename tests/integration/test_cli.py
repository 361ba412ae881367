"""The `astra` CLI against a real daemon over its socket."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.harness import NO_BACKOFF, wait_for
from tests.support.served import Served

Start = Callable[..., Served]
EXAMPLES = Path(__file__).resolve().parents[2] / "config" / "examples"
RUN_FIELDS = {
    "name", "workspace", "priority", "state", "reason", "gpus", "workers", "restarts",
    "preemptions", "submitted_at", "started_at", "finished_at", "exit_code",
    "time_limit_seconds", "starts_by",
}  # fmt: skip
CAPPED = '[workspaces.default]\nmembers = ["*"]\nmax_priority = 10\n'


def names(d: Served, *args: str) -> list[str]:
    return [r["name"] for r in d.json("ls", "--all", *args)]


def test_run_ls_show_logs_wait(served: Start) -> None:
    d = served(gpus=2)
    out = d.astra("run", "--name", "hello", "--gpus", "1", "--time-limit", "10m", "--",
                  sys.executable, "-c", "print('hello from astraeus')")  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Submitted run hello"
    waited = d.astra("wait", "hello")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    [run] = d.json("ls", "--all")
    assert set(run) >= RUN_FIELDS
    assert run["state"] == "Succeeded" and run["time_limit_seconds"] == 600
    assert "hello from astraeus" in d.astra("logs", "hello").stdout
    shown = d.json("show", "hello")
    assert [e["kind"] for e in shown["events"]][:2] == ["Submitted", "Started"]
    assert shown["spec"]["spec"]["task_template"]["image"] == "local"  # the process default
    events = d.astra("events", "hello").stdout
    assert "Succeeded" in events


def test_wait_exit_code_follows_the_run(served: Start) -> None:
    d = served(gpus=1, machine=NO_BACKOFF)
    d.astra("run", "--name", "bad", "--", sys.executable, "-c", "import sys; sys.exit(3)")
    d.astra("priority", "bad", "0")
    result = d.astra("wait", "bad")
    # restarts spend the budget (10) quickly; the run fails with code 3
    assert result.returncode == 3, result.stdout + result.stderr


def test_submit_json_toml_and_stdin(served: Start, tmp_path: Path) -> None:
    drive = tmp_path / "drive"
    drive.mkdir()
    d = served(CAPPED + f'[drives.checkpoints]\npath = "{drive}"\n', gpus=8)
    ok = d.astra("submit", str(EXAMPLES / "ft-lowprio.json"))
    assert ok.returncode == 0, ok.stderr
    toml = (EXAMPLES / "ft-lowprio.toml").read_text().replace('"ft-lowprio"', '"ft-toml"')
    ok = d.astra("submit", "-", input=toml)
    assert ok.returncode == 0, ok.stderr
    assert d.json("show", "ft-lowprio")["priority"] == -100
    assert d.json("show", "ft-toml")["spec"] == d.json("show", "ft-lowprio")["spec"] | {
        "metadata": {"name": "ft-toml"}
    }


def test_a_drive_of_another_workspace_is_refused(served: Start, tmp_path: Path) -> None:
    drive = tmp_path / "drive"
    drive.mkdir()
    config = (
        CAPPED + '[workspaces.vision]\nmembers = ["root"]\n'
        f'[drives.checkpoints]\npath = "{drive}"\nworkspaces = ["vision"]\n'
    )
    d = served(config, gpus=8)
    refused = d.astra("submit", str(EXAMPLES / "ft-lowprio.json"))
    assert refused.returncode != 0
    assert refused.stderr.strip() == (
        "403 DRIVE_NOT_ALLOWED: namespace default may not mount checkpoints"
    )
    assert names(d) == []


def test_sbatch_and_nice(served: Start, tmp_path: Path) -> None:
    d = served(gpus=8)
    script = (
        (EXAMPLES / "finetune.sbatch")
        .read_text()
        .replace("#SBATCH --container-mounts=checkpoints:/ckpt\n", "")
    )
    path = tmp_path / "finetune.sbatch"
    path.write_text(script)
    result = d.astra("slurm", "sbatch", "--nice=100", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Submitted batch job finetune"
    assert d.json("show", "finetune")["priority"] == -100


def test_priority_cap_is_403_for_everyone(served: Start) -> None:
    d = served(gpus=1)
    result = d.astra("run", "--name", "x", "--priority", "50", "--", "true")
    assert result.returncode != 0
    assert result.stderr.strip() == (
        "403 PRIORITY_NOT_ALLOWED: priority 50 is above namespace default's maximum of 0"
    )
    assert names(d) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--name", "Bad_Name", "--", "true"], "metadata.name"),
        (["run", "--name", "x", "--priority", "1001", "--", "true"], "spec.priority"),
        (["run", "--name", "x", "--gpus", "-1", "--", "true"], "gpu_requests.count"),
        (["run", "--name", "x", "--drive", "d:rel/path", "--", "true"], "mount_path"),
        (["run", "--name", "x", "--memory", "lots", "--", "true"], "memory_bytes"),
        (["run", "--name", "x", "--time-limit", "soon", "--", "true"], "soon"),
        (["priority", "nope", "1"], "404 NOT_FOUND"),
        (["delete", "nope"], "404 NOT_FOUND"),
        (["show", "nope"], "404 NOT_FOUND"),
    ],
)
def test_bad_input_is_one_line_and_changes_nothing(
    served: Start, args: list[str], message: str
) -> None:
    d = served(gpus=1)
    result = d.astra(*args)
    assert result.returncode != 0
    assert message in result.stderr
    assert names(d) == []


def test_name_in_use_is_409(served: Start) -> None:
    d = served(gpus=1)
    assert d.astra("run", "--name", "dup", "--", "sleep", "30").returncode == 0
    again = d.astra("run", "--name", "dup", "--", "sleep", "30")
    assert again.returncode != 0
    assert again.stderr.startswith("409 NAME_IN_USE:")


def test_gpus_and_workspaces(served: Start) -> None:
    d = served(CAPPED, gpus=2)
    d.astra("run", "--name", "g", "--gpus", "1", "--", "sleep", "60")
    wait_for(lambda: d.json("show", "g")["state"] == "Running")
    gpus = d.json("gpus")
    assert gpus["simulated"] is True
    assert [g["holder"]["run"] if g["holder"] else None for g in gpus["gpus"]] == ["g", None]
    [ws] = d.json("workspaces")
    assert ws["name"] == "default" and ws["usage"]["gpus"] == 1 and ws["max_priority"] == 10


def test_admin_commands_rewrite_the_config_and_reload(served: Start) -> None:
    d = served(CAPPED, gpus=4)
    assert d.astra("admin", "quota", "default", "--gpus", "2").returncode == 0
    assert d.astra("admin", "max-priority", "default", "20").returncode == 0
    assert d.astra("admin", "weight", "default", "2").returncode == 0
    [ws] = d.json("workspaces")
    assert ws["quota"]["gpus"] == 2 and ws["max_priority"] == 20 and ws["weight"] == 2
    text = (d.home / "config.toml").read_text()
    assert "max_priority = 20" in text
    bad = d.astra("admin", "weight", "default", "-1")
    assert bad.returncode != 0 and "weight" in bad.stderr
    assert "max_priority = 20" in (d.home / "config.toml").read_text()
    d.astra("run", "--name", "big", "--gpus", "3", "--", "sleep", "60")
    wait_for(lambda: "quota allows at all" in (d.json("show", "big")["reason"] or ""))


def test_admin_commands_change_the_default_workspace_a_config_without_any_has(
    served: Start,
) -> None:
    """No [workspaces] in the config: everyone's runs go to default, which astra workspaces
    lists; an admin's change of it writes it out (members "*", as it was) and applies."""
    d = served("", gpus=2)
    [ws] = d.json("workspaces")
    assert ws["name"] == "default" and ws["max_priority"] == 0
    said = d.astra("admin", "max-priority", "default", "100")
    assert said.returncode == 0, said.stderr
    [ws] = d.json("workspaces")
    assert ws["max_priority"] == 100
    assert d.astra("run", "--name", "urgent", "--priority", "50", "--", "true").returncode == 0
    missing = d.astra("admin", "weight", "nope", "2")  # any other name is still no workspace
    assert missing.returncode == 1 and missing.stderr == "404 NOT_FOUND: no workspace nope\n"


def test_delete_running_run(served: Start) -> None:
    d = served(gpus=1)
    d.astra("run", "--name", "long", "--", "sleep", "300")
    wait_for(lambda: d.json("show", "long")["state"] == "Running")
    assert d.astra("delete", "long").stdout.strip() == "long: stopping"
    wait_for(lambda: d.json("show", "long")["state"] == "Cancelled")
    shown = d.astra("show", "long").stdout.splitlines()
    assert "  attempt 1 worker 0  Cancelled (delete)" in shown  # each worker's own state


def test_delete_takes_many_runs_and_goes_on_past_a_refusal(served: Start) -> None:
    """As scancel does: each run asked in turn, a refusal its line on stderr, exit code 1."""
    d = served(gpus=1)
    d.astra("run", "--name", "first", "--", "sleep", "300")
    d.astra("run", "--name", "second", "--hold", "--", "sleep", "300")  # queued until deleted
    wait_for(lambda: d.json("show", "first")["state"] == "Running")
    out = d.astra("delete", "first", "nope", "second")
    assert out.returncode == 1, out.stderr
    assert out.stdout.splitlines() == ["first: stopping", "second: cancelled"]
    assert out.stderr == "404 NOT_FOUND: no run nope\n"
    wait_for(lambda: not names(d, "--state", "Queued,Running,Stopping"))
    assert {d.json("show", n)["state"] for n in ("first", "second")} == {"Cancelled"}


def _bad(path: str, value: object) -> str:
    """A valid spec with one field replaced (dotted path; [i] for list items)."""
    document = {
        "metadata": {"name": "ok"},
        "spec": {"task_template": {
            "image": "local", "command": "true", "time_limit_seconds": 60,
            "datavolume_refs": [{"name": "d", "mount_path": "/data", "mode": "ReadOnly"}],
            "requested_resources": {"gpu_requests": {"count": 1, "min_per_machine": 1}},
        }},
    }  # fmt: skip
    target: Any = document
    *parents, last = path.split(".")
    for key in parents:
        target = target[int(key)] if key.isdigit() else target[key]
    if last.isdigit() and int(last) == len(target):
        target.append(value)
    elif last.isdigit():
        target[int(last)] = value
    else:
        target[last] = value
    return json.dumps(document)


TT = "spec.task_template"
GPU = f"{TT}.requested_resources.gpu_requests"


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("spec.colour", "red", "spec.colour"),
        (f"{TT}.shell", "zsh", f"{TT}.shell"),
        ("spec.priority", 1001, "spec.priority"),
        ("spec.priority", -1001, "spec.priority"),
        (f"{GPU}.count", -1, f"{GPU}.count"),
        (f"{GPU}.count", 1.5, f"{GPU}.count"),
        (f"{GPU}.min_per_machine", 2, f"{GPU}.min_per_machine"),
        (f"{TT}.datavolume_refs.0.mount_path", "data", "mount_path"),
        (f"{TT}.datavolume_refs.0.mount_path", "/data/../etc", "mount_path"),
        (f"{TT}.datavolume_refs.1", {"name": "e", "mount_path": "/data"}, "mount_path"),
        (f"{TT}.time_limit_seconds", 0, f"{TT}.time_limit_seconds"),
        (f"{TT}.time_limit_seconds", -5, f"{TT}.time_limit_seconds"),
        ("metadata.name", "Not_A_Label", "metadata.name"),
        ("metadata.name", "x" * 64, "metadata.name"),
    ],
)
def test_every_bad_spec_is_one_line_through_the_cli(
    served: Start, path: str, value: object, field: str
) -> None:
    d = served(gpus=1)
    before = (d.home / "state.db").stat().st_size, d.astra("events").stdout
    result = d.astra("submit", "-", input=_bad(path, value))
    assert result.returncode != 0
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("422 INVALID_SPEC: ") and field in line, line
    assert names(d) == []
    assert d.astra("events").stdout == before[1]


def test_show_names_the_last_checkpoint_on_the_drive(served: Start, tmp_path: Path) -> None:
    drive = tmp_path / "drive"
    drive.mkdir()
    d = served(f'[drives.checkpoints]\npath = "{drive}"\n', gpus=1)
    save = (
        "import os; os.makedirs('/ckpt/saver', exist_ok=True); "
        "open('/ckpt/saver/old.pt', 'w').write('1'); "
        "open('/ckpt/saver/step-7.pt', 'w').write('22'); open('/ckpt/saver/x.tmp', 'w')"
    )
    d.astra("run", "--name", "saver", "--drive", "checkpoints:/ckpt", "--", sys.executable,
            "-c", save)  # fmt: skip
    wait_for(lambda: d.json("show", "saver")["state"] == "Succeeded")
    found = d.json("show", "saver")["checkpoint"]
    assert found["path"] in ("/ckpt/saver/step-7.pt", "/ckpt/saver/old.pt")
    assert found["drive"] == "checkpoints"
    os.utime(drive / "saver" / "old.pt", (1, 1))
    assert d.json("show", "saver")["checkpoint"]["path"] == "/ckpt/saver/step-7.pt"
    assert d.json("show", "saver")["checkpoint"]["size"] == 2


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("show", "one", "two"), "Error: Got unexpected extra argument(s) (two)"),
        (("run", "--gpus", "abc", "--", "true"), "Error: Invalid value for '--gpus': Input "
         "should be a valid integer, unable to parse string as an integer"),
        (("ls", "--bogus"), "Error: No such option: --bogus"),
    ],
)  # fmt: skip
def test_a_usage_error_is_said_in_plain_lines_and_changes_nothing(
    served: Start, args: tuple[str, ...], error: str
) -> None:
    """One line, with where help is (not click's four, nor a box broken at the terminal's
    edge)."""
    d = served(gpus=1)
    assert d.astra("run", "--name", "one", "--", "sleep", "30").returncode == 0
    said = d.astra(*args)
    assert said.returncode == 2 and said.stdout == ""
    assert said.stderr == f"{error}; see astra {args[0]} --help\n", said.stderr
    assert names(d) == ["one"]


def test_submit_of_an_sbatch_script_carries_the_shell_as_sbatch_does(
    served: Start, tmp_path: Path
) -> None:
    """`astra submit job.sbatch` (both paths) and `astra slurm sbatch job.sbatch`: the
    submitting shell's environment as the script's --export says (default ALL); a JSON
    spec's environment is what it says."""
    import subprocess

    d = served(gpus=1)
    shell = {**d.env, "MYVAR": "from-the-shell"}

    def astra(*args: str, fast: bool = True) -> None:
        env = shell if fast else {**shell, "ASTRAEUS_CLI_FAST": "0"}
        done = subprocess.run([sys.executable, "-m", "astraeus_tui.cli.main", *args], env=env,
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr

    def carried(name: str) -> dict[str, str]:
        found: dict[str, str] = d.json("show", name)["spec"]["spec"]["task_template"].get(
            "submit_env") or {}  # fmt: skip
        return found

    for name, export in (("all", ""), ("none", "#SBATCH --export=NONE\n")):
        for stem, command in ((name, ("submit",)), (f"{name}-typer", ("submit",)),
                              (f"{name}-sbatch", ("slurm", "sbatch"))):  # fmt: skip
            script = tmp_path / f"{stem}.sbatch"  # the run is named by the file
            script.write_text(f"#!/bin/bash\n#SBATCH --hold\n{export}echo $MYVAR\n")
            astra(*command, str(script), fast=not stem.endswith("-typer"))
    for name in ("all", "all-typer", "all-sbatch"):
        assert carried(name).get("MYVAR") == "from-the-shell", name
    for name in ("none", "none-typer", "none-sbatch"):
        assert carried(name) == {}, name
    spec = tmp_path / "spec.json"
    spec.write_text('{"metadata": {"name": "js"}, "spec": {"hold": true, "task_template": '
                    '{"command": ["true"]}}}')  # fmt: skip
    astra("submit", str(spec))
    assert "MYVAR" not in carried("js")


def test_run_restarts_zero_fails_at_the_first_failure(served: Start) -> None:
    """`--restarts 0`: a failed command is not started again (the daemon's limit is 10)."""
    d = served(gpus=1)
    assert d.astra("run", "--name", "once", "--restarts", "0", "--", "false").returncode == 0
    wait_for(lambda: d.json("show", "once")["state"] == "Failed")
    run = d.json("show", "once")
    assert run["restarts"] == 0 and "the restart budget (0) is spent" in run["reason"]


def test_a_memory_ask_in_bytes_below_dockers_minimum_is_refused_saying_how_to_write_it(
    served: Start,
) -> None:
    """``--memory 10`` is 10 bytes: it would die out of memory at every start."""
    d = served(gpus=1)
    assert d.astra("run", "--name", "kept", "--memory", "1G", "--", "sleep", "30").returncode == 0
    before = d.astra("events").stdout
    field = "spec.task_template.requested_resources.memory_bytes"
    for args in (("run", "--memory", "10", "--", "true"), ("update", "kept", "--memory", "10")):
        said = d.astra(*args)
        assert (said.returncode, said.stdout) == (1, ""), said.stderr
        assert said.stderr == (
            f"422 INVALID_SPEC: {field}: must be at least 6MiB (Docker's minimum), got '10',"
            " which is 10 bytes: give the unit, e.g. 10G (astra run --memory 10G)\n"
        )
    said = d.astra("run", "--gpu-mem", "20", "--", "true")  # 20 bytes on a shared GPU
    assert (said.returncode, said.stderr) == (
        1,
        (
            "422 INVALID_SPEC: spec.task_template.requested_resources.gpu_requests.memory_bytes:"
            " must be at least 6MiB, got '20', which is 20 bytes: give the unit, e.g. 20G"
            " (astra run --gpu-mem 20G)\n"
        ),
    )
    assert names(d) == ["kept"] and d.astra("events").stdout == before
    resources = d.json("show", "kept")["spec"]["spec"]["task_template"]["requested_resources"]
    assert resources["memory_bytes"] == 1000**3  # as it was
