"""Astraeus's daemon side: headless (no dashboard, no CLI stack), in layers that each import
only those below them (``pyproject.toml``'s import-linter contracts):
daemon, api, service, slurm, engine, telemetry, executors, planner | store,
spec | config, notify, clock | gpus | drives | durations | schema, model | reasons, states.
"""
