"""Every SQL statement lives in runner/store/: no other module of runner/ opens SQLite,
runs a statement or holds SQL text; a transaction outside the store is a typed Tx."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from runner.store.tx import Tx

RUNNER = Path(__file__).resolve().parents[2] / "runner"
STORE = RUNNER / "store"
FORBIDDEN = re.compile(
    r"\.execute(many|script)?\(|\bsqlite3\b|\bSELECT\s+[\w*(]"
    r"|\bINSERT\s+(OR\s+\w+\s+)?INTO\b|\bUPDATE\s+\w+\s+SET\b|\bDELETE\s+FROM\b"
)


def sql_outside_store(root: Path) -> list[str]:
    """``path:line: text`` of each line under ``root`` but runner/store/ that uses SQL."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if STORE in path.parents:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if FORBIDDEN.search(line):
                found.append(f"{path.relative_to(root.parent)}:{number}: {line.strip()}")
    return found


def test_no_sql_outside_the_store() -> None:
    assert sql_outside_store(RUNNER) == []


def test_the_check_finds_sql(tmp_path: Path) -> None:
    root = tmp_path / "runner"
    (root / "engine").mkdir(parents=True)
    (root / "engine" / "a.py").write_text(
        "import sqlite3\n"
        "ok = 1\n"
        'tx.execute("x")\n'
        'q = "UPDATE runs SET state = ?"\n'
        'r = "SELECT name FROM runs"\n'
        'd = "DELETE FROM events"\n'
        'i = "INSERT OR IGNORE INTO forgotten"\n'
    )
    lines = [f.split(":")[1] for f in sql_outside_store(root)]
    assert lines == ["1", "3", "4", "5", "6", "7"]


def test_a_transaction_has_no_public_way_to_run_sql() -> None:
    public = {n for n in dir(Tx) if not n.startswith("_")}
    assert public == set()


# a statement that may change rows of ``runs`` (or the table itself)
RUNS_WRITE = re.compile(
    r"\s*(UPDATE|INSERT\b.*?\bINTO|DELETE\s+FROM|REPLACE\s+INTO|ALTER\s+TABLE|DROP\s+TABLE)"
    r"\s+runs\b",
    re.IGNORECASE | re.DOTALL,
)


# a write whose table is made at run time (``f"UPDATE {table} SET …"``): it may be runs
ANY_WRITE = re.compile(
    r"\s*(UPDATE|INSERT\b.*?\bINTO|DELETE\s+FROM|REPLACE\s+INTO|ALTER\s+TABLE|DROP\s+TABLE)"
    r"\s+\?",
    re.IGNORECASE | re.DOTALL,
)


def _text(node: ast.expr, names: dict[str, str]) -> str | None:
    """The SQL text of a statement argument, ``?`` for a part made at run time: a string,
    strings joined, an f-string, or a name bound to one in the same function; None when
    none of it is known."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = _text(node.left, names)
        return None if left is None else left + (_text(node.right, names) or "?")
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "?" for v in node.values)
    if isinstance(node, ast.Name):
        return names.get(node.id)
    return None


def unmarked_runs_writes(root: Path) -> list[str]:
    """``path:line`` of each ``tx._sql``/``tx._many`` under ``root`` whose statement writes
    ``runs`` without saying which (``run=`` or ``runs=True``): the store's cache of the
    queue goes by what a transaction says it wrote (runner/store/tx.py)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            names = {
                t.id: text
                for a in ast.walk(function) if isinstance(a, ast.Assign)
                for t in a.targets if isinstance(t, ast.Name)
                if (text := _text(a.value, {})) is not None
            }  # fmt: skip
            for call in ast.walk(function):
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                        and call.func.attr in ("_sql", "_many") and call.args):  # fmt: skip
                    continue
                text = _text(call.args[0], names)
                said = {k.arg for k in call.keywords} & {"run", "runs"}
                unknown = text is None or ANY_WRITE.match(text)
                if (unknown or RUNS_WRITE.match(text or "")) and not said:
                    found.append(f"{path.relative_to(root.parent)}:{call.lineno}")
    return sorted(set(found))


def test_every_write_of_runs_says_which_runs_it_wrote() -> None:
    assert unmarked_runs_writes(STORE) == []


def test_the_runs_check_finds_an_unmarked_write(tmp_path: Path) -> None:
    root = tmp_path / "store"
    root.mkdir()
    (root / "a.py").write_text(
        "def f(tx, name):\n"
        '    tx._sql("UPDATE runs SET state = ? WHERE name = ?", (1, name))\n'
        '    tx._sql("UPDATE runs SET state = ? WHERE name = ?", (1, name), run=name)\n'
        '    sql = "DELETE FROM runs WHERE grp = ?"\n'
        "    tx._sql(sql, (name,))\n"
        '    tx._many("INSERT INTO runs (name) VALUES (?)", [(name,)], runs=True)\n'
        '    tx._sql("UPDATE workers SET state = ?", (1,))\n'
        "    tx._sql(f'UPDATE {name} SET x = 1')\n"  # made at run time: must say
    )
    assert [f.split(":")[1] for f in unmarked_runs_writes(root)] == ["2", "5", "8"]
