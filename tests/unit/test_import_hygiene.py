"""runner/ is headless: importing it must not load the dashboard or CLI stacks."""

import subprocess
import sys


def test_runner_imports_without_textual_or_typer() -> None:
    code = (
        "import sys, runner.model, runner.planner.plan, runner.spec.parse;"
        "import runner.planner.queuefile;"
        "bad = [m for m in ('textual', 'typer', 'astraeus_tui') if m in sys.modules];"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
