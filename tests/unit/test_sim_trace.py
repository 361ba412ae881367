"""Workload readers for ``astra sim``: each format's mapping to TraceRuns, the options that
cut a trace down and give it time limits, the format guessed from a file, and bad input
refused with one line naming the file and line."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from runner.sim.trace import (
    ReadOptions,
    Trace,
    TraceError,
    TraceRun,
    guess_format,
    parse_seconds,
    read_trace,
)

GIB = 1024**3
MIB = 1024**2
ALIBABA_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time"
)
FULL_HEADER = (
    "name,submit,duration,gpus,gpu_memory,cpus,memory,priority,workspace,time_limit,workers"
)
SWF_COMMENTS = "; Version: 2.2\n; Computer: test\n;\n"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def astraeus(tmp_path: Path, *rows: str, header: str = "name,submit,duration") -> Path:
    return write(tmp_path, "trace.csv", "\n".join([header, *rows]) + "\n")


def alibaba(tmp_path: Path, *rows: str) -> Path:
    return write(tmp_path, "pods.csv", "\n".join([ALIBABA_HEADER, *rows]) + "\n")


def swf_line(
    job: int,
    submit: int,
    run: int,
    alloc: int = 4,
    procs: int = 4,
    limit: int = 3600,
    user: int = 7,
) -> str:
    fields = [job, submit, 5, run, alloc, -1, -1, procs, limit, -1, 1, user, 3, -1, 1, -1, -1, -1]
    return " ".join(map(str, fields))


def swf(tmp_path: Path, *lines: str) -> Path:
    return write(tmp_path, "jobs.swf", SWF_COMMENTS + "\n".join(lines) + "\n")


def many(tmp_path: Path, count: int) -> Path:
    rows = [f"r{i:03d},{i * 10},{i}" for i in range(count)]
    return astraeus(tmp_path, *rows)


def only(trace: Trace) -> TraceRun:
    (run,) = trace.runs
    return run


def test_astraeus_reads_every_column_in_any_order(tmp_path: Path) -> None:
    header = (
        "duration,name,gpus,gpu_memory,cpus,memory,priority,workspace,time_limit,workers,submit"
    )
    path = astraeus(tmp_path, "7200,train,2,20GiB,4.5,64GiB,50,vision,3h,3,12.5", header=header)
    run = only(read_trace(path, "astraeus"))
    assert run == TraceRun(name="train", submit=12.5, duration=7200.0, gpus=2,
                           gpu_memory=20 * GIB, cpus=4.5, memory=64 * GIB, priority=50,
                           workspace="vision", time_limit=10800.0, workers=3)  # fmt: skip


def test_astraeus_empty_cells_ask_nothing_and_take_the_defaults(tmp_path: Path) -> None:
    path = astraeus(tmp_path, "idle,0,60,,,,,,,,", header=FULL_HEADER)
    assert only(read_trace(path)) == TraceRun(name="idle", submit=0.0, duration=60.0)


def test_astraeus_accepts_durations_with_units(tmp_path: Path) -> None:
    path = astraeus(tmp_path, "long,1h,7d")
    run = only(read_trace(path))
    assert (run.submit, run.duration) == (3600.0, 7 * 86400.0)


def test_runs_come_sorted_by_submit_then_name(tmp_path: Path) -> None:
    path = astraeus(tmp_path, "c,20,1", "b,10,1", "a,20,1")
    assert [run.name for run in read_trace(path).runs] == ["b", "a", "c"]


def test_alibaba_maps_a_shared_task_to_its_share_of_a_gpus_memory(tmp_path: Path) -> None:
    path = alibaba(tmp_path, "pod-1,6000,12288,1,460,,LS,Running,100,1100,150")
    run = only(read_trace(path, "alibaba", ReadOptions(gpu_memory=80 * GIB)))
    assert run == TraceRun(name="pod-1", submit=100.0, duration=950.0, gpus=1,
                           gpu_memory=460 * 80 * GIB // 1000, cpus=6.0, memory=12288 * MIB,
                           priority=100)  # fmt: skip


def test_alibaba_whole_and_multi_gpu_tasks_ask_whole_gpus(tmp_path: Path) -> None:
    path = alibaba(
        tmp_path,
        "whole,8000,1024,1,1000,,BE,Succeeded,0,10,0",
        "eight,96000,1024,8,1000,V100M32,BE,Succeeded,1,11,1",
        "cpu,2000,1024,0,0,,BE,Succeeded,2,12,2",
    )
    runs = {run.name: run for run in read_trace(path, "alibaba").runs}
    assert (runs["whole"].gpus, runs["whole"].gpu_memory) == (1, 0)
    assert (runs["eight"].gpus, runs["eight"].gpu_memory, runs["eight"].cpus) == (8, 0, 96.0)
    assert (runs["cpu"].gpus, runs["cpu"].gpu_memory) == (0, 0)


def test_alibaba_a_task_that_never_started_lasts_from_creation_to_deletion(
    tmp_path: Path,
) -> None:
    path = alibaba(tmp_path, "waited,1000,512,1,1000,,BE,Pending,100,400,")
    assert only(read_trace(path, "alibaba")).duration == 300.0


def test_alibaba_a_task_with_no_end_is_left_out(tmp_path: Path) -> None:
    path = alibaba(
        tmp_path, "open,1000,512,1,1000,,LS,Running,0,,0", "done,1000,512,1,1000,,LS,Running,0,9,0"
    )
    trace = read_trace(path, "alibaba")
    assert [run.name for run in trace.runs] == ["done"]
    assert trace.left_out == {"no end": 1}


def test_alibaba_negative_durations_become_zero(tmp_path: Path) -> None:
    path = alibaba(tmp_path, "odd,1000,512,1,1000,,LS,Running,0,50,60")
    assert only(read_trace(path, "alibaba")).duration == 0.0


def test_alibaba_priority_follows_qos(tmp_path: Path) -> None:
    qos = ["LS", "Guaranteed", "Burstable", "BE", "Weird", ""]
    rows = [f"p{i},1000,512,0,0,,{q},Running,{i},100," for i, q in enumerate(qos)]
    path = alibaba(tmp_path, *rows)
    default = [run.priority for run in read_trace(path, "alibaba").runs]
    assert default == [100, 100, 0, -100, 0, 0]
    mapped = read_trace(path, "alibaba", ReadOptions(qos_priority={"BE": -500, "LS": 300}))
    assert [run.priority for run in mapped.runs] == [300, 0, 0, -500, 0, 0]


def test_alibaba_workspace_is_a_stable_hash_of_the_name_spread_over_workspaces(
    tmp_path: Path,
) -> None:
    rows = [f"pod-{i:04d},1000,512,1,1000,,LS,Running,{i},{i + 60},{i}" for i in range(200)]
    path = alibaba(tmp_path, *rows)
    options = ReadOptions(workspaces=("vision", "audio", "nlp"))
    first = [run.workspace for run in read_trace(path, "alibaba", options).runs]
    again = read_trace(path, "alibaba", ReadOptions(workspaces=("nlp", "vision", "audio")))
    assert [run.workspace for run in again.runs] == first
    counts = Counter(first)
    assert set(counts) == {"vision", "audio", "nlp"}
    assert min(counts.values()) > 40
    assert {run.workspace for run in read_trace(path, "alibaba").runs} == {None}


def test_swf_maps_jobs_and_leaves_out_those_with_no_run_time(tmp_path: Path) -> None:
    path = swf(
        tmp_path,
        swf_line(1, 100, 3000, alloc=4),
        swf_line(2, 200, -1),
        swf_line(3, 300, 60, alloc=-1, procs=3, limit=-1),
    )
    trace = read_trace(path, options=ReadOptions(swf_gpus_per_proc=0.5))
    assert trace.runs == (
        TraceRun(name="job-1", submit=100.0, duration=3000.0, gpus=2, time_limit=3600.0),
        TraceRun(name="job-3", submit=300.0, duration=60.0, gpus=2),
    )
    assert trace.left_out == {"no run time": 1}


def test_swf_workspace_is_a_hash_of_the_user(tmp_path: Path) -> None:
    path = swf(tmp_path, swf_line(1, 0, 10, user=7), swf_line(2, 1, 10, user=7))
    runs = read_trace(path, "swf", ReadOptions(workspaces=("a", "b", "c", "d", "e"))).runs
    assert runs[0].workspace == runs[1].workspace is not None
    assert {run.workspace for run in read_trace(path, "swf").runs} == {None}


def test_since_drops_earlier_runs_and_shifts_times_to_it(tmp_path: Path) -> None:
    path = astraeus(tmp_path, "a,50,1", "b,100,1", "c,250,1")
    trace = read_trace(path, options=ReadOptions(since=100))
    assert [(run.name, run.submit) for run in trace.runs] == [("b", 0.0), ("c", 150.0)]
    assert trace.left_out == {"before --since": 1}


def test_longest_drops_longer_runs_after_since(tmp_path: Path) -> None:
    path = astraeus(tmp_path, "early,0,900", "short,100,60", "exact,100,600", "long,100,601")
    trace = read_trace(path, options=ReadOptions(since=100, longest=600))
    assert [run.name for run in trace.runs] == ["exact", "short"]
    assert trace.left_out == {"before --since": 1, "longer than --longest": 1}


def test_sample_keeps_about_its_fraction_the_same_way_for_a_seed(tmp_path: Path) -> None:
    path = many(tmp_path, 400)
    first = read_trace(path, options=ReadOptions(sample=0.25, seed=3))
    again = read_trace(path, options=ReadOptions(sample=0.25, seed=3))
    other = read_trace(path, options=ReadOptions(sample=0.25, seed=4))
    assert first == again
    assert first.runs != other.runs
    assert 60 < len(first.runs) < 140
    assert len(first.runs) + first.left_out["sampled out"] == 400
    assert read_trace(path, options=ReadOptions(sample=1.0)).left_out == {}


def test_limits_trace_keeps_the_files(tmp_path: Path) -> None:
    header = "name,submit,duration,time_limit"
    path = astraeus(tmp_path, "a,0,100,500", "b,0,100,", header=header)
    limits = [run.time_limit for run in read_trace(path).runs]
    assert limits == [500.0, None]
    pods = alibaba(tmp_path, "p,1000,512,1,1000,,LS,Running,0,100,0")
    assert only(read_trace(pods, "alibaba")).time_limit is None


@pytest.mark.parametrize(
    ("limits", "expected"),
    [("exact", [100.5, 1.0]), ("x2", [201.0, 1.0]), ("x5", [503.0, 1.0]), ("none", [None, None])],
)
def test_limits_modes_override_the_file(
    tmp_path: Path, limits: str, expected: list[float | None]
) -> None:
    header = "name,submit,duration,time_limit"
    path = astraeus(tmp_path, "a,0,100.5,500", "b,1,0,500", header=header)
    runs = read_trace(path, options=ReadOptions(limits=limits)).runs
    assert [run.time_limit for run in runs] == expected


def test_options_refuse_what_they_cannot_mean() -> None:
    with pytest.raises(ValueError, match="limits 'x3'"):
        ReadOptions(limits="x3")
    with pytest.raises(ValueError, match="sample"):
        ReadOptions(sample=0)
    with pytest.raises(ValueError, match="sample"):
        ReadOptions(sample=1.5)


@pytest.mark.parametrize(
    ("name", "text", "fmt"),
    [
        ("jobs.swf", "1 2 3\n", "swf"),
        ("jobs.txt", "; Version: 2.2\n1 2 3\n", "swf"),
        ("pods.csv", ALIBABA_HEADER + "\n", "alibaba"),
        ("tasks.csv", "name,gpu_milli,creation_time\n", "alibaba"),
        ("trace.csv", "name,submit,duration\n", "astraeus"),
        ("trace.csv", "duration,submit,name,gpus\n", "astraeus"),
    ],
)
def test_guess_format(tmp_path: Path, name: str, text: str, fmt: str) -> None:
    assert guess_format(write(tmp_path, name, text)) == fmt


def test_guess_format_refuses_anything_else(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"^other\.csv line 1: not a trace"):
        guess_format(write(tmp_path, "other.csv", "a,b,c\n1,2,3\n"))


def test_read_trace_guesses_the_format(tmp_path: Path) -> None:
    path = alibaba(tmp_path, "p,1000,512,1,500,,LS,Running,0,100,0")
    assert only(read_trace(path)).gpu_memory == 40 * GIB


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (["a,0,1,1", "b,0,1,x"], "trace.csv line 3: gpus: 'x' is not a whole number"),
        (["a,0,1,-1"], "trace.csv line 2: gpus: -1 is below 0"),
        (["a,zero,1,1"], "trace.csv line 2: submit: 'zero' is not a time in seconds"),
        (["a,0,1,1,,,12XB"], "trace.csv line 2: memory: '12XB' is not a size"),
        (["a,0,1,1,,1.5.2"], "trace.csv line 2: cpus: '1.5.2' is not a number"),
        (["a,0,1,0,10GiB"], "trace.csv line 2: gpu_memory: asks GPU memory but no GPUs"),
        (["a,0,1,1,,,,5000"], "trace.csv line 2: priority: 5000 is above 1000"),
        (["a,0,1,1,,,,,,,0"], "trace.csv line 2: workers: 0 is below 1"),
        (["a,0,1,1,,,,,,0"], "trace.csv line 2: time_limit: 0 is not a time limit"),
        (["a,0,1", ",0,1"], "trace.csv line 3: name: empty"),
        (["a,0,1", "b,1,1", "a,2,1"], "trace.csv line 4: name: 'a' already on line 2"),
    ],
)
def test_bad_astraeus_cells_give_one_line_naming_the_line(
    tmp_path: Path, rows: list[str], message: str
) -> None:
    full = [row + "," * (FULL_HEADER.count(",") - row.count(",")) for row in rows]
    path = astraeus(tmp_path, *full, header=FULL_HEADER)
    with pytest.raises(TraceError) as caught:
        read_trace(path, "astraeus")
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_a_row_of_the_wrong_width_is_refused(tmp_path: Path) -> None:
    path = astraeus(tmp_path, "a,0,1", "b,0", "c,0,1")
    with pytest.raises(TraceError, match=r"^trace\.csv line 3: 2 cells, the header has 3$"):
        read_trace(path)


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("name,submit", "trace.csv line 1: no column 'duration'"),
        ("name,submit,duration,gpu", "trace.csv line 1: unknown column 'gpu'"),
        ("name,submit,duration,name", "trace.csv line 1: column 'name' twice"),
    ],
)
def test_bad_astraeus_headers_are_refused(tmp_path: Path, header: str, message: str) -> None:
    path = astraeus(tmp_path, header=header)
    with pytest.raises(TraceError, match=f"^{re.escape(message)}$"):
        read_trace(path, "astraeus")


def test_bad_alibaba_cells_name_the_line(tmp_path: Path) -> None:
    path = alibaba(
        tmp_path, "p,1000,512,1,1000,,LS,Running,0,100,0", "q,1000,512,two,1000,,LS,Running,0,100,0"
    )
    with pytest.raises(TraceError, match=r"^pods\.csv line 3: num_gpu: 'two' is not a whole"):
        read_trace(path, "alibaba")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("1 2 3", "jobs.swf line 4: 3 fields, not the 18 of SWF"),
        (swf_line(1, 0, 10).replace(" 10 ", " ten ", 1), "jobs.swf line 4: field 4 (run time)"),
        (swf_line(1, 0, 10).replace("1", "1.5", 1), "jobs.swf line 4: job number: '1.5'"),
    ],
)
def test_bad_swf_lines_name_the_line(tmp_path: Path, line: str, message: str) -> None:
    with pytest.raises(TraceError, match=f"^{re.escape(message)}"):
        read_trace(swf(tmp_path, line))


def test_duplicate_swf_jobs_are_refused(tmp_path: Path) -> None:
    path = swf(tmp_path, swf_line(5, 0, 10), swf_line(5, 1, 10))
    with pytest.raises(TraceError, match=r"^jobs\.swf line 5: name: 'job-5' already on line 4$"):
        read_trace(path)


def test_a_missing_file_or_unknown_format_is_a_trace_error(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"^gone\.csv: cannot read it"):
        read_trace(tmp_path / "gone.csv", "astraeus")
    with pytest.raises(TraceError, match=r"^trace\.csv: unknown format 'slurm'"):
        read_trace(astraeus(tmp_path, "a,0,1"), "slurm")


@pytest.mark.parametrize(
    ("text", "seconds"), [("0", 0.0), ("90.5", 90.5), ("7d", 604800.0), ("1h30m", 5400.0)]
)
def test_parse_seconds(text: str, seconds: float) -> None:
    assert parse_seconds(text) == seconds


@pytest.mark.parametrize("text", ["-5", "soon", "nan"])
def test_parse_seconds_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_seconds(text)
