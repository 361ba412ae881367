"""Chaos soaks against a real daemon (process executor), longer than CI's.

Run by hand from the repository root:

    .venv/bin/python bench/chaos.py storm --kills 500 [--seed N] [--keep]
    .venv/bin/python bench/chaos.py restarts --runs 1 --restart-limit 1000

``storm``: kill -9 the daemon at that many random points of a submit/start/preempt storm
(and at the test hooks of runner/engine/crash.py's crash_point); then check that every
acknowledged submit exists, nothing started twice or ran twice at once, no GPU was held
twice, running work was adopted. tests/faults/test_crash_storm.py runs 55 kill points.

``restarts``: runs whose program exits 1 at once, each with that restart budget; the
budget must hold exactly while the API answers. CI (tests/faults/test_runaway.py) runs
4 x 50; a restart costs about one loop tick (0.5 s), so 1000 take about 9 minutes.

Exit status 0 when nothing went wrong; the report is printed either way.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.faults

from tests.faults.storm import kill_storm, restart_storm


def storm(args: argparse.Namespace, workdir: Path) -> bool:
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    print(f"kill storm: {args.kills} kill points, seed {seed}, in {workdir}", flush=True)
    report = kill_storm(workdir, args.kills, seed, drain_timeout=600, log=print)
    print(report.summary())
    for line in [*report.lost, *report.duplicated, *report.problems][:50]:
        print(f"  {line}")
    return not (report.lost or report.duplicated or report.problems)


def restarts(args: argparse.Namespace, workdir: Path) -> bool:
    print(f"restart storm: {args.runs} x {args.restart_limit}, in {workdir}", flush=True)
    report = restart_storm(workdir, args.runs, args.restart_limit, timeout=args.timeout)
    print(report.summary())
    return (
        report.states == ["Failed"] * args.runs
        and report.restarts == [args.restart_limit] * args.runs
        and report.restarting_events == [args.restart_limit] * args.runs
        and report.slowest_answer < 1.0
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("storm", help="kill -9 storm")
    s.add_argument("--kills", type=int, default=300)
    s.add_argument("--seed", type=int)
    r = sub.add_parser("restarts", help="exit-at-once restart storm")
    r.add_argument("--runs", type=int, default=1)
    r.add_argument("--restart-limit", type=int, default=1000)
    r.add_argument("--timeout", type=float, default=3600)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix=f"astraeus-chaos-{args.command}-"))
    try:
        ok = storm(args, workdir) if args.command == "storm" else restarts(args, workdir)
    finally:
        if args.keep:
            print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
