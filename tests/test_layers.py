"""The layers point one way (docs/architecture.md): clients/ imports nothing of harness/, and
nothing in the product imports the benches' or tests' tooling."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def imported_packages(path: Path) -> set[str]:
    """Top-level package of every module a Python file imports."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def importers(package: str, of: str) -> list[str]:
    return sorted(str(p.relative_to(REPO)) for p in (REPO / package).rglob("*.py")
                  if of in imported_packages(p))


def test_clients_import_nothing_of_the_harness():
    assert importers("clients", "harness") == []


def test_the_product_imports_no_bench_or_test_tooling():
    for tooling in ("servers", "topologies", "scripts", "tests"):
        assert importers("harness", tooling) == [], tooling
        assert importers("clients", tooling) == [], tooling


def test_the_check_sees_an_upward_import(tmp_path: Path):
    module = tmp_path / "m.py"
    module.write_text("import os\nfrom harness.results import format\nfrom . import sibling\n")
    assert imported_packages(module) == {"os", "harness"}
