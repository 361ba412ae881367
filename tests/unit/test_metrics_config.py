"""``[api] metrics_address`` and ``metrics_run_names``: checked at load, one line each."""

from __future__ import annotations

import pytest

from runner.config.load import ConfigError, parse_config
from runner.engine.plantimes import PLAN_BUCKETS_MS, PlanTimes


def api(body: str) -> str:
    return f"[api]\n{body}\n"


@pytest.mark.parametrize(
    ("written", "address", "where"),
    [
        ('"127.0.0.1:9480"', ("127.0.0.1", 9480), "127.0.0.1:9480"),
        ('"localhost:1"', ("localhost", 1), "localhost:1"),
        ('"[::1]:65535"', ("::1", 65535), "[::1]:65535"),
        ('"0.0.0.0:9100"', ("0.0.0.0", 9100), "0.0.0.0:9100"),
    ],
)
def test_an_address_is_host_and_port(written: str, address: tuple[str, int], where: str) -> None:
    config = parse_config(api(f"metrics_address = {written}"))
    assert config.metrics.address == address and config.metrics.where == where
    assert not config.metrics.run_names


def test_unset_there_is_no_listener_and_no_run_is_named() -> None:
    config = parse_config("")
    assert config.metrics.address is None and config.metrics.where == ""
    assert not config.metrics.run_names
    assert parse_config(api("metrics_run_names = true")).metrics.run_names


@pytest.mark.parametrize(
    "written",
    ['"127.0.0.1"', '"127.0.0.1:"', '"127.0.0.1:0"', '"127.0.0.1:65536"', '"127.0.0.1:00009480"',
     '":9480"', '"a b:9480"', '"[::1:9480"', '"[nothost]:9480"', '"host:94x0"', "9480",
     '"127.0.0.1:9480\\n"', '"-bad.example:80"'],
)  # fmt: skip
def test_a_bad_address_is_refused_in_one_line(written: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config(api(f"metrics_address = {written}"), source="/etc/astraeus/config.toml")
    message = str(refused.value)
    assert message.startswith("/etc/astraeus/config.toml: api.metrics_address: must be host:port")
    assert "\n" not in message


def test_run_names_is_true_or_false() -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config(api('metrics_run_names = "yes"'))
    assert str(refused.value) == "<config>: api.metrics_run_names: must be true or false, got 'yes'"


def test_plan_times_count_each_plan_in_its_bucket() -> None:
    times = PlanTimes()
    for ms in (0.1, 0.5, 3.0, 9999.0):
        times.observe(ms)
    read = times.read()
    assert read.count == 4 and read.total_ms == pytest.approx(10002.6)
    assert read.cumulative[0] == 2  # 0.1 and 0.5: at most 0.5 ms
    assert read.cumulative[PLAN_BUCKETS_MS.index(5.0)] == 3
    assert read.cumulative[-1] == 3  # 9999 ms only in +Inf, which is the count
