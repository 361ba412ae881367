"""Slurm batch files: the #SBATCH header becomes a run spec, the script runs as ``bash -c``."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.model import DriveRef, MountMode, RunSpec
from runner.runspec.documents import load_spec_file, load_spec_text
from runner.runspec.parse import SpecError
from runner.runspec.sbatch import parse_sbatch

IMAGE = "nvcr.io/nvidia/pytorch:24.08-py3"
EXAMPLES = Path(__file__).resolve().parents[2] / "config" / "examples"


def script(
    *options: str, body: str = "exec python train.py\n", shebang: str = "#!/bin/bash"
) -> str:
    lines = [shebang, *(f"#SBATCH {o}" for o in options), body]
    return "\n".join(lines)


def batch(*options: str, **kwargs: object) -> RunSpec:
    """A spec from a script with an image, a job name and the given options."""
    return parse_sbatch(
        script("--container-image=img", "--job-name=job", *options),
        **kwargs,  # type: ignore[arg-type]
    )


def error_of(text: str, **kwargs: object) -> SpecError:
    with pytest.raises(SpecError) as caught:
        parse_sbatch(text, **kwargs)  # type: ignore[arg-type]
    assert len(str(caught.value).splitlines()) == 1
    return caught.value


# ------------------------------------------------------------------ options


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("30", 30 * 60),
        ("30:15", 30 * 60 + 15),
        ("90", 90 * 60),
        ("1:00:00", 3600),
        ("01:02:03", 3600 + 2 * 60 + 3),
        ("2-3", 2 * 86400 + 3 * 3600),
        ("2-3:04", 2 * 86400 + 3 * 3600 + 4 * 60),
        ("2-03:04:05", 2 * 86400 + 3 * 3600 + 4 * 60 + 5),
        ("2-00:00:00", 2 * 86400),
        ("0-0:0:1", 1),
        ("UNLIMITED", None),
        ("infinite", None),
        ("0", None),  # Slurm: a limit of zero means none
    ],
)
def test_every_slurm_time_format(value: str, seconds: int | None) -> None:
    assert batch(f"--time={value}").task.time_limit_seconds == seconds
    assert batch(f"-t {value}").task.time_limit_seconds == seconds


@pytest.mark.parametrize(
    ("options", "hint", "name"),
    [
        (["--job-name=finetune"], None, "finetune"),
        (["--job-name finetune"], None, "finetune"),
        (["-J finetune"], None, "finetune"),
        (["-Jfinetune"], None, "finetune"),
        (['--job-name="quoted"'], None, "quoted"),
        (["--job-name=explicit"], "from-file", "explicit"),
        ([], "finetune", "finetune"),
        ([], "My_Fine Tune.v2", "my-fine-tune-v2"),
        ([], "__x__", "x"),
        ([], "a" * 70, "a" * 63),
    ],
)
def test_job_name(options: list[str], hint: str | None, name: str) -> None:
    text = script("--container-image=img", *options)
    assert parse_sbatch(text, name_hint=hint).name == name


@pytest.mark.parametrize(
    ("options", "nice", "priority"),
    [
        ([], None, 0),
        (["--nice=100"], None, -100),
        (["--nice=-5"], None, 5),
        (["--nice 7"], None, -7),
        (["--nice"], None, -100),  # Slurm's default adjustment
        (["--nice=100"], 20, -20),  # the argument overrides the file
        ([], 100, -100),
        ([], -1000, 1000),
    ],
)
def test_nice_is_negative_priority(options: list[str], nice: int | None, priority: int) -> None:
    assert batch(*options, nice=nice).priority == priority


def test_dependency_afterok_names_runs() -> None:
    assert batch("--dependency=afterok:prep").after == ("prep",)
    assert batch("-d afterok:a:b").after == ("a", "b")
    for value, reason in (
        ("afterany:a", "only afterok:RUN[:RUN...] is understood, got 'afterany:a'"),
        ("singleton", "only afterok:RUN[:RUN...] is understood, got 'singleton'"),
        ("afterok:a:a", "names a run twice"),
    ):
        error = error_of(script("--container-image=i", "--job-name=j", f"--dependency={value}"))
        assert str(error) == f"#SBATCH --dependency: {reason}"


@pytest.mark.parametrize(
    ("options", "gpus"),
    [
        (["--gres=gpu:4"], 4),
        (["--gres=gpu:a100:2"], 2),
        (["--gres=gpu"], 1),
        (["--gres=gpu:a100"], 1),
        (["--gres=gpu:1g.5gb:3"], 3),
        (["--gres gpu:8"], 8),
        (["--gpus=2"], 2),
        (["-G 3"], 3),
        (["--gpus=h100:5"], 5),
    ],
)
def test_gpus(options: list[str], gpus: int) -> None:
    task = batch(*options).task
    assert (task.gpus, task.min_per_machine) == (gpus, gpus)


@pytest.mark.parametrize(
    ("options", "cpu_milli", "memory"),
    [
        (["--mem=100"], 0, 100 * 1024**2),  # Slurm's default unit: megabytes
        (["--mem=64G"], 0, 64 * 1024**3),
        (["--mem=512M"], 0, 512 * 1024**2),
        (["--mem=1T"], 0, 1024**4),
        (["--mem=8192K"], 0, 8 * 1024**2),
        (["--mem=16g"], 0, 16 * 1024**3),
        (["--cpus-per-task=8"], 8000, 0),
        (["-c 4", "--mem=1G"], 4000, 1024**3),
    ],
)
def test_cpus_and_memory(options: list[str], cpu_milli: int, memory: int) -> None:
    task = batch(*options).task
    assert (task.cpu_milli, task.memory) == (cpu_milli, memory)


def test_a_memory_below_dockers_minimum_is_refused_naming_the_option() -> None:
    error = error_of(script("--container-image=img", "--job-name=job", "--mem=5"))  # 5MB
    assert str(error) == "#SBATCH --mem: must be at least 6MiB (Docker's minimum), got 5MiB"


def test_per_gpu_cpus_and_memory() -> None:
    task = batch("--gres=gpu:2", "--cpus-per-gpu=8", "--mem-per-gpu=64G").task
    assert (task.per_gpu_cpu_milli, task.per_gpu_memory) == (8000, 64 * 1024**3)


@pytest.mark.parametrize(
    ("mounts", "drives"),
    [
        ("checkpoints:/ckpt", [DriveRef("checkpoints", "/ckpt", MountMode.READ_WRITE)]),
        ("data:/data:ro", [DriveRef("data", "/data", MountMode.READ_ONLY)]),
        ("data:/data:rw", [DriveRef("data", "/data", MountMode.READ_WRITE)]),
        (
            "checkpoints:/ckpt,data:/data:ro",
            [
                DriveRef("checkpoints", "/ckpt", MountMode.READ_WRITE),
                DriveRef("data", "/data", MountMode.READ_ONLY),
            ],
        ),
    ],
)
def test_container_mounts(mounts: str, drives: list[DriveRef]) -> None:
    assert list(batch(f"--container-mounts={mounts}").task.drives) == drives


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        (IMAGE, IMAGE),
        ("nvcr.io#nvidia/pytorch:24.08-py3", IMAGE),  # enroot/pyxis form
        ("user@nvcr.io#nvidia/pytorch:24.08-py3", IMAGE),
        ("ubuntu:24.04", "ubuntu:24.04"),
    ],
)
def test_container_image(image: str, expected: str) -> None:
    text = script(f"--container-image={image}")
    assert parse_sbatch(text, name_hint="x").task.image == expected


def test_the_script_runs_whole_with_bash() -> None:
    text = script("--container-image=img", "-J job", body="set -e\nexec torchrun train.py\n")
    spec = parse_sbatch(text)
    assert (spec.task.command, spec.task.args) == ("bash", ("-c", text))


@pytest.mark.parametrize(
    ("shebang", "command"),
    [("#!/bin/bash", "bash"), ("#!/usr/bin/env bash", "bash"), ("#!/bin/sh", "sh"), ("", "bash")],
)
def test_the_shebang_picks_the_shell(shebang: str, command: str) -> None:
    text = script("--container-image=img", "-J job", shebang=shebang)
    assert parse_sbatch(text).task.command == command


def test_options_stop_at_the_first_command() -> None:
    text = script(
        "--container-image=img",
        "-J job",
        body="# a comment\n\n  # indented comment\n#SBATCH --gres=gpu:2\n"
        "echo go\n#SBATCH --gres=gpu:8\n#SBATCH --bogus\n",
    )
    assert parse_sbatch(text).task.gpus == 2


@pytest.mark.parametrize(
    "line",
    [
        "#SBATCH --gres=gpu:2 # two GPUs",
        "#SBATCH --gres=gpu:2 --time=10",
        "#SBATCH    --gres   gpu:2",
    ],
)
def test_header_line_forms(line: str) -> None:
    text = f"#!/bin/bash\n#SBATCH --container-image=img -J job\n{line}\necho\n"
    assert parse_sbatch(text).task.gpus == 2


@pytest.mark.parametrize("line", ["##SBATCH --bogus", "# SBATCH --bogus", "#SBATCHX --bogus"])
def test_disabled_directives_are_comments(line: str) -> None:
    text = script("--container-image=img", "-J job", body=f"{line}\necho\n")
    assert parse_sbatch(text).name == "job"


def test_the_example_batch_file() -> None:
    spec = load_spec_file(EXAMPLES / "finetune.sbatch")
    assert spec.name == "finetune"
    assert spec.task.image == IMAGE
    assert (spec.task.gpus, spec.task.time_limit_seconds) == (8, 2 * 86400)
    assert spec.task.drives == (DriveRef("checkpoints", "/ckpt", MountMode.READ_WRITE),)
    assert spec.task.command == "bash" and "exec torchrun" in spec.task.args[1]


def test_load_spec_text_reads_sbatch_when_asked() -> None:
    assert load_spec_text(script("--container-image=img", "-J job"), "sbatch").name == "job"


# ------------------------------------------------------------------ errors


def test_a_file_naming_no_image_leaves_it_for_the_daemon() -> None:
    """The daemon fills in its default_image (or refuses, saying what to set)."""
    assert parse_sbatch(script("-J job")).task.image == ""


@pytest.mark.parametrize(
    ("options", "field", "reason"),
    [
        (["--container-image=img"], "#SBATCH --job-name", "required"),
        (["--container-image=img", "--job-name=Bad_Name"], "#SBATCH --job-name", "lowercase"),
        (['--container-image="a b"', "-J x"], "#SBATCH --container-image", "spaces"),
        (["--container-image=img", "-J x", "--foo=1"], "#SBATCH --foo", "not supported"),
        (
            ["--container-image=img", "-J x", "-N 1"],
            "#SBATCH -N",
            "supported: --begin, --chdir, --container",
        ),
        (["--container-image=img", "-J x", "--partition=gpu"], "#SBATCH --partition", "not"),
        (["--container-image=img", "-J x", "stray"], "#SBATCH", "expected an option"),
        (["--container-image=img", "-J"], "#SBATCH --job-name", "needs a value"),
        (["--container-image=img", "-J x", "--time=1:2:3:4"], "#SBATCH --time", "not a Slurm"),
        (["--container-image=img", "-J x", "--time=1h"], "#SBATCH --time", "D-HH:MM:SS"),
        (["--container-image=img", "-J x", "--time=2-"], "#SBATCH --time", "not a Slurm"),
        (["--container-image=img", "-J x", "--time="], "#SBATCH --time", "not a Slurm"),
        (["--container-image=img", "-J x", "--time=99999-0"], "#SBATCH --time", "ten years"),
        (["--container-image=img", "-J x", "--gres=gpu:x:y:z"], "#SBATCH --gres", "gpu:N"),
        (["--container-image=img", "-J x", "--gres=tpu:4"], "#SBATCH --gres", "gpu:type:N"),
        (["--container-image=img", "-J x", "--gres=gpu:1.5"], "#SBATCH --gres", "gpu:N"),
        (["--container-image=img", "-J x", "--gres=gpu:-1"], "#SBATCH --gres", "gpu:N"),
        (["--container-image=img", "-J x", "--gres=gpu:a100:"], "#SBATCH --gres", "gpu:N"),
        (["--container-image=img", "-J x", "--gres=gpu:2,shard:1"], "#SBATCH --gres", "one"),
        (["--container-image=img", "-J x", "--gres=gpu:2000"], "#SBATCH --gres", "1024"),
        (["--container-image=img", "-J x", "--gpus=two"], "#SBATCH --gpus", "number"),
        (["--container-image=img", "-J x", "--gpus=2000"], "#SBATCH --gpus", "1024"),
        (["--container-image=img", "-J x", "--mem=64GB"], "#SBATCH --mem", "suffix"),
        (["--container-image=img", "-J x", "--mem=-1"], "#SBATCH --mem", "megabytes"),
        (["--container-image=img", "-J x", "--mem=2048T"], "#SBATCH --mem", "1PiB"),
        (["--container-image=img", "-J x", "--mem-per-gpu=x"], "#SBATCH --mem-per-gpu", "size"),
        (["--container-image=img", "-J x", "--cpus-per-task=1.5"], "#SBATCH --cpus-per-task", ""),
        (["--container-image=img", "-J x", "-c 200000"], "#SBATCH --cpus-per-task", "100000"),
        (["--container-image=img", "-J x", "--nice=abc"], "#SBATCH --nice", "integer"),
        (["--container-image=img", "-J x", "--nice=5000"], "#SBATCH --nice", "-1000 and 1000"),
        (
            ["--container-image=img", "-J x", "--container-mounts=/host/path:/data"],
            "#SBATCH --container-mounts",
            "not a host path: '/host/path'",
        ),
        (
            ["--container-image=img", "-J x", "--container-mounts=./rel:/data"],
            "#SBATCH --container-mounts",
            "drive",
        ),
        (
            ["--container-image=img", "-J x", "--container-mounts=data"],
            "#SBATCH --container-mounts",
            "",
        ),
        (
            ["--container-image=img", "-J x", "--container-mounts=data:/d:rshared"],
            "#SBATCH --container-mounts",
            "ro or rw",
        ),
        (
            ["--container-image=img", "-J x", "--container-mounts=data:rel"],
            "#SBATCH --container-mounts",
            "absolute",
        ),
        (
            ["--container-image=img", "-J x", "--container-mounts=Data:/d"],
            "#SBATCH --container-mounts",
            "lowercase",
        ),
        (
            ["--container-image=img", "-J x", "--container-mounts=a:/d,b:/d"],
            "#SBATCH --container-mounts",
            "already mounted",
        ),
        (["--container-image=img", "-J x", "--gres='gpu:2"], "#SBATCH (line 4)", "quotation"),
    ],
)
def test_errors_name_the_option(options: list[str], field: str, reason: str) -> None:
    error = error_of(script(*options))
    assert error.field == field
    assert reason in error.reason


@pytest.mark.parametrize(
    ("text", "kwargs", "field"),
    [
        (script("--container-image=img", "-J x"), {"nice": 5000}, "--nice"),
        (script("--container-image=img", "-J x").replace("\n", "\r\n"), {}, "<script>"),
        (script("--container-image=img", "-J x", shebang="#!/usr/bin/env python3"), {}, "#!"),
        (script("--container-image=img", "-J x", body="x\0"), {}, "<script>"),
        (script("--container-image=img", "-J x", body="x" * 200_000), {}, "<script>"),
        (script("--container-image=img"), {"name_hint": "___"}, "#SBATCH --job-name"),
    ],
)
def test_other_errors(text: str, kwargs: dict[str, object], field: str) -> None:
    assert error_of(text, **kwargs).field == field


def test_unknown_option_lists_the_supported_ones() -> None:
    error = error_of(script("--container-image=img", "-J x", "--foo"))
    assert str(error).startswith(
        "#SBATCH --foo: not supported (supported: --begin, --chdir, --container-image, "
    )


# ------------------------------------------------------------------ never anything else

FRAGMENTS = st.sampled_from(
    [
        "#!/bin/bash",
        "#!/usr/bin/env python",
        "#SBATCH --container-image=img",
        "#SBATCH -J job",
        "#SBATCH --job-name",
        "#SBATCH --time=",
        "#SBATCH --gres=gpu:",
        "#SBATCH --mem=",
        "#SBATCH --nice",
        "#SBATCH --container-mounts=",
        "#SBATCH -c",
        "#SBATCH '",
        "#SBATCH",
        "echo hi",
        "",
    ]
)


@settings(max_examples=300)
@given(st.lists(st.tuples(FRAGMENTS, st.text(max_size=12)), max_size=8), st.none() | st.integers())
def test_arbitrary_scripts_give_a_run_spec_or_a_spec_error(
    parts: list[tuple[str, str]], nice: int | None
) -> None:
    text = "\n".join(fragment + tail for fragment, tail in parts)
    try:
        result = parse_sbatch(text, name_hint="hint", nice=nice)
    except SpecError as error:
        assert len(str(error).splitlines()) == 1
    else:
        assert isinstance(result, RunSpec)


SHELL = {"FOO": "1", "BAR": "2", "PWD": "/x", "BASH_FUNC_f%%": "() { :; }", "ESC": "\x1b[0m"}


@pytest.mark.parametrize(
    ("export", "carried", "env"),
    [(None, {"FOO": "1", "BAR": "2"}, ()), ("NONE", {}, ()),
     ("FOO", {}, (("FOO", "1"),)), ("ALL,BAZ=3", {"FOO": "1", "BAR": "2"}, (("BAZ", "3"),))],
)  # fmt: skip
def test_export_carries_the_shell_s_environment_as_sbatch_does(
    export: str | None, carried: dict[str, str], env: tuple[tuple[str, str], ...]
) -> None:
    options = ["--container-image=img", "-J exp", *([f"--export={export}"] if export else [])]
    spec = parse_sbatch(script(*options), environ=SHELL)
    assert dict(spec.task.submit_env) == carried  # the shell's own and unsendable left out
    assert spec.task.env == env
    assert parse_sbatch(script(*options)).task.submit_env == ()  # no shell: nothing carried
