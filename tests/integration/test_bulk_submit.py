"""Bulk submit against a real daemon: `astra submit FILE...`, `astra submit --ndjson`, and
``POST /v1/runs:batch`` (docs/api.md). Each document is checked as a single submit is; the
valid ones are committed together before the answer, each refusal is one line with its code
and nothing of that run is stored."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from astraeus_tui.cli.fast.batch import PART
from astraeus_tui.client import ApiError, Client
from runner.api.batch import MAX_BATCH, MAX_BATCH_BODY
from tests.support.served import Served
from tests.support.tenants import spec as identity_spec
from tests.support.tenants import two_tenants
from tests.support.users import fork_as, lab_users

Start = Callable[..., Served]
HEAVY = ("typer", "rich", "click")
TOML = """[metadata]
name = "{name}"
[spec]
priority = {priority}
[spec.task_template]
command = "sleep"
args = ["60"]
[spec.task_template.requested_resources.gpu_requests]
count = 1
"""


def doc(name: str, **spec: Any) -> str:
    task = {
        "command": "sleep",
        "args": ["60"],
        "requested_resources": {"gpu_requests": {"count": 1}},
    }
    return json.dumps({"metadata": {"name": name}, "spec": {**spec, "task_template": task}})


def astra(d: Served, *args: str, fast: bool = True, input: str | None = None,
          ) -> tuple[subprocess.CompletedProcess[str], set[str]]:  # fmt: skip
    """One `astra` call and the top-level packages it imported."""
    env = d.env if fast else {**d.env, "ASTRAEUS_CLI_FAST": "0"}
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "astraeus_tui.cli.main",
                          *args], env=env, input=input, capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    lines = out.stderr.splitlines(keepends=True)
    imported = {line.split("|")[-1].strip().split(".")[0] for line in lines
                if line.startswith("import time:")}  # fmt: skip
    out.stderr = "".join(line for line in lines if not line.startswith("import time:"))
    return out, imported


def names(d: Served) -> list[str]:
    """The stored runs' names, in the queue's order (the blocker first: it runs)."""
    return [r["name"] for r in d.json("ls", "--all")]


@pytest.fixture
def d(served: Start) -> Served:
    daemon = served(gpus=1)
    blocker = daemon.astra("run", "--name", "blocker", "--gpus", "1", "--", "sleep", "300")
    assert blocker.returncode == 0, blocker.stderr
    return daemon


def test_many_files_one_batch_fast_and_typer_alike(d: Served, tmp_path: Path) -> None:
    outcomes = []
    for fast, prefix in ((True, "f"), (False, "t")):
        files = []
        for i in range(30):
            path = tmp_path / f"{prefix}{i:02}.toml"
            path.write_text(TOML.format(name=f"{prefix}-{i:02}", priority=-(i % 3)))
            files.append(str(path))
        bad = tmp_path / f"{prefix}-bad.toml"
        bad.write_text(TOML.format(name="Bad_Name", priority=0))
        taken = tmp_path / f"{prefix}-taken.json"
        taken.write_text(doc("blocker"))
        out, imported = astra(d, "submit", *files[:10], str(bad), *files[10:], str(taken),
                              fast=fast)  # fmt: skip
        assert ("typer" in imported) != fast and not (fast and imported & set(HEAVY))
        outcomes.append((out.returncode, out.stdout.replace(f"{prefix}-", "X-"),
                         out.stderr.replace(str(tmp_path / prefix), "DIR/")))  # fmt: skip
    assert outcomes[0] == outcomes[1]
    code, stdout, stderr = outcomes[0]
    assert code == 1
    assert stdout.splitlines()[0] == "Submitted run X-00 (default, priority 0)"
    assert len(stdout.splitlines()) == 30
    assert stderr.splitlines() == [
        "DIR/-bad.toml: 422 INVALID_SPEC: metadata.name: must be 1-63 lowercase letters,"
        " digits or '-', starting and ending with a letter or digit, got 'Bad_Name'",
        "DIR/-taken.json: 409 NAME_IN_USE: a run named blocker exists",
        "2 of 32 refused, nothing of them stored; 30 submitted",
    ]
    stored = names(d)
    assert len(stored) == 61 and "Bad_Name" not in stored
    # one batch, in the files' order: priority first, then the order given
    queued = [r for r in d.json("ls") if r["state"] == "Queued" and r["name"].startswith("f-")]
    by_priority = sorted(queued, key=lambda r: (-r["priority"], r["position"]))
    assert [r["name"] for r in by_priority if r["priority"] == 0] == [
        f"f-{i:02}" for i in range(0, 30, 3)
    ]


def test_ndjson_on_stdin_with_invalid_lines(d: Served) -> None:
    lines = [doc("a-0"), "", doc("a-1", priority=-2), "{not json", doc("a-2", priority=5000),
             doc("a-0"), doc("a-3", after=["a-1"]), doc("a-4", after=["nope"]), "[1, 2]",
             doc("blocker")]  # fmt: skip
    out, imported = astra(d, "submit", "--ndjson", input="\n".join(lines) + "\n")
    assert not imported & set(HEAVY)
    assert out.returncode == 1
    assert out.stdout.splitlines() == [
        "Submitted run a-0 (default, priority 0)",
        "Submitted run a-1 (default, priority -2)",
        "Submitted run a-3 (default, priority 0)",
    ]
    errors = out.stderr.splitlines()
    assert [e.split(": ")[0] + ": " + e.split(": ")[1].split(" ")[1] for e in errors[:-1]] == [
        "<stdin>:4: INVALID_SPEC",
        "<stdin>:5: INVALID_SPEC",
        "<stdin>:6: NAME_IN_USE",
        "<stdin>:8: INVALID_SPEC",
        "<stdin>:9: INVALID_SPEC",
        "<stdin>:10: NAME_IN_USE",
    ]
    assert errors[-1] == "6 of 9 refused, nothing of them stored; 3 submitted"
    assert sorted(names(d)) == ["a-0", "a-1", "a-3", "blocker"]
    a3 = d.json("show", "a-3")
    assert a3["after"] == ["a-1"] and a3["reason_code"] in ("WAITING", "DEPENDENCY_WAIT")
    events = [e for e in d.json("show", "a-0")["events"] if e["kind"] == "Submitted"]
    assert [e["code"] for e in events] == ["SUBMITTED"]


def test_ndjson_json_output_is_one_line_a_document(d: Served, tmp_path: Path) -> None:
    path = tmp_path / "runs.ndjson"
    path.write_text(doc("j-0") + "\n" + doc("blocker") + "\n")
    out, _ = astra(d, "submit", "--ndjson", str(path), "--json", "--after", "blocker")
    assert out.returncode == 1
    first, second = (json.loads(line) for line in out.stdout.splitlines())
    assert first["source"] == f"{path}:1" and first["run"]["name"] == "j-0"
    assert first["run"]["after"] == ["blocker"] and first["run"]["state"] == "Queued"
    assert second == {"source": f"{path}:2", "error": {
        "status": 422, "code": "INVALID_SPEC", "message": "spec.after: a run cannot wait for itself"
    }}  # fmt: skip


def test_max_submit_per_user_holds_within_a_batch(served: Start) -> None:
    d = served(gpus=1, machine="max_submit_per_user = 5")
    assert d.astra("run", "--name", "one", "--", "sleep", "300").returncode == 0
    out, _ = astra(d, "submit", "--ndjson", input="\n".join(doc(f"l-{i}") for i in range(7)))
    assert out.returncode == 1
    assert len(out.stdout.splitlines()) == 4
    assert out.stderr.splitlines()[:3] == [
        "<stdin>:5: 429 TOO_MANY_RUNS: user root has 5 runs queued or running and may have at"
        " most 5 (max_submit_per_user)",
        "<stdin>:6: 429 TOO_MANY_RUNS: user root has 5 runs queued or running and may have at"
        " most 5 (max_submit_per_user)",
        "<stdin>:7: 429 TOO_MANY_RUNS: user root has 5 runs queued or running and may have at"
        " most 5 (max_submit_per_user)",
    ]
    assert sorted(names(d)) == ["l-0", "l-1", "l-2", "l-3", "one"]


def test_the_api_bounds_a_batch_and_stores_nothing_past_them(d: Served) -> None:
    client = Client(d.socket)
    too_many = "\n".join(doc(f"m-{i}") for i in range(MAX_BATCH + 1)).encode()
    with pytest.raises(ApiError) as refused:
        client.submit_batch(too_many)
    assert refused.value.status == 413 and refused.value.code == "REQUEST_ENTITY_TOO_LARGE"
    with pytest.raises(ApiError) as large:
        client.submit_batch(b"\n" * (MAX_BATCH_BODY + 1))
    assert large.value.status == 413
    with pytest.raises(ApiError) as wrong:
        client.typed(dict, "POST", "/v1/runs:batch", raw=b"x", content_type="text/plain")
    assert wrong.value.status == 415
    with pytest.raises(ApiError) as binary:
        client.submit_batch(doc("u-0").encode() + b"\n\xff\n")
    assert (binary.value.status, binary.value.code) == (422, "INVALID_SPEC")
    assert names(d) == ["blocker"]
    deep = "[" * 40 + "]" * 40
    answer = client.submit_batch(f"{deep}\n{doc('deep-ok')}".encode())
    got = [r.error.code if r.error else r.run.name if r.run else "" for r in answer.results]
    assert got == ["INVALID_SPEC", "deep-ok"]
    assert answer.results[0].error is not None and "nested" in answer.results[0].error.message
    # a JSON array works too; an element that is not a document is refused alone
    body = json.dumps([json.loads(doc("arr-0")), 7, json.loads(doc("arr-1"))]).encode()
    answer = client.request("POST", "/v1/runs:batch", raw=body)
    assert (answer["accepted"], answer["refused"]) == (2, 1)
    assert [r["index"] for r in answer["results"]] == [0, 1, 2]
    assert answer["results"][1]["error"]["code"] == "INVALID_SPEC"
    assert answer["results"][0]["run"]["name"] == "arr-0"
    assert sorted(names(d)) == ["arr-0", "arr-1", "blocker", "deep-ok"]
    # the same run object as show's, in its order (less the forecast's fields, which come
    # with an estimate: before any run finished, how many have and how many it needs)
    later = ("likely_start", "likely_start_90", "learned_from", "forecast_needs")
    shown = [k for k in d.json("show", "arr-0") if k not in later]
    assert list(answer["results"][0]["run"]) == shown[: len(answer["results"][0]["run"])]


def test_an_acknowledged_batch_survives_a_daemon_crash(served: Start) -> None:
    d = served(gpus=1, machine="max_submit_per_user = 5000")
    count = PART + 500  # two requests, two transactions
    out, _ = astra(d, "submit", "--ndjson", input="\n".join(doc(f"c-{i}") for i in range(count)))
    assert out.returncode == 0 and len(out.stdout.splitlines()) == count
    d.kill9()
    d.restart()
    stored = names(d)
    assert [n for n in stored if n.startswith("c-")] == [f"c-{i}" for i in range(count)]


def test_a_sweep_among_many_files_is_refused_alone(d: Served, tmp_path: Path) -> None:
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(TOML.format(name="sw", priority=0) + "[spec.sweep.grid]\nLR = [1, 2]\n")
    plain = tmp_path / "plain.toml"
    plain.write_text(TOML.format(name="plain", priority=0))
    for fast in (True, False):
        out, _ = astra(d, "submit", str(sweep), str(plain), fast=fast)
        assert out.returncode == 1
        assert out.stderr.splitlines()[0] == (
            f"{sweep}: 422 INVALID_SPEC: spec.sweep: a sweep is submitted on its own:"
            f" astra submit {sweep}"
        )
    assert sorted(names(d)) == ["blocker", "plain"]
    dry, _ = astra(d, "submit", "--dry-run", str(plain), str(sweep))
    assert (dry.returncode, dry.stderr.strip()) == (1, "--dry-run: give one spec file")


def as_user(entry: pwd.struct_passwd, socket: Path, call: Callable[[Client], Any]) -> Any:
    """``call`` in a child that is really ``entry`` (uid, gid, the groups the system gives it)."""
    read, write = os.pipe()
    pid = fork_as(entry)
    if pid == 0:
        os.close(read)
        try:
            result: Any = {"ok": msgspec.to_builtins(call(Client(socket)))}
        except ApiError as e:
            result = {"error": str(e)}
        except BaseException as e:
            result = {"error": f"{type(e).__name__}: {e}"}
        os.write(write, json.dumps(result).encode())
        os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    return json.loads(b"".join(chunks))


@pytest.mark.skipif(os.geteuid() != 0, reason="creating Unix users needs root")
def test_a_members_batch_is_checked_as_that_member(served: Start) -> None:
    group, alice, bob = "astra-bulk", "astra-bulk-a", "astra-bulk-b"
    config = two_tenants(group, alice, bob, vision="max_priority = 10")
    with lab_users(group, alice, bob) as users:
        lab = served(config, gpus=2)
        made = as_user(users[bob], lab.socket, lambda c: c.submit(identity_spec("secret", "nlp")))
        assert "ok" in made
        documents = [identity_spec("v-0", "vision"), identity_spec("n-0", "nlp"),
                     identity_spec("v-1", "vision", priority=50),
                     {**identity_spec("v-2", "vision"),
                      "spec": {**identity_spec("v-2", "vision")["spec"], "after": ["secret"]}},
                     identity_spec("v-3", "vision", priority=10)]  # fmt: skip
        body = "\n".join(json.dumps(doc) for doc in documents).encode()
        answer = as_user(users[alice], lab.socket, lambda c: c.submit_batch(body))["ok"]
        outcome = [(r["run"] or {}).get("name") or r["error"]["code"] for r in answer["results"]]
        assert outcome == ["v-0", "FORBIDDEN", "PRIORITY_NOT_ALLOWED", "INVALID_SPEC", "v-3"]
        assert answer["results"][3]["error"]["message"] == "spec.after: no run secret"
        assert answer["results"][1]["error"]["message"] == (
            f"{alice} is not a member of namespace nlp"
        )
        assert {lab.json("show", n)["owner"] for n in ("v-0", "v-3")} == {alice}
        assert sorted(names(lab)) == ["secret", "v-0", "v-3"]


def test_ndjson_fast_and_typer_alike(d: Served) -> None:
    outcomes = []
    for fast, prefix in ((True, "p"), (False, "q")):
        lines = [doc(f"{prefix}-0"), "{", doc(f"{prefix}-1", after=[f"{prefix}-0"]), doc("blocker")]
        for as_json in ((), ("--json",)):
            out, imported = astra(d, "submit", "--ndjson", *as_json, fast=fast,
                                  input="\n".join(lines))  # fmt: skip
            assert ("typer" in imported) != fast and not (fast and imported & set(HEAVY))
            lines = [line.replace(f"{prefix}-", f"{prefix}j-") for line in lines]
            text = out.stdout + out.stderr
            for noise in (f"{prefix}j-", f"{prefix}-"):
                text = text.replace(noise, "X-")
            if as_json:  # ids and times differ between the two runs: compare the shape
                text = "\n".join(sorted(json.loads(line).keys().__repr__()
                                        for line in out.stdout.splitlines()))  # fmt: skip
            outcomes.append((fast, out.returncode, text))
    assert [o[1:] for o in outcomes[:2]] == [o[1:] for o in outcomes[2:]]
    assert outcomes[0][1] == 1 and "Submitted run X-1 (default, priority 0)" in outcomes[0][2]
