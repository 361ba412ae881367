"""`--json` prints what the daemon sent, byte for byte in its key order, though the client
decodes every answer into the schema's Structs (runner/schema.py) and encodes them again."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable

from astraeus_tui.client import Client
from tests.support.harness import spec, wait_for
from tests.support.served import Served, indented

Start = Callable[..., Served]


def test_json_output_is_the_daemons_json(served: Start) -> None:
    d = served(gpus=1, machine="telemetry_seconds = 0.2")  # "one" sampled: show has its usage
    client = Client(d.socket, timeout=30)
    one = ("--", sys.executable, "-c", "import time; time.sleep(1); print(1)")
    assert d.astra("run", "--name", "one", *one).returncode == 0
    assert d.astra("wait", "one").returncode == 0
    client.submit(spec("big", ["true"], gpus=3))  # more than the machine has: it waits
    # the planner's reason, not the submit's "Waiting for the scheduler": it changes no more
    wait_for(lambda: client.show("big").reason_code not in (None, "WAITING"), message="a reason")
    held = ("--hold", "--begin", "2036-12-02T03:00")  # held and begin_at set: their fields too
    assert d.astra("run", "--name", "parked", *held, "--", "true").returncode == 0
    template = spec("nightly", ["true"], gpus=1)
    client.create_group({"kind": "schedule", "cron": "0 3 * * *", "template": template})
    today = time.strftime("%Y-%m-%d", time.gmtime())  # history's since: the same in both
    pinned = {
        ("ls", "--all"): ("/v1/runs", {"all": 1}),
        ("show", "one"): ("/v1/runs/one", None),
        ("show", "big"): ("/v1/runs/big", None),
        ("show", "parked"): ("/v1/runs/parked", None),
        ("gpus",): ("/v1/gpus", None),
        ("schedule", "ls"): ("/v1/groups", {"kind": "schedule"}),
        ("schedule", "show", "nightly"): ("/v1/groups/nightly", None),
        ("history", "--since", today): ("/v1/history", {"since": today}),
    }
    for args, (path, query) in pinned.items():
        raw = client.answer("GET", path, query=query)
        if path in ("/v1/runs", "/v1/groups"):  # the CLI prints the list inside
            raw = json.dumps(next(iter(json.loads(raw).values()))).encode()
        out = d.astra(*args, "--json")
        assert out.returncode == 0, (args, out.stderr)
        assert out.stdout == indented(raw), args
        if args == ("show", "one"):
            assert json.loads(raw)["usage"]["samples"] >= 2, raw  # the field is in the bytes
    raw_events = client.answer("GET", "/v1/events", query={"run": "one"}).splitlines()
    compact = [json.dumps(json.loads(e), separators=(",", ":")) for e in raw_events]
    assert d.astra("events", "one", "--json").stdout.splitlines() == compact
