"""The house rules on size, checked over the source (``shared/style.md``): modules of at most
500 lines as formatted, functions of at most 80 lines unless their docstring says why
("longer than 80 lines ...")."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "cairn"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
REASON = "longer than 80 lines"


def _modules() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def _functions(tree: ast.AST, prefix: str = "") -> list[tuple[str, ast.AST]]:
    out: list[tuple[str, ast.AST]] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            out.append((prefix + node.name, node))
            out += _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            out += _functions(node, f"{prefix}{node.name}.")
    return out


def test_modules_are_at_most_500_lines() -> None:
    long = {
        str(p.relative_to(SRC)): n
        for p in _modules()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}, long


def test_functions_over_80_lines_say_why() -> None:
    unexplained = []
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name, node in _functions(tree):
            assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            doc = " ".join((ast.get_docstring(node) or "").lower().split())
            where = f"{path.relative_to(SRC)}:{name}"
            if length > MAX_FUNCTION_LINES and REASON not in doc:
                unexplained.append(f"{where} ({length} lines)")
    assert unexplained == []
