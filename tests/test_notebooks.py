"""Notebooks are tests too: CI executes every committed notebook with reduced sizes (CAMEL_QUICK=1)."""

import json
import os
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
NEEDS_SHARED = {  # every external data set a notebook reads (regmix_liu2024 is optional in 05: it checks for it)
    "02_epoch_chinchilla": ("epoch_chinchilla",),
    "05_real_mixtures": ("dmsl_shukor2025", "mixinglaws_ye2024"),
    "07_loss_to_benchmark_gadre": ("gadre2024",),
}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    if path.stem in NEEDS_SHARED:
        import shared_data

        for dataset in NEEDS_SHARED[path.stem]:
            shared_data.path(dataset)  # skips with the reason when a data set is absent
    monkeypatch.setenv("CAMEL_QUICK", "1")
    nb = nbformat.read(path, as_version=4)
    assert any(cell.cell_type == "markdown" for cell in nb.cells) and any(cell.cell_type == "code" for cell in nb.cells)
    committed = [cell for cell in nb.cells if cell.cell_type == "code"]
    with_output = [bool(cell.get("outputs")) for cell in committed]
    assert with_output[-1] and sum(with_output) >= len(committed) - 1, f"{path.name} is committed without outputs"
    nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    errors = [o for cell in nb.cells for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, json.dumps(errors)[:2000]
    assert os.environ["CAMEL_QUICK"] == "1"
