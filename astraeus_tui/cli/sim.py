"""`astra sim TRACE`: replay a workload through the scheduler's own engine on a virtual
clock, or through a baseline policy, and report waits, utilisation and preemption's cost
(docs/sim.md). It runs here, in this process: no daemon is needed.

`astra sim --history 30d` replays the daemon's own runs finished in that span instead, read
through its API (your workspaces' runs; admins: all), on its GPUs, under its workspaces,
quotas and weights; with `--config FILE` too, under both, side by side (`now` and FILE):
what would have happened under another config."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from astraeus_tui.cli.common import call, fail, table_options
from astraeus_tui.cli.fast.options import JSON, flag, multi, value
from astraeus_tui.cli.tables import print_json

if TYPE_CHECKING:
    from astraeus_tui.cli.fast.options import Options
    from astraeus_tui.client import Client
    from runner.config.load import Config
    from runner.sim.replay import SimMachine

POLICIES = ("astraeus", "fifo", "greedy", "easy")
HISTORY_MAX = 10_000  # runs one answer of GET /v1/history holds at most (docs/api.md)
NOW = "now"  # the column of the daemon's own config in a "what if" replay


# `astra sim`'s options, as cli/fast/options.py's tables (the command receives them as **o)
SIM: Options = {
    "history": value("--history",
                     help="Replay the daemon's runs finished this far back (e.g. 30d) instead."),
    "fmt": value("--format", help="astraeus | alibaba | swf (default: guessed)."),
    "policy": value("--policy", help="astraeus | fifo | greedy | easy (docs/sim.md).",
                    default="astraeus"),
    "compare": flag("--compare", help="Run every policy on the trace, side by side."),
    "gpus": value("--gpus",
                  help="GPUs (default: the config's, else 8; with --history, the daemon's).",
                  type=int),
    "gpu_memory": value("--gpu-memory",
                        help="Each GPU's memory (default 80GiB; with --history, the daemon's)."),
    "cpus": value("--cpus", help="Cores (default: the config's, else 16 per GPU).", type=int),
    "memory": value("--memory", help="Memory (default: the config's, else 128GiB per GPU)."),
    "config": value("--config",
                    help="Workspaces, quotas, weights, grace (default: the daemon's);"
                         " with --history, compared with the daemon's.",
                    type=Path),
    "since": value("--since", help="Only runs submitted from this second on (e.g. 9900000)."),
    "longest": value("--longest", help="Leave out runs longer than this (e.g. 7d)."),
    "sample": value("--sample", help="Keep this fraction of the runs (0 to 1).", type=float),
    "seed": value("--seed", help="The sample's seed.", type=int, default=0),
    "limits": value("--limits", help="Time limits: trace (the file's) | exact | x2 | x5 | none.",
                    default="trace"),
    "resume": value("--resume",
                    help="A preempted run resumes from a checkpoint (full) or not (none).",
                    default="full"),
    "swf_gpus_per_proc": value("--swf-gpus-per-proc", help="SWF: GPUs per processor.",
                               type=float, default=1.0),
    "estimates_every": value("--estimates-every",
                             help="Check the start estimates this often in trace time"
                                  " (0: not at all).",
                             default="1h"),
    "runs": value("--runs", help="Write every run's outcome here (NDJSON).", type=Path),
    "drain": multi("--drain",
                   help="Drain the machine, or GPUs, for a while: START+LENGTH[:GPUS], e.g."
                        " 10d+12h or 10d+12h:0,1 (repeatable)."),
    "plot": value("--plot", help="Draw runs waiting and GPUs held over time here (SVG).",
                  type=Path),
    "as_json": JSON,
}  # fmt: skip


@table_options(SIM)
def sim(
    trace: Annotated[
        Path | None,
        typer.Argument(help="The workload: a CSV, an SWF log, … (or --history)."),
    ] = None,
    **o: Any,
) -> None:
    """Replay a workload (a trace of runs, or the daemon's history) on a virtual clock and
    report how it was scheduled."""
    from runner.config.load import ConfigError
    from runner.model import parse_size
    from runner.sim.replay import Replay, SimDrain, load_sim_config, sim_machine
    from runner.sim.report import outcome_json, render_table, summarise, summary_json
    from runner.sim.trace import ReadOptions, TraceError, history_trace, parse_seconds, read_trace

    history, fmt, policy, config = o["history"], o["fmt"], o["policy"], o["config"]
    gpus, cpus, gpu_memory, memory = o["gpus"], o["cpus"], o["gpu_memory"], o["memory"]
    compare, resume, runs, plot = o["compare"], o["resume"], o["runs"], o["plot"]
    if trace is None and history is None:
        fail("name a trace file, or --history with how far back (e.g. --history 30d)")
    if trace is not None and history is not None:
        fail("a trace file or --history, not both")
    if history is not None and fmt is not None:
        fail("--format: --history reads the daemon's own runs, not a file")
    if history is not None and config is not None and compare:
        fail("--compare: with --history and --config, one policy under two configs only")
    if policy not in POLICIES:
        fail(f"--policy: no policy {policy!r} (astraeus, fifo, greedy or easy)")
    if resume not in ("full", "none"):
        fail(f"--resume: {resume!r} is not full or none")
    daemon = None if history is None else _read_daemon(history)
    what_if = daemon is not None and config is not None
    try:
        gpu_bytes = parse_size(gpu_memory) if gpu_memory else None
        memory_bytes = parse_size(memory) if memory else None
        if daemon is None:
            conf = load_sim_config(config)
            machine = sim_machine(conf, gpus, gpu_bytes, cpus, memory_bytes)
        else:
            conf = daemon.config(load_sim_config(None))
            gpu_bytes = gpu_bytes or daemon.gpu_memory
            count = gpus if gpus is not None else daemon.gpus
            machine = sim_machine(conf, count, gpu_bytes, cpus, memory_bytes)
        cases = [(name, name, conf, machine) for name in (POLICIES if compare else (policy,))]
        if daemon is not None and config is not None:
            other = load_sim_config(config)
            count = gpus if gpus is not None else other.machine.gpus or daemon.gpus
            other_machine = sim_machine(other, count, gpu_bytes, cpus, memory_bytes)
            cases = [(NOW, policy, conf, machine), (_title(config), policy, other, other_machine)]
        since, longest = o["since"], o["longest"]
        options = ReadOptions(
            since=None if since is None else parse_seconds(since),
            longest=None if longest is None else parse_seconds(longest),
            sample=o["sample"],
            seed=o["seed"],
            limits=o["limits"],
            workspaces=tuple(sorted(conf.workspaces)),
            swf_gpus_per_proc=o["swf_gpus_per_proc"],
            gpu_memory=machine.gpu_memory,
        )
        every = parse_seconds(o["estimates_every"])
        drains = [SimDrain.parse(text, parse_seconds) for text in o["drain"] or ()]
        if daemon is not None:
            found = history_trace(daemon.entries, options)
        else:
            assert trace is not None
            found = read_trace(trace, fmt, options)
    except (ConfigError, TraceError, ValueError, OSError) as e:
        fail(str(e))
    summaries, replays = [], []
    for title, name, case_conf, case_machine in cases:
        try:
            replay = Replay(
                found.runs,
                case_conf,
                case_machine,
                policy=name,
                resume=resume == "full",
                estimate_every=every if every > 0 and name == "astraeus" else None,
                drains=drains,
            )
        except ValueError as e:
            fail(str(e))
        done = replay.run()
        replays.append((title, done))
        summaries.append(
            summarise(title, done.outcomes, case_machine.gpus, done.ended_at, done.calibration)
        )
    if runs is not None:
        with runs.open("w") as out:
            for title, done in replays:
                for outcome in done.outcomes:
                    row = {"policy": done.policy, **outcome_json(outcome)}
                    if what_if:
                        row = {"config": title, **row}
                    out.write(json.dumps(row, separators=(",", ":")) + "\n")
    if plot is not None:
        from runner.sim.plot import plot_svg

        try:
            plot.write_text(plot_svg(replays, machine.gpus))
        except OSError as e:
            fail(f"--plot: {e}")
    if o["as_json"]:
        answer: dict[str, Any] = {
            "trace": {"runs": len(found.runs), "left_out": found.left_out},
            "machine": _machine_json(machine),
        }
        if daemon is not None:
            answer["history"] = {"since": daemon.since, "complete": daemon.complete}
        if what_if:
            answer["policy"] = policy
            answer["machines"] = {title: _machine_json(m) for title, _, _, m in cases}
        answer["refused"] = {title: d.refused for title, d in replays if d.refused}
        answer["policies"] = [summary_json(s) for s in summaries]
        print_json(answer)
        return
    left = ", ".join(f"{n} {why}" for why, n in sorted(found.left_out.items()))
    finished = "" if daemon is None else f" finished since {daemon.since}"
    typer.echo(
        f"{len(found.runs)} runs{finished} on {_machine_text(machine)}"
        + (f" (left out: {left})" if left else "")
    )
    if what_if:
        typer.echo(f"{policy}, under the daemon's config ({NOW}) and under {cases[1][0]}:")
        if cases[1][3] != machine:
            typer.echo(f"{cases[1][0]}: on {_machine_text(cases[1][3])}")
    for title, done in replays:
        for run_name, why in list(done.refused.items())[:5]:
            typer.echo(f"{title}: {run_name} refused: {why}", err=True)
    typer.echo(render_table(summaries))


@dataclasses.dataclass(frozen=True)
class _Daemon:
    """What a replay of the daemon's history reads through its API: the runs finished
    since ``since`` (``complete``: all of them, not only the newest HISTORY_MAX), its GPUs
    and their memory, and its workspaces as ``GET /v1/workspaces`` lists them."""

    since: str
    entries: list[dict[str, Any]]
    complete: bool
    gpus: int | None
    gpu_memory: int | None
    workspaces: list[dict[str, Any]]

    def config(self, base: Config) -> Config:
        """``base`` (the daemon's config file as this process reads it, else the defaults)
        with the daemon's own workspaces, quotas, weights and maximum priorities."""
        from runner.model import Quota, Workspace
        from runner.sim.replay import sim_config

        found: dict[str, Workspace] = {}
        for row in self.workspaces:
            q = row.get("quota") or {}
            cores = q.get("cpu_cores")
            quota = Quota(
                gpus=q.get("gpus"),
                cpu_milli=None if cores is None else round(cores * 1000),
                memory=q.get("memory"),
                workers=q.get("workers"),
                gpu_memory=q.get("gpu_memory"),
            )
            found[row["name"]] = Workspace(
                row["name"],
                None if quota.is_empty() else quota,
                weight=float(row.get("weight", 1.0)),
                max_priority=int(row.get("max_priority", 0)),
                members=tuple(row.get("members", ())),
                preempt_within_quota=bool(row.get("preempt_within_quota", False)),
            )
        if not found:
            return base
        default = next((r["name"] for r in self.workspaces if r.get("default")), None)
        if default not in found:
            default = base.default_workspace if base.default_workspace in found else min(found)
        return sim_config(dataclasses.replace(base, workspaces=found, default_workspace=default))


def _read_daemon(since: str) -> _Daemon:
    """The daemon's history since ``since``, its GPUs and its workspaces; a line on stderr
    when more runs finished than one answer holds (the newest are replayed)."""

    def read(client: Client) -> _Daemon:
        answer = client.history_json(since, HISTORY_MAX)
        entries = list(answer.get("runs") or [])
        listed = client.gpus().gpus
        memory = [g.memory_total for g in listed if g.memory_total > 0]
        return _Daemon(
            since=str(answer.get("since") or since),
            entries=entries,
            complete=len(entries) < HISTORY_MAX,
            gpus=len(listed) or None,
            gpu_memory=min(memory) if memory else None,
            workspaces=client.workspaces(),
        )

    daemon = call(read)
    if not daemon.complete:
        typer.echo(
            f"--history: only the newest {HISTORY_MAX} of the runs finished since"
            f" {daemon.since} (the most one answer holds); a shorter span replays them all",
            err=True,
        )
    return daemon


def _title(path: Path) -> str:
    """A config file's column title: its name (marked when it is ``now``'s own)."""
    return path.name if path.name != NOW else f"{NOW} (file)"


def _machine_json(machine: SimMachine) -> dict[str, int]:
    return {
        "gpus": machine.gpus,
        "gpu_memory": machine.gpu_memory,
        "cpus": machine.cpus,
        "memory": machine.memory,
    }


def _machine_text(machine: SimMachine) -> str:
    return f"{machine.gpus} GPUs of {machine.gpu_memory / 1024**3:g} GiB"


def register(app: typer.Typer) -> None:
    app.command("sim")(sim)
