"""Runs that hold memory as real users run them, for the telemetry tests: one idle on its
GPU (``HOLD``), one at work (``WORK``), and the name another workspace's run has (``ANON``)."""

from __future__ import annotations

import os
import sys
from typing import Any

HOLD = "b = bytearray(48 << 20); b[::4096] = b'x' * len(b[::4096]); import time; time.sleep(300)"

# the same memory, and about half a core of work: its simulated GPU is busy; HOLD's is idle
WORK = HOLD.replace(
    "time.sleep(300)",
    "\nwhile True:\n t = time.monotonic()\n"
    " while time.monotonic() - t < 0.01: pass\n time.sleep(0.01)",
)

ANON = "a job in another namespace"

# the run's interpreter: one its user may run (the tests' own may live in root's home)
PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


def spec(name: str, workspace: str, program: str = HOLD) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "workspace": workspace},
        "spec": {"task_template": {
            "image": "local", "command": PYTHON, "args": ["-c", program],
            "requested_resources": {"gpu_requests": {"count": 1}},
        }},
    }  # fmt: skip
