"""One document builder for `astra run` and the dashboard's form."""

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from astraeus_tui.screens.submit import build_document
from runner.runspec.build import (
    FieldError,
    default_name,
    drive_list,
    drive_ref,
    env_vars,
    run_document,
    with_submit_env,
)
from runner.runspec.parse import parse_spec


def test_the_smallest_document() -> None:
    assert run_document("a", ["true"]) == {
        "metadata": {"name": "a"},
        "spec": {
            "priority": 0,
            "task_template": {
                "command": "true",
                "args": [],
                "requested_resources": {"gpu_requests": {"count": 0}, "cpu_cores": 0},
                "datavolume_refs": [],
            },
        },
    }


def test_every_field_lands_where_the_spec_reads_it() -> None:
    document = run_document(
        "train", ["python3", "train.py", "--steps", "10"], image="img:1", gpus=2, cpus=1.5,
        memory="8GiB", time_limit_seconds=7200, priority=5, workspace="nlp",
        drives=[drive_ref("ckpt:/ckpt:ro")], env={"A": "1"}, workers=2, after=["prep"],
    )  # fmt: skip
    spec = parse_spec(document)
    task = spec.task
    assert (spec.name, spec.workspace, spec.priority, spec.workers) == ("train", "nlp", 5, 2)
    assert spec.after == ("prep",)
    assert (task.image, task.command, task.args) == (
        "img:1",
        "python3",
        ("train.py", "--steps", "10"),
    )
    assert (task.gpus, task.cpu_milli, task.memory) == (2, 1500, 8 * 1024**3)
    assert (task.time_limit_seconds, task.env) == (7200, (("A", "1"),))
    assert document["spec"]["task_template"]["datavolume_refs"] == [
        {"name": "ckpt", "mount_path": "/ckpt", "mode": "ReadOnly"}
    ]
    assert document["spec"]["task_template"]["requested_resources"] == {
        "gpu_requests": {"count": 2}, "cpu_cores": 1.5, "memory_bytes": "8GiB"
    }  # fmt: skip


def test_the_form_and_the_cli_build_the_same_document() -> None:
    values = {"name": " ft ", "command": "python3 -c 'print(1)'", "gpus": "1", "cpus": "",
              "memory": "", "limit": "90m", "priority": "-5", "drives": "a:/x, b:/y:ro",
              "image": ""}  # fmt: skip
    cli = run_document(
        "ft", ["python3", "-c", "print(1)"], gpus=1, time_limit_seconds=5400, priority=-5,
        workspace="vision", drives=[drive_ref("a:/x"), drive_ref("b:/y:ro")],
        submit_dir=os.getcwd(),  # both start it where they are called
    )  # fmt: skip
    assert build_document(values, "vision") == cli


@pytest.mark.parametrize("text", ["a", "a:/x:rx", "a:/x:ro:more"])
def test_a_drive_that_is_not_one(text: str) -> None:
    with pytest.raises(FieldError) as error:
        drive_ref(text)
    assert (error.value.field, error.value.message) == (
        "drives", f"{text!r}: use NAME:/path or NAME:/path:ro"
    )  # fmt: skip


def test_drive_lists_and_env() -> None:
    assert drive_list(" , a:/x:rw,") == [{"name": "a", "mount_path": "/x", "mode": "ReadWrite"}]
    assert env_vars(["A=1", "B=x=y", "C="]) == {"A": "1", "B": "x=y", "C": ""}
    with pytest.raises(FieldError, match="'A': use KEY=VALUE"):
        env_vars(["A"])


def test_a_bad_time_limit_names_the_limit_field() -> None:
    values = {"name": "x", "command": "true", "limit": "0.5s"}
    with pytest.raises(FieldError) as error:
        build_document(values, None)
    assert error.value.field == "limit"
    assert error.value.message == (
        "'0.5s' is under a second: at least 1s, or leave it out for none"
    )


def _reference_name(command: str) -> str:
    """The default name as first written: the command's Path name, lower case, each run of
    other characters than a-z0-9- one dash (the builder now does it without re/pathlib)."""
    import re
    from pathlib import Path

    return re.sub(r"[^a-z0-9-]+", "-", Path(command).name.lower()).strip("-")[:40] or "run"


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from("aZ9-_./ .İßé\u0301\x1b") | st.characters(), max_size=60))
def test_a_default_name_is_the_commands_base_name_made_a_name(command: str) -> None:
    made = default_name(command)
    base, _, digits = made.rpartition("-")
    assert base == _reference_name(command)
    assert len(digits) == 4 and all(c in "0123456789abcdef" for c in digits)


def test_default_names_of_paths() -> None:
    cuts = {"/usr/bin/python3": "python3", "./train.py": "train-py", "a/b/": "b", "a/.": "a",
            "..": "run", "": "run", "A__B": "a-b", "a-_b": "a--b"}  # fmt: skip
    for command, base in cuts.items():
        assert default_name(command).rpartition("-")[0] == base, command


def test_the_forms_run_carries_the_environment_where_its_spec_names_none() -> None:
    shell = {"VIRTUAL_ENV": "/p/.venv", "PATH": "/p/.venv/bin:/usr/bin", "_": "/usr/bin/x"}
    carried = with_submit_env(run_document("a", ["python", "t.py"]), shell)
    assert carried["spec"]["task_template"]["submit_env"] == {  # type: ignore[index]
        "VIRTUAL_ENV": "/p/.venv",
        "PATH": "/p/.venv/bin:/usr/bin",
    }  # the shell's own left
    own = run_document("b", ["true"], submit_env={"A": "1"})
    assert with_submit_env(own, shell)["spec"]["task_template"]["submit_env"] == {"A": "1"}  # type: ignore[index]
    parse_spec(carried)  # a spec the daemon takes
