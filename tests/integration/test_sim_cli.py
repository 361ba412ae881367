"""`astra sim` as a user types it: no daemon, a small trace of one's own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

TRACE = """name,submit,duration,gpus,gpu_memory,priority,time_limit
big,0,600,8,,0,900
small,10,60,1,,0,120
shared,20,60,1,20GiB,-100,
urgent,30,100,4,,100,200
"""


def astra(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ASTRAEUS_HOME": str(home), "ASTRAEUS_CONFIG": str(home / "none.toml")}
    return subprocess.run(
        [sys.executable, "-m", "astraeus_tui.cli.main", "sim", *args],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_every_policy_side_by_side_with_runs_and_a_picture(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text(TRACE)
    runs, picture = tmp_path / "runs.ndjson", tmp_path / "queue.svg"
    done = astra(tmp_path, str(trace), "--gpus", "8", "--compare", "--json", "--runs",
                 str(runs), "--plot", str(picture))  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [p["policy"] for p in report["policies"]] == ["astraeus", "fifo", "greedy", "easy"]
    assert report["machine"]["gpus"] == 8 and report["trace"]["runs"] == 4
    astraeus = report["policies"][0]
    assert astraeus["preemptions"] == 1 and astraeus["unfinished"] == 0  # urgent preempts big
    assert all(p["preemptions"] == 0 for p in report["policies"][1:])
    rows = [json.loads(line) for line in runs.read_text().splitlines()]
    assert len(rows) == 16 and {r["state"] for r in rows} == {"Succeeded"}
    assert picture.read_text().count("<polyline") == 8
    table = astra(tmp_path, str(trace), "--gpus", "8")
    assert table.returncode == 0 and "4 runs on 8 GPUs of 80 GiB" in table.stdout


def test_bad_input_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text(TRACE.replace("small,10,60,1", "small,10,60,x"))
    runs = tmp_path / "runs.ndjson"
    for args, said in (
        ([str(trace), "--runs", str(runs)], "line 3: gpus"),
        ([str(tmp_path / "none.csv")], "none.csv"),
        ([str(trace), "--policy", "lottery"], "--policy: no policy 'lottery'"),
        ([str(trace), "--resume", "half"], "--resume"),
        ([str(trace), "--gpus", "0"], "--gpus"),
    ):
        done = astra(tmp_path, *args)
        assert done.returncode == 1, args
        assert len(done.stderr.strip().splitlines()) == 1 and said in done.stderr, done.stderr
    assert not runs.exists()
