"""The dashboard's recorded fixtures are read through the daemon's schema (runner/schema.py),
as the real client reads the daemon: one that no longer matches it fails, loudly."""

from __future__ import annotations

import msgspec
import pytest

from runner.model import RunState
from tests.tui.fake_client import FIXTURES, FakeClient, load_fixture


@pytest.mark.parametrize("name", sorted(p.stem for p in FIXTURES.glob("*.json")))
def test_every_fixture_decodes_into_the_schema(name: str) -> None:
    fake = FakeClient(name)
    assert all(isinstance(r.state, RunState) for r in fake.snapshot.runs)
    assert {r.name for r in fake.details.values()} <= {r.name for r in fake.snapshot.runs}


def test_a_fixture_that_no_longer_matches_the_schema_is_refused() -> None:
    data = load_fixture("head")
    data["snapshot"][0] = dict(data["snapshot"][0], state="Sleeping")
    with pytest.raises(msgspec.ValidationError, match=r"state"):
        FakeClient(data)
    data = load_fixture("head")
    data["snapshot"][0] = {k: v for k, v in data["snapshot"][0].items() if k != "id"}
    with pytest.raises(msgspec.ValidationError, match=r"id"):
        FakeClient(data)
