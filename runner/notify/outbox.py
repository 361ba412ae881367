"""One queued notification: what the store's outbox holds, and the text it is sent as.

The store writes a :class:`Notice` in the transaction of the event that causes it
(runner/store/outbox.py), so a change acknowledged is never without its notification,
whatever happens next; the sender (runner/notify/sender.py) delivers it. Its fields are
fixed when it is queued: the run's name, id, workspace, state, exit code and the event's
text as the run's own workspace reads it (another workspace's run is never named); a
start's also the start the run was first forecast, when it was.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from runner.notify.targets import MACHINE_SCHEMES, NotifyEvent, scheme_of

# a start's forecast as its run was first shown it: (likely start, 90 % start), epoch seconds
StartForecast = tuple[float, float]

MAX_REASON = 1000  # characters of the event's text kept in a notification
MAX_BODY = 4096  # characters of a notification's body

# Apprise's notification types, by event: the colour or icon a chat shows
_KIND = {
    NotifyEvent.SUCCEEDED: "success",
    NotifyEvent.FAILED: "failure",
    NotifyEvent.PREEMPTED: "warning",
    NotifyEvent.TIMELIMIT: "warning",
    NotifyEvent.STARTED: "info",
}


@dataclass(frozen=True, slots=True)
class Notice:
    """What one notification says."""

    event: NotifyEvent
    run: str
    run_uid: str
    workspace: str
    state: str
    exit_code: int | None
    reason: str
    time: float
    # a start's: the likely and 90 % starts the run was first forecast (None: none was)
    forecast: StartForecast | None = None

    def to_json(self) -> str:
        return json.dumps(self.fields(), sort_keys=True)

    def fields(self) -> dict[str, object]:
        out: dict[str, object] = {
            "event": self.event.value,
            "run": self.run,
            "uid": self.run_uid,
            "workspace": self.workspace,
            "state": self.state,
            "exit_code": self.exit_code,
            "reason": self.reason[:MAX_REASON],
            "time": self.time,
        }
        if self.forecast is not None:
            out["likely_start"], out["likely_start_90"] = self.forecast
        return out

    @staticmethod
    def from_json(text: str) -> Notice:
        data = json.loads(text)
        code = data.get("exit_code")
        likely, high = data.get("likely_start"), data.get("likely_start_90")
        forecast = None if likely is None or high is None else (float(likely), float(high))
        return Notice(
            NotifyEvent(str(data["event"])), str(data["run"]), str(data["uid"]),
            str(data["workspace"]), str(data["state"]),
            code if isinstance(code, int) else None, str(data["reason"]), float(data["time"]),
            forecast,
        )  # fmt: skip

    @property
    def kind(self) -> str:
        return _KIND[self.event]

    def title(self) -> str:
        return f"Astraeus: run {self.run} {self.event.value}"

    def body(self, url: str) -> str:
        """A JSON object for the schemes programs read (json, form, xml); lines for people."""
        if scheme_of(url) in MACHINE_SCHEMES:
            return self.to_json()[:MAX_BODY]
        lines = [
            f"run: {self.run} ({self.run_uid})",
            f"workspace: {self.workspace}",
            f"state: {self.state}",
            f"exit code: {'-' if self.exit_code is None else self.exit_code}",
            f"reason: {self.reason[:MAX_REASON]}",
        ]
        return "\n".join(lines)[:MAX_BODY]


@dataclass(frozen=True, slots=True)
class Pending:
    """A row of the outbox, as the sender reads it."""

    id: int
    url: str
    label: str  # the URL as events show it (runner.notify.targets.label)
    notice: Notice
    attempts: int
