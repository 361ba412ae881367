"""The state database's schema: one migration per version, applied in order at open."""

from __future__ import annotations

SCHEMA_APPLICATION_ID = 0x41535452  # "ASTR": refuses to open a foreign database

MIGRATIONS: tuple[str, ...] = (
    # 1: runs, workers, events, usage
    """
    CREATE TABLE runs (
        name TEXT PRIMARY KEY,
        workspace TEXT NOT NULL,
        owner TEXT NOT NULL,
        uid INTEGER NOT NULL,
        gid INTEGER NOT NULL,
        spec TEXT NOT NULL,
        priority INTEGER NOT NULL,
        state TEXT NOT NULL,
        reason TEXT,
        submitted_at REAL NOT NULL,
        started_at REAL,
        finished_at REAL,
        exit_code INTEGER,
        restarts INTEGER NOT NULL DEFAULT 0,
        preemptions INTEGER NOT NULL DEFAULT 0,
        attempts INTEGER NOT NULL DEFAULT 0,
        preempted_by TEXT,
        stop_request TEXT,
        quota_noted INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX runs_state ON runs(state);
    CREATE TABLE workers (
        id INTEGER PRIMARY KEY,
        run TEXT NOT NULL REFERENCES runs(name) ON DELETE CASCADE,
        attempt INTEGER NOT NULL,
        worker INTEGER NOT NULL,
        state TEXT NOT NULL,
        handle TEXT,
        gpus TEXT NOT NULL,
        cpu_milli INTEGER NOT NULL,
        memory INTEGER NOT NULL,
        started_at REAL NOT NULL,
        stop_reason TEXT,
        stop_deadline REAL,
        stopping_for TEXT,
        killed INTEGER NOT NULL DEFAULT 0,
        exit_code INTEGER,
        error TEXT,
        finished_at REAL,
        UNIQUE (run, attempt, worker)
    );
    CREATE INDEX workers_live ON workers(state);
    CREATE TABLE events (
        id INTEGER PRIMARY KEY,
        run TEXT NOT NULL,
        workspace TEXT NOT NULL,
        time REAL NOT NULL,
        kind TEXT NOT NULL,
        message TEXT NOT NULL
    );
    CREATE INDEX events_run ON events(run, id);
    CREATE TABLE usage (
        run TEXT NOT NULL,
        workspace TEXT NOT NULL,
        gpu_seconds REAL NOT NULL DEFAULT 0,
        cpu_seconds REAL NOT NULL DEFAULT 0,
        PRIMARY KEY (run, workspace)
    );
    """,
    # 2: groups of runs made from one template (sweeps, replica groups, schedules)
    """
    CREATE TABLE groups (
        name TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        workspace TEXT NOT NULL,
        owner TEXT NOT NULL,
        uid INTEGER NOT NULL,
        gid INTEGER NOT NULL,
        spec TEXT NOT NULL,
        created_at REAL NOT NULL,
        replicas INTEGER NOT NULL DEFAULT 0,
        paused INTEGER NOT NULL DEFAULT 0,
        next_at REAL,
        last_fired_at REAL
    );
    ALTER TABLE runs ADD COLUMN grp TEXT;
    ALTER TABLE runs ADD COLUMN streak INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX runs_grp ON runs(grp);
    ALTER TABLE events ADD COLUMN grp TEXT;
    CREATE INDEX events_grp ON events(grp, id);
    """,
    # 3: a run's dependencies, once all succeeded, are not looked at again
    """
    ALTER TABLE runs ADD COLUMN deps_met INTEGER NOT NULL DEFAULT 0;
    """,
    # 4: every run has an immutable unique id (its files on disk are named by it); the
    # files of forgotten runs wait in ``forgotten`` to be removed; usage is kept per run
    # id, so a name used again never merges with the usage of the run it had before
    """
    ALTER TABLE runs ADD COLUMN run_uid TEXT;
    UPDATE runs SET run_uid = printf('%012x', CAST(submitted_at * 1000 AS INTEGER))
        || lower(hex(randomblob(10)));
    CREATE UNIQUE INDEX runs_run_uid ON runs(run_uid);
    CREATE INDEX runs_finished ON runs(finished_at);
    CREATE TABLE forgotten (
        run_uid TEXT PRIMARY KEY,
        handles TEXT NOT NULL,
        time REAL NOT NULL
    );
    CREATE TABLE usage_by_run (
        run_uid TEXT PRIMARY KEY,
        run TEXT NOT NULL,
        workspace TEXT NOT NULL,
        gpu_seconds REAL NOT NULL DEFAULT 0,
        cpu_seconds REAL NOT NULL DEFAULT 0
    );
    INSERT INTO usage_by_run (run_uid, run, workspace, gpu_seconds, cpu_seconds)
        SELECT COALESCE(r.run_uid, lower(hex(randomblob(16)))), u.run, u.workspace,
               u.gpu_seconds, u.cpu_seconds
        FROM usage u LEFT JOIN runs r ON r.name = u.run AND r.workspace = u.workspace;
    DROP TABLE usage;
    ALTER TABLE usage_by_run RENAME TO usage;
    CREATE INDEX usage_workspace ON usage(workspace);
    """,
    # 5: monotonic readings of a worker's start and stop deadline, and the boot they count
    # from (runner/clock.py): time limits and graces are measured on them, not on the wall
    """
    ALTER TABLE workers ADD COLUMN started_mono REAL;
    ALTER TABLE workers ADD COLUMN stop_deadline_mono REAL;
    ALTER TABLE workers ADD COLUMN boot_id TEXT;
    """,
    # 6: a group's run template stored once; its runs keep only their own part
    # (runner/runspec/templates.py). AUTOINCREMENT: an id is never used twice (it is cached).
    """
    CREATE TABLE templates (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        spec TEXT NOT NULL
    );
    ALTER TABLE runs ADD COLUMN template INTEGER REFERENCES templates(id);
    CREATE INDEX runs_template ON runs(template);
    ALTER TABLE groups ADD COLUMN template INTEGER REFERENCES templates(id);
    """,
    # 7: the executor that started each worker ("docker", "process"); NULL on older rows
    """
    ALTER TABLE workers ADD COLUMN executor TEXT;
    """,
    # 8: each event's code (runner.model.ReasonCode), older rows' from their kind; whether
    # each run's latest attempt was started by backfill, older runs' from their last start
    """
    ALTER TABLE runs ADD COLUMN backfilled INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE events ADD COLUMN code TEXT NOT NULL DEFAULT 'LEGACY';
    UPDATE events SET code = CASE kind
        WHEN 'Started' THEN CASE WHEN json_extract(message, '$.template') LIKE 'Backfilled%'
                                 THEN 'BACKFILLED' ELSE 'STARTED' END
        WHEN 'Submitted' THEN 'SUBMITTED' WHEN 'Priority' THEN 'PRIORITY_CHANGED'
        WHEN 'QuotaReached' THEN 'QUOTA_REACHED' WHEN 'Preempting' THEN 'PREEMPTING'
        WHEN 'Preempted' THEN 'PREEMPTED' WHEN 'PreemptionWithdrawn' THEN 'PREEMPTION_WITHDRAWN'
        WHEN 'TimeLimit' THEN 'TIME_LIMIT' WHEN 'Restarting' THEN 'RESTARTING'
        WHEN 'Requeued' THEN 'REQUEUED' WHEN 'StartFailed' THEN 'START_FAILED'
        WHEN 'Killed' THEN 'KILLED' WHEN 'Deleting' THEN 'DELETING'
        WHEN 'Succeeded' THEN 'SUCCEEDED' WHEN 'Failed' THEN 'FAILED'
        WHEN 'Cancelled' THEN 'CANCELLED' WHEN 'Slurm' THEN 'SLURM'
        WHEN 'Created' THEN 'CREATED' WHEN 'Scaled' THEN 'SCALED' WHEN 'Fired' THEN 'FIRED'
        WHEN 'Skipped' THEN 'SKIPPED' WHEN 'Refused' THEN 'REFUSED'
        WHEN 'Paused' THEN 'PAUSED' WHEN 'Resumed' THEN 'RESUMED'
        ELSE 'LEGACY' END;
    UPDATE runs SET backfilled = 1 WHERE (
        SELECT e.code FROM events e WHERE e.run = runs.name AND e.grp IS NULL
        AND e.kind = 'Started' ORDER BY e.id DESC LIMIT 1) = 'BACKFILLED';
    """,
    # 9: the machine's drains: the whole machine ("machine") or one GPU (its index), who
    # drained it, when and why (runner/store/drains.py); they outlive a restart
    """
    CREATE TABLE IF NOT EXISTS drains (
        target TEXT PRIMARY KEY,
        reason TEXT NOT NULL,
        by_user TEXT NOT NULL,
        at REAL NOT NULL
    );
    """,
    # 10: one usage record per finished run (runner/store/usage.py), written with its
    # finish and kept after the run is forgotten: astra usage and astra history read them
    """
    CREATE TABLE usage_records (
        id INTEGER PRIMARY KEY,
        run_uid TEXT NOT NULL,
        run TEXT NOT NULL,
        workspace TEXT NOT NULL,
        owner TEXT NOT NULL,
        outcome TEXT NOT NULL,
        exit_code INTEGER,
        submitted_at REAL NOT NULL,
        started_at REAL,
        finished_at REAL NOT NULL,
        gpus INTEGER NOT NULL DEFAULT 0,
        gpu_seconds REAL NOT NULL DEFAULT 0,
        cpu_seconds REAL NOT NULL DEFAULT 0,
        wait_seconds REAL,
        preemptions INTEGER NOT NULL DEFAULT 0,
        restarts INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX usage_records_finished ON usage_records(finished_at);
    CREATE INDEX usage_records_run ON usage_records(run_uid);
    """,
    # 11: who holds a queued run (astra hold; NULL: not held): out of the order until released
    """
    ALTER TABLE runs ADD COLUMN held_by TEXT;
    """,
    # 12: the outbox of notifications (runner/store/outbox.py): each row written with the
    # event that causes it, deleted once delivered; ``failed`` once given up
    """
    CREATE TABLE outbox (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_uid TEXT NOT NULL,
        workspace TEXT NOT NULL,
        event TEXT NOT NULL,
        url TEXT NOT NULL,
        label TEXT NOT NULL,
        notice TEXT NOT NULL,
        created_at REAL NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        last_error TEXT,
        failed INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX outbox_pending ON outbox(failed, id);
    CREATE INDEX outbox_run ON outbox(run_uid);
    CREATE INDEX outbox_workspace ON outbox(workspace, failed);
    """,
    # 13: telemetry history (runner/store/telemetry.py): every sample of each GPU and each
    # running run (by its uid) for a day, ``coarse`` 5-minute means and peaks for a month
    """
    CREATE TABLE telemetry_gpus (
        at REAL NOT NULL,
        coarse INTEGER NOT NULL DEFAULT 0,
        samples INTEGER NOT NULL DEFAULT 1,
        gpu INTEGER NOT NULL,
        utilization REAL,
        utilization_peak REAL,
        memory_used INTEGER,
        memory_peak INTEGER,
        temperature REAL,
        power_watts REAL
    );
    CREATE INDEX telemetry_gpus_at ON telemetry_gpus(coarse, at);
    CREATE TABLE telemetry_runs (
        at REAL NOT NULL,
        coarse INTEGER NOT NULL DEFAULT 0,
        samples INTEGER NOT NULL DEFAULT 1,
        run_uid TEXT NOT NULL,
        workspace TEXT NOT NULL,
        gpus TEXT NOT NULL DEFAULT '',
        cpu_percent REAL,
        cpu_peak REAL,
        memory_bytes INTEGER,
        memory_peak INTEGER,
        gpu_memory_bytes INTEGER,
        gpu_memory_peak INTEGER,
        gpu_util REAL,
        gpu_util_peak REAL
    );
    CREATE INDEX telemetry_runs_at ON telemetry_runs(coarse, at);
    CREATE INDEX telemetry_runs_uid ON telemetry_runs(run_uid, coarse, at);
    """,
    # 14: the bytes of each run's stored spec, kept by triggers (the spec is never read to
    # count them): what a user's finished runs keep is bounded (max_kept_bytes_per_user)
    """
    ALTER TABLE runs ADD COLUMN spec_bytes INTEGER NOT NULL DEFAULT 0;
    UPDATE runs SET spec_bytes = length(CAST(spec AS BLOB));
    CREATE TRIGGER runs_spec_bytes_insert AFTER INSERT ON runs BEGIN
        UPDATE runs SET spec_bytes = length(CAST(NEW.spec AS BLOB)) WHERE rowid = NEW.rowid;
    END;
    CREATE TRIGGER runs_spec_bytes_update AFTER UPDATE OF spec ON runs BEGIN
        UPDATE runs SET spec_bytes = length(CAST(NEW.spec AS BLOB)) WHERE rowid = NEW.rowid;
    END;
    CREATE INDEX runs_uid_finished ON runs(uid, finished_at);
    """,
    # 15: the restart back-off (runner/engine/backoff.py): failures in a row, those that
    # exited at once in a row, and when a failed run may start again (both clocks, the boot)
    """
    ALTER TABLE runs ADD COLUMN fails INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE runs ADD COLUMN quick INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE runs ADD COLUMN restart_at REAL;
    ALTER TABLE runs ADD COLUMN restart_mono REAL;
    ALTER TABLE runs ADD COLUMN restart_boot TEXT;
    """,
    # 16: what a replay of the history needs of each usage record (astra sim --history):
    # the run's priority, time limit and workers, what one worker asked (a shared run's
    # memory on each GPU, cores, memory), and how long its workers ran. An older record
    # takes the priority, workers, cores and memory of its run where the store still
    # holds it (else 0, 1, 0 and none), and its time run from its GPU-seconds over its
    # GPUs (none for a run that held no GPU; 0 for one that never started)
    """
    ALTER TABLE usage_records ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE usage_records ADD COLUMN time_limit_seconds INTEGER;
    ALTER TABLE usage_records ADD COLUMN workers INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE usage_records ADD COLUMN gpu_memory INTEGER;
    ALTER TABLE usage_records ADD COLUMN cpus REAL NOT NULL DEFAULT 0;
    ALTER TABLE usage_records ADD COLUMN memory INTEGER;
    ALTER TABLE usage_records ADD COLUMN run_seconds REAL;
    UPDATE usage_records SET
        priority = COALESCE(
            (SELECT r.priority FROM runs r WHERE r.run_uid = usage_records.run_uid), 0),
        workers = MAX(1, (SELECT COUNT(DISTINCT w.worker) FROM workers w JOIN runs r
            ON r.name = w.run WHERE r.run_uid = usage_records.run_uid)),
        cpus = COALESCE((SELECT MAX(w.cpu_milli) / 1000.0 FROM workers w JOIN runs r
            ON r.name = w.run WHERE r.run_uid = usage_records.run_uid), 0),
        memory = (SELECT NULLIF(MAX(w.memory), 0) FROM workers w JOIN runs r
            ON r.name = w.run WHERE r.run_uid = usage_records.run_uid),
        run_seconds = CASE WHEN started_at IS NULL THEN 0
                           WHEN gpus > 0 THEN gpu_seconds / gpus END;
    """,
)
