"""The stream's runs escaped as every other answer is, with no cost for those that need
nothing (a snapshot holds thousands)."""

from __future__ import annotations

from astraeus_tui.escaped import escape_all, escape_stream
from runner.model import RunState
from runner.schema import Change, Run, Snapshot


def run(name: str, reason: str = "Queued behind big") -> Run:
    return Run(id=name, name=name, workspace="default", state=RunState.QUEUED, reason=reason)


HOSTILE = [
    run("esc", "[b]x[/b] \x1b[2J"),  # a control character: JSON escapes it
    run("bidi", "right\u202eleft"),  # printable to JSON, not to a terminal
    run("del", "rub\x7fout"),  # DEL: JSON leaves it as it is
    run("newline\nname"),
]


def test_a_snapshot_is_escaped_as_escape_all_does_and_clean_runs_are_kept() -> None:
    clean = [run("plain"), run("café", "Queued behind résumé")]  # not ASCII, printable
    snapshot = Snapshot(version=3, runs=[*clean, *HOSTILE])
    shown = escape_stream(snapshot)
    assert shown == escape_all(snapshot)
    assert isinstance(shown, Snapshot)
    assert [r.reason for r in shown.runs[2:]] == [
        "[b]x[/b] \\x1b[2J",
        "right\\u202eleft",
        "rub\\x7fout",
        "Queued behind big",
    ]
    assert shown.runs[5].name == "newline\\nname"
    assert shown.runs[0] is clean[0] and shown.runs[1] is clean[1]  # untouched, not copied
    quiet = Snapshot(version=1, runs=clean[:1])
    assert escape_stream(quiet) is quiet


def test_a_change_is_escaped_upserts_and_removed_ids_alike() -> None:
    change = Change(version=4, upsert=[run("plain"), *HOSTILE], remove=["gone\x1b"])
    shown = escape_stream(change)
    assert shown == escape_all(change)
    assert isinstance(shown, Change)
    assert shown.remove == ["gone\\x1b"]
    assert shown.upsert[0] is change.upsert[0]
