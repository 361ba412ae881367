"""A run's output made safe for a terminal: ``astra logs`` and ``astra attach`` on a tty.

A program's bytes could change the reader's window title, clear the screen, write the
clipboard (OSC 52) or move the cursor over what was printed before. On a terminal,
every control character and escape sequence is shown as its escape (``\\x1b]0;t\\x07``)
but colour and style (SGR, ``ESC [ … m``), newline, tab and carriage return (progress
bars). Piped output, and ``--raw``, stay byte-exact.
"""

from __future__ import annotations

import codecs
import re

# SGR whole; else one control character (C0 but \t \n \r, DEL, C1)
_PIECE = re.compile(r"\x1b\[[0-9;:]*m|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_SGR_START = re.compile(r"\x1b(\[[0-9;:]*)?")  # what may still become an SGR
_HOLD_AT_MOST = 64  # characters of an unfinished SGR held for the next chunk
_WHITESPACE = str.maketrans("", "", "\n\t\r")


def _escaped(text: str) -> str:
    """Every character but the printable ones and newline, tab and carriage return as
    its escape (a bidi override, a zero-width space)."""
    if text.translate(_WHITESPACE).isprintable():
        return text
    return "".join(c if c.isprintable() or c in "\n\t\r" else repr(c)[1:-1] for c in text)


class TerminalText:
    """Feed it a stream's chunks; it answers the text to write, safe for a terminal.

    A sequence split between chunks is judged whole: an ``ESC [ 3`` at a chunk's end is
    held until the next one says whether it is colour."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._held = ""

    def feed(self, data: bytes, final: bool = False) -> str:
        text = self._held + self._decoder.decode(data, final)
        self._held = ""
        out: list[str] = []
        at = 0
        for piece in _PIECE.finditer(text):
            out.append(_escaped(text[at : piece.start()]))
            at = piece.end()
            found = piece.group()
            if len(found) > 1:  # colour: kept
                out.append(found)
                continue
            rest = text[piece.start() :]
            unfinished = _SGR_START.fullmatch(rest)
            if found == "\x1b" and not final and unfinished and len(rest) < _HOLD_AT_MOST:
                self._held = rest
                return "".join(out)
            out.append(repr(found)[1:-1])
        out.append(_escaped(text[at:]))
        return "".join(out)
