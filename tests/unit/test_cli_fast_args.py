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
