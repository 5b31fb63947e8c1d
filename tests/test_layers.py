"""The layers import downwards only: the core (``ad``) imports no family, and model families import no task family
(they reach tasks through the registry), so a family can be added or removed without touching either."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports (at any depth: function-level imports count too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


@pytest.mark.parametrize("package, forbidden", [("models", ("tasks",)), ("ad", ("tasks", "models"))])
def test_a_layer_imports_no_layer_above_it(package, forbidden):
    offenders = sorted(f"{path.relative_to(ROOT)} imports {module}"
                       for path in (ROOT / package).rglob("*.py")
                       for module in imported_modules(path)
                       if module.split(".")[0] in forbidden)
    assert not offenders, offenders


def test_the_check_sees_an_upward_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from tasks.darkroom.demo import DarkRoomDemoConfig\n")
    assert "tasks.darkroom.demo" in imported_modules(bad)


def test_the_core_keeps_about_ten_top_level_modules():
    """One concept a module; related modules share a subpackage of ``ad/`` instead of piling up beside the others."""
    modules = sorted(path.name for path in (ROOT / "ad").glob("*.py"))
    assert len(modules) <= 10, f"{len(modules)} top-level modules in ad/ (group related ones in a subpackage): {modules}"
