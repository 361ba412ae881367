"""Forgetting finished runs after the retention time; removing what forgotten runs leave.

Config ``[machine] finished_retention`` (default 14 days; ``"off"`` keeps finished runs
until deleted): a Succeeded, Failed or Cancelled run with no live worker whose
``finished_at`` is older than that is forgotten, at most ``BATCH`` of them per pass, as if
deleted: its name may be used again, and its usage stays in the accounting. A finished run
that a queued run still waits for (``spec.after``, not yet met) is kept until that one
starts or goes. Runs of a group (a sweep, replica group or schedule) are forgotten like
any other; the group stays.

Every file of a run is named by its id (``RunRow.run_uid``): ``logs/<run_uid>/`` holds
``<attempt>-<worker>.log``, and the executor's worker handles (process executor folders,
container names) carry it. A forgotten run's files go as soon as the loop sees its note
(runner/store/forget.py). Usage records (runner/store/usage.py) are pruned on the same
pass once older than USAGE_KEPT. At the daemon's start, log folders named by a run's *name* (the
layout before ids) move to the run's id, and those of runs no longer known are removed.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from runner.engine.snapshot import SpecCache
from runner.executors.base import Executor, ExecutorError
from runner.executors.logcap import log_attempt
from runner.model import RunState
from runner.store.db import Store, is_run_uid
from runner.store.usage import USAGE_KEPT

log = logging.getLogger("astraeus.loop")

BATCH = 100  # runs forgotten, or whose files are removed, per pass
RETAIN_EVERY = 5.0  # seconds between two looks for finished runs kept too long
ATTEMPT_LOGS_KEPT = 4  # a run's newest attempts whose logs are kept (each within log_limit)


def waited_for(store: Store, specs: SpecCache) -> set[str]:
    """Names that queued runs still wait for (their ``spec.after``, not yet met)."""
    return {
        name
        for r in store.runs.all(active_only=True)
        if r.state == RunState.QUEUED and not r.deps_met and r.attempts == 0
        for name in specs.shown(r).after  # an unreadable spec waits for nothing
    }


def forget_expired(store: Store, specs: SpecCache, retention: float | None, now: float) -> int:
    """Forget up to BATCH finished runs older than ``retention`` seconds; how many. Usage
    records older than USAGE_KEPT go too (prune_usage)."""
    prune_usage(store, now)
    if retention is None or not store.forget.expired(now - retention, 1, ()):
        return 0
    keep = waited_for(store, specs)
    names = store.forget.expired(now - retention, BATCH, keep)
    forgotten = 0
    with store.transaction() as tx:
        for name in names:
            if store.forget.if_expired(tx, name, now - retention):
                forgotten += 1
    if forgotten:
        log.info("forgot %d finished run(s) kept longer than the retention time", forgotten)
    return forgotten


def forget_over_kept(store: Store, specs: SpecCache, kept: tuple[int, int] | None) -> int:
    """Forget up to BATCH finished runs past what their user may keep (``kept``: how many,
    and their stored specs' bytes; [machine] max_kept_per_user, max_kept_bytes_per_user),
    the oldest first, as if their retention time had passed; how many."""
    if kept is None:
        return 0
    most, most_bytes = kept
    names = store.forget.over_kept(most, most_bytes, waited_for(store, specs), BATCH)
    forgotten = 0
    if names:
        with store.transaction() as tx:
            for name in names:
                if store.forget.if_expired(tx, name, float("inf")):
                    forgotten += 1
    if forgotten:
        log.info("forgot %d finished run(s) past what their user may keep", forgotten)
    return forgotten


def prune_usage(store: Store, now: float) -> int:
    """Forget the usage records kept longer than USAGE_KEPT (runner/store/usage.py), at
    most BATCH at a time; how many."""
    if not store.usage.expired(now - USAGE_KEPT):
        return 0
    with store.transaction() as tx:
        return store.usage.prune(tx, now - USAGE_KEPT, BATCH)


def remove_forgotten(store: Store, executor: Executor, logs_dir: Path) -> bool:
    """Remove the files of up to BATCH forgotten runs; whether there were any."""
    notes = store.forget.pending(BATCH)
    for note in notes:
        for handle in note.handles:
            try:
                executor.cleanup(handle)
            except ExecutorError as e:
                log.warning("cleanup of %s (a forgotten run's) failed: %s", handle, e)
        remove_log_folder(logs_dir, note.run_uid)
        store.forget.files_removed(note.run_uid)
    return bool(notes)


def remove_log_folder(logs_dir: Path, run_uid: str) -> None:
    if not is_run_uid(run_uid):  # never a path from anywhere else
        return
    folder = logs_dir / run_uid
    try:
        shutil.rmtree(folder)  # never follows a symlink out of the folder
    except FileNotFoundError:
        pass
    except OSError as e:
        log.warning("could not remove %s: %s", folder, e)


def prune_attempt_logs(logs_dir: Path, run_uid: str, attempt: int, workers: Iterable[int]) -> None:
    """Before ``workers`` start in attempt ``attempt``: remove each one's logs of attempts
    older than its newest ATTEMPT_LOGS_KEPT (this one included), so a worker that restarts
    again and again (a replica that keeps ending) keeps at most that many logs. Only the
    starting workers' files are touched: an independent sibling still running in an older
    attempt keeps its log."""
    if not is_run_uid(run_uid):
        return
    try:
        entries = list(os.scandir(logs_dir / run_uid))
    except FileNotFoundError:
        return
    older: dict[int, list[tuple[int, str]]] = {w: [] for w in workers}
    for entry in entries:
        if (named := log_attempt(entry.name)) is not None:
            a, w = named
            if w in older and a < attempt:
                older[w].append((a, entry.path))
    for found in older.values():
        for _, path in sorted(found)[: max(0, len(found) - ATTEMPT_LOGS_KEPT + 1)]:
            try:
                os.unlink(path)  # the entry itself: never follows a symlink
            except OSError as e:
                log.warning("could not remove %s: %s", path, e)


def tidy_log_folders(store: Store, logs_dir: Path) -> None:
    """At the start: the old layout (a folder per run name) moves to the run's id; the
    folders of runs no longer known (forgotten before files were named by ids) go."""
    if not logs_dir.is_dir():
        return
    known = store.forget.run_uids()
    by_name = {name: uid for uid, name in known.items() if name}
    for entry in list(os.scandir(logs_dir)):
        if entry.name in known or not entry.is_dir(follow_symlinks=False):
            continue
        uid = by_name.get(entry.name)
        target = logs_dir / uid if uid else None
        try:
            if target is not None and not target.exists():
                os.rename(entry.path, target)
            else:
                shutil.rmtree(entry.path)
        except OSError as e:
            log.warning("could not tidy the log folder %s: %s", entry.path, e)
