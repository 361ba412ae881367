"""The SQLite store, the one writer of SQL: runs, workers, events, groups, usage, the
notification outbox and telemetry, each write in its caller's transaction.

:class:`runner.store.db.Store` is composed: one core (runner/store/core.py: a connection
per thread, the writer's lock, transactions, the generation, the queue's cache) and a
repository per family of tables, each given the core and the repositories it reads:
``store.runs``, ``store.workers``, ``store.events``, ``store.groups``, ``store.templates``,
``store.drains``, ``store.usage``, ``store.forget`` and ``store.outbox``. Imports only
spec, config, notify and the bottom layers.
"""
