"""The New run form's fields and the spec document in step (astraeus_tui.form_fields)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from astraeus_tui.form_fields import values_of, with_values
from runner.runspec.build import FieldError, run_document

GUIDE = {  # the scheduling guide's ft-lowprio, as its JSON tab gives it
    "metadata": {"name": "ft-lowprio"},
    "spec": {
        "priority": -100,
        "task_template": {
            "image": "nvcr.io/nvidia/pytorch:24.08-py3",
            "command": "bash",
            "args": ["-c", "exec torchrun --nproc-per-node=$ASTRAEUS_GPU_COUNT /ckpt/train.py"],
            "time_limit_seconds": 172800,
            "datavolume_refs": [
                {"name": "checkpoints", "mount_path": "/ckpt", "mode": "ReadWrite"}
            ],
            "requested_resources": {
                "gpu_requests": {"count": 8, "min_per_machine": 8},
                "per_gpu": {"cpu_cores": 8, "memory_bytes": 68719476736},
            },
        },
    },
}


def test_the_guides_spec_reads_into_the_fields() -> None:
    values = values_of(GUIDE)
    assert (
        values["command"]
        == "bash -c 'exec torchrun --nproc-per-node=$ASTRAEUS_GPU_COUNT /ckpt/train.py'"
    )
    assert (values["gpus"], values["drives"], values["priority"], values["limit"]) == (
        "8", "checkpoints:/ckpt", "-100", "2d")  # fmt: skip
    assert with_values(GUIDE, values) == GUIDE  # read and written back: the same document


def test_a_field_typed_in_changes_its_place_only() -> None:
    values = values_of(GUIDE) | {"gpus": "4", "limit": "90m", "drives": "checkpoints:/c:ro"}
    changed = with_values(GUIDE, values)
    task = changed["spec"]["task_template"]
    assert task["requested_resources"] == {
        "gpu_requests": {"count": 4, "min_per_machine": 8},  # what only the JSON said stays
        "per_gpu": {"cpu_cores": 8, "memory_bytes": 68719476736},
    }
    assert (
        task["time_limit_seconds"] == 5400
        and task["args"] == GUIDE["spec"]["task_template"]["args"]
    )
    assert task["datavolume_refs"] == [
        {"name": "checkpoints", "mount_path": "/c", "mode": "ReadOnly"}
    ]
    assert GUIDE["spec"]["task_template"]["time_limit_seconds"] == 172800  # not changed in place


def test_emptied_fields_leave_the_document() -> None:
    values = values_of(GUIDE) | {"limit": "", "image": "", "restarts": "3"}
    changed = with_values(GUIDE, values)
    assert "time_limit_seconds" not in changed["spec"]["task_template"]
    assert "image" not in changed["spec"]["task_template"]
    assert changed["spec"]["restart_limit"] == 3


@pytest.mark.parametrize(
    ("field", "typed", "says"),
    [("gpus", "eight", "'eight' is not a whole number"), ("limit", "soon", "is not a duration"),
     ("command", "'open", "No closing quotation"), ("drives", "nocolon", "use NAME:/path"),
     ("cpus", "x", "'x' is not a number"), ("command", "  ", "give the command to run")],
)  # fmt: skip
def test_a_field_that_cannot_be_read_is_named(field: str, typed: str, says: str) -> None:
    with pytest.raises(FieldError) as e:
        with_values(GUIDE, values_of(GUIDE) | {field: typed})
    assert e.value.field == field and says in e.value.message


words = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=12)


@given(
    argv=st.lists(words, min_size=1, max_size=4).filter(lambda a: a[0] != ""),
    gpus=st.integers(0, 16), cpus=st.sampled_from([0, 0.5, 2, 8.0]),
    limit=st.one_of(st.none(), st.integers(1, 10**7)), priority=st.integers(-1000, 1000),
    memory=st.sampled_from([None, "64GiB", "512MiB"]),
)  # fmt: skip
def test_what_the_cli_builds_reads_back_unchanged(
    argv: list[str], gpus: int, cpus: float, limit: int | None, priority: int, memory: str | None
) -> None:
    doc = run_document("r", argv, image="img:1", gpus=gpus, cpus=cpus, memory=memory,
                       time_limit_seconds=limit, priority=priority,
                       drives=[{"name": "d", "mount_path": "/d", "mode": "ReadOnly"}])  # fmt: skip
    values = values_of(doc)
    assert with_values(doc, values) == doc
    typed_again = with_values({"metadata": {}, "spec": {}}, values)  # every field written
    assert values_of(typed_again) == values


def test_the_folder_is_the_submit_folder_until_one_is_typed_in() -> None:
    sent = run_document("r", ["python", "train.py"], submit_dir="/home/alice/proj")
    values = values_of(sent)
    assert values["folder"] == "/home/alice/proj"
    assert with_values(sent, values) == sent  # untouched: where it was sent from
    task = with_values(sent, values | {"folder": "/data/other"})["spec"]["task_template"]
    assert task["working_dir"] == "/data/other"  # typed in: a --chdir, which must be entered
    emptied = with_values(sent, values | {"folder": " "})["spec"]["task_template"]
    assert "working_dir" not in emptied and "submit_dir" not in emptied  # the member's home
