"""One line on a group's state: `astra sweep|replicas|schedule ls` and the dashboard."""

from __future__ import annotations

from runner.schema import Group


def describe(g: Group) -> str:
    """``4 runs (2 running, 2 succeeded)``, ``2/3 running (…)``, ``0 3 * * * (skip), next …``."""
    states = g.states or {}
    counts = ", ".join(f"{n} {s.lower()}" for s, n in sorted(states.items())) or "no runs yet"
    if g.kind == "sweep":
        return f"{g.size} runs ({counts})"
    if g.kind == "replicas":
        return f"{g.running}/{g.replicas} running ({counts})"
    when = "paused" if g.paused else f"next {g.next_at.replace('T', ' ')}" if g.next_at else "ended"
    return f"{g.cron} ({g.policy}), {when}; {counts}"
