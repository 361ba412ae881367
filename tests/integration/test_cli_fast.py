"""The fast commands (astraeus_tui/cli/fast/) against their typer twins on one daemon.

Each case runs the same arguments twice: once as `astra` runs them (the fast path,
with ``-X importtime`` to see that typer, rich and click stay unloaded) and once
with ``ASTRAEUS_CLI_FAST=0`` (typer's path); stdout, stderr and the exit code must
be the same bytes.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable

import pytest

from tests.support.harness import interruptible, wait_for
from tests.support.served import Served

Start = Callable[..., Served]
HEAVY = ("typer", "rich", "click")
SPEC = """[metadata]
name = "{name}"
[spec]
priority = -3
[spec.task_template]
command = "sleep"
args = ["60"]
"""


def _astra(d: Served, args: tuple[str, ...], fast: bool, input: str | None = None,
           ) -> tuple[subprocess.CompletedProcess[str], set[str]]:  # fmt: skip
    """One `astra` call and the top-level packages it imported."""
    env = d.env if fast else {**d.env, "ASTRAEUS_CLI_FAST": "0"}
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "astraeus_tui.cli.main",
                          *args], env=env, input=input, capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    lines = out.stderr.splitlines(keepends=True)
    imported = {line.split("|")[-1].strip().split(".")[0] for line in lines
                if line.startswith("import time:")}  # fmt: skip
    out.stderr = "".join(line for line in lines if not line.startswith("import time:"))
    return out, imported


def same(d: Served, *args: str, input: str | None = None, rename: str = "",
         via_typer: bool = False) -> str:  # fmt: skip
    """Run ``args`` on both paths; they must agree byte for byte. ``rename``: a run name
    the typer call spells with ``-typer`` after it (two runs cannot share one). Returns
    the fast call's stdout."""
    fast, imported = _astra(d, args, True, input)
    assert ("typer" in imported) if via_typer else not imported & set(HEAVY), args
    twin = tuple(a + "-typer" if rename and a == rename else a for a in args)
    quoted = f'"{rename}"'
    twin_input = input.replace(quoted, f'"{rename}-typer"') if rename and input else input
    slow, imported = _astra(d, twin, False, twin_input)
    assert "typer" in imported
    if rename and "--json" in args and fast.returncode == 0:  # two runs: compare shapes
        got, want = json.loads(fast.stdout), json.loads(slow.stdout)
        assert list(got) == list(want) and f"{got['name']}-typer" == want["name"]
        fast.stdout = slow.stdout = ""
    twin_out = slow.stdout.replace(rename + "-typer", rename) if rename else slow.stdout
    assert (fast.stdout, fast.stderr, fast.returncode) == (
        twin_out,
        slow.stderr,
        slow.returncode,
    ), args
    return fast.stdout or "{}"


@pytest.fixture
def d(served: Start) -> Served:
    daemon = served(gpus=1)
    ok = daemon.astra("run", "--name", "done", "--", sys.executable, "-c", "print('hi')")
    assert ok.returncode == 0, ok.stderr
    assert daemon.astra("wait", "done").returncode == 0
    assert daemon.astra("run", "--name", "busy", "--gpus", "1", "--", "sleep", "60").returncode == 0
    assert daemon.astra("run", "--name", "queued", "--gpus", "1", "--", "true").returncode == 0
    wait_for(lambda: daemon.json("show", "busy")["state"] == "Running", 20, "busy running")
    return daemon


def same_once_still(d: Served, *args: str) -> None:
    """:func:`same` for what shows ages, estimates or usage: they may move between the two
    calls, so up to six tries (a real difference between the paths fails all six)."""
    for attempt in range(6):
        try:
            same(d, *args)
            return
        except AssertionError:
            if attempt == 5:
                raise


def test_reads_and_their_refusals(d: Served) -> None:
    assert same(d, "show", "done").startswith("name:")
    same_once_still(d, "show", "busy")  # its age and usage move
    assert json.loads(same(d, "show", "done", "--json"))["name"] == "done"
    for args in (("show", "nope"), ("delete", "nope"), ("priority", "nope", "1"),
                 ("priority", "queued", "5"), ("priority", "queued", "-4"),
                 ("wait", "done"), ("wait", "busy", "--timeout", "0.2"),
                 ("wait", "nope"), ("show", "done", "--json")):  # fmt: skip
        same(d, *args)


# what the commands people run most load nothing of (each costs them 3-9 ms of start-up):
# json and re (runner/plainjson.py, shell_quoted), pathlib, typing, msgspec, datetime
# (astraeus_tui/when.py)
UNLOADED = {"json", "re", "pathlib", "typing", "msgspec", "shlex", "urllib", "datetime"}


@pytest.mark.parametrize("args", [
    ("run", "--name", "light", "--", "true"), ("show", "done"), ("show", "busy"),
    ("priority", "queued", "-3"), ("hold", "queued"), ("release", "queued"),
    ("wait", "done"), ("delete", "nope"), ("ls",),
])  # fmt: skip
def test_the_plain_forms_start_on_the_interpreters_core(d: Served, args: tuple[str, ...]) -> None:
    out, imported = _astra(d, args, True)
    assert out.stderr == "" or args[0] == "delete", out.stderr
    assert not imported & UNLOADED, (args, imported & UNLOADED)


def test_run_and_submit_send_the_same_documents(d: Served, tmp_path: object) -> None:
    same(d, "run", "--name", "made", "--gpus", "1", "--cpus", "2", "--memory", "1GiB",
         "--time-limit", "1h30m", "--priority=-2", "--env", "A=1", "--env=B=x=y",
         "--workers", "1", "--restarts", "3", "--after", "done",
         "--notify", "json://127.0.0.1:9/hook",
         "--notify-on", "failed", "--", "sleep", "5", rename="made")  # fmt: skip
    same(d, "run", "--name", "js", "--json", "--", "true", rename="js")
    same(d, "submit", "-", input=SPEC.format(name="sub"), rename="sub")
    same(d, "submit", "-", "--json", "--after", "done", input=SPEC.format(name="sj"), rename="sj")
    fast, typer = d.json("show", "made"), d.json("show", "made-typer")
    for run in (fast, typer):
        run["spec"]["metadata"].pop("name")
        carried = run["spec"]["spec"]["task_template"]["submit_env"]
        assert carried.pop("ASTRAEUS_CLI_FAST", "0") == "0"  # how typer's path was asked for
    assert fast["spec"] == typer["spec"] and fast["spec"]["spec"]["restart_limit"] == 3
    assert d.json("show", "sj")["spec"]["spec"] == d.json("show", "sj-typer")["spec"]["spec"]


def test_dry_runs_say_a_held_or_later_run_waits_as_its_submit_would(d: Served) -> None:
    later = "2099-01-02T03:00:00Z"
    cases = ((("--hold",), 'hold = true', "HELD"),
             (("--begin", later), f'begin_at = "{later}"', "BEGIN_WAIT"))  # fmt: skip
    for flags, field, code in cases:
        name, file = f"dry-{code.lower().replace('_', '')}", f"file-{code.lower()[:4]}"
        preview = json.loads(same(d, "run", "--name", name, *flags, "--dry-run", "--json",
                                  "--", "true"))  # fmt: skip
        said = same(d, "run", "--name", name, *flags, "--dry-run", "--", "true")
        spec = SPEC.format(name=file).replace("[spec]\n", f"[spec]\n{field}\n")
        from_file = json.loads(same(d, "submit", "-", "--dry-run", "--json", input=spec))
        assert same(d, "submit", "-", "--dry-run", input=spec).endswith("Nothing was submitted.\n")
        assert d.astra("show", name).returncode == d.astra("show", file).returncode == 1
        assert d.astra("run", "--name", name, *flags, "--", "true").returncode == 0
        assert d.astra("submit", "-", input=spec).returncode == 0
        for got, run in ((preview, d.json("show", name)), (from_file, d.json("show", file))):
            assert run["state"] == "Queued" and run["reason_code"] == code, run
            assert (got["reason"], got["reason_code"]) == (run["reason"], code)
            assert got["position"] is None and got["starts_now"] is False
        assert said.splitlines()[1:] == [f"Would wait: {preview['reason']} (start not known).",
                                         "Nothing was submitted."], said  # fmt: skip
        assert ("released" if code == "HELD" else "its begin time") in said.splitlines()[0]


def test_run_and_submit_refusals(d: Served) -> None:
    for args in (["run", "--name", "Bad_Name", "--", "true"],
                 ["run", "--name", "x", "--priority", "1001", "--", "true"],
                 ["run", "--name", "x", "--drive", "d:/data", "--", "true"],
                 ["run", "--name", "x", "--memory", "lots", "--", "true"],
                 ["run", "--name", "x", "--notify", "file:///etc/passwd", "--", "true"],
                 ["run", "--name", "done", "--", "true"],
                 ["submit", "/nonexistent.json"]):  # fmt: skip
        same(d, *args)
    same(d, "submit", "-", input=SPEC.format(name="Bad_Name"))
    same(d, "submit", "-", input="{not json", via_typer=True)  # the stdin is read once


def test_delete(d: Served) -> None:
    assert d.astra("run", "--name", "gone", "--", "sleep", "60").returncode == 0
    assert d.astra("run", "--name", "gone-typer", "--", "sleep", "60").returncode == 0
    for name in ("gone", "gone-typer"):  # both started: each delete stops a running run
        wait_for(lambda name=name: d.json("show", name)["state"] == "Running", 30, name)
    assert same(d, "delete", "gone", rename="gone").strip() == "gone: stopping"


def test_hold_release_requeue(d: Served) -> None:
    for name in ("parked", "parked-typer"):
        assert d.astra("run", "--name", name, "--gpus", "1", "--", "true").returncode == 0
    assert same(d, "hold", "parked", rename="parked") == "parked: held\n"
    assert same(d, "hold", "parked", "nope", "done", rename="parked") == "parked: already held\n"
    assert same(d, "release", "parked", rename="parked") == "parked: released\n"
    same(d, "release", "done")
    assert same(d, "requeue", "queued") == "queued: already queued\n"
    for args in (("requeue", "done"), ("requeue", "nope"), ("hold", "busy")):
        same(d, *args)
    same(d, "run", "--name", "later", "--hold", "--begin", "2036-12-02T03:00", "--", "true",
         rename="later")  # fmt: skip
    assert d.json("show", "later")["begin_at"] == d.json("show", "later-typer")["begin_at"]
    same(d, "run", "--name", "x", "--begin", "tomorrow", "--", "true", via_typer=True)


def test_run_with_gpu_memory(d: Served) -> None:
    """``--gpu-mem``: the same shared request on both paths."""
    same(d, "run", "--name", "packed", "--hold", "--gpu-mem", "20GiB", "--", "true",
         rename="packed")  # fmt: skip
    for name in ("packed", "packed-typer"):
        assert d.json("show", name)["gpu_memory_bytes"] == 20 * 1024**3
        assert d.json("show", name)["gpus_requested"] == 1
    # two GPUs of 20 GiB on a machine of one: refused alike, in one line
    out = same(d, "run", "--name", "x", "--gpus", "2", "--gpu-mem", "20GiB", "--", "true")
    assert out == "{}"
    same(d, "run", "--name", "x", "--gpu-mem", "lots", "--", "true")


@pytest.mark.parametrize(
    "args",
    [
        ("show", "--help"),
        ("show",),
        ("run", "--name", "done", "true"),
        ("run", "--gpus", "-1", "--", "true"),
        ("run", "--name", "x", "--time-limit", "1-00:00:00", "--bogus", "--", "true"),
        ("wait", "done", "--timeout", "soon"),
        ("ls", "--wor", "x"),
        ("ls", "-aw"),
        ("priority", "done"),
        ("submit", "--dry-run", "x.json", "y.json"),
        ("delet", "done"),
    ],
)
def test_other_shapes_go_to_typer(d: Served, args: tuple[str, ...]) -> None:
    for _ in range(6):  # ls shows ages and estimates: they may move between the two calls
        fast, imported = _astra(d, args, True)
        assert "typer" in imported
        slow, _ = _astra(d, args, False)
        if args[0] != "ls" or fast.stdout == slow.stdout:
            break
    assert (fast.stdout, fast.stderr, fast.returncode) == (
        slow.stdout,
        slow.stderr,
        slow.returncode,
    )


@pytest.mark.parametrize(
    "args",
    [
        ("ls",),
        ("ls", "--all"),
        ("ls", "-a", "-w"),
        ("ls", "--json", "--all"),
        ("ls", "--state", "Queued,Running"),
        ("ls", "--workspace=nope"),
        ("ls", "--state", "Bogus"),
    ],
)
def test_ls(d: Served, args: tuple[str, ...]) -> None:
    same_once_still(d, *args)  # ls shows ages and estimates


def test_ctrl_c_in_wait_ends_it_as_typer_does(d: Served) -> None:
    outcomes = []
    for fast in (True, False):
        env = d.env if fast else {**d.env, "ASTRAEUS_CLI_FAST": "0"}
        command = interruptible([sys.executable, "-m", "astraeus_tui.cli.main", "wait", "busy"])
        proc = subprocess.Popen(command,
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)  # fmt: skip
        wait_for(lambda: d.json("show", "busy")["state"] == "Running", 5, "busy")
        # past the imports, asking the daemon: a Ctrl-C while the interpreter starts is
        # not what this checks (its handler may not be set yet)
        pid = proc.pid
        wait_for(lambda: _talks_to_the_daemon(pid), 30, "wait to ask the daemon")  # noqa: B023
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        outcomes.append((out, err, proc.returncode))
    assert outcomes[0] == outcomes[1] == ("", "", 130)


def _talks_to_the_daemon(pid: int) -> bool:
    """``pid`` holds a socket open (``astra wait`` asks the daemon every 0.1 s)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except FileNotFoundError:
        return False
    for fd in fds:
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                return True
    return False


def test_a_reader_that_goes_away_ends_ls_as_typer_does(d: Served) -> None:
    outcomes = []
    for fast in ("1", "0"):
        proc = subprocess.Popen([sys.executable, "-m", "astraeus_tui.cli.main", "ls"],
                                env={**d.env, "ASTRAEUS_CLI_FAST": fast}, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)  # fmt: skip
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # gone before the table is written
        outcomes.append((proc.stderr.read(), proc.wait(30)))
    assert outcomes[0] == outcomes[1] == (b"", 1)
