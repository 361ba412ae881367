"""Run specs: the JSON of docs/api.md, the same in TOML, defaults, and every rule's error.

"The seed" here is the example run, config/examples/ft-lowprio.json (and .toml): ``SEED`` is
its document, ``SEED_SPEC`` the RunSpec it parses to.
"""

from __future__ import annotations

import copy
import json
import math
import pickle
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner.model import DEFAULT_RESTART_LIMIT, DriveRef, MountMode, RunSpec, TaskTemplate
from runner.runspec.documents import load_spec_file, load_spec_text
from runner.runspec.parse import SpecError, parse_spec, spec_to_dict

EXAMPLES = Path(__file__).resolve().parents[2] / "config" / "examples"
TASK = "spec.task_template"
RES = f"{TASK}.requested_resources"
GPU = f"{RES}.gpu_requests"
DRIVES = f"{TASK}.datavolume_refs"
SCRIPT = "exec torchrun --nproc-per-node=$ASTRAEUS_GPU_COUNT /ckpt/code/train.py"

SEED: dict[str, Any] = {
    "metadata": {"name": "ft-lowprio"},
    "spec": {
        "priority": -100,
        "task_template": {
            "image": "nvcr.io/nvidia/pytorch:24.08-py3",
            "command": "bash",
            "args": ["-c", SCRIPT],
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

SEED_SPEC = RunSpec(
    name="ft-lowprio",
    workspace=None,
    priority=-100,
    workers=1,
    gang=True,
    restart_limit=DEFAULT_RESTART_LIMIT,
    task=TaskTemplate(
        image="nvcr.io/nvidia/pytorch:24.08-py3",
        command="bash",
        args=("-c", SCRIPT),
        env=(),
        time_limit_seconds=172800,
        drives=(DriveRef("checkpoints", "/ckpt", MountMode.READ_WRITE),),
        gpus=8,
        min_per_machine=8,
        per_gpu_cpu_milli=8000,
        per_gpu_memory=64 * 1024**3,
        cpu_milli=0,
        memory=0,
    ),
)

SEED_TOML = """
[metadata]
name = "ft-lowprio"

[spec]
priority = -100

[spec.task_template]
image = "nvcr.io/nvidia/pytorch:24.08-py3"
command = "bash"
args = ["-c", "exec torchrun --nproc-per-node=$ASTRAEUS_GPU_COUNT /ckpt/code/train.py"]
time_limit_seconds = 172800

[[spec.task_template.datavolume_refs]]
name = "checkpoints"
mount_path = "/ckpt"
mode = "ReadWrite"

[spec.task_template.requested_resources.gpu_requests]
count = 8
min_per_machine = 8

[spec.task_template.requested_resources.per_gpu]
cpu_cores = 8
memory_bytes = 68719476736
"""


def seed() -> dict[str, Any]:
    return copy.deepcopy(SEED)


def minimal(**task: Any) -> dict[str, Any]:
    return {"metadata": {"name": "r"}, "spec": {"task_template": {"image": "img", **task}}}


_DELETE = object()


def with_value(path: str, value: object) -> dict[str, Any]:
    """The seed document with ``path`` (dots, ``[i]`` for list items) set or deleted."""
    doc = seed()
    node: Any = doc
    keys: list[Any] = []
    for part in path.split("."):
        name, _, index = part.partition("[")
        keys.append(name)
        if index:
            keys.append(int(index.rstrip("]")))
    for key in keys[:-1]:
        node = node[key] if isinstance(node, list) else node.setdefault(key, {})
    if value is _DELETE:
        del node[keys[-1]]
    elif isinstance(node, list) and keys[-1] == len(node):
        node.append(value)
    else:
        node[keys[-1]] = value
    return doc


def error_of(data: object) -> SpecError:
    with pytest.raises(SpecError) as caught:
        parse_spec(data)
    return caught.value


def assert_one_line(error: SpecError) -> None:
    text = str(error)
    assert text == f"{error.field}: {error.reason}"
    assert len(text.splitlines()) == 1
    assert text.isprintable()


# ------------------------------------------------------------------ good documents


def test_seed_example_parses_to_the_expected_run_spec() -> None:
    assert parse_spec(seed()) == SEED_SPEC


def test_the_same_document_in_toml_gives_the_same_run_spec() -> None:
    assert load_spec_text(SEED_TOML) == SEED_SPEC
    assert load_spec_text(SEED_TOML, "toml") == SEED_SPEC
    assert load_spec_text(json.dumps(SEED)) == SEED_SPEC
    assert load_spec_text(json.dumps(SEED), "json") == SEED_SPEC


def test_a_task_naming_no_image_is_left_for_the_daemon_to_fill() -> None:
    document = {"metadata": {"name": "r"}, "spec": {"task_template": {"command": "true"}}}
    spec = parse_spec(document)
    assert spec.task.image == ""
    assert "image" not in spec_to_dict(spec)["spec"]["task_template"]


def test_defaults() -> None:
    spec = parse_spec(minimal())
    assert spec == RunSpec(name="r", task=TaskTemplate(image="img"))
    assert (spec.workspace, spec.priority, spec.workers, spec.gang) == (None, 0, 1, True)
    assert spec.restart_limit == DEFAULT_RESTART_LIMIT
    assert spec.task.gpus == spec.task.min_per_machine == 0
    assert spec.task.time_limit_seconds is None and spec.task.command is None


def test_nulls_mean_the_default() -> None:
    doc = minimal(command=None, args=None, time_limit_seconds=None, requested_resources=None)
    doc["metadata"]["workspace"] = None
    doc["spec"].update(priority=None, workers=None, gang=None, restart_limit=None)
    assert parse_spec(doc) == parse_spec(minimal())


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ({"memory_bytes": "16GiB"}, {"memory": 16 * 1024**3}),
        ({"per_gpu": {"memory_bytes": "64GiB"}}, {"per_gpu_memory": 64 * 1024**3}),
        ({"memory_bytes": "512G"}, {"memory": 512 * 1000**3}),
        ({"memory_bytes": 8 * 1024**2}, {"memory": 8 * 1024**2}),
        ({"memory_bytes": "6MiB"}, {"memory": 6 * 1024**2}),  # Docker's minimum
        ({"memory_bytes": 0}, {"memory": 0}),  # no limit
        ({"cpu_cores": 2}, {"cpu_milli": 2000}),
        ({"cpu_cores": 1.5}, {"cpu_milli": 1500}),
        ({"per_gpu": {"cpu_cores": 0.25}}, {"per_gpu_cpu_milli": 250}),
        ({"gpu_requests": {"count": 4}}, {"gpus": 4, "min_per_machine": 4}),
        ({"gpu_requests": {"count": 4, "min_per_machine": 1}}, {"gpus": 4, "min_per_machine": 1}),
        ({"gpu_requests": {}}, {"gpus": 0, "min_per_machine": 0}),
        ({"gpu_requests": {"count": 2000 // 2}}, {"gpus": 1000, "min_per_machine": 1000}),
    ],
)
def test_resources(resources: dict[str, Any], expected: dict[str, int]) -> None:
    task = parse_spec(minimal(requested_resources=resources)).task
    assert {key: getattr(task, key) for key in expected} == expected


def test_a_memory_below_dockers_minimum_is_refused_in_a_submit_not_in_a_stored_run() -> None:
    """A run the daemon took before the rule still plans, shows and starts."""
    doc = minimal(requested_resources={"memory_bytes": "10", "per_gpu": {"memory_bytes": 64}})
    assert str(error_of(minimal(requested_resources={"memory_bytes": "10"}))) == (
        f"{RES}.memory_bytes: must be at least 6MiB (Docker's minimum), got '10', which is"
        " 10 bytes: give the unit, e.g. 10G (astra run --memory 10G)"
    )
    task = parse_spec(doc, stored=True).task
    assert (task.memory, task.per_gpu_memory) == (10, 64)


def test_a_gpu_share_below_6mib_is_refused_in_a_submit_not_in_a_stored_run() -> None:
    """`--gpu-mem 20` is 20 bytes on each GPU, as `--memory 10` was 10 bytes."""
    shared = {"gpu_requests": {"count": 1, "memory_bytes": "20", "shared": True}}
    assert str(error_of(minimal(requested_resources=shared))) == (
        f"{RES}.gpu_requests.memory_bytes: must be at least 6MiB, got '20', which is 20"
        " bytes: give the unit, e.g. 20G (astra run --gpu-mem 20G)"
    )
    assert parse_spec(minimal(requested_resources=shared), stored=True).task.gpu_share == 20
    enough = {"gpu_requests": {"count": 1, "memory_bytes": "6MiB", "shared": True}}
    assert parse_spec(minimal(requested_resources=enough)).task.gpu_share == 6 * 1024**2


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        ({"command": ["python", "-u"], "args": ["train.py"]}, ("python", ("-u", "train.py"))),
        ({"command": ["python"]}, ("python", ())),
        ({"command": "bash", "args": ["-c", ""]}, ("bash", ("-c", ""))),
    ],
)
def test_command_list_leads_the_args(
    task: dict[str, Any], expected: tuple[str, tuple[str, ...]]
) -> None:
    spec = parse_spec(minimal(**task))
    assert (spec.task.command, spec.task.args) == expected


def test_env_is_sorted_pairs() -> None:
    spec = parse_spec(minimal(env={"ZED": "1", "A_B": "", "_x": "y"}))
    assert spec.task.env == (("A_B", ""), ("ZED", "1"), ("_x", "y"))


def test_drives_modes_and_normalised_paths() -> None:
    refs = [
        {"name": "data", "mount_path": "/data/", "mode": "ReadOnly"},
        {"name": "checkpoints", "mount_path": "//ckpt/./run"},
    ]
    assert parse_spec(minimal(datavolume_refs=refs)).task.drives == (
        DriveRef("data", "/data", MountMode.READ_ONLY),
        DriveRef("checkpoints", "/ckpt/run", MountMode.READ_WRITE),
    )


def test_workspace_workers_gang_restart_limit() -> None:
    doc = minimal()
    doc["metadata"]["workspace"] = "vision"
    doc["spec"].update(workers=4, gang=False, restart_limit=0, priority=1000)
    spec = parse_spec(doc)
    assert (spec.workspace, spec.workers, spec.gang, spec.restart_limit) == ("vision", 4, False, 0)
    assert spec.priority == 1000


def test_a_run_larger_than_any_machine_is_valid() -> None:
    doc = minimal(requested_resources={"gpu_requests": {"count": 1024}, "memory_bytes": 1024**5})
    doc["spec"]["workers"] = 1024
    assert parse_spec(doc).total_resources().gpus == 1024 * 1024


# ------------------------------------------------------------------ round trip


@pytest.mark.parametrize(
    "doc",
    [
        SEED,
        minimal(),
        minimal(
            command=["python", "-u"],
            env={"B": "2", "A": "1"},
            requested_resources={"cpu_cores": 1.5, "memory_bytes": "3GiB"},
            datavolume_refs=[{"name": "d", "mount_path": "/d", "mode": "ReadOnly"}],
        ),
        {
            "metadata": {"name": "w", "workspace": "nlp"},
            "spec": {
                "workers": 3,
                "gang": False,
                "restart_limit": 0,
                "task_template": {"image": "i"},
            },
        },
    ],
)
def test_spec_to_dict_round_trips(doc: dict[str, Any]) -> None:
    spec = parse_spec(copy.deepcopy(doc))
    out = spec_to_dict(spec)
    assert parse_spec(out) == spec
    assert parse_spec(json.loads(json.dumps(out))) == spec


def test_spec_to_dict_keeps_the_seed_shape() -> None:
    out = spec_to_dict(SEED_SPEC)
    assert out["metadata"] == {"name": "ft-lowprio"}
    task = out["spec"]["task_template"]  # type: ignore[index]
    assert task["requested_resources"]["per_gpu"] == {"cpu_cores": 8, "memory_bytes": 68719476736}
    assert task["datavolume_refs"] == SEED["spec"]["task_template"]["datavolume_refs"]
    assert "time_limit_seconds" in task and "command" in task


# ------------------------------------------------------------------ bad documents

BAD: list[tuple[str, object, str]] = [
    # (path to set in the seed, value, the field the error names)
    ("apiVersion", "v1", "apiVersion"),
    ("metadata.labels", {}, "metadata.labels"),
    ("spec.replicas", 2, "spec.replicas"),
    (f"{TASK}.foo", 1, f"{TASK}.foo"),
    (f"{RES}.gpus", 8, f"{RES}.gpus"),
    (f"{GPU}.type", "a100", f"{GPU}.type"),
    (f"{RES}.per_gpu.disk", 1, f"{RES}.per_gpu.disk"),
    (f"{DRIVES}[0].readonly", True, f"{DRIVES}[0].readonly"),
    ("metadata", _DELETE, "metadata"),
    ("metadata", [], "metadata"),
    ("spec", _DELETE, "spec"),
    ("spec", "x", "spec"),
    ("metadata.name", _DELETE, "metadata.name"),
    (TASK, _DELETE, TASK),
    (TASK, [], TASK),
    (f"{TASK}.image", "", f"{TASK}.image"),
    (f"{TASK}.image", 3, f"{TASK}.image"),
    (f"{TASK}.image", "a b", f"{TASK}.image"),
    (f"{TASK}.image", "x" * 4097, f"{TASK}.image"),
    ("metadata.name", "Bad_Name", "metadata.name"),
    ("metadata.name", "-x", "metadata.name"),
    ("metadata.name", "x-", "metadata.name"),
    ("metadata.name", "a" * 64, "metadata.name"),
    ("metadata.name", "", "metadata.name"),
    ("metadata.name", "ok\n", "metadata.name"),
    ("metadata.name", 7, "metadata.name"),
    ("metadata.workspace", "Vision", "metadata.workspace"),
    ("metadata.workspace", "", "metadata.workspace"),
    ("spec.priority", 1001, "spec.priority"),
    ("spec.priority", -1001, "spec.priority"),
    ("spec.priority", 1.5, "spec.priority"),
    ("spec.priority", 100.0, "spec.priority"),
    ("spec.priority", True, "spec.priority"),
    ("spec.priority", "5", "spec.priority"),
    ("spec.priority", 10**400, "spec.priority"),
    ("spec.workers", 0, "spec.workers"),
    ("spec.workers", 1025, "spec.workers"),
    ("spec.gang", "yes", "spec.gang"),
    ("spec.gang", 1, "spec.gang"),
    ("spec.restart_limit", -1, "spec.restart_limit"),
    ("spec.restart_limit", 1001, "spec.restart_limit"),
    (f"{GPU}.count", -1, f"{GPU}.count"),
    (f"{GPU}.count", 1.5, f"{GPU}.count"),
    (f"{GPU}.count", "2", f"{GPU}.count"),
    (f"{GPU}.count", True, f"{GPU}.count"),
    (f"{GPU}.count", 1025, f"{GPU}.count"),
    (f"{GPU}.min_per_machine", 9, f"{GPU}.min_per_machine"),
    (f"{GPU}.min_per_machine", -1, f"{GPU}.min_per_machine"),
    (f"{GPU}", [8], f"{GPU}"),
    (f"{RES}.cpu_cores", -1, f"{RES}.cpu_cores"),
    (f"{RES}.cpu_cores", "2", f"{RES}.cpu_cores"),
    (f"{RES}.cpu_cores", math.nan, f"{RES}.cpu_cores"),
    (f"{RES}.cpu_cores", math.inf, f"{RES}.cpu_cores"),
    (f"{RES}.cpu_cores", 100_001, f"{RES}.cpu_cores"),
    (f"{RES}.cpu_cores", 1e308, f"{RES}.cpu_cores"),
    (f"{RES}.per_gpu.cpu_cores", False, f"{RES}.per_gpu.cpu_cores"),
    (f"{RES}.memory_bytes", "lots", f"{RES}.memory_bytes"),
    (f"{RES}.memory_bytes", "64 GiBs", f"{RES}.memory_bytes"),
    (f"{RES}.memory_bytes", "9" * 400, f"{RES}.memory_bytes"),
    (f"{RES}.memory_bytes", "9" * 400 + "GiB", f"{RES}.memory_bytes"),
    (f"{RES}.memory_bytes", -1, f"{RES}.memory_bytes"),
    (f"{RES}.memory_bytes", 1.5, f"{RES}.memory_bytes"),
    (f"{RES}.memory_bytes", True, f"{RES}.memory_bytes"),
    (f"{RES}.memory_bytes", "2PiB", f"{RES}.memory_bytes"),
    (f"{RES}.memory_bytes", 1024**5 + 1, f"{RES}.memory_bytes"),
    (f"{RES}.per_gpu.memory_bytes", "1.5B", f"{RES}.per_gpu.memory_bytes"),
    (f"{RES}.per_gpu.memory_bytes", [], f"{RES}.per_gpu.memory_bytes"),
    (f"{RES}.memory_bytes", "10", f"{RES}.memory_bytes"),  # 10 bytes: below Docker's 6MiB
    (f"{RES}.memory_bytes", 6 * 1024**2 - 1, f"{RES}.memory_bytes"),
    (f"{RES}.per_gpu.memory_bytes", 64, f"{RES}.per_gpu.memory_bytes"),
    (f"{TASK}.time_limit_seconds", 0, f"{TASK}.time_limit_seconds"),
    (f"{TASK}.time_limit_seconds", -5, f"{TASK}.time_limit_seconds"),
    (f"{TASK}.time_limit_seconds", 1.5, f"{TASK}.time_limit_seconds"),
    (f"{TASK}.time_limit_seconds", True, f"{TASK}.time_limit_seconds"),
    (f"{TASK}.time_limit_seconds", "48h", f"{TASK}.time_limit_seconds"),
    (f"{TASK}.time_limit_seconds", 10**12, f"{TASK}.time_limit_seconds"),
    (f"{TASK}.command", "", f"{TASK}.command"),
    (f"{TASK}.command", [], f"{TASK}.command"),
    (f"{TASK}.command", ["", "x"], f"{TASK}.command[0]"),
    (f"{TASK}.command", ["ok", 3], f"{TASK}.command[1]"),
    (f"{TASK}.command", {"a": 1}, f"{TASK}.command"),
    (f"{TASK}.command", "x" * 4097, f"{TASK}.command"),
    (f"{TASK}.args", "-c", f"{TASK}.args"),
    (f"{TASK}.args", ["ok", None], f"{TASK}.args[1]"),
    (f"{TASK}.args", ["nul\0"], f"{TASK}.args[0]"),
    (f"{TASK}.command", ["bash", *["x"] * 1025], f"{TASK}.command"),
    (f"{TASK}.args", ["x"] * 1025, f"{TASK}.args"),
    (f"{TASK}.args", ["x" * (128 * 1024 + 1)], f"{TASK}.args[0]"),
    (f"{TASK}.args", ["x" * 100_000] * 11, TASK),
    (f"{TASK}.env", ["A=1"], f"{TASK}.env"),
    (f"{TASK}.env", {"1BAD": "x"}, f"{TASK}.env"),
    (f"{TASK}.env", {"BAD-KEY": "x"}, f"{TASK}.env"),
    (f"{TASK}.env", {"": "x"}, f"{TASK}.env"),
    (f"{TASK}.env", {"K": 1}, f"{TASK}.env.K"),
    (f"{TASK}.env", {f"K{i}": "" for i in range(1025)}, f"{TASK}.env"),
    (DRIVES, {}, DRIVES),
    (DRIVES, [{"name": "d", "mount_path": "/d"}] * 65, DRIVES),
    (f"{DRIVES}[0]", "checkpoints:/ckpt", f"{DRIVES}[0]"),
    (f"{DRIVES}[0].name", "/srv/data", f"{DRIVES}[0].name"),
    (f"{DRIVES}[0].name", _DELETE, f"{DRIVES}[0].name"),
    (f"{DRIVES}[0].mount_path", _DELETE, f"{DRIVES}[0].mount_path"),
    (f"{DRIVES}[0].mount_path", "ckpt", f"{DRIVES}[0].mount_path"),
    (f"{DRIVES}[0].mount_path", "/ckpt/../etc", f"{DRIVES}[0].mount_path"),
    (f"{DRIVES}[0].mount_path", "/..", f"{DRIVES}[0].mount_path"),
    (f"{DRIVES}[0].mount_path", "/", f"{DRIVES}[0].mount_path"),
    (f"{DRIVES}[0].mount_path", "//", f"{DRIVES}[0].mount_path"),
    (f"{DRIVES}[0].mount_path", "/./", f"{DRIVES}[0].mount_path"),
    (f"{DRIVES}[0].mount_path", "/proc/x", f"{DRIVES}[0].mount_path"),
    (f"{DRIVES}[0].mount_path", "/a:b", f"{DRIVES}[0].mount_path"),
    (f"{DRIVES}[0].mode", "ReadOnlyMany", f"{DRIVES}[0].mode"),
    (f"{DRIVES}[0].mode", "readonly", f"{DRIVES}[0].mode"),
    (f"{DRIVES}[0].mode", True, f"{DRIVES}[0].mode"),
    (f"{DRIVES}[1]", {"name": "other", "mount_path": "/ckpt"}, f"{DRIVES}[1].mount_path"),
    (f"{DRIVES}[1]", {"name": "other", "mount_path": "/ckpt/"}, f"{DRIVES}[1].mount_path"),
]


@pytest.mark.parametrize(("path", "value", "field"), BAD, ids=[f"{p}={v!r:.30}" for p, v, _ in BAD])
def test_bad_documents_name_the_field(path: str, value: object, field: str) -> None:
    error = error_of(with_value(path, value))
    assert error.field == field
    assert_one_line(error)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (None, "<document>"),
        ([], "<document>"),
        ("spec", "<document>"),
        (42, "<document>"),
        ({"spec": {}, 3: 4}, "<document>[3]"),
        ({"metadata": {"name": "x", "bad key\n": 1}}, "metadata['bad key\\n']"),
        (
            {"metadata": {"name": "x"}, "spec": {"task_template": {"image": "i", "env": {3: "x"}}}},
            f"{TASK}.env",
        ),
    ],
)
def test_garbage_documents(data: object, field: str) -> None:
    error = error_of(data)
    assert error.field == field
    assert_one_line(error)


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("spec.priority", 5000, "spec.priority: must be between -1000 and 1000, got 5000"),
        (
            "spec.priority",
            1.5,
            "spec.priority: must be an integer between -1000 and 1000, got 1.5",
        ),
        (
            f"{TASK}.foo",
            1,
            f"{TASK}.foo: unknown key (expected one of: image, command, args, env, "
            "time_limit_seconds, datavolume_refs, requested_resources, working_dir, submit_dir,"
            " submit_env)",
        ),
        (
            f"{GPU}.min_per_machine",
            9,
            f"{GPU}.min_per_machine: must not be more than count (8), got 9",
        ),
        (
            f"{DRIVES}[1]",
            {"name": "x", "mount_path": "/ckpt"},
            f"{DRIVES}[1].mount_path: '/ckpt' is already mounted by {DRIVES}[0]",
        ),
        ("metadata.name", "a" * 200, "metadata.name: must be 1-63 lowercase letters"),
        ("spec.priority", 10**5000, "spec.priority: must be between -1000 and 1000, got a"),
    ],
    ids=lambda v: "int" if isinstance(v, int) else None,  # str() fails on 10**5000
)
def test_messages(path: str, value: object, message: str) -> None:
    assert str(error_of(with_value(path, value))).startswith(message)


def test_command_list_and_args_count_together() -> None:
    error = error_of(minimal(command=["bash", *["x"] * 600], args=["y"] * 500))
    assert error.field == f"{TASK}.args"
    assert_one_line(error)


LIMIT_MESSAGE = f"{TASK}: command, args and env must be at most 65536 characters together (64 KiB)"


def test_command_args_and_env_together_fit_in_64_kib() -> None:
    env = {"K": "v" * 4000}  # 4001 characters with its name
    args = ["a" * 30_000, "b" * (65536 - 4001 - 30_000 - 4)]
    assert parse_spec(minimal(command="bash", args=args, env=env)).task.args == tuple(args)
    error = error_of(minimal(command="bash", args=[*args, "c"], env=env))
    assert str(error) == (
        f"{LIMIT_MESSAGE}, got 65537: put larger inputs in a file on a drive; the largest"
        " variables: K (4001) (astra run --export=NONE, or --export naming only some, carries"
        " fewer)"
    )
    carried = minimal(command="bash", args=args)
    carried["spec"]["task_template"]["submit_env"] = {"BIG": "v" * 3999, "K": "x"}
    error = error_of(carried)  # what was carried from the submit counts too, and is named
    assert "got 65539:" in str(error) and "the largest variables: BIG (4002), K (2)" in str(error)


@pytest.mark.parametrize(
    "task",
    [
        {"args": ["x" * 40_000, "y" * 30_000]},  # each argument fits, not all together
        {"env": {f"V{i}": "x" * 4000 for i in range(17)}},  # each value fits, not all
        {"command": ["bash", "-c", "x" * 66_000]},  # the command's own arguments count
    ],
    ids=["args", "env", "command-list"],
)
def test_the_64_kib_bound_counts_command_args_and_env(task: dict[str, Any]) -> None:
    error = error_of(minimal(**task))
    assert (error.field, str(error).startswith(LIMIT_MESSAGE)) == (TASK, True)
    assert_one_line(error)


def test_spec_error_is_a_value_error_that_pickles() -> None:
    error = error_of(with_value("spec.priority", 5000))
    assert isinstance(error, ValueError)
    again = pickle.loads(pickle.dumps(error))
    assert (again.field, again.reason, str(again)) == (error.field, error.reason, str(error))


# ------------------------------------------------------------------ text and files


@pytest.mark.parametrize(
    ("text", "fmt", "reason"),
    [
        ('{"metadata": ', None, "not valid JSON"),
        ('{"metadata": {}\n,,}', "json", "line 2"),
        ("[metadata\nname=1", None, "not valid TOML"),
        ("name = = 1", "toml", "line 1"),
        ("[" * 100_000, "json", "not valid JSON"),
        ("x = " + "[" * 100_000, "toml", "not valid TOML"),
        ('{"a": ' + "9" * 5000 + "}", None, "not valid JSON"),
        ('{"metadata": {}, "metadata": {}}', None, "duplicate key 'metadata'"),
        ("{}", "yaml", "unknown format"),
        ("", None, "required"),
    ],
)
def test_decode_errors(text: str, fmt: str | None, reason: str) -> None:
    with pytest.raises(SpecError) as caught:
        load_spec_text(text, fmt)
    assert caught.value.field in ("<document>", "metadata")
    assert reason in str(caught.value)
    assert_one_line(caught.value)


@pytest.mark.parametrize("name", ["ft-lowprio.json", "ft-lowprio.toml", "finetune.sbatch"])
def test_example_files_parse(name: str) -> None:
    spec = load_spec_file(EXAMPLES / name)
    assert spec.task.image == "nvcr.io/nvidia/pytorch:24.08-py3"
    assert spec.task.gpus == 8
    assert spec.task.drives[0] == DriveRef("checkpoints", "/ckpt", MountMode.READ_WRITE)


def test_json_and_toml_examples_are_the_seed_run() -> None:
    assert load_spec_file(EXAMPLES / "ft-lowprio.json") == SEED_SPEC
    assert load_spec_file(EXAMPLES / "ft-lowprio.toml") == SEED_SPEC


@pytest.mark.parametrize(
    ("filename", "text"),
    [
        ("run.json", json.dumps(SEED)),
        ("run.toml", SEED_TOML),
        ("run.spec", json.dumps(SEED)),
        ("run", SEED_TOML),
    ],
)
def test_load_spec_file_by_extension_or_content(tmp_path: Path, filename: str, text: str) -> None:
    (tmp_path / filename).write_text(text)
    assert load_spec_file(tmp_path / filename) == SEED_SPEC


def test_load_spec_file_reads_sbatch_by_content(tmp_path: Path) -> None:
    path = tmp_path / "My_Job"
    path.write_text("#!/bin/bash\n#SBATCH --container-image=img\necho hi\n")
    spec = load_spec_file(path)
    assert (spec.name, spec.task.command) == ("my-job", "bash")


@pytest.mark.parametrize("content", [None, b"\xff\xfe{"])
def test_unreadable_files_are_spec_errors(tmp_path: Path, content: bytes | None) -> None:
    path = tmp_path / "run.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(SpecError) as caught:
        load_spec_file(path)
    assert caught.value.field == str(path)
    assert_one_line(caught.value)


# ------------------------------------------------------------------ never anything else

KEYS = sorted(
    {
        "metadata",
        "spec",
        "name",
        "workspace",
        "task_template",
        "image",
        "requested_resources",
        "gpu_requests",
        "count",
        "datavolume_refs",
        "mount_path",
        "env",
        "args",
        "command",
        "per_gpu",
        "cpu_cores",
        "memory_bytes",
    }
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats()
    | st.text(max_size=20)
    | st.sampled_from(["img", "r", "/ckpt", "64GiB", "ReadOnly", "..", "/"])
)
KEY = st.sampled_from(KEYS) | st.text(max_size=8) | st.integers() | st.none()
JSONISH = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEY, inner, max_size=5),
    max_leaves=30,
)


def outcome(data: object) -> None:
    try:
        result = parse_spec(data)
    except SpecError as error:
        assert_one_line(error)
    else:
        assert isinstance(result, RunSpec)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(JSONISH)
def test_arbitrary_values_give_a_run_spec_or_a_spec_error(data: object) -> None:
    outcome(data)


def paths(node: object, prefix: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    found = [prefix]
    if isinstance(node, dict):
        for key, child in node.items():
            found += paths(child, (*prefix, key))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            found += paths(child, (*prefix, index))
    return found


SEED_PATHS = [p for p in paths(SEED) if p]


@st.composite
def mutated_seeds(draw: st.DrawFn) -> object:
    doc = seed()
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(SEED_PATHS))
        node: Any = doc
        try:
            for key in path[:-1]:
                node = node[key]
            action = draw(st.sampled_from(["set", "delete", "add"]))
            if action == "set":
                node[path[-1]] = draw(JSONISH)
            elif action == "delete":
                del node[path[-1]]
            elif isinstance(node, dict):
                node[draw(KEY)] = draw(JSONISH)
        except (KeyError, IndexError, TypeError):
            pass  # an earlier mutation changed the shape
    return doc


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_seeds())
def test_mutated_seeds_give_a_run_spec_or_a_spec_error(data: object) -> None:
    outcome(data)


@settings(max_examples=200)
@given(st.text(max_size=200))
def test_arbitrary_text_gives_a_run_spec_or_a_spec_error(text: str) -> None:
    for fmt in (None, "json", "toml"):
        try:
            load_spec_text(text, fmt)
        except SpecError as error:
            assert_one_line(error)
