"""What may be notified, and where to: the events, the URLs a run or the config names.

A URL is an Apprise URL whose scheme is in :data:`SCHEMES`: senders of webhooks, chats
and mail. Schemes that act on the daemon's own machine (desktop notices, files, custom
plugins) are refused, for a run's URL is a member's input and the daemon runs as root;
the config's ``[[notify]]`` entries are held to the same list. Every check raises
``ValueError`` with a one-line reason; the callers (the spec, the config) add the field.
Apprise is imported only when a URL is checked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from runner.reasons import ReasonCode


class NotifyEvent(StrEnum):
    """An event a notification may be asked for (``events = [...]``)."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    PREEMPTED = "preempted"
    STARTED = "started"
    TIMELIMIT = "timelimit"


# the event code (runner.reasons) that each notification follows
EVENT_OF_CODE: dict[ReasonCode, NotifyEvent] = {
    ReasonCode.SUCCEEDED: NotifyEvent.SUCCEEDED,
    ReasonCode.FAILED: NotifyEvent.FAILED,
    ReasonCode.PREEMPTED: NotifyEvent.PREEMPTED,
    ReasonCode.STARTED: NotifyEvent.STARTED,
    ReasonCode.BACKFILLED: NotifyEvent.STARTED,
    ReasonCode.TIME_LIMIT: NotifyEvent.TIMELIMIT,
}
DEFAULT_EVENTS = (NotifyEvent.SUCCEEDED, NotifyEvent.FAILED)  # Slurm's END,FAIL
SCHEMES = (
    "json", "jsons", "form", "forms", "xml", "xmls", "slack", "mailto", "mailtos",
    "ntfy", "ntfys", "matrix", "matrixs", "discord", "tgram",
)  # fmt: skip
MACHINE_SCHEMES = frozenset({"json", "jsons", "form", "forms", "xml", "xmls"})  # read by programs
MAX_URL = 1024  # characters of one URL
# the parameters (``?key=value``) a member's URL may give, per scheme: what the services
# take for their message, never one that names a file or a second URL (Apprise's
# ``template=``, ``attach=``, ``click=``, ``avatar_url=``, ``pgpkey=``…), which the daemon,
# as root, would open or fetch. Apprise's own for every service: format, timeouts.
_COMMON = frozenset({"format", "overflow", "emojis", "tz", "verify", "cto", "rto"})
_WEBHOOK = _COMMON | {"method"}  # and "+Header=", "-field=", ":key=" (the payload's)
_MAIL = _COMMON | {"to", "cc", "bcc", "from", "name", "smtp", "mode", "reply", "user", "pass"}
MEMBER_PARAMETERS: dict[str, frozenset[str]] = {
    **dict.fromkeys(("json", "jsons", "form", "forms", "xml", "xmls"), _WEBHOOK),
    "slack": _COMMON | {"blocks", "footer", "image", "mode", "timestamp", "to", "token"},
    "discord": _COMMON | {"avatar", "batch", "botname", "fields", "flags", "footer", "image",
                          "ping", "thread", "tts"},
    "tgram": _COMMON | {"content", "detect", "image", "mdv", "preview", "silent", "thread",
                        "to", "topic"},
    "ntfy": _COMMON | {"auth", "delay", "email", "image", "mode", "priority", "tags", "to",
                       "token"},
    "matrix": _COMMON | {"image", "mode", "msgtype", "to", "token", "version"},
    "mailto": _MAIL,
}  # fmt: skip
for _plain, _secure in (("ntfy", "ntfys"), ("matrix", "matrixs"), ("mailto", "mailtos")):
    MEMBER_PARAMETERS[_secure] = MEMBER_PARAMETERS[_plain]
_PAYLOAD_PREFIXES = ("+", "-", ":")  # a webhook's headers, fields and key mapping
MAX_RUN_TARGETS = 8  # URLs one run may name
MAX_CONFIG_TARGETS = 64  # [[notify]] entries

_NAMES = frozenset(e.value for e in NotifyEvent)
_SCHEME_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.-]{0,31})://")
_MAIL_RE = re.compile(r"[A-Za-z0-9!#$%'*+=^_`{|}~.-]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})")


@dataclass(frozen=True, slots=True)
class Target:
    """Where to send which events; ``workspaces`` (config entries): only those runs'."""

    url: str
    events: tuple[NotifyEvent, ...] = DEFAULT_EVENTS
    workspaces: tuple[str, ...] = ()

    def wants(self, event: NotifyEvent, workspace: str) -> bool:
        return event in self.events and (not self.workspaces or workspace in self.workspaces)


def scheme_of(url: str) -> str:
    match = _SCHEME_RE.match(url)
    return match.group(1).lower() if match else ""


def check_parameters(url: str, scheme: str) -> None:
    """A member's URL gives only :data:`MEMBER_PARAMETERS`, and none of them names a path
    or a second URL; ValueError (naming the parameter) if not."""
    from urllib.parse import unquote, urlsplit

    allowed = MEMBER_PARAMETERS.get(scheme, _COMMON)
    webhook = "method" in allowed
    pairs = (part.partition("=") for part in urlsplit(url).query.split("&") if part)
    for key, value in ((unquote(k), unquote(v)) for k, _, v in pairs):  # "+" stays "+"
        known = key.lower() in allowed or (webhook and key.startswith(_PAYLOAD_PREFIXES))
        if not known:
            raise ValueError(
                f"parameter {_shown(key)} is not allowed for {scheme}:// (allowed:"
                f" {', '.join(sorted(allowed))}{', +header, -field, :key' if webhook else ''})"
            )
        if "://" in value or value.startswith(("/", "~", "\\", "file:")):
            raise ValueError(f"parameter {_shown(key)} must not name a path or a URL")


def check_url(value: object, *, member: bool = False) -> str:
    """An Apprise URL of an allowed scheme that Apprise can parse; ValueError if not.
    ``member``: a member's (a run's) URL, whose parameters are held to
    :data:`MEMBER_PARAMETERS` too (an admin's ``[[notify]]`` URL is not)."""
    if not isinstance(value, str) or not value:
        raise ValueError("must be an Apprise URL such as 'json://host/path'")
    if len(value) > MAX_URL:
        raise ValueError(f"must be at most {MAX_URL} characters, got {len(value)}")
    if not value.isprintable() or any(c.isspace() for c in value):
        raise ValueError("must not contain spaces or control characters")
    scheme = scheme_of(value)
    if scheme not in SCHEMES:
        shown = f"{scheme}://" if scheme else "no scheme"
        raise ValueError(f"scheme {shown} is not allowed (allowed: {', '.join(SCHEMES)})")
    if member:
        check_parameters(value, scheme)
    import apprise  # lazy: only a URL to check loads it

    try:
        parsed = apprise.Apprise.instantiate(value)
    except Exception:  # whatever Apprise makes of odd input, it is a URL it cannot use
        parsed = None
    if parsed is None:
        raise ValueError(f"Apprise cannot parse {_shown(value)}")
    return value


def check_events(value: object) -> tuple[NotifyEvent, ...]:
    """A list of event names (at least one, each known) as events, without repeats."""
    if not isinstance(value, list) or not value:
        raise ValueError(f"must be a list of events ({', '.join(NotifyEvent)})")
    found: list[NotifyEvent] = []
    for item in value[: len(NotifyEvent) * 2 + 1]:
        if not isinstance(item, str) or item not in _NAMES:
            shown = _shown(item) if isinstance(item, str) else "a non-string"
            raise ValueError(f"unknown event {shown} (known: {', '.join(NotifyEvent)})")
        found.append(NotifyEvent(item))
    if len(value) > len(found):
        raise ValueError(f"must have at most {len(NotifyEvent)} events")
    return tuple(dict.fromkeys(found))


def event_list(text: str) -> list[str]:
    """``succeeded,failed`` (as typed) as a list of names; checked by :func:`check_events`."""
    return [part.strip() for part in text.split(",") if part.strip()]


def holds_secret(url: str) -> bool:
    """Whether a URL carries a secret: credentials (``user:pass@``), a chat service's
    token (in its host and path), or a parameter that is one (``token``, ``pass``…)."""
    from urllib.parse import urlsplit

    scheme = scheme_of(url)
    if scheme not in MACHINE_SCHEMES and scheme not in ("mailto", "mailtos"):
        return True  # slack, discord, tgram, matrix, ntfy: the URL is the key
    parts = urlsplit(url)
    if "@" in parts.netloc and ":" in parts.netloc.rpartition("@")[0]:
        return True
    keys = {part.partition("=")[0].lower().lstrip("+-:") for part in parts.query.split("&")}
    return any(k in keys for k in ("token", "pass", "password", "auth", "key", "secret",
                                   "authorization", "x-api-key", "apikey"))  # fmt: skip


def label(url: str) -> str:
    """A URL as events show it: the scheme, and the host of a webhook or mail server;
    never credentials, a path, a query, nor the host part of the chat schemes (a token)."""
    scheme, _, rest = url.partition("://")
    scheme = scheme.lower()
    if scheme not in MACHINE_SCHEMES and scheme not in ("mailto", "mailtos"):
        return f"{scheme}://…"
    host = re.split(r"[/?#]", rest, maxsplit=1)[0].rpartition("@")[2]
    return f"{scheme}://{host[:64]}"


def stored_targets(value: object) -> tuple[Target, ...]:
    """A run's ``spec.notify`` as stored (checked at its submit), never raising: an item
    that does not read as a target is left out."""
    found: list[Target] = []
    for item in value[:MAX_RUN_TARGETS] if isinstance(value, list) else ():
        url = item.get("url") if isinstance(item, dict) else None
        events = (
            item.get("events", [e.value for e in DEFAULT_EVENTS])
            if isinstance(item, dict)
            else None
        )
        if isinstance(url, str) and isinstance(events, list):
            wanted = tuple(NotifyEvent(e) for e in events if isinstance(e, str) and e in _NAMES)
            found.append(Target(url, wanted))
    return tuple(found)


def _shown(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:57] + "...")


# ------------------------------------------------------------- #SBATCH --mail-type

_MAIL_TYPES: dict[str, tuple[NotifyEvent, ...]] = {
    "BEGIN": (NotifyEvent.STARTED,),
    "END": (NotifyEvent.SUCCEEDED, NotifyEvent.FAILED),
    "FAIL": (NotifyEvent.FAILED,),
    "REQUEUE": (NotifyEvent.PREEMPTED,),
    "TIME_LIMIT": (NotifyEvent.TIMELIMIT,),
    "ALL": tuple(NotifyEvent),
    "NONE": (),
}
MAIL_TYPES = tuple(_MAIL_TYPES)


def mail_events(types: Iterable[str]) -> tuple[NotifyEvent, ...]:
    """Slurm's mail types as events (``END,FAIL`` -> succeeded, failed); ValueError on others."""
    events: list[NotifyEvent] = []
    for kind in types:
        if kind.upper() not in _MAIL_TYPES:
            raise ValueError(f"unknown mail type {_shown(kind)} (known: {', '.join(MAIL_TYPES)})")
        events.extend(_MAIL_TYPES[kind.upper()])
    return tuple(e for e in NotifyEvent if e in events)  # in the enum's order


def mail_url(address: str) -> str:
    """The Apprise URL that mails ``address`` through the machine's own mail server
    (SMTP on localhost, as Slurm mails through the machine's mail program)."""
    if not _MAIL_RE.fullmatch(address):
        raise ValueError(f"{_shown(address)} is not a mail address")
    return f"mailto://localhost?to={address}"
