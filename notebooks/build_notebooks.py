"""Execute the notebooks' jupytext sources (`notebooks/NN_name.py`, percent format) to `.ipynb`.

    python notebooks/build_notebooks.py                     # every notebook at full size
    CAMEL_QUICK=1 python notebooks/build_notebooks.py 04    # CI sizes, only notebooks whose name has "04"

The `.py` files are the notebooks: edit them (or open them in Jupyter with jupytext), never the `.ipynb` this
writes next to them (git ignores those). CI executes every source at CI size (`tests/test_notebooks.py`).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def sources() -> list[Path]:
    """The notebooks' percent-format sources, in order."""
    return sorted(HERE.glob("[0-9][0-9]_*.py"))


def load(path: Path):
    """Read one source as a notebook (jupytext), with the kernel every notebook runs on."""
    import jupytext

    nb = jupytext.read(path, fmt="py:percent")
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def execute(nb, timeout: int = 3600) -> None:
    """Run every cell in place, from the notebooks' folder (their relative paths start there)."""
    from nbclient import NotebookClient

    NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}).execute()


if __name__ == "__main__":
    import nbformat

    wanted = sys.argv[1:]
    for path in sources():
        if wanted and not any(w in path.stem for w in wanted):
            continue
        nb = load(path)
        t0 = time.perf_counter()
        if os.environ.get("CAMEL_NO_EXECUTE") != "1":
            execute(nb)
        nbformat.write(nb, path.with_suffix(".ipynb"))
        print(f"wrote {path.stem}.ipynb ({time.perf_counter() - t0:.0f} s)")
