"""The fast commands' stdlib stand-ins against the stdlib they stand in for: the JSON
codec (runner/plainjson.py) against json, the shell quoting of `show` against shlex."""

from __future__ import annotations

import json
import math
import shlex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from astraeus_tui.cli.fast.show import shell_quoted
from runner import plainjson

scalars = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
           | st.text())  # fmt: skip
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=500, deadline=None)
@given(values)
def test_dumps_writes_what_json_writes(value: object) -> None:
    assert plainjson.dumps(value) == json.dumps(value)


@settings(max_examples=500, deadline=None)
@given(values, st.sampled_from(["", " ", "\n", " \r\n\t"]))
def test_loads_reads_what_json_reads(value: object, after: str) -> None:
    text = json.dumps(value, ensure_ascii=False) + after
    got = plainjson.loads(text.encode("utf-8", "surrogatepass"))
    assert json.dumps(got) == json.dumps(json.loads(text))


def test_the_constants_and_whitespace_before_a_value() -> None:
    got = plainjson.loads(b'[NaN, Infinity, -Infinity, 1e400, "\\ud800"]')
    assert math.isnan(got[0]) and got[1:4] == [math.inf, -math.inf, math.inf]
    assert got[4] == "\ud800"
    assert plainjson.loads(b' \n {"a": 1}') == {"a": 1}
    assert plainjson.dumps([math.nan, math.inf]) == "[NaN, Infinity]"


@pytest.mark.parametrize("bad", [b"", b"{", b"[1,]", b"1 2", b'{"a" 1}', b"nul", b"\xff"])
def test_bad_json_fails_as_json_fails(bad: bytes) -> None:
    with pytest.raises(ValueError) as ours:
        plainjson.loads(bad)
    try:
        json.loads(bad)
    except ValueError as theirs:
        assert type(ours.value) is type(theirs) and str(ours.value) == str(theirs)
    else:  # pragma: no cover
        pytest.fail(f"json read {bad!r}")


def test_what_json_cannot_write_is_refused_as_json_refuses() -> None:
    for value in ({1, 2}, {"a": object()}, b"x"):
        with pytest.raises(TypeError) as ours:
            plainjson.dumps(value)
        with pytest.raises(TypeError) as theirs:
            json.dumps(value)
        assert str(ours.value) == str(theirs.value)
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        plainjson.dumps(loop)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from("aZ9_@%+=:,./- '\"$\\\n\té\x1b") | st.characters()))
def test_shell_quoting_is_shlexs(arg: str) -> None:
    assert shell_quoted(arg) == shlex.quote(arg)
