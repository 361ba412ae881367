"""`astra plan` on the shipped example queue."""

from typer.testing import CliRunner

from astraeus_tui.cli.main import app
from astraeus_tui.cli.plan import EXAMPLE_QUEUE


def test_plan_of_the_example_queue_preempts_for_the_urgent_run() -> None:
    result = CliRunner().invoke(app, ["plan", str(EXAMPLE_QUEUE)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "Preempting 1 lower-priority worker(s) of ft-lowprio to start" in result.output
    assert "preempt ft-lowprio (priority -100)" in result.output


def test_plan_of_a_missing_file_is_one_clear_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(app, ["plan", str(tmp_path / "nope.toml")])
    assert result.exit_code == 2
    assert "nope.toml" in result.output
