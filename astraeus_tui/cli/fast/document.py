"""The run documents `astra run` and `astra submit` send, built as cli/runs.py builds them.

None means "not a form handled here": typer then parses the call, and says what is
wrong with it in its own words (a bad ``--env``, a duration only Slurm's forms
read, a sweep).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from astraeus_tui.cli.fast.args import FLAG, MULTI, VALUE, Parsed, text, texts

RUN_OPTIONS = {
    "--name": ("name", VALUE), "--image": ("image", VALUE), "--gpus": ("gpus", VALUE),
    "--cpus": ("cpus", VALUE), "--memory": ("memory", VALUE),
    "--time-limit": ("time_limit", VALUE), "--priority": ("priority", VALUE),
    "--workspace": ("workspace", VALUE), "--drive": ("drive", MULTI), "--env": ("env", MULTI),
    "--workers": ("workers", VALUE), "--after": ("after", MULTI), "--json": ("as_json", FLAG),
}  # fmt: skip
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")


def duration(raw: str) -> int | None:
    """The plain forms of cli/common.py's ``parse_duration`` (``90``, ``2h``, ``1h30m``);
    None for the rest (Slurm's forms, mistakes), which typer's parser answers."""
    value = raw.strip().lower()
    if value.isdigit():
        try:
            return int(value)
        except ValueError:
            return None
    if re.fullmatch(r"(\d+(?:\.\d+)?[smhdw])+", value):
        total = sum(float(n) * _UNITS[u] for n, u in _DURATION.findall(value))
        if total > 0:
            return int(total)
    return None


def _drive(raw: str) -> dict[str, str] | None:
    parts = raw.split(":")
    if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] not in ("ro", "rw")):
        return None
    mode = "ReadOnly" if len(parts) == 3 and parts[2] == "ro" else "ReadWrite"
    return {"name": parts[0], "mount_path": parts[1], "mode": mode}


def _env(pairs: list[str]) -> dict[str, str] | None:
    env = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            return None
        env[key] = value
    return env


def _default_name(command: str) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", Path(command).name.lower()).strip("-")[:40] or "run"
    return f"{base}-{os.urandom(2).hex()}"  # secrets.token_hex(2), without importing secrets


def _numbers(p: Parsed) -> tuple[int, float, int, int] | None:
    """``--gpus``, ``--cpus``, ``--priority``, ``--workers`` converted as click converts them."""
    try:
        return (int(text(p, "gpus") or 0), float(text(p, "cpus") or 0),
                int(text(p, "priority") or 0), int(text(p, "workers") or 1))  # fmt: skip
    except ValueError:
        return None


def run_document(p: Parsed) -> dict[str, Any] | None:
    command = p.rest or []
    numbers, env = _numbers(p), _env(texts(p, "env") or [])
    drives = [_drive(d) for d in texts(p, "drive") or []]
    if numbers is None or env is None or None in drives:
        return None
    gpus, cpus, priority, workers = numbers
    image = text(p, "image")
    image = image if image is not None else os.environ.get("ASTRAEUS_IMAGE") or ""
    resources: dict[str, Any] = {"gpu_requests": {"count": gpus}, "cpu_cores": cpus}
    if (memory := text(p, "memory")) is not None:
        resources["memory_bytes"] = memory
    task: dict[str, Any] = {
        **({"image": image} if image else {}), "command": command[0], "args": command[1:],
        "requested_resources": resources, "env": env, "datavolume_refs": drives,
    }  # fmt: skip
    if (limit := text(p, "time_limit")) is not None:
        if (seconds := duration(limit)) is None:
            return None
        task["time_limit_seconds"] = seconds
    meta = {"name": text(p, "name") or _default_name(command[0])}
    if workspace := text(p, "workspace"):
        meta["workspace"] = workspace
    body: dict[str, Any] = {"priority": priority, "workers": workers, "task_template": task}
    if after := texts(p, "after"):
        body["after"] = after
    return {"metadata": meta, "spec": body}


def is_plain_spec(file: str, text: str | None) -> bool:
    """True when the file surely has no ``spec.sweep`` (typer's submit makes sweeps)."""
    from runner.spec.documents import decode_document
    from runner.spec.parse import SpecError

    if text is None:
        if Path(file).suffix.lower() in (".sbatch", ".sh"):
            return True
        try:
            text = Path(file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return True  # load_spec_file says what is wrong with it
    fmt = "json" if text.lstrip().startswith("{") else "toml"
    try:
        document = decode_document(text, fmt)
    except SpecError:
        return False  # typer's submit decides whether the error is about a sweep
    spec = document.get("spec") if isinstance(document, dict) else None
    return not (isinstance(spec, dict) and "sweep" in spec)


def spec_document(file: str, text: str | None) -> dict[str, Any]:
    """cli/common.py's ``spec_document``: the daemon's own checks, its own messages."""
    from astraeus_tui.cli.fast.out import Failed
    from runner.spec.documents import load_spec_file, load_spec_text
    from runner.spec.parse import SpecError, spec_to_dict
    from runner.spec.printable import check_spec

    try:
        spec = load_spec_text(text) if text is not None else load_spec_file(file)
        check_spec(spec)
    except SpecError as e:
        raise Failed(f"422 INVALID_SPEC: {e}") from None
    result: dict[str, Any] = spec_to_dict(spec)
    return result
