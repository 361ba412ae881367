"""The SQLite store, the one writer of SQL: runs, workers, events, groups, usage, the
notification outbox and telemetry, each write in its caller's transaction. Imports only
spec, config, notify and the bottom layers.
"""
