"""Submit a run: from a form, or from a spec file (JSON, TOML or #SBATCH).

Errors are shown at the field they are about: first what the form itself can
tell (a number that is not one, a duration that is not one), then the spec
rules of ``runner.spec.parse`` (the same the daemon applies), then the daemon's own
answer, word for word (``403 PRIORITY_NOT_ALLOWED: …``).

Preview (ctrl+r) asks ``POST /v1/preview`` what a submit of the form would do
(position, start or wait, whom it would preempt) and shows it under the form;
nothing is submitted.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, ClassVar, Literal

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static

from astraeus_tui.client import ApiError, DashboardApi
from astraeus_tui.fmt import when
from astraeus_tui.screens.dialogs import priority_hint
from runner.spec.build import FieldError, drive_list, run_document, time_limit

InputType = Literal["integer", "number", "text"]
# (field id, label, placeholder, input type)
FIELDS: tuple[tuple[str, str, str, InputType], ...] = (
    ("name", "Name", "e.g. ft-lowprio", "text"),
    ("image", "Image", "container image (ignored by the process executor)", "text"),
    ("command", "Command", "e.g. python3 /ckpt/code/train.py --steps 1000", "text"),
    ("gpus", "GPUs", "0", "integer"),
    ("cpus", "CPU cores", "0", "number"),
    ("memory", "Memory", "e.g. 64GiB (empty: none asked)", "text"),
    ("limit", "Time limit", "e.g. 2h, 90m, 1-00:00:00 (empty: none)", "text"),
    ("priority", "Priority", "0", "integer"),
)
SPEC_FIELDS = (  # where runner.spec.parse and the daemon point, and the form field that is about it
    ("metadata.name", "name"), ("metadata.workspace", "workspace"), ("spec.priority", "priority"),
    ("spec.task_template.image", "image"), ("spec.task_template.command", "command"),
    ("spec.task_template.args", "command"), ("spec.task_template.time_limit", "limit"),
    ("spec.task_template.datavolume_refs", "drives"),
    ("spec.task_template.requested_resources.gpu", "gpus"),
    ("spec.task_template.requested_resources.cpu", "cpus"),
    ("spec.task_template.requested_resources.memory", "memory"),
)  # fmt: skip
CODE_FIELDS = {"PRIORITY_NOT_ALLOWED": "priority", "NAME_IN_USE": "name",
               "DRIVE_NOT_ALLOWED": "drives", "FORBIDDEN": "workspace"}  # fmt: skip


def field_for(message: str) -> str:
    """The form field a spec error (``spec.task_template.image: …``) is about."""
    path = message.split(": ", 1)[0]
    return next((f for prefix, f in SPEC_FIELDS if path.startswith(prefix)), "form")


def _number(values: dict[str, str], field: str, kind: type[int] | type[float]) -> Any:
    text = values.get(field, "").strip() or "0"
    try:
        return kind(text)
    except ValueError:
        raise FieldError(field, f"{text!r} is not a number") from None


def build_document(values: dict[str, str], workspace: str | None) -> dict[str, Any]:
    """The run spec the form describes; FieldError at the first field that cannot be read."""
    try:
        argv = shlex.split(values.get("command", ""))
    except ValueError as e:
        raise FieldError("command", str(e)) from None
    if not argv:
        raise FieldError("command", "give the command to run")
    gpus, cpus = _number(values, "gpus", int), _number(values, "cpus", float)
    drives = drive_list(values.get("drives", ""))
    limit = values.get("limit", "").strip()
    seconds = time_limit(values["limit"]) if limit else None
    return run_document(
        values.get("name", "").strip(), argv, image=values.get("image", "").strip(), gpus=gpus,
        cpus=cpus, memory=values.get("memory", "").strip() or None, time_limit_seconds=seconds,
        priority=_number(values, "priority", int), workspace=workspace, drives=drives,
    )  # fmt: skip


def check_document(document: dict[str, Any]) -> None:
    """The spec rules the daemon applies, at the field: FieldError if one is broken."""
    from runner.spec.parse import SpecError, parse_spec

    try:
        parse_spec(document)
    except SpecError as e:
        raise FieldError(field_for(str(e)), f"422 INVALID_SPEC: {e}") from None


def preview_text(p: dict[str, Any]) -> str:
    """``POST /v1/preview``'s answer as lines, as ``astra submit --dry-run`` says it."""
    lines = [
        f"Preview: position {p.get('position')} of {p.get('queue_length')}."
        if p.get("position") is not None
        else "Preview: not in the order until its dependencies succeed."
    ]
    if p.get("starts_now"):
        how = "by backfill" if p.get("backfill") else "at once"
        gpus = ", ".join(map(str, p.get("gpus") or [])) or "none"
        lines.append(f"Would start now {how}, on GPUs {gpus}.")
    else:
        lines.append(f"Would wait: {p.get('reason') or '?'} ({when(p.get('estimate'))}).")
    if p.get("preempts"):
        lines.append("Would preempt: " + ", ".join(p["preempts"]) + ".")
    lines.append("Nothing was submitted.")
    return "\n".join(lines)


class SubmitScreen(ModalScreen[str | None]):
    """Dismissed with the submitted run's name, or None when cancelled."""

    CSS_PATH = "submit.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "submit", "Submit"),
        Binding("ctrl+r", "preview", "Preview", tooltip="What a submit would do; submits nothing"),
    ]

    class Submitted(Message):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

    class Previewed(Message):
        def __init__(self, answer: dict[str, Any]) -> None:
            super().__init__()
            self.answer = answer

    class Refused(Message):
        def __init__(self, field: str, error: str) -> None:
            super().__init__()
            self.field, self.error = field, error

    def __init__(self, client: DashboardApi, workspaces: list[dict[str, Any]]) -> None:
        super().__init__()
        self.client, self.workspaces = client, workspaces
        self._shown_image = ""  # the default image last put in the Image field

    def compose(self) -> ComposeResult:
        with Vertical(classes="form") as form:
            form.border_title = "New run"
            with VerticalScroll():
                for field, label, placeholder, kind in FIELDS:
                    yield from self._row(field, label, Input(placeholder=placeholder, id=field,
                                                             type=kind))  # fmt: skip
                options = [(w["name"], w["name"]) for w in self.workspaces]
                yield from self._row("workspace", "Workspace", Select(
                    options, prompt="(your default)", id="workspace"))  # fmt: skip
                yield from self._row(
                    "drives",
                    "Drives",
                    Input(placeholder="NAME:/mount[:ro], … e.g. checkpoints:/ckpt", id="drives"),
                )
                yield Static("Or submit a spec file (JSON, TOML or #SBATCH):", classes="or")
                yield from self._row("file", "Spec file", Input(placeholder="path/to/run.json",
                                                                id="file"))  # fmt: skip
                yield Static("", id="error-form", classes="error")
                yield Static("", id="preview-answer")
            with Horizontal(classes="buttons"):
                yield Button("Cancel", id="cancel", compact=True)
                yield Button("Preview", id="preview", compact=True)
                yield Button("Submit file", id="submit-file", compact=True)
                yield Button("Submit", id="submit", variant="primary", compact=True)

    def _row(self, field: str, label: str, widget: Input | Select[str]) -> ComposeResult:
        with Horizontal(classes="row"):
            yield Label(label, classes="label")
            with Vertical(classes="field"):
                yield widget
                yield Static("", id=f"error-{field}", classes="error")
                if field == "priority":
                    yield Static(priority_hint(None), id="priority-hint", classes="hint")

    def on_mount(self) -> None:
        for box in self.query(Input).results(Input):
            box.cursor_blink = False
        self.query_one("#name", Input).focus()
        self._update_hint()  # and the Image field: the daemon's default image

    def _target(self) -> dict[str, Any]:
        """The workspace the run would go to: the one chosen, else the caller's default."""
        chosen = self.query_one("#workspace", Select).value
        found = next((w for w in self.workspaces if w.get("name") == chosen), None)
        return found or next((w for w in self.workspaces if w.get("default")), {})

    def _default_image(self) -> str:
        """The image the daemon gives a run in that workspace when it names none."""
        return str(self._target().get("default_image") or "local")

    @on(Select.Changed, "#workspace")
    def _update_hint(self) -> None:
        limit = int(self._target().get("max_priority", 0))
        self.query_one("#priority-hint", Static).update(priority_hint(limit))
        image = self.query_one("#image", Input)
        if image.value == self._shown_image:  # untouched: follow the workspace's default
            image.value = self._shown_image = self._default_image()

    # ------------------------------------------------------------ errors

    def show_error(self, field: str, text: str) -> None:
        """One error at ``field`` (or at the form), every other one cleared."""
        for error in self.query(".error").results(Static):
            mine = error.id == f"error-{field}"
            error.update(text if mine else "")
            error.display = mine and bool(text)
        for widget in self.query("Input, Select"):
            widget.set_class(widget.id == field and bool(text), "-invalid")
        if text:
            target = self.query(f"#error-{field}").first()
            self.call_after_refresh(target.scroll_visible)

    # ------------------------------------------------------------ submitting

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.dismiss(None)

    def values(self) -> dict[str, str]:
        return {w.id or "": w.value for w in self.query(Input).results(Input)}

    def checked_document(self) -> dict[str, Any] | None:
        """The form as a run spec, or None with the error shown at its field."""
        chosen = self.query_one("#workspace", Select).value
        workspace = chosen if isinstance(chosen, str) else None
        try:
            document = build_document(self.values(), workspace)
            check_document(document)
        except FieldError as e:
            self.show_error(e.field, e.message)
            return None
        self.show_error("form", "")
        return document

    @on(Button.Pressed, "#submit")
    def action_submit(self) -> None:
        document = self.checked_document()
        if document is not None:
            self.send(document)

    @on(Button.Pressed, "#preview")
    def action_preview(self) -> None:
        document = self.checked_document()
        if document is None:
            self._preview_shown("")
        else:
            self.ask_preview(document)

    def _preview_shown(self, text: str) -> None:
        answer = self.query_one("#preview-answer", Static)
        answer.update(text)
        answer.display = bool(text)
        if text:
            self.call_after_refresh(answer.scroll_visible)

    @work(exclusive=True, group="preview", exit_on_error=False)
    async def ask_preview(self, document: dict[str, Any]) -> None:
        try:
            answer = await self.client.preview(document)
        except ApiError as e:
            where = CODE_FIELDS.get(e.code) or field_for(e.message)
            self.post_message(self.Refused(where, str(e)))
            return
        self.post_message(self.Previewed(answer))

    def on_submit_screen_previewed(self, message: Previewed) -> None:
        self.show_error("form", "")
        self._preview_shown(preview_text(message.answer))

    @on(Button.Pressed, "#submit-file")
    def _submit_file(self) -> None:
        path = self.query_one("#file", Input).value.strip()
        if not path:
            self.show_error("file", "give the path of a spec file")
            return
        from runner.spec.documents import load_spec_file
        from runner.spec.parse import SpecError, spec_to_dict

        try:
            document = spec_to_dict(load_spec_file(Path(path).expanduser()))
        except SpecError as e:
            self.show_error("file", f"422 INVALID_SPEC: {e}")
            return
        self.show_error("file", "")
        self.send(document, field="file")

    @on(Input.Submitted)
    def _enter(self, event: Input.Submitted) -> None:
        if event.input.id == "file":
            self._submit_file()
        else:
            self.action_submit()

    @work(exclusive=True, group="submit", exit_on_error=False)
    async def send(self, document: dict[str, Any], field: str | None = None) -> None:
        try:
            run = await self.client.submit(document)
        except ApiError as e:
            where = field or CODE_FIELDS.get(e.code) or field_for(e.message)
            self.post_message(self.Refused(where, str(e)))
            return
        self.post_message(self.Submitted(str(run.name)))

    def on_submit_screen_submitted(self, message: Submitted) -> None:
        self.dismiss(message.name)

    def on_submit_screen_refused(self, message: Refused) -> None:
        self._preview_shown("")
        self.show_error(message.field, message.error)
