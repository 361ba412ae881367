"""What holds and begin times add to each plan: ``kept_out`` over 1k, 10k and 100k
queued runs (a tenth held, a tenth with a begin time ahead, specs already parsed, as
the loop's spec cache has them).

Run by hand: ``.venv/bin/python bench/bench_holds.py``. Prints the median of several
passes per size. Target on a 2-core machine: <= 5 ms at 10k (a twentieth of a plan's
budget there).
"""

from __future__ import annotations

import json
import statistics
import sys
import time

from runner.engine.holds import kept_out
from runner.model import RunSpec, RunState
from runner.runspec.build import run_document
from runner.runspec.parse import parse_spec
from runner.store.db import RunRow

NOW = 1_790_856_000.0


def rows(n: int) -> tuple[list[RunRow], dict[str, RunSpec]]:
    out, specs = [], {}
    for i in range(n):
        begin = "2036-12-02T03:00:00Z" if i % 10 == 1 else None
        doc = run_document(f"run-{i}", ["true"], begin_at=begin)
        row = RunRow(f"run-{i}", "vision", "alice", 1000, 1000, json.dumps(doc), 0,
                     RunState.QUEUED, None, NOW - i, None, None, None, 0, 0, 0, None, None,
                     False, held_by="bob" if i % 10 == 0 else None)  # fmt: skip
        out.append(row)
        specs[row.name] = parse_spec(doc)
    return out, specs


def main() -> int:
    for n in (1_000, 10_000, 100_000):
        runs, specs = rows(n)
        times = []
        for _ in range(7):
            t0 = time.perf_counter()
            kept = kept_out(runs, lambda r, specs=specs: specs[r.name], NOW)
            times.append((time.perf_counter() - t0) * 1000)
        assert len(kept.reasons) == n // 5
        print(f"{n:>7} queued runs: kept_out {statistics.median(times):7.2f} ms (median of 7)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
