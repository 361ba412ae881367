"""Raw control characters never reach another user's terminal.

A mount path such as ``/data ESC]0;title BEL ESC[2J`` used to be accepted and end up in
start-failure reasons that `astra events` and `astra ls -a` print for everyone. Now every
one-line field refuses what is not printable, arguments and env values only the control
characters a script does not need; and the CLI escapes what it prints of the daemon's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from astraeus_tui.cli.tables import print_runs
from astraeus_tui.client import ApiError, Client
from runner.schema import Run
from tests.hostile.helpers import db_state
from tests.support.served import Served

HOSTILE = "\x1b]0;pwned\x07\x1b[2J"
TASK = "spec.task_template"
LINE = "must not contain control characters or other unprintable ones, found"
SCRIPT = "must not contain control characters other than tab, newline and carriage return, found"


def spec(name: str = "esc", **task: Any) -> dict[str, Any]:
    template = {
        "image": "local",
        "command": "true",
        "requested_resources": {"gpu_requests": {"count": 5}},
    }  # never starts: 2 GPUs
    return {"metadata": {"name": name, "workspace": "vision"},
            "spec": {"task_template": {**template, **task}}}  # fmt: skip


@pytest.fixture
def untouched(lab: Served) -> Iterator[None]:
    before = db_state(lab.home)
    yield
    assert db_state(lab.home) == before


@pytest.mark.parametrize(
    ("task", "message"),
    [
        (
            {"datavolume_refs": [{"name": "checkpoints", "mount_path": "/data" + HOSTILE}]},
            f"{TASK}.datavolume_refs[0].mount_path: {LINE} '\\x1b'",
        ),
        ({"image": "local" + HOSTILE}, f"{TASK}.image: {LINE} '\\x1b'"),
        ({"command": "tr\u202eue"}, f"{TASK}.command: {LINE} '\\u202e'"),
        ({"command": ["sh", "-c", "echo \x1b[2J"]}, f"{TASK}.args[1]: {SCRIPT} '\\x1b'"),
        ({"args": ["ok", "\x9b2J"]}, f"{TASK}.args[1]: {SCRIPT} '\\x9b'"),
        ({"env": {"TITLE": "\x07"}}, f"{TASK}.env.TITLE: {SCRIPT} '\\x07'"),
    ],
    ids=["mount-path", "image", "command-bidi", "arg-esc", "arg-c1", "env-bel"],
)
def test_control_characters_are_refused_and_nothing_is_written(
    lab: Served, untouched: None, task: dict[str, Any], message: str, tmp_path: Path
) -> None:
    with pytest.raises(ApiError) as caught:
        Client(lab.socket).submit(spec(**task))
    assert str(caught.value) == f"422 INVALID_SPEC: {message}"
    (tmp_path / "run.json").write_text(json.dumps(spec(**task)))
    cli = lab.astra("submit", str(tmp_path / "run.json"))
    assert (cli.returncode, cli.stderr) == (1, f"422 INVALID_SPEC: {message}\n")
    assert "\x1b" not in cli.stderr


def test_a_script_s_newlines_are_accepted_and_shown_escaped(lab: Served) -> None:
    script = "set -e\n\techo one\r\necho 'two \u202e owt'\n"
    Client(lab.socket).submit(spec("script", command=["bash", "-c", script]))
    shown = lab.astra("show", "script")
    assert shown.returncode == 0, shown.stderr
    lines = [line for line in shown.stdout.splitlines() if line.startswith("command:")]
    expected = "bash -c 'set -e\\n\\techo one\\r\\necho '\"'\"'two \\u202e owt'\"'\"'\\n'"
    assert lines == [f"{'command:':<20}{expected}"]
    assert "\u202e" not in shown.stdout and "\r" not in shown.stdout
    Client(lab.socket).delete("script")


def test_ls_prints_a_reason_escaped_and_not_as_markup(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    run = {"name": "r", "workspace": "vision", "priority": 0, "state": "Failed", "gpus": [],
           "gpus_requested": 0, "head": False, "position": None, "submitted_at": None,
           "reason": f"[bold red]Could not start[/bold red]: {HOSTILE}"}  # fmt: skip
    print_runs([msgspec.convert(dict(run, id="r"), Run)])
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "[bold red]Could not start[/bold red]: \\x1b]0;pwned\\x07\\x1b[2J" in out


def test_a_sweep_parameter_with_control_characters_is_refused(lab: Served, untouched: None) -> None:
    template = spec("sw", command="echo", args=["${LR}"])
    sweep = {"kind": "sweep", "name": "sw", "template": template, "list": [{"LR": "\x1b[2J"}]}
    with pytest.raises(ApiError) as caught:
        Client(lab.socket).create_group(sweep)
    assert str(caught.value) == f"422 INVALID_SPEC: list[0].LR: {SCRIPT} '\\x1b'"
    assert Client(lab.socket).groups() == []
