"""Fuzzing the spec parsers: whatever the text, a RunSpec that is safe, or one SpecError line.

tests/unit/test_spec.py fuzzes decoded values (random trees, mutated seeds). Here the
mutations are of the *text* (JSON, TOML, #SBATCH) with hostile fragments spliced in,
and every spec that is accepted is checked for what the daemon relies on: drives are
config names mounted on clean container paths outside the system's folders, every
number is in range, and the spec reads back unchanged.
"""

from __future__ import annotations

import json
import posixpath
import re

import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner.model import RunSpec
from runner.runspec.documents import load_spec_text
from runner.runspec.parse import (
    MAX_CPU_CORES,
    MAX_GPUS,
    MAX_MEMORY,
    MAX_WORKERS,
    SpecError,
    parse_spec,
    spec_to_dict,
)
from runner.runspec.sbatch import parse_sbatch
from tests.hostile.cases import CORPUS

FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
SYSTEM = ("/proc", "/sys", "/dev", "/run", "/var/run", "/etc", "/boot", "/bin", "/sbin", "/usr",
          "/lib", "/lib32", "/lib64", "/libx32")  # fmt: skip
SEED_JSON = (CORPUS / "mount-dotdot.json").read_text().replace("/ckpt/../etc", "/ckpt")
SEED_TOML = (CORPUS / "workers-million.toml").read_text().replace("1000000", "2") + (
    '\n[[spec.task_template.datavolume_refs]]\nname = "checkpoints"\nmount_path = "/ckpt"\n'
)
HOSTILE = [
    "..", "/..", "/etc", "/proc/self/root", "/var/run/docker.sock", "/", "//", ":", "~",
    "\x00", "\r\n", "\r", "\n", "\\", '"', "'", "[", "]", "{", "}", "[[", ",", "=", "#",
    "NaN", "Infinity", "-1", "1e999", "9" * 30, "true", "null", '"privileged": true, ',
    "privileged = true\n", '"network_mode": "host", ', "\ufeff", "\u202e", "\udcff",
]  # fmt: skip
OPTIONS = [
    "--job-name", "-J", "--nice", "--time", "-t", "--gres", "--gpus", "-G", "--cpus-per-task",
    "-c", "--cpus-per-gpu", "--mem", "--mem-per-gpu", "--container-image",
    "--container-mounts", "--privileged", "--export", "--uid", "--container-remap-root",
]  # fmt: skip
VALUES = [
    "x", "gpu:2", "gpu:a100:1", "checkpoints:/ckpt", "checkpoints:/ckpt:ro", "/etc:/x",
    "../x:/y", "checkpoints:/ckpt/../etc", "checkpoints:/var/run/docker.sock",
    "checkpoints:/ckpt,/:/host", "busybox", "user@reg#img:1", "1:00:00", "100", "-100",
    "64G", "1000000000", "UNLIMITED", '"a b"', "'", "",
]  # fmt: skip


def assert_safe(spec: RunSpec) -> None:
    """What the daemon relies on in an accepted spec."""
    assert NAME.fullmatch(spec.name) and (spec.workspace is None or NAME.fullmatch(spec.workspace))
    assert -1000 <= spec.priority <= 1000 and 1 <= spec.workers <= MAX_WORKERS
    task = spec.task
    assert 0 <= task.min_per_machine <= task.gpus <= MAX_GPUS
    assert 0 <= task.cpu_milli <= MAX_CPU_CORES * 1000 and 0 <= task.memory <= MAX_MEMORY
    assert 0 <= task.per_gpu_memory <= MAX_MEMORY
    # an image may be left empty: the daemon fills in its default_image at submit
    assert not any(c.isspace() for c in task.image) and "\0" not in task.image
    for drive in task.drives:
        path = drive.mount_path
        assert NAME.fullmatch(drive.name)
        assert path.startswith("/") and path == posixpath.normpath(path) and path != "/"
        assert ".." not in path.split("/") and ":" not in path and "\0" not in path
        assert not any(path == s or path.startswith(s + "/") for s in SYSTEM), path
    assert len({d.mount_path for d in task.drives}) == len(task.drives)
    assert parse_spec(json.loads(json.dumps(spec_to_dict(spec)))) == spec


def outcome(parse: object, *args: object, **kwargs: object) -> None:
    try:
        spec = parse(*args, **kwargs)  # type: ignore[operator]
    except SpecError as error:
        assert "\n" not in str(error) and "\r" not in str(error)
    else:
        assert_safe(spec)


@st.composite
def mutated(draw: st.DrawFn, text: str) -> str:
    """``text`` with a few edits: hostile fragments spliced in, slices cut or repeated."""
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        end = draw(st.integers(at, min(len(text), at + 12)))
        piece = draw(st.sampled_from(HOSTILE) | st.text(max_size=6))
        action = draw(st.sampled_from(["insert", "replace", "delete", "repeat"]))
        if action == "insert":
            text = text[:at] + piece + text[at:]
        elif action == "replace":
            text = text[:at] + piece + text[end:]
        elif action == "delete":
            text = text[:at] + text[end:]
        else:
            text = text[:end] + text[at:end] + text[end:]
    return text


@FAST
@given(mutated(SEED_JSON))
def test_mutated_json_text(text: str) -> None:
    outcome(load_spec_text, text, "json")


@FAST
@given(mutated(SEED_TOML))
def test_mutated_toml_text(text: str) -> None:
    outcome(load_spec_text, text, "toml")


@st.composite
def batch_files(draw: st.DrawFn) -> str:
    lines = ["#!/bin/bash", "#SBATCH --container-image=busybox"]
    for _ in range(draw(st.integers(0, 6))):
        option = draw(st.sampled_from(OPTIONS))
        value = draw(st.sampled_from(VALUES) | st.text(max_size=12))
        joiner = draw(st.sampled_from(["=", " "]))
        lines.append(f"#SBATCH {option}{joiner}{value}")
    lines.append(draw(st.sampled_from(["echo hi", "python train.py", "", "#SBATCH --x"])))
    return draw(mutated("\n".join(lines) + "\n")) if draw(st.booleans()) else "\n".join(lines)


@FAST
@given(batch_files(), st.none() | st.integers(-2000, 2000))
def test_batch_files(text: str, nice: int | None) -> None:
    outcome(parse_sbatch, text, name_hint="fuzz", nice=nice)


@FAST
@given(st.binary(max_size=300))
def test_any_bytes_as_any_format(data: bytes) -> None:
    text = data.decode("utf-8", errors="surrogateescape")
    for fmt in (None, "json", "toml", "sbatch"):
        outcome(load_spec_text, text, fmt)


SEGMENTS = st.sampled_from(
    [
        "..",
        ".",
        "",
        "etc",
        "proc",
        "self",
        "root",
        "ckpt",
        "run",
        "var",
        "docker.sock",
        "usr",
        "lib64",
        "data",
        "dev",
        "sys",
        "a:b",
        "~",
    ]
)
MOUNT_PATHS = st.lists(SEGMENTS, min_size=1, max_size=6).map(lambda parts: "/".join(parts))


@FAST
@given(st.lists(MOUNT_PATHS, min_size=1, max_size=3), st.sampled_from(["json", "toml", "sbatch"]))
def test_composed_mount_paths(paths: list[str], fmt: str) -> None:
    """Mount paths put together from hostile parts, in each format: safe, or refused."""
    if fmt == "sbatch":
        mounts = ",".join(f"checkpoints:{p}" for p in paths)
        text = (
            f"#!/bin/bash\n#SBATCH --container-image=busybox\n#SBATCH --container-mounts={mounts}\n"
        )
        outcome(parse_sbatch, text, name_hint="fuzz")
        return
    doc = json.loads(SEED_JSON)
    doc["spec"]["task_template"]["datavolume_refs"] = [
        {"name": "checkpoints", "mount_path": p} for p in paths
    ]
    text = json.dumps(doc) if fmt == "json" else tomli_w.dumps(doc)
    outcome(load_spec_text, text, fmt)
