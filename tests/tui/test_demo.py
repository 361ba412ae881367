"""`astra demo`'s machinery: its daemon starts, its fine-tune runs, and nothing outlives it."""

from __future__ import annotations

import json
import os
import time

from astraeus_tui.cli.demo import Demo
from tests.support.harness import wait_for


def alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_demo_starts_its_daemon_and_leaves_nothing_behind() -> None:
    demo = Demo(gpus=4, grace=2)
    try:
        demo.start()
        assert demo.client.status()["simulated"]
        demo.client.submit(demo.fine_tune())
        wait_for(lambda: demo.client.show("ft-lowprio").state == "Running", 20, "the run")
        meta = next((demo.home / "workers").glob("*/meta.json"))
        wait_for(lambda: json.loads(meta.read_text()).get("child_pgid"), 10, "its process")
        pgid = json.loads(meta.read_text())["child_pgid"]
        wait_for(lambda: b"step 0" in b"".join(demo.client.logs("ft-lowprio")), 20, "a step")
    finally:
        demo.stop()
    assert not demo.home.exists()
    deadline = time.monotonic() + 5
    while alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pgid)
