"""The GPU panel's shared GPUs: ``shared · 30G free``, then one line per run, bounded."""

from __future__ import annotations

from astraeus_tui.widgets.gpu_panel import gpu_row, share_lines
from runner.model import WorkerState
from runner.schema import Gpu, GpuHolder, GpuShare

GiB = 1 << 30


def _shared(*runs: tuple[str, int]) -> Gpu:
    return Gpu(index=2, simulated=True, memory_total=80 * GiB,
               shares=[GpuShare(run=r, worker=0, bytes=n * GiB) for r, n in runs])  # fmt: skip


def test_a_shared_gpu_says_what_is_free_and_lists_each_run_under_it() -> None:
    gpu = _shared(("eval-a", 20), ("another namespace's run", 30))
    assert gpu_row(gpu)[-1].plain == "shared · 30G free"
    assert [t.plain for t in share_lines(gpu)] == [
        "  eval-a 20G",
        "  another namespace's run 30G",
    ]


def test_many_shares_are_bounded_with_a_count_of_the_rest() -> None:
    gpu = _shared(*((f"r{i}", 5) for i in range(7)))
    lines = [t.plain for t in share_lines(gpu)]
    assert lines == ["  r0 5G", "  r1 5G", "  +5 more"]
    assert [t.plain for t in share_lines(_shared(("a", 1), ("b", 1), ("c", 1)))] == [
        "  a 1G", "  b 1G", "  c 1G",
    ]  # fmt: skip


def test_a_whole_gpu_row_is_unchanged_and_has_no_lines_under_it() -> None:
    gpu = Gpu(
        index=0,
        simulated=True,
        memory_total=80 * GiB,
        holder=GpuHolder(run="train", worker=0, state=WorkerState.RUNNING),
    )
    assert gpu_row(gpu)[-1].plain == "train" and share_lines(gpu) == []
