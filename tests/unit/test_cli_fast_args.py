"""The fast path's option parser takes only what click reads the same way."""

from __future__ import annotations

import pytest

from astraeus_tui.cli.fast.args import FLAG, MULTI, VALUE, parse

SPEC = {"--json": ("as_json", FLAG), "-a": ("all", FLAG), "--name": ("name", VALUE),
        "--env": ("env", MULTI)}  # fmt: skip


def test_options_values_positionals_and_the_rest() -> None:
    got = parse(["x", "--name", "n", "--env=A=1", "--json", "--env", "B", "--", "-c", "y"], SPEC)
    assert got is not None
    assert got.options == {"name": "n", "env": ["A=1", "B"], "as_json": True}
    assert (got.positional, got.rest) == (["x"], ["-c", "y"])
    got = parse(["-", "--name=", "-a"], SPEC)
    assert got is not None and (got.positional, got.options) == (["-"], {"name": "", "all": True})


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["-h"],
        ["--nam", "x"],
        ["-aw"],
        ["--json=1"],
        ["--name"],
        ["--name", "-x"],
        ["--bogus"],
        ["x", "--name", "--json"],
    ],
)
def test_anything_unsure_is_refused(argv: list[str]) -> None:
    assert parse(argv, SPEC) is None


def test_values_are_converted_by_the_table_as_typer_receives_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from astraeus_tui.cli.fast.args import values
    from astraeus_tui.cli.fast.options import RUN, WAIT, spec

    monkeypatch.delenv("ASTRAEUS_IMAGE", raising=False)
    parsed = parse(["--gpus", "2", "--cpus=1.5", "--name", "n", "--env", "A=1"], spec(RUN))
    assert parsed is not None
    got = values(parsed, RUN)
    assert got == {"gpus": 2, "cpus": 1.5, "priority": 0, "workers": 1, "image": "",
                   "name": "n", "env": ["A=1"]}  # fmt: skip
    monkeypatch.setenv("ASTRAEUS_IMAGE", "img:1")
    parsed = parse(["--gpus="], spec(RUN))  # empty: the default, as before
    assert parsed is not None and values(parsed, RUN) == {
        "gpus": 0, "cpus": 0.0, "priority": 0, "workers": 1, "image": "img:1"}  # fmt: skip
    parsed = parse(["--image", ""], spec(RUN))  # given, even empty: not the variable
    assert parsed is not None and (values(parsed, RUN) or {})["image"] == ""
    for argv, options in (["--gpus", "x"], RUN), (["--timeout", "soon"], WAIT):
        parsed = parse(argv, spec(options))
        assert parsed is not None and values(parsed, options) is None  # typer says why
    parsed = parse([], spec(WAIT))
    assert parsed is not None and values(parsed, WAIT) == {}
