"""The Apprise adapter: one notification to one URL, and why it was not delivered.

Apprise's Python API, without its command line's plugin folders or config files: only
the URL's own service is loaded. Whatever the URL asks (``cto``, ``rto``, ``retry``),
a send gives up after :data:`CONNECT_TIMEOUT` s to connect and :data:`READ_TIMEOUT` s
to read, and is not retried by Apprise: the sender retries, with its back-off.
"""

from __future__ import annotations

import io
import logging
import threading
from typing import Any

from runner.notify.outbox import Notice

MAX_ERROR = 300  # characters of Apprise's complaint kept in an event
CONNECT_TIMEOUT = 15.0  # Apprise's own default for mail; 4 s for the HTTP services
READ_TIMEOUT = 15.0


def deliver(url: str, notice: Notice) -> str | None:
    """Send ``notice`` to ``url``: None when delivered, else one line saying why not."""
    import apprise  # lazy: the sender's thread loads it, the CLI never does

    service = apprise.Apprise.instantiate(url)
    if service is None:
        return "Apprise cannot use this URL"
    with _complaints() as said:  # the service's own notify sends in this thread
        delivered = bounded(service).notify(
            title=notice.title(), body=notice.body(url), notify_type=notice.kind
        )
    if delivered:
        return None
    lines = [line.strip() for line in said.getvalue().splitlines() if line.strip()]
    why = lines[-1] if lines else "the service did not accept it"
    return " ".join(why.split())[:MAX_ERROR]


def bounded(service: Any) -> Any:
    """An Apprise service held to this module's timeouts, without retries of its own."""
    service.socket_connect_timeout = min(service.socket_connect_timeout, CONNECT_TIMEOUT)
    service.socket_read_timeout = min(service.socket_read_timeout, READ_TIMEOUT)
    if hasattr(service, "retry"):
        service.retry = 0
    return service


class _complaints:
    """Apprise's warnings of this thread's send only (several sends run at once)."""

    def __enter__(self) -> io.StringIO:
        self.text = io.StringIO()
        self.handler = logging.StreamHandler(self.text)
        self.handler.setLevel(logging.WARNING)
        self.handler.setFormatter(logging.Formatter("%(message)s"))
        me = threading.get_ident()
        self.handler.addFilter(lambda record: record.thread == me)
        self.logger = logging.getLogger("apprise")
        if self.logger.getEffectiveLevel() > logging.WARNING:
            self.logger.setLevel(logging.WARNING)
        self.logger.addHandler(self.handler)
        return self.text

    def __exit__(self, *exc: object) -> None:
        self.logger.removeHandler(self.handler)
