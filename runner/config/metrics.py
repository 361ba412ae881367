"""``[api]``'s metrics keys: where ``GET /metrics`` is served besides the socket, and whether
runs are named in it.

``metrics_address = "127.0.0.1:9480"`` (``host:port``; unset: no TCP listener) serves only
``GET /metrics`` (Prometheus text) on that address, read-only; ``metrics_run_names = true``
(default false) adds a series per running run, labelled with its name, for every scraper to
read. Both are read at the daemon's start.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from runner.config.checks import _Invalid, _show, _Table

__all__ = ["METRICS_KEYS", "MetricsConfig", "parse_metrics"]

METRICS_KEYS = ("metrics_address", "metrics_run_names")
_HOSTNAME_RE = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                          r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")  # fmt: skip
_FORM = 'must be host:port, e.g. "127.0.0.1:9480" or "[::1]:9480"'


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    """``address``: (host, port) of the TCP listener, None for none; ``run_names``: whether
    the per-run series (named by run) are served."""

    address: tuple[str, int] | None = None
    run_names: bool = False

    @property
    def where(self) -> str:
        """The address as written: ``host:port``, ``[v6]:port``; empty when unset."""
        if self.address is None:
            return ""
        host, port = self.address
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _address(value: object, path: str) -> tuple[str, int] | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > 300:
        raise _Invalid(path, f"{_FORM}, got {_show(value)}")
    host, sep, port = value.rpartition(":")
    if host.startswith("[") and host.endswith("]"):  # an IPv6 literal in brackets
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise _Invalid(path, f"{_FORM}, got {_show(value)}") from None
    elif not _HOSTNAME_RE.fullmatch(host):  # an IPv4 literal matches too
        raise _Invalid(path, f"{_FORM}, got {_show(value)}")
    if (
        not sep
        or not (port.isascii() and port.isdigit())
        or len(port) > 5
        or not 0 < int(port) <= 65535
    ):
        raise _Invalid(path, f"{_FORM} (a port from 1 to 65535), got {_show(value)}")
    return host, int(port)


def parse_metrics(api: _Table) -> MetricsConfig:
    """The metrics keys of the ``[api]`` table (its keys already checked)."""
    run_names = api.get("metrics_run_names", False)
    if not isinstance(run_names, bool):
        raise _Invalid("api.metrics_run_names", f"must be true or false, got {_show(run_names)}")
    return MetricsConfig(_address(api.get("metrics_address"), "api.metrics_address"), run_names)
