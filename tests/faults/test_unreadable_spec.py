"""A run whose stored spec can no longer be read (a damaged row, a spec an older version
wrote) stops nothing: after a restart the daemon sets it aside with one event and plans
and starts every other run. A real daemon process; the row damaged in the real file."""

from __future__ import annotations

import sqlite3

from tests.faults.conftest import MakeDaemon
from tests.faults.daemon import document, wait_for


def test_a_run_whose_spec_cannot_be_read_is_set_aside_after_a_restart(
    make_daemon: MakeDaemon,
) -> None:
    d = make_daemon(gpus=1).start()
    d.submit(document("blocker", ["sleep", "600"], gpus=1, restart_limit=0))
    d.wait_state("blocker", "Running")
    d.submit(document("damaged", ["sleep", "600"], gpus=1))
    d.kill9()
    d.kill_workers()  # the blocker's GPU is free again after the restart
    conn = sqlite3.connect(d.home / "state.db")
    with conn:
        damaged = '{"metadata": {"name": "damaged"}, "spec": {"workers": "many"}}'
        conn.execute("UPDATE runs SET spec = ? WHERE name = 'damaged'", (damaged,))
    conn.close()
    d.start()
    d.submit(document("after", ["sleep", "600"], gpus=1))
    d.wait_state("after", "Running", timeout=30)  # planned, and given the GPU
    wait_for(lambda: any(e.kind == "SetAside" for e in d.client().events("damaged")),
             20, "the damaged run's event")  # fmt: skip
    aside = [e for e in d.client().events("damaged") if e.kind == "SetAside"]
    assert len(aside) == 1 and aside[0].code == "SET_ASIDE"
    assert d.run("damaged")["state"] == "Queued"
