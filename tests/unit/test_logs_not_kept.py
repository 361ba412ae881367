"""Which attempts' output a run no longer keeps (runner/service/logs.py ``not_kept``)."""

from __future__ import annotations

from pathlib import Path

from runner.service.logs import not_kept


def test_each_worker_says_the_attempts_it_lost() -> None:
    paths = [Path(f"/x/{a}-{w}.log") for a, w in ((1, 0), (4, 1), (5, 1), (6, 1), (7, 1))]
    assert not_kept(paths).decode().splitlines() == [
        "[astraeus: worker 1's output of attempts 1-3 not kept: a run keeps its newest 4 attempts']"
    ]
    one = [Path(f"/x/{a}-0.log") for a in (2, 3, 4, 5)]
    assert not_kept(one) == (
        b"[astraeus: output of attempt 1 not kept: a run keeps its newest 4 attempts']\n"
    )
    assert not_kept([Path("/x/1-0.log"), Path("/x/2-0.log")]) == b""
    assert not_kept([]) == b""
