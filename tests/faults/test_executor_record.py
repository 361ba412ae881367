"""After a crash, a daemon on processes refuses only for workers Docker started.

What started each worker is recorded on it (not guessed from the run's image): a run
that names an image but was started as a local process is picked up again by a daemon
on processes after kill -9.
"""

from __future__ import annotations

from tests.faults.conftest import MakeDaemon
from tests.faults.daemon import PY, document


def test_process_workers_of_an_image_run_survive_a_crash(make_daemon: MakeDaemon) -> None:
    daemon = make_daemon(gpus=4).start()
    argv = [PY, "-c", "import time; time.sleep(3600)"]
    daemon.submit(document("r1", argv, gpus=4, image="any/image"))
    daemon.wait_state("r1", "Running")
    with daemon.database() as db:
        rows = db.execute("SELECT executor FROM workers WHERE run = 'r1'").fetchall()
        assert [tuple(r) for r in rows] == [("process",)]
    daemon.kill9()
    daemon.start()  # before: 'process: executor = "process" in the config, but 1 run(s) ...'
    assert daemon.wait_state("r1", "Running")["state"] == "Running"
