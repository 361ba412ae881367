"""GET /metrics end to end: a real `astra serve`, scraped over its socket and over TCP.

The text must parse as Prometheus's exposition format; its values follow submits, starts and
restarts of the daemon; no run is named unless the admin sets `metrics_run_names`.
"""

from __future__ import annotations

import os
import pwd
import re
import socket
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from astraeus_tui.client import Client
from runner.api.metrics import KEPT_SECONDS, Metrics
from runner.clock import Clock
from tests.support.harness import Harness, sleeper, spec, wait_for, worker
from tests.support.served import Served, free_port
from tests.support.users import fork_as, lab_users

Start = Callable[..., Served]
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
SECRET = "secret-run-name"


def _get(path: str) -> bytes:
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(path)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: astraeus\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
        return data


def raw(d: Served, user: pwd.struct_passwd | None = None) -> str:
    """The socket's answer to GET /metrics, head and body; as ``user`` in a child that is
    really that user."""
    if user is None:
        return _get(str(d.socket)).decode()
    read, write = os.pipe()
    pid = fork_as(user, [])
    if pid == 0:  # the child: the user, scrapes and reports back
        os.close(read)
        code = 0
        try:
            os.write(write, _get(str(d.socket)))
        except BaseException:
            code = 1
        os._exit(code)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    _, status = os.waitpid(pid, 0)
    assert status == 0, "the member could not scrape"
    return b"".join(chunks).decode()


def body(answer: str) -> str:
    head, _, text = answer.partition("\r\n\r\n")
    assert head.startswith("HTTP/1.1 200"), head
    assert "content-type: text/plain; version=0.0.4" in head.lower(), head
    return text


def samples(text: str) -> Samples:
    """Every sample, parsed by the client library's own parser (which refuses bad text)."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def scrape(d: Served) -> Samples:
    return samples(body(raw(d)))


def value(found: Samples, name: str, **labels: str) -> float:
    return found[name, tuple(sorted(labels.items()))]


def run(d: Served, name: str, gpus: int = 1, program: list[str] | None = None) -> None:
    out = d.astra("run", "--name", name, "--gpus", str(gpus), "--", *(program or sleeper()))
    assert out.returncode == 0, out.stderr


def test_the_socket_serves_the_queue_the_gpus_and_the_counters(served: Start) -> None:
    d = served(gpus=2)
    before = scrape(d)
    assert value(before, "astraeus_gpus") == 2 and value(before, "astraeus_gpus_free") == 2
    assert value(before, "astraeus_gpus_held") == 0
    assert value(before, "astraeus_runs", workspace="default", state="Running") == 0
    assert value(before, "astraeus_submits_total", workspace="default") == 0
    run(d, SECRET)
    run(d, "waits", gpus=2)
    wait_for(lambda: d.json("show", SECRET)["state"] == "Running", 20, "the run to start")
    after = wait_for(
        lambda: (s := scrape(d))[("astraeus_gpus_held", ())] == 1 and s, 20, "the held GPU"
    )
    assert value(after, "astraeus_gpus_free") == 1
    assert value(after, "astraeus_runs", workspace="default", state="Running") == 1
    assert value(after, "astraeus_runs", workspace="default", state="Queued") == 1
    assert value(after, "astraeus_workspace_gpus_held", workspace="default") == 1
    assert value(after, "astraeus_submits_total", workspace="default") == 2
    assert value(after, "astraeus_starts_total", workspace="default") == 1
    assert value(after, "astraeus_plan_seconds_count") >= 1
    assert value(after, "astraeus_plan_seconds_bucket", le="+Inf") == value(
        after, "astraeus_plan_seconds_count"
    )
    text = body(raw(d))
    assert SECRET not in text and "waits" not in text  # no run named without the admin's word
    assert "astraeus_run_gpus_held" not in text
    # the counters come from the events the store keeps: a restarted daemon counts on
    d.stop()
    d.restart()
    again = scrape(d)
    assert value(again, "astraeus_submits_total", workspace="default") == 2
    assert value(again, "astraeus_starts_total", workspace="default") >= 1


def test_metrics_address_serves_only_metrics_and_names_runs_when_asked(served: Start) -> None:
    port = free_port()
    config = f'[api]\nmetrics_address = "127.0.0.1:{port}"\nmetrics_run_names = true\n'
    d = served(config, gpus=1)
    run(d, SECRET)
    url = f"http://127.0.0.1:{port}/metrics"

    def read() -> str:
        with urllib.request.urlopen(url, timeout=10) as answer:
            assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            text: str = answer.read().decode()
            return text

    text = wait_for(lambda: (t := read()) and f'run="{SECRET}"' in t and t, 20, "the named run")
    uid = d.json("show", SECRET)["uid"]
    held = value(samples(text), "astraeus_run_gpus_held", workspace="default", run=SECRET, uid=uid)
    assert held == 1
    assert value(samples(text), "astraeus_gpus_held") == 1
    for path, method in (("/v1/runs", "GET"), ("/metrics", "POST"), ("/v1/shutdown", "POST")):
        request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method, data=b"")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code in (404, 405), path
    assert d.proc is not None and d.proc.poll() is None  # still serving
    assert f'run="{SECRET}"' in body(raw(d))  # the socket says the same


@pytest.mark.skipif(os.geteuid() != 0, reason="creating Unix users needs root")
def test_a_local_user_who_takes_the_metrics_port_cannot_keep_the_scheduler_down(
    served: Start,
) -> None:
    """A local user binds the metrics port first: the daemon starts anyway, runs work, says
    in /v1/status why it does not listen there, and binds the port once it is free."""
    port = free_port()
    with lab_users(GROUP, MEMBER) as users:
        ready_r, ready_w = os.pipe()
        hold_r, hold_w = os.pipe()
        pid = fork_as(users[MEMBER])
        if pid == 0:  # the squatter: binds, says so, holds until told
            try:
                os.close(ready_r)
                os.close(hold_w)  # else its own copy keeps the read below from ever ending
                with socket.socket() as taken:
                    taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    taken.bind(("127.0.0.1", port))
                    taken.listen()
                    os.write(ready_w, b"1")
                    os.read(hold_r, 1)
            finally:
                os._exit(0)
        os.close(ready_w)
        os.close(hold_r)
        assert os.read(ready_r, 1) == b"1"
        try:
            d = served(f'[api]\nmetrics_address = "127.0.0.1:{port}"\n', gpus=1)
            status = Client(d.socket).status()
            assert status["metrics"].startswith(
                f"not listening on 127.0.0.1:{port}: Address already in use"
            ), status["metrics"]
            out = d.astra("run", "--name", "works", "--gpus", "1", "--", *sleeper())
            assert out.returncode == 0, out.stderr
            wait_for(lambda: d.json("show", "works")["state"] == "Running", 20, "a run to start")
        finally:
            os.close(hold_w)
            os.waitpid(pid, 0)
            os.close(ready_r)
        listening = f"listening on http://127.0.0.1:{port}/metrics"
        wait_for(lambda: Client(d.socket).status()["metrics"] == listening, 30, "the port bound")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            assert b"astraeus_gpus" in answer.read()


GROUP, MEMBER = "astra-metrics", "astra-metrics-a"


@pytest.mark.skipif(os.geteuid() != 0, reason="creating Unix users needs root")
def test_any_member_of_the_socket_scrapes_and_sees_no_run_names(served: Start) -> None:
    config = f'[api]\nsocket_group = "{GROUP}"\n\n[workspaces.nlp]\nmembers = ["root"]\n'
    config += f'\n[workspaces.vision]\nmembers = ["{MEMBER}"]\n'
    with lab_users(GROUP, MEMBER) as users:
        d = served(config, gpus=1)
        out = d.astra(
            "run", "--name", SECRET, "--gpus", "1", "--workspace", "nlp", "--", *sleeper()
        )
        assert out.returncode == 0, out.stderr
        wait_for(lambda: d.json("show", SECRET)["state"] == "Running", 20, "the run to start")
        text = body(raw(d, user=users[MEMBER]))
        assert SECRET not in text
        found = samples(text)
        assert value(found, "astraeus_workspace_gpus_held", workspace="nlp") == 1
        assert value(found, "astraeus_workspace_gpus_held", workspace="vision") == 0


def test_preemptions_and_restarts_are_counted(served: Start) -> None:
    config = '[workspaces.default]\nmembers = ["*"]\nmax_priority = 10\n'
    d = served(config, gpus=1)
    low = d.astra("run", "--name", "low", "--gpus", "1", "--priority", "-5", "--", *sleeper())
    assert low.returncode == 0, low.stderr
    wait_for(lambda: d.json("show", "low")["state"] == "Running", 20, "low to start")
    high = d.astra("run", "--name", "high", "--gpus", "1", "--priority", "5", "--", *sleeper())
    assert high.returncode == 0, high.stderr
    found = wait_for(
        lambda: (s := scrape(d))[("astraeus_preemptions_total", (("workspace", "default"),))] and s,
        30,
        "the preemption",
    )
    assert value(found, "astraeus_preemptions_total", workspace="default") == 1
    assert value(found, "astraeus_restarts_total", workspace="default") == 0
    d.astra("delete", "high")
    d.astra("delete", "low")
    bad = d.astra("run", "--name", "bad", "--", sys.executable, "-c", "import sys; sys.exit(3)")
    assert bad.returncode == 0, bad.stderr
    wait_for(
        lambda: scrape(d)[("astraeus_restarts_total", (("workspace", "default"),))] >= 1,
        30,
        "a restart",
    )
    # deleted runs are still counted: a counter never goes back
    after = scrape(d)
    assert value(after, "astraeus_preemptions_total", workspace="default") == 1
    assert value(after, "astraeus_submits_total", workspace="default") == 3


class Stepped(Clock):
    def __init__(self) -> None:
        super().__init__()
        self.at = 1000.0

    def mono(self) -> float:
        return self.at


def test_scrapes_within_a_second_are_given_the_same_text(
    make_daemon: Callable[..., Harness],
) -> None:
    h = make_daemon(gpus=1)
    metrics = Metrics(h.daemon)
    clock = metrics._clock = Stepped()
    first = metrics.render()
    h.submit(spec("one", sleeper(), gpus=0))
    clock.at += KEPT_SECONDS / 2
    assert metrics.render() == first  # the store is not read again
    clock.at += KEPT_SECONDS
    found = samples(metrics.render().decode())
    assert value(found, "astraeus_submits_total", workspace="default") == 1


def test_the_gpus_readings_are_scraped_marked_simulated(served: Start) -> None:
    d = served(gpus=2, machine="telemetry_seconds = 0.2")
    run(d, "busy", program=worker())  # a sleeper's simulated GPU would be idle
    held = wait_for(lambda: (r := d.json("show", "busy"))["state"] == "Running" and r, 20, "run")
    gpu = str(held["gpus"][0])
    idle = str(1 - held["gpus"][0])

    def measured() -> Samples | None:
        found = scrape(d)
        key = ("astraeus_gpu_utilization_ratio", (("gpu", gpu), ("simulated", "true")))
        return found if found.get(key, 0) > 0 else None

    found = wait_for(measured, 20, "the held GPU's readings")
    busy = value(found, "astraeus_gpu_utilization_ratio", gpu=gpu, simulated="true")
    assert 0.8 <= busy <= 1.0  # the simulation: a held GPU is 80-100% busy
    assert value(found, "astraeus_gpu_utilization_ratio", gpu=idle, simulated="true") == 0
    total = value(found, "astraeus_gpu_memory_total_bytes", gpu=gpu, simulated="true")
    assert total == 80 * 2**30
    assert 0 < value(found, "astraeus_gpu_memory_used_bytes", gpu=gpu, simulated="true") < total
    assert "busy" not in body(raw(d))  # the run is not named without the admin's word
    # `astra gpus` reads them as `astra top` does (it said 0B of memory in use)
    gpus = {g["index"]: g for g in d.json("gpus")["gpus"]}
    held_gpu, idle_gpu = gpus[int(gpu)], gpus[int(idle)]
    assert 0.6 * total <= held_gpu["memory_used"] <= 0.9 * total
    assert held_gpu["utilization"] >= 80 and held_gpu["temperature"] is not None
    assert (idle_gpu["memory_used"], idle_gpu["utilization"]) == (0, 0)
    shown = d.astra("gpus").stdout  # the held GPU's memory in GiB, the idle one's 0B
    assert "GiB/80GiB" in shown and "0B/80GiB" in shown, shown


def _documented() -> dict[str, tuple[str, frozenset[str]]]:
    """docs/api.md's table of metrics: each family's type and labels."""
    text = (Path(__file__).parents[2] / "docs" / "api.md").read_text()
    section = text.split("### `GET /metrics`", 1)[1].split("\n### ", 1)[0]
    found = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`astraeus_"):
            continue
        kind = cells[1]
        labels = frozenset(re.findall(r"`([a-z_]+)`", cells[2]))
        for name in re.findall(r"`(astraeus_[a-z_]+)`", cells[0]):
            found[name.removesuffix("_total") if kind == "counter" else name] = (kind, labels)
    return found


def test_every_metric_served_is_documented_with_its_labels(served: Start) -> None:
    port = free_port()
    config = f'[api]\nmetrics_address = "127.0.0.1:{port}"\nmetrics_run_names = true\n'
    d = served(config, gpus=2, machine="telemetry_seconds = 0.2")
    run(d, "busy")
    key = ("astraeus_run_gpu_memory_bytes", "run", "busy")

    def every_family() -> dict[str, tuple[str, frozenset[str]]] | None:
        families = list(text_string_to_metric_families(body(raw(d))))
        served = {
            f.name: (f.type, frozenset(k for s in f.samples for k in s.labels if k != "le"))
            for f in families
        }
        named = any(
            f.name == key[0] and s.labels.get(key[1]) == key[2] for f in families for s in f.samples
        )
        return served if named else None

    found = wait_for(every_family, 20, "the run's GPU memory")
    assert found == _documented()
