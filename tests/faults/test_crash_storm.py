"""kill -9 at random points of a submit/start/preempt storm: nothing acknowledged is lost,
nothing runs twice, running work is adopted (tests/faults/storm.py says how it is checked).

``ASTRAEUS_CHAOS_KILLS`` (default 55) sets the number of kill points, ``ASTRAEUS_CHAOS_SEED``
the seed (default: a new one, printed on failure). bench/chaos.py runs longer storms.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from tests.faults.storm import kill_storm


def test_kill_9_storm_loses_nothing_and_starts_nothing_twice(tmp_path: Path) -> None:
    kills = int(os.environ.get("ASTRAEUS_CHAOS_KILLS", "55"))
    seed = int(os.environ.get("ASTRAEUS_CHAOS_SEED", str(random.randrange(1 << 30))))
    report = kill_storm(tmp_path, kills, seed)
    said = f"seed {seed}: {report.summary()}"
    print(said)
    assert report.kill_points >= min(kills, 50), said
    assert not report.lost, f"{said}\nlost: {report.lost}"
    assert not report.duplicated, f"{said}\nduplicated: {report.duplicated}"
    assert not report.problems, f"{said}\nproblems: {report.problems}"
    assert report.submitted >= 40, said  # the storm did happen
    assert report.kills_with_live_workers >= kills // 2, said  # adoption was exercised
