"""Groups of runs made from one run template: sweeps, replica groups and schedules.

Pure: documents in, validated groups and the run specs they make out.

- A **sweep** expands a parameter grid (every combination) or a list of parameter
  sets into independent runs ``<name>-0``, ``<name>-1``, … (like Slurm's job arrays).
  Each run gets its parameters as environment variables, ``ASTRAEUS_SWEEP_INDEX``
  (and ``SLURM_ARRAY_TASK_ID``), and ``{key}`` in its arguments replaced by the value.
- A **replica group** keeps N identical independent runs ``<name>-0`` … ``<name>-N-1``
  alive: one that ends is queued again (after a back-off when it keeps ending quickly).
- A **schedule** submits a run ``<name>-<YYYYMMDD>-<HHMMSS>`` at each time of a cron
  expression (the daemon's local time; a sixth field is seconds), with a policy for a
  previous run still going: ``skip`` it, ``queue`` another, or ``replace`` it.

The template obeys every rule of a run, the workspace's priority cap included, checked
when the group is made and again for each run it makes (runner/engine/groups.py).
"""

from __future__ import annotations

import itertools
import math
import os
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from runner.model import RunSpec
from runner.runspec.fields import (
    _ENV_KEY_RE,
    _NAME_RE,
    _NAME_RULE,
    _child,
    _int_between,
    _list,
    _name,
    _object,
    _optional,
    _required,
    _string,
)
from runner.runspec.parse import (
    DOCUMENT,
    SpecError,
    parse_spec,
    show_value,
    spec_to_dict,
)
from runner.runspec.printable import check_script
from runner.runspec.templates import Params, run_document, run_part

KINDS = ("sweep", "replicas", "schedule")
POLICIES = ("skip", "queue", "replace")
MAX_SWEEP = 1000  # runs one sweep may make
MAX_PARAMS = 64
MAX_SWEEP_TEXT = 1024 * 1024  # characters of all a sweep's parameters, one set per run
MAX_REPLICAS = 256
QUICK_EXIT = 60.0  # seconds: a replica that ends sooner than this backs off before its next start
MAX_BACKOFF = 60.0
SCHEDULE_SUFFIX = "-%Y%m%d-%H%M%S"  # a schedule's run: its name, then the firing time

_KEYS = ("kind", "name", "template", "grid", "list", "replicas", "cron", "policy")


@dataclass(frozen=True, slots=True)
class GroupSpec:
    name: str
    kind: str
    template: RunSpec  # its name is the group's
    points: tuple[Params, ...] = ()  # sweep: one parameter set per run
    replicas: int = 0
    cron: str = ""
    policy: str = "skip"


def parse_group(data: object, *, stored: bool = False) -> GroupSpec:
    """A validated group from a decoded document; SpecError naming the field otherwise.

    ``stored``: a group the daemon made earlier, read back (see ``parse_spec``)."""
    doc = _object(data, "", _KEYS)
    kind = _required(doc, "", "kind", _kind)
    template_doc = _object(
        _required(doc, "", "template", _present), "template", ("metadata", "spec")
    )
    meta = template_doc.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    name = _optional(doc, "", "name", _name, None) or meta.get("name")
    if name is None:
        raise SpecError("name", "required (or template.metadata.name)")
    name = _name(name, "name")
    template = _template({**template_doc, "metadata": {**meta, "name": name}}, stored)
    extra = {"sweep": ("grid", "list"), "replicas": ("replicas",), "schedule": ("cron", "policy")}
    for key in ("grid", "list", "replicas", "cron", "policy"):
        if key in doc and key not in extra[kind]:
            raise SpecError(key, f"is not a setting of a {kind}")
    if kind != "sweep" and template.after:
        raise SpecError("template.spec.after", f"a {kind}'s runs cannot wait for other runs")
    if kind == "sweep":
        return _sweep(doc, name, template)
    if kind == "replicas":
        if template.workers > 1 and not template.gang:
            raise SpecError("template.spec.gang", "a replica is one unit: one worker, or a gang")
        count = _required(doc, "", "replicas", _int_between(0, MAX_REPLICAS))
        _check_run_name(f"{name}-{max(count - 1, 0)}", "name")
        return GroupSpec(name, kind, template, replicas=count)
    cron = _required(doc, "", "cron", _cron)
    if not stored and next_fire(cron, time.time()) is None:  # a past year, February 31st
        raise SpecError("cron", f"{show_value(cron)} never fires again")
    policy = _optional(doc, "", "policy", _policy, "skip")
    _check_run_name(name + time.strftime(SCHEDULE_SUFFIX, time.gmtime(0)), "name")
    return GroupSpec(name, kind, template, cron=cron, policy=policy)


def group_to_dict(group: GroupSpec) -> dict[str, object]:
    """The document ``parse_group`` reads back unchanged (stored with the group)."""
    out: dict[str, object] = {
        "kind": group.kind,
        "name": group.name,
        "template": spec_to_dict(group.template),
    }
    if group.kind == "sweep":
        out["list"] = [dict(p) for p in group.points]
    elif group.kind == "replicas":
        out["replicas"] = group.replicas
    else:
        out["cron"], out["policy"] = group.cron, group.policy
    return out


def _present(value: object, path: str) -> object:
    return value


def _kind(value: object, path: str) -> str:
    if value not in KINDS:
        raise SpecError(path, f"must be one of {', '.join(KINDS)}, got {show_value(value)}")
    return str(value)


def _policy(value: object, path: str) -> str:
    if value not in POLICIES:
        raise SpecError(path, f"must be one of {', '.join(POLICIES)}, got {show_value(value)}")
    return str(value)


def _cron(value: object, path: str) -> str:
    from croniter import croniter  # lazy: a daemon without schedules never loads it

    text = " ".join(_string(value, path, 200).split())
    if not croniter.is_valid(text):
        raise SpecError(path, f"is not a cron expression, got {show_value(value)}")
    return text


def _template(document: object, stored: bool) -> RunSpec:
    try:
        return parse_spec(document, stored=stored)
    except SpecError as e:
        raise SpecError(f"template.{e.field}", e.reason) from None


def _check_run_name(name: str, path: str) -> None:
    if not _NAME_RE.fullmatch(name):
        raise SpecError(path, f"too long: its runs' names ({name}) must be {_NAME_RULE}")


# ------------------------------------------------------------------ sweeps


def _sweep(doc: dict[str, object], name: str, template: RunSpec) -> GroupSpec:
    if ("grid" in doc) == ("list" in doc):
        raise SpecError(DOCUMENT, "a sweep needs a grid or a list of parameter sets (one of them)")
    if "grid" in doc:
        points = _grid(doc["grid"], "grid")
    else:
        items = _list(doc["list"], "list", MAX_SWEEP)
        points = [_params(item, f"list[{i}]") for i, item in enumerate(items)]
    if not points:
        raise SpecError("list" if "list" in doc else "grid", "makes no runs")
    _check_run_name(f"{name}-{len(points) - 1}", "name")
    text = sum(len(k) + len(v) for point in points for k, v in point)
    if text > MAX_SWEEP_TEXT:
        raise SpecError(
            "list" if "list" in doc else "grid",
            f"its parameters, one set per run, must be at most {MAX_SWEEP_TEXT} characters"
            f" in all (1 MiB), got {text}",
        )
    group = GroupSpec(name, "sweep", template, tuple(points))
    sweep_runs(group)  # every run it makes must be a valid run (arguments grow with values)
    return group


def _grid(value: object, path: str) -> list[Params]:
    if not isinstance(value, dict) or not value:
        raise SpecError(
            path, f"must be an object of parameter names to lists, got {show_value(value)}"
        )
    if len(value) > MAX_PARAMS:
        raise SpecError(path, f"must have at most {MAX_PARAMS} parameters, got {len(value)}")
    axes = []
    size = 1
    for key, values in value.items():
        _param_key(key, path)
        items = _list(values, _child(path, key), MAX_SWEEP)
        if not items:
            raise SpecError(_child(path, key), "must not be empty")
        axes.append(
            [(str(key), _param_value(v, f"{_child(path, key)}[{i}]")) for i, v in enumerate(items)]
        )
        size *= len(items)
        if size > MAX_SWEEP:
            raise SpecError(path, f"makes more than {MAX_SWEEP} runs")
    return [tuple(combo) for combo in itertools.product(*axes)]


def _params(value: object, path: str) -> Params:
    if not isinstance(value, dict):
        raise SpecError(
            path, f"must be an object of parameter names to values, got {show_value(value)}"
        )
    if len(value) > MAX_PARAMS:
        raise SpecError(path, f"must have at most {MAX_PARAMS} parameters, got {len(value)}")
    out = []
    for key, item in value.items():
        _param_key(key, path)
        out.append((str(key), _param_value(item, _child(path, key))))
    return tuple(out)


def _param_key(key: object, path: str) -> None:
    if not isinstance(key, str) or not _ENV_KEY_RE.fullmatch(key) or key.startswith("ASTRAEUS_"):
        raise SpecError(
            _child(path, key),
            "a parameter name must be a variable name (letters, digits and '_', not starting "
            "with a digit or ASTRAEUS_)",
        )


def _param_value(value: object, path: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    if isinstance(value, str):
        check_script(value, path)
        return _string(value, path, empty=True)
    raise SpecError(path, f"must be a string, number or true/false, got {show_value(value)}")


def sweep_runs(group: GroupSpec) -> list[RunSpec]:
    """The sweep's runs, in index order, each checked like a submitted run."""
    runs = []
    template = spec_to_dict(group.template)
    for index in range(len(group.points)):
        part = sweep_part(group, index)
        try:
            runs.append(parse_spec(run_document(template, part)))
        except SpecError as e:
            raise SpecError(f"run {index} ({part['name']}): {e.field}", e.reason) from None
    return runs


def sweep_part(group: GroupSpec, index: int) -> dict[str, object]:
    """What the sweep's run ``index`` keeps of its own (runner/runspec/templates.py)."""
    return run_part(f"{group.name}-{index}", index, group.points[index])


# ------------------------------------------------------- replicas and schedules


def replica_name(group: str, slot: int) -> str:
    return f"{group}-{slot}"


def replica_slot(group: str, run: str) -> int | None:
    """The slot of ``run`` in replica group ``group``, or None when it is not one of its runs."""
    prefix = group + "-"
    tail = run[len(prefix) :] if run.startswith(prefix) else ""
    return int(tail) if tail.isdigit() and str(int(tail)) == tail else None


def replica_backoff(streak: int) -> float:
    """Seconds a replica waits before starting again after ``streak`` quick exits in a row."""
    return 0.0 if streak <= 0 else min(float(2 ** (streak - 1)), MAX_BACKOFF)


def next_fire(cron: str, after: float) -> float | None:
    """The first time of ``cron`` strictly after ``after`` (epoch seconds), in the local time
    zone's rules: across a daylight-saving change, ``0 3 * * *`` stays at 03:00. None when
    it never fires again (its years are past, or its date never comes)."""
    from croniter import CroniterError, croniter

    start = datetime.fromtimestamp(after, local_zone())
    try:
        return float(croniter(cron, start).get_next(float))
    except (CroniterError, OverflowError):  # "failed to find next date"
        return None


def local_zone() -> tzinfo:
    """The machine's zone with its rules ($TZ, else /etc/localtime's name), else its offset now."""
    name = os.environ.get("TZ", "").lstrip(":")
    if not name:
        target = os.path.realpath("/etc/localtime")
        name = target.split("/zoneinfo/", 1)[1] if "/zoneinfo/" in target else ""
    if name:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            pass
    zone = datetime.now().astimezone().tzinfo
    return zone if zone is not None else UTC


def schedule_run_name(group: str, fired: float) -> str:
    return group + time.strftime(SCHEDULE_SUFFIX, time.localtime(fired))


_FIRING = re.compile(r"(.+)-\d{8}-\d{6}(?:-[2-9])?")  # SCHEDULE_SUFFIX, and -2 … -9


def schedule_of_firing(name: str) -> str | None:
    """The schedule whose firing could be named ``name`` (``nightly-20261206-030000``:
    ``nightly``), or None for a name no firing has."""
    found = _FIRING.fullmatch(name)
    return None if found is None else found.group(1)


def sweep_document(document: object) -> dict[str, object] | None:
    """A run document with a ``spec.sweep`` section (``grid`` or ``list``) as a sweep's
    group document; None when it has none. ``astra submit`` sends sweeps this way."""
    if not isinstance(document, dict):
        return None
    spec = document.get("spec")
    if not isinstance(spec, dict) or "sweep" not in spec:
        return None
    sweep = spec["sweep"]
    if not isinstance(sweep, dict):
        raise SpecError(
            "spec.sweep", f"must be an object with a grid or a list, got {show_value(sweep)}"
        )
    for key in sweep:
        if key not in ("grid", "list"):
            raise SpecError(_child("spec.sweep", key), "unknown key (expected one of: grid, list)")
    template = {**document, "spec": {k: v for k, v in spec.items() if k != "sweep"}}
    group: dict[str, object] = {"kind": "sweep", "template": template, **sweep}
    try:
        parse_group(group)
    except SpecError as e:
        field = e.field if e.field.startswith("template.") else f"spec.sweep.{e.field}"
        field = "spec.sweep" if e.field == DOCUMENT else field
        raise SpecError(field.removeprefix("template."), e.reason) from None
    return group
