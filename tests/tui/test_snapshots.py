"""The main screen, pixel for pixel, in the states that matter (fixed size, frozen clock).

Fed by ``FakeClient`` replaying a real daemon's recorded answers
(``tests/tui/fixtures/*.json``). After an intended change of the picture:
``pytest tests/tui/test_snapshots.py --snapshot-update``, then look at the SVGs.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.tui.helpers import PROJECT, STATES, app_for, new_run_filled, settled


@pytest.mark.parametrize("state", STATES)
def test_main_screen(snap_compare: Any, state: str) -> None:
    assert snap_compare(app_for(state), terminal_size=(120, 36), run_before=settled)


def test_main_screen_narrow_during_a_preemption(snap_compare: Any) -> None:
    assert snap_compare(app_for("preemption"), terminal_size=(80, 24), run_before=settled)


def test_main_screen_narrow_with_the_timeline(snap_compare: Any) -> None:
    """At 80 columns the bottom panels take turns: `v` shows the timeline."""
    app = app_for("head")
    assert snap_compare(app, terminal_size=(80, 24), press=["v"], run_before=settled)


def test_groups_screen(snap_compare: Any) -> None:
    """`g`: a replica group, a sweep and a schedule, the first one's runs and events."""
    assert snap_compare(app_for("groups"), terminal_size=(120, 36), press=["g"],
                        run_before=settled)  # fmt: skip


def test_main_screen_on_a_front_for_slurm(snap_compare: Any) -> None:
    """Recorded from a front for the real Slurm: Slurm's head, start estimates and GPUs."""
    assert snap_compare(app_for("slurm"), terminal_size=(120, 36), run_before=settled)


def test_main_screen_with_shared_gpus(snap_compare: Any) -> None:
    """Runs sharing GPUs by memory: the GPU panel gives each GPU's shares by run and
    what is free; a shared head waits for memory on one GPU."""
    assert snap_compare(app_for("shared"), terminal_size=(120, 36), run_before=settled)


def test_the_new_run_form(snap_compare: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fields, the spec as JSON kept in step, More options, and the workspace's quota. The
    dashboard is opened in a project folder: the JSON and Folder name it."""
    PROJECT.mkdir(exist_ok=True)
    monkeypatch.chdir(PROJECT)
    assert snap_compare(app_for("head"), terminal_size=(120, 36), run_before=new_run_filled)
