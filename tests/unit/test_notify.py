"""Notifications: the spec field, #SBATCH --mail-type, [[notify]], the URLs refused, the
text sent, and the sender's back-off (runner/notify/)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.config.load import ConfigError, parse_config
from runner.model import RunState
from runner.notify.deliver import bounded
from runner.notify.outbox import Notice, Pending
from runner.notify.sender import Sender, backoff
from runner.notify.targets import SCHEMES, NotifyEvent, Target, check_url, label, scheme_of
from runner.reasons import Reason, ReasonCode
from runner.runspec.build import event_names, run_document
from runner.runspec.parse import SpecError, parse_spec, spec_to_dict
from runner.runspec.sbatch import parse_sbatch
from runner.store.db import RunRow, Store, new_run_uid
from runner.store.outbox import MAX_PENDING_PER_RUN
from tests.support.notify import NOTICE, FakeOutbox

E = NotifyEvent
HOOK = "json://127.0.0.1:9000/hook"


def batch(*options: str) -> list[dict[str, object]]:
    """The ``spec.notify`` a batch file with these options gives."""
    lines = ["#!/bin/bash", "#SBATCH --job-name=job", *(f"#SBATCH {o}" for o in options)]
    spec = parse_sbatch("\n".join([*lines, "true\n"]))
    return spec_to_dict(spec)["spec"].get("notify", [])  # type: ignore[union-attr,no-any-return]


@pytest.mark.parametrize(
    ("types", "events"),
    [
        ("END,FAIL", ["succeeded", "failed"]),
        ("END", ["succeeded", "failed"]),
        ("FAIL", ["failed"]),
        ("BEGIN", ["started"]),
        ("REQUEUE", ["preempted"]),
        ("TIME_LIMIT", ["timelimit"]),
        ("BEGIN,END", ["succeeded", "failed", "started"]),
        ("ALL", ["succeeded", "failed", "preempted", "started", "timelimit"]),
        ("fail", ["failed"]),
    ],
)
def test_mail_type_maps_onto_the_spec(types: str, events: list[str]) -> None:
    assert batch(f"--mail-type={types}", "--mail-user=ann@lab.example") == [
        {"url": "mailto://localhost?to=ann@lab.example", "events": events}
    ]


def test_mail_type_none_or_absent_asks_for_nothing() -> None:
    assert batch("--mail-type=NONE", "--mail-user=ann@lab.example") == []
    assert batch("--mail-user=ann@lab.example") == []  # as Slurm: no type, no mail


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (("--mail-type=END",), "#SBATCH --mail-user: required with --mail-type"),
        (("--mail-type=DONE", "--mail-user=a@b.c"), "#SBATCH --mail-type: unknown mail type"),
        (("--mail-type=END", "--mail-user=not-mail"), "#SBATCH --mail-user: 'not-mail' is not"),
        (("--mail-type=END", "--mail-user=a@b?smtp=x"), "#SBATCH --mail-user: 'a@b?smtp=x'"),
    ],
)
def test_mail_options_refused_in_one_line(options: tuple[str, ...], message: str) -> None:
    with pytest.raises(SpecError) as caught:
        batch(*options)
    assert str(caught.value).startswith(message)
    assert len(str(caught.value).splitlines()) == 1


def test_the_spec_field_round_trips_and_defaults_to_succeeded_and_failed() -> None:
    document = run_document("job", ["true"], notify=[HOOK, "ntfy://lab-runs"])
    assert document["spec"]["notify"] == [{"url": HOOK}, {"url": "ntfy://lab-runs"}]
    spec = parse_spec(document)
    assert spec.notify == (
        (HOOK, ("succeeded", "failed")),
        ("ntfy://lab-runs", ("succeeded", "failed")),
    )
    assert parse_spec(spec_to_dict(spec)) == spec
    typed = run_document(
        "job", ["true"], notify=[HOOK], notify_on=event_names("started, timelimit")
    )
    assert parse_spec(typed).notify == ((HOOK, ("started", "timelimit")),)
    assert "notify" not in run_document("job", ["true"])["spec"]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"url": "file:///etc/passwd"}, "spec.notify[0].url: scheme file:// is not allowed"),
        ({"url": "dbus://"}, "spec.notify[0].url: scheme dbus:// is not allowed"),
        ({"url": "HOOK"}, "spec.notify[0].url: scheme no scheme is not allowed"),
        ({"url": "json://h/a b"}, "spec.notify[0].url: must not contain spaces"),
        ({"url": "slack://"}, "spec.notify[0].url: Apprise cannot parse 'slack://'"),
        ({"url": HOOK, "events": []}, "spec.notify[0].events: must be a list of events"),
        ({"url": HOOK, "events": ["END"]}, "spec.notify[0].events: unknown event 'END'"),
        ({"url": HOOK, "to": "x"}, "spec.notify[0].to: unknown key"),
    ],
)
def test_refused_in_the_spec(entry: dict[str, object], message: str) -> None:
    document = run_document("job", ["true"])
    document["spec"]["notify"] = [entry]
    with pytest.raises(SpecError) as caught:
        parse_spec(document)
    assert str(caught.value).startswith(message), str(caught.value)


def test_at_most_eight_urls_and_none_twice() -> None:
    many = run_document("job", ["true"], notify=[f"json://h/{i}" for i in range(9)])
    with pytest.raises(SpecError, match=r"^spec.notify: must have at most 8 items"):
        parse_spec(many)
    with pytest.raises(SpecError, match=r"^spec.notify\[1\].url: names a URL twice"):
        parse_spec(run_document("job", ["true"], notify=[HOOK, HOOK]))


CONFIG = """
[workspaces.vision]
members = ["*"]
[[notify]]
url = "json://127.0.0.1:9000/hook"
events = ["succeeded", "failed", "preempted", "started", "timelimit"]
[[notify]]
url = "mailto://localhost?to=lab@example.org"
workspaces = ["vision"]
"""


def test_config_entries() -> None:
    config = parse_config(CONFIG)
    assert config.notify == (
        Target(HOOK, tuple(NotifyEvent)),
        Target("mailto://localhost?to=lab@example.org", (E.SUCCEEDED, E.FAILED), ("vision",)),
    )
    assert config.notify[1].wants(E.FAILED, "vision")
    assert not config.notify[1].wants(E.FAILED, "other")
    assert not config.notify[1].wants(E.STARTED, "vision")
    assert parse_config("").notify == ()


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('url = "json://h/x"\nevents = ["done"]', "notify[0].events: unknown event 'done' (known:"),
        ('url = "windows://"', "notify[0].url: scheme windows:// is not allowed (allowed: json,"),
        ('url = "json://"', "notify[0].url: Apprise cannot parse 'json://'"),
        ('events = ["failed"]', "notify[0].url: required"),
        ('url = "json://h/x"\nworkspaces = ["x"]', "notify[0].workspaces[0]: no workspace named"),
        ('url = "json://h/x"\nbody = "y"', "notify[0].body: unknown key"),
    ],
)
def test_config_errors_in_one_line(entry: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(f"[[notify]]\n{entry}\n", source="config.toml")
    assert str(caught.value).startswith(f"config.toml: {message}"), str(caught.value)
    assert "\n" not in str(caught.value)


def test_labels_show_no_secrets() -> None:
    assert label("json://user:pw@hooks.lab:8080/p?x=1") == "json://hooks.lab:8080"
    assert label("slack://TOKENA/TOKENB/TOKENC/#chan") == "slack://…"
    assert label("mailtos://me:pw@smtp.lab?to=a@b") == "mailtos://smtp.lab"
    assert check_url("jsons://hooks.lab/x") == "jsons://hooks.lab/x"


def test_the_text_sent() -> None:
    assert NOTICE.title() == "Astraeus: run train failed" and NOTICE.kind == "failure"
    assert json.loads(NOTICE.body(HOOK)) == {
        "event": "failed", "run": "train", "uid": "0" * 32, "workspace": "vision",
        "state": "Failed", "exit_code": 3, "reason": "Failed: exit 3", "time": 1.0,
    }  # fmt: skip
    assert NOTICE.body("ntfy://topic").splitlines() == [
        f"run: train ({'0' * 32})", "workspace: vision", "state: Failed", "exit code: 3",
        "reason: Failed: exit 3",
    ]  # fmt: skip
    long = Notice(E.FAILED, "t", "u", "w", "Failed", None, "x" * 9000, 1.0)
    assert len(json.loads(long.body(HOOK))["reason"]) == 1000
    assert Notice.from_json(NOTICE.to_json()) == NOTICE
    # a start's forecast: two fields more, and back; none: the fields are absent
    started = Notice(E.STARTED, "t", "u", "w", "Running", None, "Started", 9.0, (5.0, 8.5))
    fields = json.loads(started.body(HOOK))
    assert (fields["likely_start"], fields["likely_start_90"]) == (5.0, 8.5)
    assert Notice.from_json(started.to_json()) == started
    assert "likely_start" not in json.loads(NOTICE.body(HOOK))


def test_backoff_doubles_up_to_five_minutes() -> None:
    assert [backoff(n) for n in (1, 2, 3, 4, 10, 30)] == [1, 2, 4, 8, 300, 300]


def test_the_sender_retries_on_the_monotonic_clock_then_gives_up() -> None:
    clock = [100.0]
    outbox = FakeOutbox([Pending(1, HOOK, "json://127.0.0.1:9000", NOTICE, 0)])
    tries: list[float] = []

    def refuse(url: str, notice: Notice) -> str | None:
        tries.append(clock[0])
        raise OSError("connection refused")

    sender = Sender(outbox, refuse, attempts=4, monotonic=lambda: clock[0])

    def send_and_record() -> float:
        sender.round()  # the send starts on its own thread
        assert sender.idle(5)
        return sender.round()  # what came of it is recorded

    assert send_and_record() == pytest.approx(1.0) and tries == [100.0]  # not due for 1 s
    for step in (1.0, 2.0, 4.0):  # each back-off twice the one before
        clock[0] += step - 0.5
        assert sender.round() == pytest.approx(0.5)  # not yet
        clock[0] += 0.5
        send_and_record()
    assert tries == [100.0, 101.0, 103.0, 107.0]
    assert [kind for kind, _, _ in outbox.log] == ["retry", "retry", "retry", "failed"]
    assert outbox.log[-1][2] == "the service failed"  # a phrase: its words stay in the log
    sender.stop()


def test_the_sender_sends_a_few_at_once_one_at_a_time_to_a_url_and_forgets() -> None:
    urls = ["a", "a", "c", "d", "e", "f"]
    outbox = FakeOutbox([Pending(i, url, "l", NOTICE, 0) for i, url in enumerate(urls, 1)])
    sent: list[str] = []
    sender = Sender(outbox, lambda url, notice: sent.append(url) or None)
    sender.round()
    assert sender.idle(5) and sorted(sent) == ["a", "c", "d", "e"]  # PARALLEL, one to a
    sender.round()  # those recorded; the rest started
    assert sender.idle(5) and sorted(sent) == ["a", "a", "c", "d", "e", "f"]
    assert sender.round() == 5.0  # nothing left: it waits to be woken
    assert sorted(row for _, row, _ in outbox.log) == [1, 2, 3, 4, 5, 6]
    assert {kind for kind, _, _ in outbox.log} == {"delivered"}
    sender.stop()


def test_a_send_past_its_deadline_is_cut_and_retried_while_other_targets_go_on() -> None:
    cut_now = threading.Event()
    cuts: list[int] = []

    def send(url: str, notice: Notice) -> str | None:
        if url == "slow":  # accepts and never answers, until its connection is cut
            cut_now.wait(30)
            return "ConnectionError: the connection was shut down"
        return None

    def cut(thread: int) -> None:
        cuts.append(thread)
        cut_now.set()

    rows = [Pending(1, "slow", "s", NOTICE, 0), Pending(2, "quick", "q", NOTICE, 0)]
    outbox = FakeOutbox(rows)
    sender = Sender(outbox, send, deadline=0.5, cut=cut)
    started = time.monotonic()
    sender.round()
    while ("delivered", 2, "") not in outbox.log:  # the quick one, not waiting for the slow
        assert time.monotonic() - started < 0.4, outbox.log
        time.sleep(0.01)
        sender.round()
    assert cuts == [] and 1 in outbox.rows
    outbox.rows[3] = Pending(3, "quick", "q", NOTICE, 0)  # queued while the slow one hangs
    while len(outbox.log) < 3 or time.monotonic() - started < 0.6:
        assert time.monotonic() - started < 5, outbox.log
        time.sleep(0.01)
        sender.round()
    assert outbox.log == [("delivered", 2, ""), ("delivered", 3, ""),
                          ("retry", 1, "no answer within 0.5 s")]  # fmt: skip
    assert len(cuts) == 1
    assert sender.idle(5)
    sender.round()  # the cut send's own end is not recorded again
    assert len(outbox.log) == 3
    sender.stop()


def test_a_url_cannot_make_a_send_wait_longer_or_retry() -> None:
    import apprise

    service = bounded(apprise.Apprise.instantiate(f"{HOOK}?rto=3600&cto=999&retry=9&wait=20"))
    assert (service.socket_connect_timeout, service.socket_read_timeout) == (15.0, 15.0)
    assert service.retry == 0
    quick = bounded(apprise.Apprise.instantiate(HOOK))
    assert (quick.socket_connect_timeout, quick.socket_read_timeout) == (4.0, 4.0)


HOSTILE_SCHEMES = (*SCHEMES, "file", "windows", "dbus", "apprise", "http", "JSON", "")


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(HOSTILE_SCHEMES),
    st.text(max_size=80) | st.sampled_from(["127.0.0.1:9000/hook", "topic", "T/B/C", "h/x"]),
    st.lists(st.sampled_from(["succeeded", "failed", "started", "END", ""]), max_size=4),
)
def test_any_url_is_refused_in_one_line_or_of_an_allowed_scheme(
    scheme: str, rest: str, events: list[str]
) -> None:
    document = run_document("job", ["true"])
    document["spec"]["notify"] = [{"url": f"{scheme}://{rest}", "events": events}]
    try:
        spec = parse_spec(document)
    except SpecError as e:
        assert len(str(e).splitlines()) == 1 and str(e).startswith("spec.notify[0].")
        return
    [(url, names)] = spec.notify
    assert scheme_of(url) in SCHEMES and len(url) <= 1024 and url.isprintable()
    assert names and set(names) <= {e.value for e in NotifyEvent}
    assert parse_spec(spec_to_dict(spec)) == spec


def _store_with_runs(tmp_path: Path, runs: list[tuple[str, str]]) -> Store:
    store = Store(tmp_path / "state.db")
    store.outbox.targets = (Target(HOOK, tuple(NotifyEvent)),)
    for name, workspace in runs:
        store.runs.insert(
            RunRow(
                name=name,
                workspace=workspace,
                owner="ann",
                uid=1000,
                gid=1000,
                spec_text='{"metadata": {}, "spec": {}}',
                priority=0,
                state=RunState.RUNNING,
                reason=None,
                submitted_at=1.0,
                started_at=None,
                finished_at=None,
                exit_code=None,
                restarts=0,
                preemptions=0,
                attempts=1,
                preempted_by=None,
                stop_request=None,
                quota_noted=False,
                run_uid=new_run_uid(),
            )
        )
    return store


def test_the_outbox_hands_out_each_workspaces_rows_in_turn(tmp_path: Path) -> None:
    store = _store_with_runs(tmp_path, [("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b")])
    woken: list[int] = []
    store.outbox.listener = lambda: woken.append(1)
    for name, ws in (("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b")):
        with store.transaction() as tx:
            store.events.add(
                tx, name, ws, ReasonCode.SUCCEEDED, Reason("Succeeded", code=ReasonCode.MESSAGE)
            )
    assert [p.notice.run for p in store.outbox.pending(10)] == ["a1", "b1", "a2", "a3"]
    assert len(woken) == 4
    with store.transaction() as tx:  # an event no notification follows
        store.events.add(
            tx,
            "a1",
            "a",
            ReasonCode.PRIORITY_CHANGED,
            Reason("Priority 0 -> 1", code=ReasonCode.MESSAGE),
        )
    assert len(woken) == 4 and len(store.outbox.pending(10)) == 4


def test_a_run_queues_at_most_32_then_an_event_says_so(tmp_path: Path) -> None:
    store = _store_with_runs(tmp_path, [("loop", "a")])
    with store.transaction() as tx:
        for _ in range(MAX_PENDING_PER_RUN + 1):
            store.events.add(
                tx, "loop", "a", ReasonCode.STARTED, Reason("Started", code=ReasonCode.MESSAGE)
            )
    assert len(store.outbox.pending(100)) == MAX_PENDING_PER_RUN
    [refused] = [e for e in store.events.all("loop") if e.code is ReasonCode.NOTIFY_FAILED]
    assert refused.message.render() == (
        "Notification (started) not queued: too many waiting to be sent"
    )


def test_a_rolled_back_event_queues_nothing(tmp_path: Path) -> None:
    store = _store_with_runs(tmp_path, [("r", "a")])
    with pytest.raises(RuntimeError), store.transaction() as tx:
        store.events.add(
            tx, "r", "a", ReasonCode.SUCCEEDED, Reason("Succeeded", code=ReasonCode.MESSAGE)
        )
        raise RuntimeError("the decision was not made")
    assert store.outbox.pending(10) == []
    with store.transaction() as tx:
        store.events.add(
            tx, "r", "a", ReasonCode.SUCCEEDED, Reason("Succeeded", code=ReasonCode.MESSAGE)
        )
    [row] = store.outbox.pending(10)
    store.outbox.delivered(row)
    assert store.outbox.pending(10) == []
    assert [e.code for e in store.events.all("r")][-1] is ReasonCode.NOTIFIED


def test_a_secret_url_from_a_root_only_file_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "slack"
    secret.write_text("slack://T1/B2/C3token\n")
    secret.chmod(0o600)
    monkeypatch.setenv("ASTRA_TEST_PAGER", "json://10.0.0.1/page?+Authorization=Bearer%20x")
    text = f'[[notify]]\nurl_file = "{secret}"\n[[notify]]\nurl_env = "ASTRA_TEST_PAGER"\n'
    config = parse_config(text)
    assert [t.url for t in config.notify] == [
        "slack://T1/B2/C3token", "json://10.0.0.1/page?+Authorization=Bearer%20x"]  # fmt: skip


def test_a_secret_file_others_may_read_or_a_link_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "slack"
    secret.write_text("slack://T1/B2/C3token\n")
    link = tmp_path / "link"
    link.symlink_to(secret)
    for path, mode, why in (
        (secret, 0o644, "may be read or changed by others: chown root"),
        (secret, 0o660, "(mode 0660, uid 0) may be read or changed by others"),
        (link, 0o600, "Too many levels of symbolic links"),
        (tmp_path, 0o700, "is not a regular file"),
    ):
        secret.chmod(mode)
        with pytest.raises(ConfigError) as caught:
            parse_config(f'[[notify]]\nurl_file = "{path}"\n', source="config.toml")
        assert why in str(caught.value) and "\n" not in str(caught.value)
        assert str(caught.value).startswith("config.toml: notify[0].url_file: ")
    for entry, message in (
        ('url = "json://h/x"\nurl_env = "X"', "notify[0].url_env: give only one of url"),
        ('url_env = "ASTRA_TEST_UNSET"', "notify[0].url_env: 'ASTRA_TEST_UNSET' is not set"),
        ('url_file = "relative"', "notify[0].url_file: 'relative' must be an absolute path"),
    ):
        with pytest.raises(ConfigError) as caught:
            parse_config(f"[[notify]]\n{entry}\n", source="config.toml")
        assert str(caught.value).startswith(f"config.toml: {message}"), str(caught.value)


def test_one_workspace_s_hanging_receivers_take_only_its_share_and_late_ones_none() -> None:
    """Eight of vision's URLs that never answer (and a send that cannot be cut, as a
    stuck name lookup): they take vision's share of the places, nlp's notice and the
    config's entry leave at once; past their deadline they take no place at all."""
    release = threading.Event()

    def send(url: str, notice: Notice) -> str | None:
        if url.startswith("hang"):
            release.wait(30)  # cut has no effect on it
            return "cut"
        return None

    def of(workspace: str) -> Notice:
        return Notice(E.FAILED, "r", "u", workspace, "Failed", 1, "x", 1.0)

    rows = [Pending(i, f"hang{i}", "l", of("vision"), 0) for i in range(1, 9)]
    rows += [
        Pending(9, "nlp-hook", "l", of("nlp"), 0),
        Pending(10, "admin-hook", "the config's [[notify]] entry 1: x", of("vision"), 0),
    ]
    outbox = FakeOutbox(rows)
    sender = Sender(outbox, send, deadline=0.3, cut=lambda thread: None)
    try:
        started = time.monotonic()
        sender.round()
        launched = sorted(f.row.url for f in sender._flights.values())
        assert launched == ["admin-hook", "hang1", "nlp-hook"]  # 4 places, 3 senders: 1 each
        while {("delivered", 9, ""), ("delivered", 10, "")} - set(outbox.log):
            assert time.monotonic() - started < 0.25, outbox.log  # before any deadline
            sender.round()
            time.sleep(0.01)
        while len({row for kind, row, _ in outbox.log if kind == "retry"}) < 8:
            assert time.monotonic() - started < 10, outbox.log  # each in turn, none waits
            sender.round()
            time.sleep(0.02)
        assert all(f.late for f in sender._flights.values())  # late, still on their threads
    finally:
        release.set()
        sender.stop()
