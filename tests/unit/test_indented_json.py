"""``--json`` is indented by msgspec when that gives json.dumps's bytes, by json otherwise
(astraeus_tui/cli/tables.py ``indented_json``): the same text either way."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from astraeus_tui.cli.tables import indented_json

FIXTURE = Path(__file__).parent / "fixtures" / "views.json"

values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)  # fmt: skip


@given(values)
@settings(max_examples=400, deadline=None)
def test_any_json_value_is_indented_as_json_dumps_does(value: object) -> None:
    assert indented_json(value) == json.dumps(value, indent=2)


def test_the_wire_objects_are_indented_as_before() -> None:
    objects = [json.loads(text) for text in json.loads(FIXTURE.read_text()).values()]
    assert indented_json(objects) == json.dumps(objects, indent=2)
    exotic = {"name": "nöt ascii", "del": "\x7f", "tiny": 3.2e-05, "huge": 1e16, "e": "1e5"}
    assert indented_json(exotic) == json.dumps(exotic, indent=2)
