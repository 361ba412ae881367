"""The planner: a pure function from a snapshot of the machine and the queue to a plan
(starts, preemptions, reasons, the head's shadow time), documented by its invariants.
Imports only ``runner.model``, ``runner.reasons``, ``runner.durations`` (how a message
says a duration) and the standard library (no clock, no files: ``pyproject.toml``'s
contract forbids them).
"""
