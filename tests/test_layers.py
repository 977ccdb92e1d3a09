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


# harness/'s parts, lowest first: each imports only parts before it (docs/architecture.md).
# Parts on one line are one layer and import nothing of each other.
HARNESS_LAYERS = (
    ("yamlfile", "interrupts", "monotonic"),
    ("procs",),
    ("templates", "servers", "topology", "results"),
    ("metrics", "scenario"),
    ("manifest", "analysis"),
    ("guest",),
    ("doctor", "runner"),
    ("cluster", "reproduce"),
    ("commands",),
    ("cli", "__main__"),
)


def harness_part_imports(root: Path = REPO / "harness") -> dict[str, set[str]]:
    """For each part of harness/ (a folder, or a module at its top), the other parts its
    files import (`from harness import X` names part X)."""
    found: dict[str, set[str]] = {}
    for path in root.rglob("*.py"):
        relative = path.relative_to(root)
        part = relative.parts[0] if len(relative.parts) > 1 else relative.stem
        if part == "__init__":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            modules: list[list[str]] = []
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                head = node.module.split(".")
                modules = [head] if len(head) > 1 else [[*head, a.name] for a in node.names]
            elif isinstance(node, ast.Import):
                modules = [alias.name.split(".") for alias in node.names]
            for name in modules:
                if name[0] == "harness" and len(name) > 1 and name[1] != part:
                    found.setdefault(part, set()).add(name[1])
    return found


def upward_imports(found: dict[str, set[str]]) -> list[str]:
    rank = {part: level for level, parts in enumerate(HARNESS_LAYERS) for part in parts}
    unplaced = sorted((set(found) | {d for ds in found.values() for d in ds}) - set(rank))
    assert not unplaced, f"parts of harness/ in no layer of HARNESS_LAYERS: {unplaced}"
    return sorted(f"{part} -> {dep}" for part, deps in found.items() for dep in deps
                  if rank[dep] >= rank[part])


def test_harness_parts_import_only_lower_layers():
    assert upward_imports(harness_part_imports()) == []


def test_the_layer_check_sees_an_import_back_up(tmp_path: Path):
    (tmp_path / "analysis").mkdir()
    (tmp_path / "analysis" / "prepare.py").write_text(
        "from harness.reproduce.capabilities import ABSENT\nfrom harness import results\n")
    (tmp_path / "topology").mkdir()
    (tmp_path / "topology" / "cleanup.py").write_text("from harness import topology\n")
    found = harness_part_imports(tmp_path)
    assert found == {"analysis": {"reproduce", "results"}}
    assert upward_imports(found) == ["analysis -> reproduce"]
