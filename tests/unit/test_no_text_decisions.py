"""No loop or dashboard decision compares message text: they decide on codes and fields.

Walks the syntax of every module under ``astraeus_tui/`` and ``runner/engine/`` and
looks for the beginnings of the messages users read (the planner's, the loop's) in
comparisons: ``startswith``/``endswith``/``removeprefix``/``find``…, ``in``, ``==``.
A state or an event kind compared whole (``state == "Starting"``) is not a message.
"""

from __future__ import annotations

import ast
from pathlib import Path

from runner.model import RunState
from runner.reasons import ReasonCode

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("astraeus_tui", "runner/engine")
# how the messages people read begin: the planner's (runner/planner/messages.py, plan.py,
# types.py), the loop's and the starts' (runner/engine/)
PREFIXES = (
    "Waits for namespace quota",
    "Waits for more than the namespace's quota",
    "Waits for",
    "Quota reached",
    "Next to run",
    "Queued behind",
    "Preempting",
    "Preempted by",
    "Starting",
    "Backfill",
    "Cannot run on this machine",
    "first in the order",
    "its time limit ends it",
    "it fits in room",
    "Time limit reached",
    "Deleted",
)
TEXT_METHODS = {
    "startswith", "endswith", "removeprefix", "removesuffix", "find", "rfind", "index",
    "rindex", "partition", "rpartition", "split", "count", "replace",
}  # fmt: skip
# compared whole, these are states and event kinds, not messages
WHOLE_NAMES = {s.value for s in RunState} | {
    "Preempting", "Preempted", "Started", "QuotaReached", "TimeLimit", "Deleting",
} | {code.title().replace("_", "") for code in ReasonCode}  # fmt: skip


def _strings(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [s for elt in node.elts for s in _strings(elt)]
    return []


def _is_message(text: str, whole_allowed: bool) -> bool:
    if whole_allowed and text in WHOLE_NAMES:
        return False
    return text.startswith(PREFIXES)


def text_comparisons(source: str) -> list[tuple[int, str]]:
    """(line, literal) of each message beginning compared in ``source``; a name given to
    a text method is looked up among the module's constants (``QUOTA_PREFIXES``)."""
    tree = ast.parse(source)
    constants = {
        target.id: _strings(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    for node in ast.walk(tree):  # ``for marker in ("Next to run", …)``: a constant too
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
            constants[node.target.id] = constants.get(node.target.id, []) + _strings(node.iter)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in TEXT_METHODS:
                for arg in node.args:
                    texts = constants.get(arg.id, []) if isinstance(arg, ast.Name) else []
                    texts = texts or _strings(arg)
                    found += [(node.lineno, s) for s in texts if _is_message(s, False)]
        elif isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                found += [(node.lineno, s) for s in _strings(operand) if _is_message(s, True)]
    return found


def test_the_finder_finds_what_the_dashboard_used_to_do() -> None:
    before = """
QUOTA_PREFIXES = ("Waits for namespace quota", "Waits for more than the namespace's quota")
ok = reason.startswith(QUOTA_PREFIXES) or reason.startswith(("Preempting", "Starting"))
a = str(last.get("message", "")).startswith("Backfill")
b = check.removeprefix("Waits for namespace quota: ")
c = "Next to run" in text or text.find("Preempting ") > 0 or text == "Queued behind x"
for marker in ("Next to run", "Preempting "):
    at = text.find(marker)
d = run.state == "Starting" or kind in ("Preempting", "Started")
"""
    assert sorted(s for _, s in text_comparisons(before)) == sorted([
        "Waits for namespace quota", "Waits for more than the namespace's quota",
        "Preempting", "Starting", "Backfill", "Waits for namespace quota: ", "Next to run",
        "Queued behind x", "Preempting ", "Next to run", "Preempting ",
    ])  # fmt: skip


def test_no_loop_or_dashboard_decision_compares_message_text() -> None:
    offences = []
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for line, text in text_comparisons(path.read_text()):
                offences.append(f"{path.relative_to(ROOT)}:{line}: {text!r}")
    assert offences == []
