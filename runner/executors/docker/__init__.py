"""The Docker executor: one container per worker, its labels, its logs, its GPUs by the
NVIDIA runtime's device requests."""
