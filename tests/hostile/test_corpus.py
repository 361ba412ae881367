"""The hostile corpus against a real daemon: through `astra` and as raw bytes on the socket.

Every input is refused with one line that starts with its code and says why, and
nothing is written: `astra ls --all` stays empty and the state DB does not change.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.hostile.cases import API, CORPUS, EXPECTED, content, expected, names
from tests.hostile.conftest import LAB
from tests.hostile.helpers import db_state, error_of, raw, request_bytes, status_of
from tests.support.served import Served

CASES = names()
# `astra slurm sbatch` reads the file with universal newlines (astraeus_tui/cli/slurm.py),
# so the script's \r never reaches the parser there.
SLURM: dict[str, tuple[str, str]] = {
    "sbatch-invalid-utf8.sbatch": ("error:", "cannot read"),
}
CRLF = "sbatch-crlf.sbatch"


def assert_refused(returncode: int, stderr: str, code: str, message: str) -> None:
    lines = stderr.splitlines()
    assert returncode != 0, stderr
    assert len(lines) == 1, stderr
    assert lines[0].startswith(code), lines[0]
    assert message in lines[0], lines[0]


@pytest.fixture
def untouched(lab: Served) -> Iterator[None]:
    """Nothing written: no run listed, the state DB's tables as they were."""
    before = db_state(lab.home)
    yield
    assert lab.json("ls", "--all") == []
    assert db_state(lab.home) == before


def test_the_corpus_is_complete() -> None:
    assert {p.name for p in CORPUS.iterdir()} == set(EXPECTED)
    assert len(CASES) >= 50


def _cli_commands(folder: Path) -> dict[tuple[str, str], list[str]]:
    commands: dict[tuple[str, str], list[str]] = {}
    for name in CASES:
        path = folder / name
        path.write_bytes(content(name))
        commands["submit", name] = ["submit", str(path)]
        if name.endswith(".sbatch") and name != CRLF:
            commands["sbatch", name] = ["slurm", "sbatch", str(path)]
    return commands


@pytest.fixture(scope="module")
def cli(lab: Served, tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Any]:
    """Every corpus file through `astra submit` (and `astra slurm sbatch`), eight at a time.

    Refusals never delete anything, so the state DB being the same after all of them
    means none of them wrote.
    """
    commands = _cli_commands(tmp_path_factory.mktemp("corpus"))
    before = db_state(lab.home)
    with ThreadPoolExecutor(8) as pool:
        futures = {key: pool.submit(lab.astra, *argv) for key, argv in commands.items()}
        results: dict[tuple[str, str], Any] = {k: f.result() for k, f in futures.items()}
    results["ls", ""] = lab.json("ls", "--all")
    results["db", ""] = (before, db_state(lab.home))
    return results


@pytest.mark.parametrize("name", CASES)
def test_astra_submit_refuses(cli: dict[tuple[str, str], Any], name: str) -> None:
    result = cli["submit", name]
    assert_refused(result.returncode, result.stderr, *expected(name))


@pytest.mark.parametrize("name", [n for n in CASES if n.endswith(".sbatch") and n != CRLF])
def test_astra_slurm_sbatch_refuses(cli: dict[tuple[str, str], Any], name: str) -> None:
    result = cli["sbatch", name]
    assert_refused(result.returncode, result.stderr, *SLURM.get(name, expected(name)))


def test_astra_slurm_sbatch_refuses_dos_line_breaks(
    served: Callable[..., Served], tmp_path: Path
) -> None:
    d = served(gpus=1)  # a daemon of its own
    (tmp_path / CRLF).write_bytes(content(CRLF))
    result = d.astra("slurm", "sbatch", str(tmp_path / CRLF))
    assert_refused(result.returncode, result.stderr, *expected(CRLF))


def test_the_cli_refusals_wrote_nothing(cli: dict[tuple[str, str], Any]) -> None:
    before, after = cli["db", ""]
    assert after == before
    assert cli["ls", ""] == []


@pytest.mark.parametrize("name", [n for n in CASES if not n.endswith(".sbatch")])
def test_the_daemon_refuses_the_raw_bytes(lab: Served, name: str, untouched: None) -> None:
    kind = "application/toml" if name.endswith(".toml") else "application/json"
    response = raw(lab.socket, request_bytes("POST", "/v1/runs", content(name), kind))
    code, message = API.get(name, expected(name))
    line = error_of(response)
    assert status_of(response) == int(code.split()[0])
    assert line.startswith(code) and message in line, line
    assert "\n" not in line


def test_the_same_inputs_done_right_are_accepted(
    served: Callable[..., Served], tmp_path: Path
) -> None:
    """The control: what the corpus bends is accepted when straight, by both paths."""
    drives = {n: tmp_path / n for n in ("checkpoints", "secret")}
    for folder in drives.values():
        folder.mkdir()
    d = served(LAB.format(**{k: str(v) for k, v in drives.items()}), gpus=2)
    doc = json.loads((CORPUS / "mount-dotdot.json").read_text())
    doc["spec"]["task_template"]["datavolume_refs"][0]["mount_path"] = "/ckpt/run"
    doc["spec"]["priority"] = 10
    (tmp_path / "ok.json").write_text(json.dumps(doc))
    assert d.astra("submit", str(tmp_path / "ok.json")).returncode == 0
    doc["metadata"]["name"] = "raw-ok"
    response = raw(d.socket, request_bytes("POST", "/v1/runs", json.dumps(doc).encode()))
    assert status_of(response) == 201, response
    toml = (CORPUS / "workers-million.toml").read_text().replace("1000000", "2")
    toml = toml.replace('name = "hostile"', 'name = "toml-ok"')
    response = raw(d.socket, request_bytes("POST", "/v1/runs", toml.encode(), "application/toml"))
    assert status_of(response) == 201, response
    assert {r["name"] for r in d.json("ls", "--all")} == {"hostile", "raw-ok", "toml-ok"}
