"""Notebooks are tests too: every jupytext source in notebooks/ runs at CI size (CAMEL_QUICK=1) and asserts its
headline results with margins; a failed assertion is an error output, and the test fails with it."""

import ast
import json
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1] / "notebooks"
sys.path.insert(0, str(HERE))
import build_notebooks  # noqa: E402
import conftest  # noqa: E402

SOURCES = build_notebooks.sources()
NEEDS_SHARED = {
    "02_epoch_chinchilla": ["epoch_chinchilla"],
    "05_real_mixtures": ["dmsl_shukor2025", "mixinglaws_ye2024"],
    "07_loss_to_benchmark_gadre": ["gadre2024"],
}
# A kernel inherits its test process's XLA flags: under xdist (`make test`), no LLVM optimization of the programs,
# which at CI size saves more compile time than it costs in run time (the notebook step, 2 workers: 471 -> 390 s;
# 09 200 -> 122 s, 05 161 -> 96 s, 01 116 -> 81 s). These two run long programs and keep XLA's optimization
# (measured at level 0: 06 36 -> 61 s, 07 52 -> 74 s).
RUN_BOUND = {"06_sampling_strategies", "07_loss_to_benchmark_gadre"}


def test_every_notebook_has_a_source():
    assert [p.stem[:2] for p in SOURCES] == [f"{i:02d}" for i in range(1, len(SOURCES) + 1)] and len(SOURCES) >= 9


@pytest.mark.parametrize("path", SOURCES, ids=[p.stem for p in SOURCES])
def test_notebook_asserts_its_results(path, monkeypatch):
    pytest.importorskip("jupytext")
    pytest.importorskip("nbclient")
    nb = build_notebooks.load(path)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert any(cell.cell_type == "markdown" for cell in nb.cells) and code
    # the headline checks are part of the notebook: at least one assert that is not a tautology about the mode
    trees = [ast.parse(_python(cell.source)) for cell in code]
    asserts = [node for tree in trees for node in ast.walk(tree) if isinstance(node, ast.Assert)]
    assert [a for a in asserts if "QUICK" not in ast.unparse(a.test)], f"{path.name} asserts no result"
    for dataset in NEEDS_SHARED.get(path.stem, []):
        import shared_data

        shared_data.path(dataset)  # skips with the reason when ../shared is absent
    monkeypatch.setenv("CAMEL_QUICK", "1")
    if path.stem in RUN_BOUND:
        monkeypatch.setenv("XLA_FLAGS", conftest.optimized_flags())
    build_notebooks.execute(nb, timeout=600)
    errors = [o for cell in nb.cells for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, json.dumps(errors)[:2000]
    assert all(cell.get("execution_count") for cell in code), f"{path.name}: a cell did not run"


def _python(source: str) -> str:
    """A cell's source without IPython magics (`%matplotlib inline`), which are not Python."""
    return "\n".join("" if line.lstrip().startswith("%") else line for line in source.splitlines())
