"""The per-paper notebooks execute against stored runs and say plainly when data is absent."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from harness.analysis.figures import SPECS

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


def _execute(path: Path, results: Path, monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    monkeypatch.setenv("WANBENCH_RESULTS", str(results))
    notebook = nbformat.read(path, as_version=4)
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), (
        f"{path.name}: committed with outputs; clear them"
    )
    NotebookClient(notebook, timeout=180, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    return [out for cell in notebook.cells if cell.cell_type == "code" for out in cell.outputs]


def test_one_notebook_per_paper() -> None:
    assert [p.name for p in NOTEBOOKS] == [
        "banga-mogul-1998.ipynb", "banga-mogul-druschel-1999.ipynb",
        "chandra-mosberger-2001.ipynb", "cycles-per-packet.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes_on_synthetic_runs(
    path: Path, synthetic_results: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outputs = _execute(path, synthetic_results, monkeypatch)
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert images, f"{path.name}: no figure shown"
    assert "no data" not in str(outputs)


def test_notebook_says_when_there_is_no_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outputs = _execute(REPO / "notebooks" / "cycles-per-packet.ipynb", tmp_path, monkeypatch)
    text = str(outputs)
    assert "No stored runs under" in text
    assert text.count("no data (no stored runs)") == 6  # one per cycles-per-packet target


def test_each_notebook_shows_every_target_of_its_paper() -> None:
    papers = {"banga-mogul-1998": "bm98", "banga-mogul-druschel-1999": "bmd99",
              "chandra-mosberger-2001": "cm01", "cycles-per-packet": "cpp"}
    for path in NOTEBOOKS:
        sources = "\n".join(cell.source for cell in nbformat.read(path, as_version=4).cells)
        shown = set(re.findall(r'nb\.show\(runs, "([^"]+)"\)', sources))
        assert shown == {s.id for s in SPECS if s.paper == papers[path.stem]}, path.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes_on_reference_results(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reference = REPO / "results" / "reference"
    if not any(reference.rglob("manifest.json")):
        pytest.skip(f"no reference results under {reference} yet")
    outputs = _execute(path, reference, monkeypatch)
    assert not [o for o in outputs if o.output_type == "error"]
