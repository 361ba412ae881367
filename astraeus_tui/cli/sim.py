"""`astra sim TRACE`: replay a workload through the scheduler's own engine on a virtual
clock, or through a baseline policy, and report waits, utilisation and preemption's cost
(docs/sim.md). It runs here, in this process: no daemon is needed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from astraeus_tui.cli.common import JsonOption, fail
from astraeus_tui.cli.tables import print_json

POLICIES = ("astraeus", "fifo", "greedy", "easy")


def sim(
    trace: Annotated[Path, typer.Argument(help="The workload: a CSV, an SWF log, …")],
    fmt: Annotated[
        str | None,
        typer.Option("--format", help="astraeus | alibaba | swf (default: guessed)."),
    ] = None,
    policy: Annotated[
        str, typer.Option(help="astraeus | fifo | greedy | easy (docs/sim.md).")
    ] = "astraeus",
    compare: Annotated[
        bool, typer.Option("--compare", help="Run every policy on the trace, side by side.")
    ] = False,
    gpus: Annotated[int | None, typer.Option(help="GPUs (default: the config's, else 8).")] = None,
    gpu_memory: Annotated[
        str | None, typer.Option("--gpu-memory", help="Each GPU's memory (default 80GiB).")
    ] = None,
    cpus: Annotated[
        int | None, typer.Option(help="Cores (default: the config's, else 16 per GPU).")
    ] = None,
    memory: Annotated[
        str | None, typer.Option(help="Memory (default: the config's, else 128GiB per GPU).")
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(help="Workspaces, quotas, weights, grace (default: the daemon's)."),
    ] = None,
    since: Annotated[
        str | None, typer.Option(help="Only runs submitted from this second on (e.g. 9900000).")
    ] = None,
    longest: Annotated[
        str | None, typer.Option(help="Leave out runs longer than this (e.g. 7d).")
    ] = None,
    sample: Annotated[
        float | None, typer.Option(help="Keep this fraction of the runs (0 to 1).")
    ] = None,
    seed: Annotated[int, typer.Option(help="The sample's seed.")] = 0,
    limits: Annotated[
        str,
        typer.Option(help="Time limits: trace (the file's) | exact | x2 | x5 | none."),
    ] = "trace",
    resume: Annotated[
        str, typer.Option(help="A preempted run resumes from a checkpoint (full) or not (none).")
    ] = "full",
    swf_gpus_per_proc: Annotated[
        float, typer.Option("--swf-gpus-per-proc", help="SWF: GPUs per processor.")
    ] = 1.0,
    estimates_every: Annotated[
        str,
        typer.Option(
            "--estimates-every",
            help="Check the start estimates this often in trace time (0: not at all).",
        ),
    ] = "1h",
    runs: Annotated[
        Path | None, typer.Option("--runs", help="Write every run's outcome here (NDJSON).")
    ] = None,
    as_json: bool = JsonOption,
) -> None:
    """Replay a workload (a trace of runs) on a virtual clock and report how it was scheduled."""
    from runner.config.load import ConfigError
    from runner.model import parse_size
    from runner.sim.replay import Replay, load_sim_config, sim_machine
    from runner.sim.report import outcome_json, render_table, summarise, summary_json
    from runner.sim.trace import ReadOptions, TraceError, parse_seconds, read_trace

    chosen = POLICIES if compare else (policy,)
    if policy not in POLICIES:
        fail(f"--policy: no policy {policy!r} (astraeus, fifo, greedy or easy)")
    if resume not in ("full", "none"):
        fail(f"--resume: {resume!r} is not full or none")
    try:
        conf = load_sim_config(config)
        machine = sim_machine(
            conf,
            gpus,
            parse_size(gpu_memory) if gpu_memory else None,
            cpus,
            parse_size(memory) if memory else None,
        )
        options = ReadOptions(
            since=None if since is None else parse_seconds(since),
            longest=None if longest is None else parse_seconds(longest),
            sample=sample,
            seed=seed,
            limits=limits,
            workspaces=tuple(sorted(conf.workspaces)),
            swf_gpus_per_proc=swf_gpus_per_proc,
            gpu_memory=machine.gpu_memory,
        )
        every = parse_seconds(estimates_every)
        found = read_trace(trace, fmt, options)
    except (ConfigError, TraceError, ValueError, OSError) as e:
        fail(str(e))
    summaries, replays = [], []
    for name in chosen:
        replay = Replay(
            found.runs,
            conf,
            machine,
            policy=name,
            resume=resume == "full",
            estimate_every=every if every > 0 and name == "astraeus" else None,
        )
        done = replay.run()
        replays.append(done)
        summaries.append(summarise(name, done.outcomes, machine.gpus, done.ended_at))
    if runs is not None:
        with runs.open("w") as out:
            for done in replays:
                for outcome in done.outcomes:
                    row = {"policy": done.policy, **outcome_json(outcome)}
                    out.write(json.dumps(row, separators=(",", ":")) + "\n")
    if as_json:
        print_json(
            {
                "trace": {"runs": len(found.runs), "left_out": found.left_out},
                "machine": {
                    "gpus": machine.gpus,
                    "gpu_memory": machine.gpu_memory,
                    "cpus": machine.cpus,
                    "memory": machine.memory,
                },
                "refused": {d.policy: d.refused for d in replays if d.refused},
                "policies": [summary_json(s) for s in summaries],
            }
        )
        return
    left = ", ".join(f"{n} {why}" for why, n in sorted(found.left_out.items()))
    typer.echo(
        f"{len(found.runs)} runs on {machine.gpus} GPUs"
        f" of {machine.gpu_memory / 1024**3:g} GiB" + (f" (left out: {left})" if left else "")
    )
    for done in replays:
        for run_name, why in list(done.refused.items())[:5]:
            typer.echo(f"{done.policy}: {run_name} refused: {why}", err=True)
    typer.echo(render_table(summaries))


def register(app: typer.Typer) -> None:
    app.command("sim")(sim)
