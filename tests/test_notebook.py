"""The walkthrough notebook runs end to end on tiny settings."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "walkthrough.ipynb"


@pytest.mark.slow
def test_walkthrough_notebook_executes(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("AD_WALKTHROUGH_SCALE", "tiny")
    monkeypatch.setenv("AD_WALKTHROUGH_OUT", str(tmp_path / "walk"))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    walk = tmp_path / "walk"
    assert (walk / "eval" / "in_context.png").is_file() and (walk / "report.md").is_file()
    assert {"AD", "ED"} <= set(json.loads((walk / "eval" / "eval.json").read_text())["policies"])
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    plots = (walk / "report.md").read_text().count("![")  # the report's plots, each shown inline
    assert plots >= 1 and sum("image/png" in o.get("data", {}) for o in outputs) == plots
