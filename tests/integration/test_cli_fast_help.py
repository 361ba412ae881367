"""`astra --help`, `astra COMMAND --help` and shell completion on the fast path, against typer.

Run as users run it (the `astra` console script), once on the fast path with
``-X importtime`` (typer, rich and click must stay unloaded) and once through typer
(``ASTRAEUS_CLI_FAST=0``); the bytes and exit codes must be the same. The help is typer's
without Rich (``TYPER_USE_RICH=0``, 80 columns), which is what the fast path prints.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.served import Served

ASTRA = str(Path(sys.executable).parent / "astra")
HEAVY = {"typer", "rich", "click"}


def _astra(
    args: list[str], env: dict[str, str], fast: bool
) -> tuple[tuple[str, str, int], set[str]]:
    typer_env = {"ASTRAEUS_CLI_FAST": "0", "TYPER_USE_RICH": "0"}
    env = {**env, "COLUMNS": "80", **({} if fast else typer_env)}
    out = subprocess.run([sys.executable, "-X", "importtime", ASTRA, *args], env=env,
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    lines = out.stderr.splitlines(keepends=True)
    imported = {line.split("|")[-1].strip().split(".")[0] for line in lines
                if line.startswith("import time:")}  # fmt: skip
    stderr = "".join(line for line in lines if not line.startswith("import time:"))
    return (out.stdout, stderr, out.returncode), imported


def same(args: list[str], env: dict[str, str]) -> str:
    fast, imported = _astra(args, env, True)
    assert not imported & HEAVY, (args, imported & HEAVY)
    slow, imported = _astra(args, env, False)
    assert "typer" in imported
    assert fast == slow, args
    return fast[0] + fast[1]


@pytest.mark.parametrize(
    "args",
    [["--help"], [], ["ls", "--help"], ["run", "--help"], ["submit", "--help"],
     ["show", "--help"], ["priority", "--help"], ["delete", "--help"], ["wait", "--help"],
     ["logs", "--help"], ["sweep", "--help"], ["admin", "--help"]],
)  # fmt: skip
def test_help(args: list[str], tmp_path: Path) -> None:
    env = {**os.environ, "ASTRAEUS_HOME": str(tmp_path)}  # no daemon: help needs none
    text = same(args, env)
    assert text.startswith("Usage: astra")


def _completion(shell: str, line: str, words: list[str] | None = None) -> dict[str, str]:
    env = {"_ASTRA_COMPLETE": f"complete_{shell}"}
    if shell == "bash":
        parts = line.split(" ")
        return {**env, "COMP_WORDS": line, "COMP_CWORD": str(len(parts) - 1)}
    if shell == "fish":
        env["_TYPER_COMPLETE_FISH_ACTION"] = "get-args"
    return {**env, "_TYPER_COMPLETE_ARGS": line}


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_of_commands_and_run_names(shell: str, served: Callable[..., Served]) -> None:
    d = served(gpus=1)
    for name in ("alpha", "alps", "beta"):
        assert d.astra("run", "--name", name, "--", "sleep", "60").returncode == 0
    outputs = {}
    for line in ("astra ", "astra s", "astra sh", "astra x", "astra show ", "astra show al",
                 "astra wait b", "astra priority "):  # fmt: skip
        outputs[line] = same([], {**d.env, **_completion(shell, line)})
    assert "show" in outputs["astra s"] and "submit" in outputs["astra s"]
    assert "ls" not in outputs["astra s"] and "show" in outputs["astra sh"]
    assert "alpha" in outputs["astra show al"] and "beta" not in outputs["astra show al"]
    assert "beta" in outputs["astra wait b"]


def test_fish_asks_whether_there_are_completions(tmp_path: Path) -> None:
    env = {**os.environ, "ASTRAEUS_HOME": str(tmp_path)}
    for line, code in (("astra s", 0), ("astra zzz", 1)):
        ask = {**env, **_completion("fish", line), "_TYPER_COMPLETE_FISH_ACTION": "is-args"}
        fast, _ = _astra([], ask, True)
        slow, _ = _astra([], ask, False)
        assert fast == slow == ("", "", code)


def test_other_shapes_of_help_and_completion_go_to_typer(tmp_path: Path) -> None:
    env = {**os.environ, "ASTRAEUS_HOME": str(tmp_path)}
    for args, extra in ((["sweep", "submit", "--help"], {}), (["ls", "-a", "--help"], {}),
                        ([], _completion("bash", "astra ls --")),
                        ([], _completion("bash", "astra sweep "))):  # fmt: skip
        fast, imported = _astra(args, {**env, **extra}, True)
        assert "typer" in imported, args
        assert fast[2] == 0
