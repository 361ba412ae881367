"""Notifications through Apprise from the store's outbox, received on 127.0.0.1.

A real daemon on the process executor sends json:// notifications to an HTTP server in
the test (a thread with http.server); the receiver can be down and come back up.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.daemon.daemon import Daemon, DaemonError
from runner.reasons import ReasonCode
from runner.service.caller import ServiceError
from tests.support.harness import PY, Harness, sleeper, spec, wait_for, write_config
from tests.support.notify import Receiver
from tests.support.served import Served

Make = Callable[..., Harness]


class Trickler:
    """A receiver on 127.0.0.1 that accepts, reads the request, then answers one byte a
    second and never finishes; it counts the connections and those the sender cut."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self.cut = 0  # connections the other end shut down while the answer trickled
        self.stopped = threading.Event()

    @property
    def url(self) -> str:
        return f"json://127.0.0.1:{self.port}/hook"

    def start(self) -> Trickler:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    answer = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 10_000
    pause = 1.0  # seconds between two bytes
    reads_first = True  # the request, before it answers

    def _trickle(self, conn: socket.socket) -> None:
        with conn:
            if self.reads_first:
                conn.recv(65536)
            for byte in self.answer:
                if self.stopped.is_set():
                    return
                try:
                    conn.sendall(bytes([byte]))
                    ready, _, _ = select.select([conn], [], [], self.pause)
                    if ready and not conn.recv(65536):
                        self.cut += 1
                        return
                except OSError:
                    self.cut += 1
                    return

    def stop(self) -> None:
        self.stopped.set()
        self.listener.close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.stop()


def notify(document: dict[str, Any], url: str, *events: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"url": url}
    if events:
        entry["events"] = list(events)
    document["spec"]["notify"] = [entry]
    return document


def codes(h: Harness, name: str) -> list[ReasonCode]:
    return [e.code for e in h.daemon.store.events.all(name)]


def test_a_run_that_succeeds_posts_one_notification(make_daemon: Make, receiver: Receiver) -> None:
    receiver.start()
    h = make_daemon(gpus=1)
    h.submit(notify(spec("ok", [PY, "-c", "pass"]), receiver.url))
    run = h.wait_state("ok", "Succeeded")
    wait_for(lambda: ReasonCode.NOTIFIED in codes(h, "ok"), message="the NOTIFIED event")
    time.sleep(0.5)  # nothing more comes
    assert len(receiver.posts) == 1
    post = receiver.posts[0]
    assert post["title"] == "Astraeus: run ok succeeded" and post["type"] == "success"
    fields = json.loads(post["message"])
    assert fields == {
        "event": "succeeded", "run": "ok", "uid": run.run_uid, "workspace": "default",
        "state": "Succeeded", "exit_code": 0, "reason": "Succeeded", "time": fields["time"],
    }  # fmt: skip
    port = receiver.port
    assert f"Notification (succeeded) delivered to json://127.0.0.1:{port}" in h.events("ok")
    assert h.daemon.store.outbox.pending(10) == []


def test_the_configs_entries_for_each_event(make_daemon: Make, receiver: Receiver) -> None:
    """[[notify]] for every event; the run of another workspace is never named."""
    receiver.start()
    config = f"""
[workspaces.a]
members = ["*"]
max_priority = 10
[workspaces.b]
members = ["*"]
max_priority = 10

[[notify]]
url = "{receiver.url}"
events = ["succeeded", "failed", "preempted", "started", "timelimit"]
workspaces = ["a"]
"""
    h = make_daemon(config, gpus=1, grace=1)
    h.submit(spec("bad", [PY, "-c", "import sys; sys.exit(3)"], restart_limit=0, workspace="a"))
    h.submit(spec("slow", sleeper(), limit=1, workspace="a"))
    h.wait_state("bad", "Failed")
    h.wait_state("slow", "Failed", timeout=20)
    h.submit(spec("victim", sleeper(), gpus=1, priority=-5, workspace="a"))
    h.wait_state("victim", "Running")
    h.submit(spec("urgent", sleeper(), gpus=1, priority=10, workspace="b"))
    h.wait_state("urgent", "Running")
    wait_for(lambda: "preempted" in receiver.events_of("victim"), message="preempted")
    wait_for(lambda: receiver.events_of("slow") == ["started", "timelimit", "failed"])
    assert receiver.events_of("bad") == ["started", "failed"]
    assert receiver.events_of("urgent") == []  # workspace b: not this entry's
    failed = next(n for n in receiver.notices() if n["run"] == "bad" and n["event"] == "failed")
    assert failed["state"] == "Failed" and failed["exit_code"] == 3
    assert "exited with code 3" in failed["reason"]
    preempted = next(n for n in receiver.notices() if n["event"] == "preempted")
    assert "urgent" not in json.dumps(preempted)
    assert "a job in another namespace" in preempted["reason"]
    assert preempted["workspace"] == "a" and preempted["state"] == "Stopping"


def test_a_receiver_down_then_up_gets_it_on_a_retry(make_daemon: Make, receiver: Receiver) -> None:
    h = make_daemon(gpus=1)
    h.submit(notify(spec("ok", [PY, "-c", "pass"]), receiver.url))
    h.wait_state("ok", "Succeeded")
    store = h.daemon.store
    wait_for(
        lambda: [p.attempts >= 2 for p in store.outbox.pending(10)] == [True], message="2 tries"
    )
    assert receiver.posts == []
    receiver.start()
    wait_for(lambda: receiver.events_of("ok") == ["succeeded"], timeout=30, message="a retry")
    wait_for(lambda: ReasonCode.NOTIFIED in codes(h, "ok"))
    assert store.outbox.pending(10) == []


def test_given_up_after_its_attempts_with_an_event(make_daemon: Make, receiver: Receiver) -> None:
    h = make_daemon(gpus=1)
    h.daemon.notifier.attempts = 2  # (8 by default, over minutes)
    h.submit(notify(spec("ok", [PY, "-c", "pass"]), receiver.url))
    h.wait_state("ok", "Succeeded")
    wait_for(lambda: ReasonCode.NOTIFY_FAILED in codes(h, "ok"), message="given up")
    [(row, error)] = h.daemon.store.outbox.failed()
    assert row.attempts == 2 and error == "could not connect"  # a phrase, not Apprise's words
    [text] = [e for e in h.events("ok") if e.startswith("Notification (succeeded)")]
    assert text.startswith(f"Notification (succeeded) to json://127.0.0.1:{receiver.port}")
    assert "not delivered after 2 attempts" in text


def test_the_outbox_survives_a_restart(tmp_path: Path, receiver: Receiver) -> None:
    home = tmp_path / "home"
    write_config(home, gpus=1)
    daemon = Daemon(home).start()
    try:
        h = Harness(daemon)
        h.submit(notify(spec("ok", [PY, "-c", "pass"]), receiver.url))
        h.wait_state("ok", "Succeeded")
        wait_for(lambda: daemon.store.outbox.pending(10), message="a row in the outbox")
    finally:
        daemon.stop()
    assert len(Daemon(home).store.outbox.pending(10)) == 1  # (not started: nothing sent)
    receiver.start()
    again = Daemon(home).start()
    try:
        wait_for(lambda: receiver.events_of("ok") == ["succeeded"], message="sent after restart")
        wait_for(lambda: ReasonCode.NOTIFIED in codes(Harness(again), "ok"))
        assert again.store.outbox.pending(10) == []
    finally:
        again.stop()


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"url": "file:///etc/shadow"}, "spec.notify[0].url: scheme file:// is not allowed"),
        ({"url": "windows://"}, "spec.notify[0].url: scheme windows:// is not allowed"),
        ({"url": "json://"}, "spec.notify[0].url: Apprise cannot parse 'json://'"),
        ({"url": "json://h/" + "x" * 1100}, "spec.notify[0].url: must be at most 1024 characters"),
        (
            {"url": "json://h/x", "events": ["done"]},
            "spec.notify[0].events: unknown event 'done' (known: succeeded, failed,",
        ),
    ],
)
def test_refused_urls_and_events_change_nothing(
    make_daemon: Make, entry: dict[str, Any], message: str
) -> None:
    h = make_daemon(gpus=1)
    document = spec("refused", [PY, "-c", "pass"])
    document["spec"]["notify"] = [entry]
    with pytest.raises(ServiceError) as caught:
        h.submit(document)
    assert caught.value.status == 422 and caught.value.code == "INVALID_SPEC"
    assert str(caught.value.message).startswith(message)
    assert "\n" not in caught.value.message
    assert h.daemon.store.runs.get("refused") is None


def test_astra_run_notify_through_the_socket(
    served: Callable[..., Served], receiver: Receiver
) -> None:
    receiver.start()
    daemon = served(gpus=1)
    done = daemon.astra(
        "run", "--name", "cli", "--image", "local", "--notify", receiver.url,
        "--notify-on", "started,succeeded", "--", PY, "-c", "pass",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    wait_for(lambda: receiver.events_of("cli") == ["started", "succeeded"], message="both")
    shown = daemon.json("show", "cli")
    assert shown["spec"]["spec"]["notify"] == [
        {"url": receiver.url, "events": ["started", "succeeded"]}
    ]
    refused = daemon.astra("run", "--image", "local", "--notify", "dbus://", "--", "true")
    assert refused.returncode != 0
    assert (
        refused.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "spec.notify[0].url: scheme dbus:// is not allowed (allowed: json, jsons, form, forms,"
            " xml, xmls, slack, mailto, mailtos, ntfy, ntfys, matrix, matrixs, discord, tgram)"
        )
    )


def test_the_outbox_survives_a_kill_9(served: Callable[..., Served], receiver: Receiver) -> None:
    """The run's end and its notification commit together: a daemon killed before it
    could send sends after its restart."""
    daemon = served(gpus=1)
    ran = daemon.astra(
        "run", "--name", "crash", "--image", "local", "--notify", receiver.url, "--",
        PY, "-c", "pass",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    wait_for(lambda: daemon.json("show", "crash")["state"] == "Succeeded", message="its end")
    daemon.kill9()
    assert receiver.posts == []
    receiver.start()
    daemon.restart()
    wait_for(lambda: receiver.events_of("crash") == ["succeeded"], message="sent after restart")
    codes = [e["code"] for e in daemon.json("show", "crash")["events"]]
    assert codes.count("NOTIFIED") == 1


def test_a_sweeps_runs_notify_from_its_template(make_daemon: Make, receiver: Receiver) -> None:
    receiver.start()
    h = make_daemon(gpus=2)
    template = notify(spec("sw", [PY, "-c", "pass"]), receiver.url)
    h.daemon.groups.create(
        {"kind": "sweep", "name": "sw", "template": template, "list": [{"A": 1}, {"A": 2}]},
        h.root,
    )
    wait_for(lambda: sorted(n["run"] for n in receiver.notices()) == ["sw-0", "sw-1"])
    assert {n["event"] for n in receiver.notices()} == {"succeeded"}


def test_a_slow_receiver_never_holds_the_loop(make_daemon: Make, receiver: Receiver) -> None:
    receiver.hold.clear()  # the receiver answers only when the test lets it
    receiver.start()
    h = make_daemon(gpus=1)
    slow = f"{receiver.url}?rto=30"  # Apprise waits up to 30 s for the answer
    h.submit(notify(spec("first", [PY, "-c", "pass"]), slow))
    wait_for(lambda: receiver.begun == 1, message="the first POST under way")
    h.submit(spec("second", [PY, "-c", "pass"]))
    h.wait_state("second", "Succeeded", timeout=15)
    assert receiver.posts == [] and receiver.begun == 1  # the loop went on without it
    receiver.hold.set()
    wait_for(lambda: receiver.events_of("first") == ["succeeded"], message="then delivered")


def test_a_trickling_receiver_delays_no_other_target(make_daemon: Make, receiver: Receiver) -> None:
    receiver.start()
    trickler = Trickler().start()
    try:
        h = make_daemon(gpus=1)
        h.submit(notify(spec("slow", [PY, "-c", "pass"]), trickler.url))
        wait_for(lambda: trickler.connections == 1, message="the trickled send under way")
        h.submit(notify(spec("quick", [PY, "-c", "pass"]), receiver.url))
        h.wait_state("quick", "Succeeded", timeout=15)
        ended = time.monotonic()
        wait_for(lambda: receiver.events_of("quick") == ["succeeded"], 5, "the other target")
        assert time.monotonic() - ended < 5 and trickler.cut == 0  # the slow send still on
        # its deadline (10 s, connect + send + answer) cuts it; it is tried again later
        wait_for(lambda: trickler.cut == 1, 20, "the trickled send cut at its deadline")
        wait_for(lambda: trickler.connections == 2, 20, "then tried again, with its back-off")
        assert receiver.events_of("slow") == []
    finally:
        trickler.stop()


def test_a_bad_entry_stops_the_start_and_a_config_change_takes_the_new_ones(
    served: Callable[..., Served], receiver: Receiver, tmp_path: Path
) -> None:
    home = tmp_path / "bad"
    write_config(home, '[[notify]]\nurl = "json://h/x"\nevents = ["done"]\n')
    with pytest.raises(DaemonError) as caught:
        Daemon(home)
    assert str(caught.value) == (
        f"{home / 'config.toml'}: notify[0].events: unknown event 'done'"
        " (known: succeeded, failed, preempted, started, timelimit)"
    )
    receiver.start()
    lab = served('[workspaces.default]\nmembers = ["*"]\n', gpus=1)
    config = lab.home / "config.toml"
    good = f'\n[[notify]]\nurl = "{receiver.url}"\nevents = ["succeeded"]\n'
    config.write_text(config.read_text() + good.replace("succeeded", "done"))
    refused = lab.astra("admin", "weight", "default", "2")  # the admin's edit reads it again
    assert refused.returncode != 0
    assert "notify[0].events: unknown event 'done'" in refused.stderr.strip().splitlines()[-1]
    config.write_text(config.read_text().replace('"done"', '"succeeded"'))
    assert lab.astra("admin", "weight", "default", "2").returncode == 0
    ran = lab.astra("run", "--name", "after", "--image", "local", "--", PY, "-c", "pass")
    assert ran.returncode == 0, ran.stderr
    wait_for(lambda: receiver.events_of("after") == ["succeeded"], message="the new entry")


class SmtpTrickler(Trickler):
    """A mail server that greets one byte at a time and never finishes its greeting."""

    @property
    def url(self) -> str:
        return f"mailto://127.0.0.1:{self.port}?to=lab@example.org&from=astra@example.org"

    answer = b"220-" + b"x" * 10_000
    pause = 0.5
    reads_first = False  # a mail server speaks first


def test_a_trickling_mail_server_is_cut_at_the_deadline_too() -> None:
    """Mail goes through smtplib, not urllib3: its connection is cut at the deadline as
    an HTTP one is, so eight of them never hold the sender."""
    from runner.notify.outbox import Pending
    from runner.notify.sender import Sender
    from tests.support.notify import NOTICE, FakeOutbox

    trickler = SmtpTrickler().start()
    rows = [Pending(i, f"{trickler.url}&name=n{i}", "mailto://127.0.0.1", NOTICE, 0)
            for i in range(1, 9)]  # fmt: skip
    outbox = FakeOutbox(rows)
    sender = Sender(outbox, deadline=1.0)
    try:
        started = time.monotonic()
        while trickler.cut < 8:
            assert time.monotonic() - started < 20, (trickler.connections, trickler.cut)
            sender.round()
            time.sleep(0.05)
        retried = {row for kind, row, error in outbox.log if kind == "retry"}
        assert retried == set(range(1, 9))
    finally:
        sender.stop()
        trickler.stop()
