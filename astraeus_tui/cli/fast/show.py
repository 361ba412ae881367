"""What `astra show NAME` prints, line for line as cli/runs.py's ``show`` does."""

from __future__ import annotations

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing at start-up

if TYPE_CHECKING:
    from typing import Any

    from runner.schema import RunDetail, RunUsage, UsageFigures, Worker

FIELDS = ("name", "uid", "workspace", "owner", "priority", "state", "reason", "gpus", "workers",
          "restarts", "preemptions", "submitted_at", "started_at", "finished_at",
          "exit_code", "time_limit_seconds", "starts_by", "likely_start", "likely_start_90",
          "learned_from", "restart_at", "idle_since")  # fmt: skip


def show_row(answer: dict[str, Any]) -> Any:
    """``GET /v1/runs/{name}``'s plain JSON read as ``show_lines`` reads a RunDetail."""
    from astraeus_tui.cli.fast.out import Row

    run: Any = Row(answer)
    run.workers_history = [Row(w) for w in run.workers_history or []]
    run.events = [Row(e) for e in run.events or []]
    if isinstance(run.usage, dict):  # its telemetry: the figures as attributes too
        usage: Any = Row(run.usage)
        for key in ("now", "mean", "peak"):
            figures = getattr(usage, key)
            setattr(usage, key, Row(figures) if isinstance(figures, dict) else None)
        run.usage = usage
    return run


def _unset(value: object) -> bool:
    """msgspec's UNSET (a field a Struct left out), known without importing msgspec."""
    return type(value).__name__ == "UnsetType"


def show_lines(run: RunDetail) -> list[str]:
    from astraeus_tui.when import no_history

    lines = [run.paused] if run.paused else []
    # before there is history enough for a forecast: said where the forecast would be
    none_yet = no_history(getattr(run, "learned_from", None), getattr(run, "forecast_needs", None))
    for key in FIELDS:
        value = getattr(run, key)
        if none_yet and key in ("likely_start", "learned_from"):
            value = none_yet if key == "likely_start" else None
        if value not in (None, [], "") and not _unset(value):  # idle_since: only while idle
            lines.append(f"{key + ':':<20}{value}")
    if isinstance(share := run.gpu_memory_bytes, int):  # a shared request only
        from runner.model import format_size

        lines.append(f"{'gpu_memory:':<20}{format_size(share)} on each GPU (shared)")
    if command := command_line(run.spec):
        lines.append(f"{'command:':<20}{command}")  # a script's newlines shown as \n
    if folder := start_folder(run.spec):
        lines.append(f"{'folder:':<20}{folder}")
    if carried := carried_env(run.spec):
        lines.append(f"{'environment:':<20}{carried}")
    lines += usage_lines(run)
    lines += worker_lines(run.workers_history or [])
    for e in run.events[-15:]:
        lines.append(f"  {e.time}  {e.kind:<12} {e.message}")
    return lines


def start_folder(spec: dict[str, Any] | None) -> str:
    """Where the run starts: its --chdir, else the folder it was submitted from."""
    task = (spec or {}).get("spec", {}).get("task_template", {})
    if not isinstance(task, dict):
        return ""
    from astraeus_tui.text import shown

    if task.get("working_dir"):
        return shown(task["working_dir"])
    return f"{shown(task['submit_dir'])} (submitted from)" if task.get("submit_dir") else ""


def carried_env(spec: dict[str, Any] | None) -> str:
    """The environment carried from the submit, as a line: how many variables, and the
    virtualenv or conda environment that was active."""
    task = (spec or {}).get("spec", {}).get("task_template", {})
    env = task.get("submit_env") if isinstance(task, dict) else None
    if not isinstance(env, dict) or not env:
        return ""
    from astraeus_tui.text import shown

    line = f"{len(env)} variables from the submit"
    if env.get("VIRTUAL_ENV"):
        line += f"; virtualenv {shown(env['VIRTUAL_ENV'])}"
    if env.get("CONDA_DEFAULT_ENV"):
        line += f"; conda {shown(env['CONDA_DEFAULT_ENV'])}"
    return line


def _gib(n: float | None) -> str:
    if n is None:
        return "-"
    value = n / (1 << 30)
    return f"{value:.2f} GiB" if value < 10 else f"{value:.1f} GiB"


def _percent(p: float | None) -> str:
    return "-" if p is None else f"{p:.0f}%"


def _figures(label: str, f: UsageFigures) -> str:
    return (f"{label:<5}GPU {_percent(f.gpu_util):>4}  GPU mem {_gib(f.gpu_memory_bytes):>9}"
            f"  CPU {_percent(f.cpu_percent):>5}  RSS {_gib(f.memory_bytes):>9}")  # fmt: skip


def usage_lines(run: RunDetail) -> list[str]:
    """What the run used (its telemetry): now while it runs, mean and peak over its life."""
    if run.usage is None or _unset(run.usage):
        return []
    # UNSET is told apart by its type's name (msgspec is not imported here): not narrowed
    usage: RunUsage = run.usage  # type: ignore[assignment]
    rows = [(k, f) for k, f in (("now", usage.now), ("mean", usage.mean), ("peak", usage.peak))
            if f is not None]  # fmt: skip
    lines = [f"{'usage:' if i == 0 else '':<20}{_figures(k, f)}" for i, (k, f) in enumerate(rows)]
    if usage.samples:
        lines.append(f"{'':<20}{usage.samples} samples, {usage.since} to {usage.until}")
    return lines


def worker_lines(history: list[Worker], limit: int = 16) -> list[str]:
    """Each worker's state, latest attempts last: ``attempt 1 worker 0  Cancelled (preempt)``;
    a worker stopping for a preemption says for whom (``Stopping (preempted by urgent)``)."""
    lines = []
    for w in history[-limit:]:
        why = w.error or w.stop_reason or ""
        if w.stopping_for and why == _preempt():
            why = f"preempted by {w.stopping_for}"
        if w.killed:
            why = f"{why}, SIGKILL".lstrip(", ")
        tail = f" ({why})" if why else ""
        lines.append(f"  attempt {w.attempt} worker {w.worker}  {w.state}{tail}")
    return lines


def _preempt() -> str:
    from runner.states import StopReason  # only for a worker stopped for another run

    return StopReason.PREEMPT


def command_line(spec: object, limit: int = 300) -> str:
    """The run's command and arguments as a shell would take them, cut at ``limit``."""
    task = spec.get("spec", {}).get("task_template", {}) if isinstance(spec, dict) else {}
    argv = [task["command"]] if task.get("command") else []
    argv += task.get("args") or []
    line = " ".join(shell_quoted(str(a)) for a in argv)
    return line if len(line) <= limit else line[: limit - 1] + "…"


_SHELL_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-")


def shell_quoted(arg: str) -> str:
    """``shlex.quote(arg)``, without the ``re`` that shlex loads (~4 ms of a `show`)."""
    if not arg:
        return "''"
    if all(c in _SHELL_SAFE for c in arg):
        return arg
    return "'" + arg.replace("'", "'\"'\"'") + "'"
