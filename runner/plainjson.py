"""JSON's plain values in and out, as ``json.loads``/``json.dumps`` give them, without
the json package's start-up.

``import json`` costs a process ~9 ms here (its decoder imports ``re``, which imports
``enum``): a quarter of what a call of `astra show` may take, and a part of every
process worker's start (its supervisor reads and writes JSON files). Its C parts (``_json``)
load in a fraction of a millisecond: the same scanner and encoder ``json`` itself runs,
set up as ``json.loads(data)`` and ``json.dumps(value)`` set them up, so the values and
bytes are the same. What they do not take (a body with whitespace before its value,
invalid JSON, an interpreter without ``_json``) goes to ``json``, which gives its own
value or its own error.
"""

from __future__ import annotations

try:
    import _json
except ImportError:  # pragma: no cover - CPython has it
    _json = None  # type: ignore[assignment]  # no C accelerator: the json module's path

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing at start-up

if TYPE_CHECKING:
    from typing import Any

_CONSTANTS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}
_SPACE = " \t\n\r"


class _Decoding:
    """What ``json.JSONDecoder()`` hands its scanner: the defaults of ``json.loads``."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__


def _refuse(value: object) -> object:
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


if _json is not None:
    _scan = _json.make_scanner(_Decoding())  # type: ignore[arg-type]  # a decoder's fields only
    _encode = _json.make_encoder(
        {}, _refuse, _json.encode_basestring_ascii, None, ": ", ", ", False, False, True
    )
else:  # pragma: no cover
    _scan = _encode = None


def loads(data: bytes | str) -> Any:
    """``json.loads(data)`` of a UTF-8 body."""
    text = data.decode("utf-8", "surrogatepass") if isinstance(data, bytes) else data
    if _scan is not None:
        try:
            value, end = _scan(text, 0)
        except StopIteration:
            pass  # not a value at 0 (whitespace first, or not JSON): json says which
        else:
            if end == len(text) or not text[end:].strip(_SPACE):
                return value
    import json

    return json.loads(text)


def dumps(value: object) -> str:
    """``json.dumps(value)``: the same text, ASCII only, ``", "`` and ``": "`` between."""
    if _encode is None or isinstance(value, str):
        import json

        return json.dumps(value)
    chunks = _encode(value, 0)
    return "".join(chunks)
