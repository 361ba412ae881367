"""Submit a run: from a form, or from a spec file (JSON, TOML or #SBATCH).

The form: Name, Image, Command, GPUs and Drives; **Edit as JSON** shows the spec
document they make, editable, kept in step with the fields; **More options**
holds Priority (its hint says the workspace's maximum), Time limit, CPU cores,
Memory, Workspace, Restarts and Folder (where the dashboard was opened, as ``astra run``
starts a run where it is called). The panel on the right shows the chosen
workspace's quota, its use and its Max priority.

Errors are shown at the field they are about: first what the form itself can
tell (a number that is not one, a duration that is not one), then the spec
rules of ``runner.runspec.parse`` (the same the daemon applies), then the daemon's own
answer, word for word (``403 PRIORITY_NOT_ALLOWED: …``).

Preview (ctrl+r) asks ``POST /v1/preview`` what a submit of the form would do
(position, start or wait, whom it would preempt) and shows it under the form;
nothing is submitted.
"""

from __future__ import annotations

import copy
import json
import os
import shlex
from pathlib import Path
from typing import Any, ClassVar, Literal

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Collapsible, Input, Label, Select, Static, TextArea

from astraeus_tui.client import ApiError, DashboardApi
from astraeus_tui.fmt import when
from astraeus_tui.form_fields import values_of, with_values
from astraeus_tui.screens.dialogs import priority_hint
from astraeus_tui.when import on_gpus
from astraeus_tui.widgets import SaysFaults
from astraeus_tui.widgets.workspaces_panel import UNITS, amount_text
from runner.runspec.build import FieldError, drive_list, here, run_document, time_limit

InputType = Literal["integer", "number", "text"]
Field = tuple[str, str, str, InputType]  # (field id, label, placeholder, input type)
MAIN_FIELDS: tuple[Field, ...] = (
    ("name", "Name", "e.g. ft-lowprio", "text"),
    ("image", "Image", "container image (ignored by the process executor)", "text"),
    ("command", "Command", "e.g. python3 /ckpt/code/train.py --steps 1000", "text"),
    ("gpus", "GPUs", "0", "integer"),
    ("drives", "Drives", "NAME:/mount[:ro], … e.g. checkpoints:/ckpt", "text"),
)
MORE_FIELDS: tuple[Field, ...] = (  # under More options; the workspace's Select sits after memory
    ("priority", "Priority", "0", "integer"),
    ("limit", "Time limit", "e.g. 2h, 90m, 1-00:00:00 (empty: none)", "text"),
    ("cpus", "CPU cores", "0", "number"),
    ("memory", "Memory", "e.g. 64GiB (empty: none asked)", "text"),
)
RESTARTS: Field = ("restarts", "Restarts", "at most, after a failure (empty: the daemon's 10)",
                   "integer")  # fmt: skip
FOLDER: Field = ("folder", "Folder", "where it starts (empty: your home; a container: its image's)",
                 "text")  # fmt: skip
SPEC_FIELDS = (  # where runner.runspec.parse and the daemon point, and the form field about it
    ("metadata.name", "name"), ("metadata.workspace", "workspace"), ("spec.priority", "priority"),
    ("spec.restart_limit", "restarts"),
    ("spec.task_template.image", "image"), ("spec.task_template.command", "command"),
    ("spec.task_template.args", "command"), ("spec.task_template.time_limit", "limit"),
    ("spec.task_template.datavolume_refs", "drives"),
    ("spec.task_template.working_dir", "folder"), ("spec.task_template.submit_dir", "folder"),
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
        submit_dir=here(),  # where the dashboard was opened: the Folder field's first text
    )  # fmt: skip


def _carried(document: dict[str, Any]) -> dict[str, Any]:
    """The form's run as sent: with the environment the dashboard was opened in, as
    ``astra run`` carries its shell's (kept out of the JSON shown: it is the machine's,
    not the run's own)."""
    from runner.runspec.build import with_submit_env

    sent = copy.deepcopy(document)
    with_submit_env(sent, os.environ)
    return sent


def check_document(document: dict[str, Any]) -> None:
    """The spec rules the daemon applies, at the field: FieldError if one is broken."""
    from runner.runspec.parse import SpecError, parse_spec

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
        lines.append(f"Would start now {how}, {on_gpus(p.get('gpus'))}.")
    else:
        lines.append(f"Would wait: {p.get('reason') or '?'} ({when(p.get('estimate'))}).")
    if p.get("preempts"):
        lines.append("Would preempt: " + ", ".join(p["preempts"]) + ".")
    lines.append("Nothing was submitted.")
    return "\n".join(lines)


def quota_text(ws: dict[str, Any]) -> Text:
    """The panel beside the form: the workspace's quota, its use, and its Max priority."""
    out = Text()
    out.append(str(ws.get("name") or "your default"), style="bold").append("\n\n")
    quota, used = ws.get("quota") or {}, ws.get("usage") or {}
    limited = [r for r in UNITS if quota.get(r)]
    if limited:
        out.append("used / quota\n", style="dim")
        for resource in limited:
            amount, limit = used.get(resource, 0), quota[resource]
            out.append(f"{UNITS[resource]:<8}").append(
                f"{amount_text(resource, amount)} / {amount_text(resource, limit)}\n",
                style="red" if amount >= limit else "",
            )
    else:
        out.append("no quota\n", style="dim")
    out.append("\nMax priority ", style="dim").append(str(ws.get("max_priority", 0)), style="bold")
    return out


class SubmitScreen(SaysFaults, ModalScreen[str | None]):
    """Dismissed with the submitted run's name, or None when cancelled.

    The fields, then the spec itself (Edit as JSON), kept in step: a field typed in is
    written into the JSON, JSON typed in fills the fields (``astraeus_tui.form_fields``).
    """

    CSS_PATH = "submit.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "submit", "Start run"),
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
        self._json: dict[str, Any] | None = None  # the spec as last edited, once JSON is shown
        self._json_error = ""  # why the JSON's text is not a spec, while it is not

    def compose(self) -> ComposeResult:
        with Vertical(classes="form") as form:
            form.border_title = "New run"
            with Horizontal(classes="body"):
                with VerticalScroll(id="fields"):
                    for field in MAIN_FIELDS:
                        yield from self._input_row(field)
                    with Horizontal(classes="json-bar"):
                        yield Button("Edit as JSON", id="edit-json", compact=True)
                    with Vertical(id="json-box"):
                        yield TextArea(id="json", soft_wrap=False, tab_behavior="indent")
                        yield Static("", id="error-json", classes="error")
                        yield Static("tab indents · esc leaves the JSON", classes="hint")
                    with Collapsible(title="More options", id="more"):
                        for field in MORE_FIELDS:
                            yield from self._input_row(field)
                        options = [(w["name"], w["name"]) for w in self.workspaces]
                        yield from self._row("workspace", "Workspace", Select(
                            options, prompt="(your default)", id="workspace"))  # fmt: skip
                        yield from self._input_row(RESTARTS)
                        yield from self._input_row(FOLDER)
                    yield Static("Or submit a spec file (JSON, TOML or #SBATCH):", classes="or")
                    yield from self._row("file", "Spec file", Input(placeholder="path/to/run.json",
                                                                    id="file"))  # fmt: skip
                    yield Static("", id="error-form", classes="error")
                    yield Static("", id="preview-answer")
                quota = Static("", id="quota")
                quota.border_title = "Quota"
                yield quota
            with Horizontal(classes="buttons"):
                yield Button("Cancel", id="cancel", compact=True)
                yield Button("Preview", id="preview", compact=True)
                yield Button("Submit file", id="submit-file", compact=True)
                yield Button("Start run", id="submit", variant="primary", compact=True)

    def _input_row(self, field: Field) -> ComposeResult:
        name, label, placeholder, kind = field
        yield from self._row(name, label, Input(placeholder=placeholder, id=name, type=kind))

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
        self.query_one("#json-box").display = False
        self.query_one("#folder", Input).value = here() or ""  # as astra run: started here
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
        self._clear_errors("workspace", "priority", "form")  # said of the other workspace
        target = self._target()
        limit = int(target.get("max_priority", 0))
        self.query_one("#priority-hint", Static).update(priority_hint(limit))
        self.query_one("#quota", Static).update(quota_text(target))
        image = self.query_one("#image", Input)
        if image.value == self._shown_image:  # untouched: follow the workspace's default
            image.value = self._shown_image = self._default_image()
        self._fields_changed()

    # ------------------------------------------------------------ the JSON

    def _json_shown(self) -> bool:
        return bool(self.query_one("#json-box").display)

    @on(Button.Pressed, "#edit-json")
    def action_edit_json(self) -> None:
        """Show the spec the fields make, editable; or hide it (what it says is kept)."""
        box, button = self.query_one("#json-box"), self.query_one("#edit-json", Button)
        if self._json_shown():
            box.display = False
            button.label = "Edit as JSON"
            return
        if self._json is None:
            try:
                self._json = self._from_fields(None)
            except FieldError as e:
                self.show_error(e.field, e.message)
                return
        self._write_json(self._json)
        box.display = True
        button.label = "Hide JSON"
        self.query_one("#json", TextArea).focus()

    def _write_json(self, document: dict[str, Any]) -> None:
        self.query_one("#json", TextArea).load_text(json.dumps(document, indent=2))
        self._json_error = ""
        self.show_error("json", "")

    def _from_fields(self, base: dict[str, Any] | None) -> dict[str, Any]:
        """The fields written into ``base`` (the JSON as last edited), or into the
        document the fields alone make (the same ``astra run`` makes)."""
        values = self.values()
        if base is None:
            base = build_document(values, values["workspace"] or None)
        return with_values(base, values)

    @on(Input.Changed)
    def _fields_changed(self, event: Input.Changed | None = None) -> None:
        """A field changed: its error is gone (what it said was of the old text); write
        it into the JSON, when the JSON is shown."""
        if event is not None and event.input.id:
            self._clear_errors(event.input.id)
        if self._json is None or not self._json_shown() or self._json_error:
            return
        if event is not None and event.input.id == "file":
            return
        try:
            document = self._from_fields(self._json)
        except FieldError as e:
            self.show_error(e.field, e.message)
            return
        self.show_error("form", "")
        if document != self._json:
            self._json = document
            self._write_json(document)

    @on(TextArea.Changed, "#json")
    def _json_changed(self, event: TextArea.Changed) -> None:
        """The JSON was typed in: fill the fields from it; if it is not JSON, say why."""
        if not event.text_area.has_focus:
            return  # written from the fields
        try:
            document = json.loads(event.text_area.text)
        except json.JSONDecodeError as e:
            document, why = None, f"JSON: {e}"
        else:
            why = "" if isinstance(document, dict) else "JSON: a spec is an object, {…}"
        self._json_error = why
        self.show_error("json", why)
        if why or not isinstance(document, dict):
            return
        self._json = document
        for field, text in values_of(document).items():
            self._show_value(field, text)

    def _show_value(self, field: str, text: str) -> None:
        if field == "workspace":
            select = self.query_one("#workspace", Select)
            known = any(w.get("name") == text for w in self.workspaces)
            if not text:
                select.clear()
            elif known and select.value != text:
                select.value = text
            return
        box = self.query_one(f"#{field}", Input)
        if box.value != text:
            box.value = text

    # ------------------------------------------------------------ errors

    def show_error(self, field: str, text: str) -> None:
        """One error at ``field`` (or at the form), every other one cleared."""
        for error in self.query(".error").results(Static):
            mine = error.id == f"error-{field}"
            error.update(text if mine else "")
            error.display = mine and bool(text)
        for widget in self.query("Input, Select, TextArea"):
            widget.set_class(widget.id == field and bool(text), "-invalid")
        if not text:
            return
        if any(field == f[0] for f in (*MORE_FIELDS, RESTARTS, FOLDER)) or field == "workspace":
            self.query_one("#more", Collapsible).collapsed = False
        target = self.query(f"#error-{field}").first()
        self.call_after_refresh(target.scroll_visible)

    def _clear_errors(self, *fields: str) -> None:
        """Take back what was said at ``fields`` (each other error stays)."""
        for field in fields:
            for error in self.query(f"#error-{field}").results(Static):
                error.update("")
                error.display = False
            for widget in self.query(f"#{field}"):
                widget.remove_class("-invalid")

    # ------------------------------------------------------------ submitting

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.dismiss(None)

    def values(self) -> dict[str, str]:
        values = {w.id or "": w.value for w in self.query(Input).results(Input)}
        chosen = self.query_one("#workspace", Select).value
        values["workspace"] = chosen if isinstance(chosen, str) else ""
        return values

    def checked_document(self) -> dict[str, Any] | None:
        """The run spec (the fields, and the JSON where it was edited), or None with the
        error shown at its field (at the JSON while it is shown)."""
        if self._json_error:
            self.show_error("json", self._json_error)
            return None
        try:
            document = self._from_fields(self._json)
            check_document(document)
        except FieldError as e:
            self.show_error(self._where(e.field), e.message)
            return None
        self.show_error("form", "")
        return document

    def _where(self, field: str) -> str:
        """Where a refusal of the spec is shown: at its field, or at the JSON if shown."""
        return "json" if self._json_shown() and field not in self.values() else field

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
            answer = await self.client.preview(_carried(document))
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
        from runner.runspec.build import with_submit_dir
        from runner.runspec.documents import load_spec_file
        from runner.runspec.parse import SpecError, spec_to_dict

        try:  # a script carries the environment as its --export says, as astra submit's
            spec = load_spec_file(Path(path).expanduser(), os.environ)
            document = spec_to_dict(spec)
            with_submit_dir(document)  # the process executor starts it here
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
        try:  # a file's spec says its environment itself (a script's, as it exported)
            run = await self.client.submit(document if field == "file" else _carried(document))
        except ApiError as e:
            where = field or CODE_FIELDS.get(e.code) or field_for(e.message)
            self.post_message(self.Refused(where, str(e)))
            return
        self.post_message(self.Submitted(str(run.name)))

    def on_submit_screen_submitted(self, message: Submitted) -> None:
        self.dismiss(message.name)

    def on_submit_screen_refused(self, message: Refused) -> None:
        self._preview_shown("")
        self.show_error(message.field if message.field == "file" else self._where(message.field),
                        message.error)  # fmt: skip
