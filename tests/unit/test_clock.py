"""Monotonic readings stored with a boot id: used on that boot, the wall clock otherwise."""

from __future__ import annotations

from pathlib import Path

from runner.clock import Clock, Now, as_clock, read_boot_id

BOOT = "0f4c2a3e-boot"


def test_same_boot_measures_on_the_monotonic_clock() -> None:
    now = Now(wall=1_000_000.0 + 7200, mono=500.0, boot=BOOT)  # the wall stepped 2 h ahead
    assert now.elapsed(1_000_000.0 - 1, 499.0, BOOT) == 1.0
    assert now.until(1_000_000.0 + 30, 530.0, BOOT) == 30.0
    assert now.as_wall(1_000_000.0 - 1, 499.0, BOOT) == now.wall - 1.0


def test_another_boot_or_no_reading_falls_back_to_the_wall_clock() -> None:
    now = Now(wall=1_000_100.0, mono=5.0, boot=BOOT)  # after a reboot: mono restarted
    assert now.elapsed(1_000_000.0, 900.0, "an-older-boot") == 100.0
    assert now.elapsed(1_000_000.0, None, None) == 100.0
    assert now.until(1_000_130.0, 930.0, "an-older-boot") == 30.0


def test_an_unknown_boot_id_is_never_trusted() -> None:
    now = Now(wall=1_000_100.0, mono=5.0, boot="")
    assert now.elapsed(1_000_000.0, 900.0, "") == 100.0


def test_boot_id_and_a_plain_wall_function(tmp_path: Path) -> None:
    assert read_boot_id(tmp_path / "missing") == ""
    (tmp_path / "boot_id").write_text(BOOT + "\n")
    assert read_boot_id(tmp_path / "boot_id") == BOOT
    clock = as_clock(lambda: 42.0)
    assert clock() == clock.wall() == 42.0 and clock.now().wall == 42.0
    real = Clock()
    assert as_clock(real) is real and real.mono() <= real.mono()
