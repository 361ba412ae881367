"""No raw control characters in what a run shows to others.

A run's name, image, command, mount paths and the like end up in listings, events
and start-failure reasons that other people's terminals print: an escape sequence
there (``ESC ] 0;title BEL``, ``ESC [2J``) would act on their terminal, and a
bidirectional override would make the text read other than it is. So a submit
refuses, in every field that is one line of text, any character that is not
printable (:meth:`str.isprintable`: C0, DEL, C1, format characters such as the bidi
overrides U+202A-U+202E and U+2066-U+2069, line and paragraph separators, spaces
other than ' '). Arguments and environment values may hold a script (``bash -c``
with an #SBATCH file's lines), so there tab, newline and carriage return are fine
and only the other C0 characters, DEL and C1 are refused; the faces escape what
they show of them.

Checked at submit (and when a group's template makes a run), not when a stored
spec is read back: a run acknowledged before this rule keeps running.
"""

from __future__ import annotations

from runner.model import RunSpec
from runner.runspec.parse import SpecError

TASK = "spec.task_template"
_SCRIPT_OK = frozenset("\t\n\r")


def unprintable(text: str) -> str | None:
    """The first character of a one-line field that may not be shown; None when fine."""
    if text.isprintable():
        return None
    return next(c for c in text if not c.isprintable())


def control(text: str) -> str | None:
    """The first C0 (but tab, newline, CR), DEL or C1 character of a script; or None."""
    for c in text:
        code = ord(c)
        if (code < 0x20 and c not in _SCRIPT_OK) or 0x7F <= code <= 0x9F:
            return c
    return None


def _refuse(field: str, found: str, allowed: str) -> SpecError:
    return SpecError(field, f"must not contain control characters{allowed}, found {found!r}")


def check_line(text: str, field: str) -> None:
    """SpecError when ``text``, a one-line field, holds a character that is not printable."""
    found = unprintable(text)
    if found is not None:
        raise _refuse(field, found, " or other unprintable ones")


def check_script(text: str, field: str) -> None:
    """SpecError when ``text`` (an argument, an env value) holds a control character."""
    found = control(text)
    if found is not None:
        raise _refuse(field, found, " other than tab, newline and carriage return")


def check_spec(spec: RunSpec) -> None:
    """SpecError, naming the field, for the first character a face could not show as is."""
    check_line(spec.name, "metadata.name")
    if spec.workspace is not None:
        check_line(spec.workspace, "metadata.workspace")
    task = spec.task
    if task.image is not None:
        check_line(task.image, f"{TASK}.image")
    if task.command is not None:
        check_line(task.command, f"{TASK}.command")
    for i, arg in enumerate(task.args):
        check_script(arg, f"{TASK}.args[{i}]")
    for field, pairs in (("env", task.env), ("submit_env", task.submit_env)):
        for key, value in pairs:
            check_line(key, f"{TASK}.{field}")
            check_script(value, f"{TASK}.{field}.{key}")
    for key, folder in (("working_dir", task.working_dir), ("submit_dir", task.submit_dir)):
        if folder is not None:
            check_line(folder, f"{TASK}.{key}")
    for i, drive in enumerate(task.drives):
        check_line(drive.name, f"{TASK}.datavolume_refs[{i}].name")
        check_line(drive.mount_path, f"{TASK}.datavolume_refs[{i}].mount_path")
    for i, name in enumerate(spec.after):
        check_line(name, f"spec.after[{i}]")
