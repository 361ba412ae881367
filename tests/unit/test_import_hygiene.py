"""What importing a part loads, in a fresh interpreter: the daemon's modules load no face
(textual, typer, rich, ``astraeus_tui``), only the API loads aiohttp and only the Docker
executor loads the Docker SDK; the client the faces talk through loads none of the daemon.

Every module of ``runner`` is imported, so a new module that pulls in a face fails here.
"""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import importlib, pkgutil, sys
import {package}
path = getattr({package}, "__path__", [])  # a module alone: itself
names = [m.name for m in pkgutil.walk_packages(path, "{package}.")]
skipped = {skipped!r}
for name in names:
    if not name.startswith(skipped):
        importlib.import_module(name)
print(len(names))
print(" ".join(sorted(m for m in sys.modules if m.split(".")[0] in {watched!r}
                      or m.startswith({prefixes!r}))))
"""


def _loaded(
    package: str,
    watched: tuple[str, ...],
    skipped: tuple[str, ...] = (),
    prefixes: tuple[str, ...] = (),
) -> tuple[int, set[str]]:
    code = PROBE.format(package=package, skipped=skipped, watched=watched, prefixes=prefixes)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    count, modules = [*done.stdout.splitlines(), ""][:2]
    return int(count), set(modules.split())


def test_the_daemon_loads_no_face() -> None:
    count, loaded = _loaded("runner", ("textual", "typer", "rich", "astraeus_tui"))
    assert count > 100  # every module of runner was imported
    assert loaded == set()


def test_only_the_api_loads_aiohttp_and_only_the_docker_executor_its_sdk() -> None:
    api, docker = "runner.api", "runner.executors.docker"
    _, loaded = _loaded("runner", ("aiohttp", "docker", "requests"), skipped=(api, docker))
    assert loaded == set()
    _, with_api = _loaded("runner", ("aiohttp",), skipped=(docker,))
    assert "aiohttp.web" in with_api  # the probe sees what it looks for


def test_the_faces_client_loads_none_of_the_daemon() -> None:
    daemon = ("runner.api", "runner.engine", "runner.store", "runner.executors", "runner.daemon")
    count, loaded = _loaded("astraeus_tui.client", ("aiohttp", "textual", "typer"), prefixes=daemon)
    assert count == 0 and loaded == set()
