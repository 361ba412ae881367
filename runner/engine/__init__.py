"""The engine's loop on this machine: observe workers, enforce stops, settle outcomes, plan
and apply (starts, preemptions, reasons), groups, retention. May import telemetry,
executors, the planner, the store and the layers below them; never the API or service.
"""
