"""``astra sim``: a workload replayed through the real engine on a virtual clock.

``trace`` reads workloads (this project's CSV, the Alibaba GPU trace, SWF, the daemon's
own history) into :class:`trace.TraceRun`; ``virtual`` is the clock that jumps to the
next event and the executor whose workers last as long as the trace says; ``replay``
drives the daemon's own loop, planner, store and lifecycle with them (or one of the
baseline planners of ``policies`` in the planner's place); ``report`` measures the
outcome.
"""
