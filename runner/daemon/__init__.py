"""The daemon as a whole: what ``astra serve`` starts (the store, the service, the back end,
the API, telemetry, notifications), ``astra doctor``'s checks, and the system install. The
top layer: it may import every other package of ``runner``.
"""
