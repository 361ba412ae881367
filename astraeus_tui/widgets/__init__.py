"""The dashboard's widgets: one per module, each with its ``.tcss`` beside it."""

from __future__ import annotations

from pathlib import Path

from textual.message import Message
from textual.worker import Worker, WorkerState

from runner.oneline import one_line


def css_beside(module_file: str) -> str:
    """The ``.tcss`` file next to a widget's module, as its DEFAULT_CSS."""
    return Path(module_file).with_suffix(".tcss").read_text(encoding="utf-8")


class Latest(Message):
    """A message only the newest of which matters: one not yet handled gives way to the
    next of its kind (Toolong's ``can_replace``)."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, type(self))


class SaysFaults:
    """Mixed into each screen with workers: a worker that ends on an error it did not
    catch is said in a toast, never lost without a word. Each catches ``ApiError``, all a
    daemon and the connection to it may say; what is left is a fault of the dashboard's
    own, or an answer it cannot read (a daemon of another version)."""

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if event.state != WorkerState.ERROR:
            return
        what = "no error given" if worker.error is None else one_line(worker.error)
        worker.node.app.notify(f"could not finish {worker.name}: {what}", title="Dashboard",
                               severity="error")  # fmt: skip
