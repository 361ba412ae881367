"""Telemetry: what GPUs and running workers use, sampled every ``[machine]
telemetry_seconds`` by a thread of the daemon and kept for the last hour in memory.

``gpus`` reads NVML (or simulates GPUs from the runs holding them), ``procs`` measures a
worker's process tree with psutil, ``sampler`` is the thread and its ring buffers.
"""
