"""What runs the work: the process executor (supervised local processes in cgroups, under
bubblewrap) and the Docker executor, behind one protocol (``base.py``). Executors never
decide; they start, signal and observe. May import the planner, the store, spec, config
and the layers below them.
"""
