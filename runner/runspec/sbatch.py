"""Slurm batch files: the #SBATCH options Astraeus understands, turned into a run spec.

The script becomes the command (``bash -c <script>``); the options become the
same document :mod:`runner.runspec.parse` validates, so errors read the same, named by
the #SBATCH option.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from runner.durations import slurm_seconds
from runner.model import MAX_PRIORITY, MIN_PRIORITY, MountMode, RunSpec
from runner.notify.targets import mail_events, mail_url
from runner.runspec.begin import begin_from_slurm, iso_begin
from runner.runspec.parse import SCRIPT, JsonObject, SpecError, parse_spec, show_value

# ------------------------------------------------------------------ #SBATCH files

_SBATCH_ALIASES = {
    "-J": "--job-name", "-t": "--time", "-c": "--cpus-per-task", "-G": "--gpus",
    "-d": "--dependency", "-b": "--begin", "-H": "--hold", "-D": "--chdir",
}  # fmt: skip
_FLAGS = ("--hold",)  # options without a value
_TIME_FORMS = "MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED"
_MEM_RE = re.compile(r"([0-9]{1,15})([KMGTkmgt]?)")
_COUNT_RE = re.compile(r"[0-9]{1,9}")
_NICE_RE = re.compile(r"[-+]?[0-9]{1,9}")
_GRES_TYPE_RE = re.compile(r"(?=[A-Za-z0-9_.-]*[A-Za-z])[A-Za-z0-9_.-]{1,64}")  # a100, 1g.5gb
_MEM_UNITS = {"": 1024**2, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_SHELLS = ("bash", "sh")

_TEMPLATE = "spec.task_template"
_RES = f"{_TEMPLATE}.requested_resources"
# Where parse_spec's fields come from in a batch file, for its error messages.
_SBATCH_FIELDS = {
    "metadata.name": "#SBATCH --job-name",
    "spec.priority": "#SBATCH --nice",
    "spec.after": "#SBATCH --dependency",
    "spec.begin_at": "#SBATCH --begin",
    "spec.hold": "#SBATCH --hold",
    f"{_TEMPLATE}.image": "#SBATCH --container-image",
    f"{_TEMPLATE}.args": SCRIPT,
    f"{_TEMPLATE}.time_limit_seconds": "#SBATCH --time",
    f"{_TEMPLATE}.working_dir": "#SBATCH --chdir",
    f"{_TEMPLATE}.submit_env": "#SBATCH --export",
    f"{_TEMPLATE}.env": "#SBATCH --export",
    f"{_TEMPLATE}.datavolume_refs": "#SBATCH --container-mounts",
    f"{_RES}.gpu_requests": "#SBATCH --gres",
    f"{_RES}.per_gpu.cpu_cores": "#SBATCH --cpus-per-gpu",
    f"{_RES}.per_gpu.memory_bytes": "#SBATCH --mem-per-gpu",
    f"{_RES}.cpu_cores": "#SBATCH --cpus-per-task",
    f"{_RES}.memory_bytes": "#SBATCH --mem",
}


class _Batch:
    """What the #SBATCH header asks for, as spec fields, and which option set each."""

    def __init__(self, now: float) -> None:
        self.now = now  # the wall clock as the file is read: ``--begin=now+1hour`` counts from it
        self.values: dict[str, object] = {}
        self.origin: dict[str, str] = dict(_SBATCH_FIELDS)
        self.mail: dict[str, str] = {}  # --mail-type and --mail-user, read together
        self.export: str | None = None  # --export, applied to the caller's environment

    def set(self, field: str, value: object, option: str) -> None:
        self.values[field] = value
        self.origin[field] = option

    def document(self) -> JsonObject:
        doc: JsonObject = {}
        for dotted, value in self.values.items():
            *parents, leaf = dotted.split(".")
            node = doc
            for part in parents:
                child = node.setdefault(part, {})
                assert isinstance(child, dict)
                node = child
            node[leaf] = value
        return doc

    def option_for(self, field: str) -> str | None:
        matches = [f for f in self.origin if field == f or field.startswith((f + ".", f + "["))]
        return self.origin[max(matches, key=len)] if matches else None


def parse_sbatch(
    text: str, *, name_hint: str | None = None, nice: int | None = None, now: float | None = None,
    environ: Mapping[str, str] | None = None,
) -> RunSpec:  # fmt: skip
    """A RunSpec from a Slurm batch script's #SBATCH header; the script runs as ``bash -c``.

    ``name_hint`` (e.g. the file's stem) names the run when there is no --job-name;
    ``nice`` overrides the file's --nice (priority = -nice); ``now``: the wall clock
    relative begin times count from (default: read now). ``environ``: the submitting
    shell's environment, carried as ``--export`` says (default ALL, as sbatch's).
    """
    if "\r" in text:  # a lone \r can also hide an #SBATCH line from one reader or another
        raise SpecError(SCRIPT, "has carriage returns (DOS line breaks?); convert it with dos2unix")
    batch = _Batch(time.time() if now is None else now)
    batch.set(f"{_TEMPLATE}.command", _shell(text), SCRIPT)
    batch.set(f"{_TEMPLATE}.args", ["-c", text], SCRIPT)
    hint = _sanitise_name(name_hint) if name_hint else None
    if hint:
        batch.set("metadata.name", hint, "#SBATCH --job-name")
    for tokens in _header_lines(text):
        _apply_options(batch, tokens)
    if nice is not None:
        batch.set("spec.priority", -_nice_value(str(nice), "--nice"), "--nice")
    _mail(batch)
    if environ is not None:
        _carry(batch, environ)
    if "metadata.name" not in batch.values:
        raise SpecError("#SBATCH --job-name", "required (no job name and no file name to use)")
    return _validate_batch(batch)


def _shell(text: str) -> str:
    """The shell of the ``#!`` line (bash or sh) that runs the script; bash without one."""
    first = text.split("\n", 1)[0]
    if not first.startswith("#!"):
        return "bash"
    words = first[2:].split()
    if words and Path(words[0]).name == "env":
        words = [w for w in words[1:] if not w.startswith("-")]
    shell = Path(words[0]).name if words else "bash"
    if shell not in _SHELLS:
        raise SpecError(
            "#!", f"only bash or sh batch scripts are supported, got {show_value(shell)}"
        )
    return shell


def _validate_batch(batch: _Batch) -> RunSpec:
    try:
        return parse_spec(batch.document())
    except SpecError as error:
        option = batch.option_for(error.field)
        if option is None:
            raise
        raise SpecError(option, error.reason) from None


def _sanitise_name(hint: str) -> str:
    name = re.sub(r"[^a-z0-9]+", "-", hint.lower()).strip("-")
    return name[:63].rstrip("-")


def _header_lines(text: str) -> list[list[str]]:
    """The words of each #SBATCH line before the script's first command, as Slurm reads them."""
    found: list[list[str]] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if number == 1 and line.startswith("#!"):
            continue
        if line == "#SBATCH" or (line.startswith("#SBATCH") and line[7:8].isspace()):
            found.append(_words(line[7:], number))
        elif line.strip() and not line.lstrip().startswith("#"):
            break
    return found


def _words(rest: str, number: int) -> list[str]:
    try:
        words = shlex.split(rest)
    except ValueError as error:
        raise SpecError(f"#SBATCH (line {number})", f"cannot split: {error}") from None
    for index, word in enumerate(words):
        if word.startswith("#"):  # a comment after the options
            return words[:index]
    return words


def _apply_options(batch: _Batch, words: list[str]) -> None:
    index = 0
    while index < len(words):
        option, value, index = _next_option(words, index)
        _SBATCH_HANDLERS[option](batch, value, f"#SBATCH {option}")


def _next_option(words: list[str], index: int) -> tuple[str, str | None, int]:
    """(canonical option, its value or None, index of the next word)."""
    word = words[index]
    if word.startswith("--"):
        option, eq, value = word.partition("=")
        inline: str | None = value if eq else None
    elif word.startswith("-") and len(word) > 1:
        option, inline = word[:2], word[2:] or None
    else:
        raise SpecError("#SBATCH", f"expected an option, got {show_value(word)}")
    option = _SBATCH_ALIASES.get(option, option)
    if option not in _SBATCH_HANDLERS:
        supported = ", ".join(sorted(_SBATCH_HANDLERS))
        raise SpecError(f"#SBATCH {option}", f"not supported (supported: {supported})")
    if option in _FLAGS:
        if inline is not None:
            raise SpecError(f"#SBATCH {option}", "takes no value")
        return option, None, index + 1
    if inline is not None:
        return option, inline, index + 1
    follows = words[index + 1] if index + 1 < len(words) else None
    if option == "--nice" and (follows is None or not _NICE_RE.fullmatch(follows)):
        return option, None, index + 1
    if follows is None:
        raise SpecError(f"#SBATCH {option}", "needs a value")
    return option, follows, index + 2


def _job_name(batch: _Batch, value: str | None, option: str) -> None:
    batch.set("metadata.name", value, option)


def _nice(batch: _Batch, value: str | None, option: str) -> None:
    batch.set("spec.priority", -_nice_value(value or "100", option), option)


def _nice_value(value: str, field: str) -> int:
    if not _NICE_RE.fullmatch(value):
        raise SpecError(field, f"must be an integer, got {show_value(value)}")
    nice = int(value)
    if not -MAX_PRIORITY <= nice <= -MIN_PRIORITY:
        low, high = -MAX_PRIORITY, -MIN_PRIORITY
        raise SpecError(field, f"must be between {low} and {high} (priority = -nice), got {nice}")
    return nice


def _dependency(batch: _Batch, value: str | None, option: str) -> None:
    """``afterok:RUN[:RUN...]``: runs named here (Slurm's job ids are Astraeus's run names)."""
    kind, _, names = (value or "").partition(":")
    if kind != "afterok" or not names:
        raise SpecError(option, f"only afterok:RUN[:RUN...] is understood, got {show_value(value)}")
    batch.set("spec.after", names.split(":"), option)


def _begin(batch: _Batch, value: str | None, option: str) -> None:
    """Slurm's clear forms (runner/runspec/begin.py); any other is refused, in one line."""
    try:
        seconds = begin_from_slurm(value or "", batch.now)
    except ValueError as e:
        raise SpecError(option, str(e)) from None
    batch.set("spec.begin_at", iso_begin(seconds), option)


def _hold(batch: _Batch, value: str | None, option: str) -> None:
    batch.set("spec.hold", True, option)


def _chdir(batch: _Batch, value: str | None, option: str) -> None:
    """``--chdir DIR`` (``-D``): where the job starts; relative to the submit folder."""
    if not value:
        raise SpecError(option, "needs a folder")
    from runner.runspec.build import folder_given

    batch.set(f"{_TEMPLATE}.working_dir", folder_given(value), option)


def _export(batch: _Batch, value: str | None, option: str) -> None:
    """``--export=ALL|NONE|VAR1,VAR2|ALL,VAR=value``: read once the header is."""
    if not value:
        raise SpecError(option, "needs ALL, NONE or the variables to carry")
    batch.export = value


def _carry(batch: _Batch, environ: Mapping[str, str]) -> None:
    from runner.runspec.build import exported

    carried, named = exported(batch.export, environ)
    if carried:
        batch.set(f"{_TEMPLATE}.submit_env", carried, "#SBATCH --export")
    if named:
        batch.set(f"{_TEMPLATE}.env", named, "#SBATCH --export")


def _time(batch: _Batch, value: str | None, option: str) -> None:
    batch.set(f"{_TEMPLATE}.time_limit_seconds", slurm_time(value or "", option), option)


def slurm_time(value: str, field: str = "#SBATCH --time") -> int | None:
    """Seconds from a Slurm time (``30``, ``1:00:00``, ``2-03:04:05``…); None = no limit."""
    try:
        return slurm_seconds(value)  # Slurm: a time limit of zero means none
    except ValueError:
        raise SpecError(
            field, f"{show_value(value)} is not a Slurm time (use {_TIME_FORMS})"
        ) from None


def _gres(batch: _Batch, value: str | None, option: str) -> None:
    entries = (value or "").split(",")
    if len(entries) != 1:
        raise SpecError(
            option, f"only one gres, gpu[:type]:N, is supported, got {show_value(value)}"
        )
    parts = entries[0].split(":")
    if parts[0] == "shard":  # Slurm's shards of one GPU: a shared request (docs/scheduling.md)
        if len(parts) != 2 or not _COUNT_RE.fullmatch(parts[1]) or int(parts[1]) < 1:
            raise SpecError(option, f"must be shard:N with N of 1 or more, got {show_value(value)}")
        batch.set(f"{_RES}.gpu_requests", {"count": 1, "shards": int(parts[1])}, option)
        return
    count = _gres_count(parts)
    if count is None:
        raise SpecError(option, f"must be gpu:N, gpu:type:N or shard:N, got {show_value(value)}")
    batch.set(f"{_RES}.gpu_requests", {"count": count}, option)


def _gres_count(parts: list[str]) -> int | None:
    """GPUs in ``gpu``, ``gpu:N``, ``gpu:type`` or ``gpu:type:N``; None if not that."""
    if parts[0] != "gpu" or len(parts) > 3:
        return None
    if len(parts) == 2 and _GRES_TYPE_RE.fullmatch(parts[1]):
        return 1
    count = parts[-1] if len(parts) > 1 else "1"
    if len(parts) == 3 and not _GRES_TYPE_RE.fullmatch(parts[1]):
        return None
    return int(count) if _COUNT_RE.fullmatch(count) else None


def _gpus(batch: _Batch, value: str | None, option: str) -> None:
    text = (value or "").rpartition(":")[2]  # --gpus=[type:]N
    if not _COUNT_RE.fullmatch(text):
        raise SpecError(option, f"must be a number of GPUs, got {show_value(value)}")
    batch.set(f"{_RES}.gpu_requests", {"count": int(text)}, option)


def _cores_option(field: str) -> Callable[[_Batch, str | None, str], None]:
    def apply(batch: _Batch, value: str | None, option: str) -> None:
        if not _COUNT_RE.fullmatch(value or ""):
            raise SpecError(option, f"must be a whole number of cores, got {show_value(value)}")
        batch.set(field, int(value or 0), option)

    return apply


def _mem_option(field: str) -> Callable[[_Batch, str | None, str], None]:
    def apply(batch: _Batch, value: str | None, option: str) -> None:
        match = _MEM_RE.fullmatch(value or "")
        if not match:
            reason = "must be a size in megabytes or with a K, M, G or T suffix"
            raise SpecError(option, f"{reason}, got {show_value(value)}")
        batch.set(field, int(match.group(1)) * _MEM_UNITS[match.group(2).lower()], option)

    return apply


def _container_image(batch: _Batch, value: str | None, option: str) -> None:
    image = value or ""
    if "#" in image:  # enroot/pyxis form: [user@]registry#image[:tag]
        registry, _, rest = image.partition("#")
        image = f"{registry.rpartition('@')[2]}/{rest}"
    batch.set(f"{_TEMPLATE}.image", image, option)


def _container_mounts(batch: _Batch, value: str | None, option: str) -> None:
    refs = [_mount(entry, option) for entry in (value or "").split(",")]
    batch.set(f"{_TEMPLATE}.datavolume_refs", refs, option)


def _mount(entry: str, option: str) -> dict[str, str]:
    parts = entry.split(":")
    if len(parts) not in (2, 3) or not parts[0] or not parts[1]:
        raise SpecError(option, f"each mount must be drive:/path[:ro], got {show_value(entry)}")
    source, target, flags = parts[0], parts[1], parts[2] if len(parts) == 3 else "rw"
    if source.startswith(("/", ".", "~")):
        reason = "mount sources name a drive from the config (e.g. checkpoints:/ckpt), not a host"
        raise SpecError(option, f"{reason} path: {show_value(source)}")
    if flags not in ("ro", "rw"):
        raise SpecError(option, f"mount flags must be ro or rw, got {show_value(flags)}")
    mode = MountMode.READ_ONLY if flags == "ro" else MountMode.READ_WRITE
    return {"name": source, "mount_path": target, "mode": mode.value}


def _mail_option(batch: _Batch, value: str | None, option: str) -> None:
    batch.mail[option] = value or ""


def _mail(batch: _Batch) -> None:
    """``--mail-type=END,FAIL --mail-user=a@b``: a mail to a@b (through the machine's mail
    server) on those events, as ``spec.notify``: BEGIN started, END succeeded and failed,
    FAIL failed, REQUEUE preempted, TIME_LIMIT timelimit, ALL every one, NONE none."""
    types, user = batch.mail.get("#SBATCH --mail-type"), batch.mail.get("#SBATCH --mail-user")
    if types is None:
        return  # Slurm too sends nothing without a mail type
    try:
        events = mail_events(types.split(","))
    except ValueError as e:
        raise SpecError("#SBATCH --mail-type", str(e)) from None
    if not events:
        return
    if not user:
        raise SpecError("#SBATCH --mail-user", "required with --mail-type (the address to mail)")
    try:
        url = mail_url(user)
    except ValueError as e:
        raise SpecError("#SBATCH --mail-user", str(e)) from None
    batch.set(
        "spec.notify", [{"url": url, "events": [e.value for e in events]}], "#SBATCH --mail-user"
    )


_SBATCH_HANDLERS: dict[str, Callable[[_Batch, str | None, str], None]] = {
    "--job-name": _job_name,
    "--nice": _nice,
    "--dependency": _dependency,
    "--begin": _begin,
    "--hold": _hold,
    "--time": _time,
    "--chdir": _chdir,
    "--export": _export,
    "--gres": _gres,
    "--gpus": _gpus,
    "--cpus-per-task": _cores_option(f"{_RES}.cpu_cores"),
    "--cpus-per-gpu": _cores_option(f"{_RES}.per_gpu.cpu_cores"),
    "--mem": _mem_option(f"{_RES}.memory_bytes"),
    "--mem-per-gpu": _mem_option(f"{_RES}.per_gpu.memory_bytes"),
    "--container-image": _container_image,
    "--container-mounts": _container_mounts,
    "--mail-type": _mail_option,
    "--mail-user": _mail_option,
}
