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


def test_plan_of_a_shared_queue_shows_the_packing() -> None:
    queue = EXAMPLE_QUEUE.parent / "shared-queue.toml"
    result = CliRunner().invoke(app, ["plan", str(queue)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "0 (30GiB each)" in result.output  # eval-a joins the notebook on GPU 0
    assert "1x40GiB" in result.output  # eval-b: 30 GiB left there, train-big holds GPU 1
    assert "gpu 0 shared: notebook 20GiB, eval-a 30GiB, 30GiB free" in result.output
    assert "waits for GPU memory: needs 40GiB on 1 GPU, the most free on one GPU is 30GiB" in (
        " ".join(result.output.split())
    )
