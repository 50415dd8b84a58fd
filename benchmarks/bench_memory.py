"""Memory on a large table: `camel-jax fit` on 100,000 rows with bootstrap intervals, within 1 GiB (issue 30).

Writes a synthetic table (a known tied CAMEL law, 3 datasets, 6 sizes, 0.3% noise) to a temporary folder, runs
`camel-jax fit --law camel-tied --resamples 8` on it in a fresh process and prints that process's peak resident
memory, beside the baseline measured in the same run: a process that only imports camel_jax and reads the table.
The fit keeps its memory bounded by solving its starts a few at a time on large tables
(`solver._minimise.starts_side_by_side`) and building Newton's Hessian a few columns at a time
(`solver._newton.hessian`).

    python benchmarks/bench_memory.py [--rows 100000] [--resamples 8] [--restarts 32]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

BUDGET = 1 << 30


def table(rows: int, seed: int = 0) -> pd.DataFrame:
    """Losses of a known tied CAMEL law (numpy formula: L = C + sum_i K_i / (<t_i, r>^alpha_i M^beta_i), with
    alpha_i = a_i / (a_i + 1), beta_i = a_i / c for capacity ~ M^c) with 0.3% multiplicative noise."""
    rng = np.random.default_rng(seed)
    t = np.array([[0.8, 0.3, 0.1], [0.2, 0.7, 0.9]])
    K, beta, C, c = np.array([1.0, 0.6]), np.array([0.9, 1.5]), 1.5, 3.0
    a = beta * c
    alpha = a / (a + 1)
    r = rng.dirichlet(np.ones(3), rows)
    size = rng.choice([4.0, 5.0, 6.0, 8.0, 10.0, 12.0], rows)
    loss = C + np.sum(K / ((r @ t.T) ** alpha * size[:, None] ** beta), axis=1)
    loss *= 1 + 0.003 * rng.standard_normal(rows)
    return pd.DataFrame(r, columns=["web", "code", "books"]).assign(size=size, loss=loss)


def peak_rss(command: list[str]) -> tuple[float, float]:
    """(peak resident memory in bytes, wall seconds) of `command` run as a child process."""
    env = {**os.environ, "CAMEL_JAX_CACHE_DIR": "off"}
    # stderr to a file, not a pipe: a child filling a pipe nobody reads (the progress bar, warnings) would block
    with tempfile.TemporaryFile(mode="w+") as errors:
        start = time.perf_counter()
        process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=errors, text=True)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            errors.seek(0)
            raise SystemExit(f"{' '.join(command)} failed:\n{errors.read()}")
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    return usage.ru_maxrss * scale, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--resamples", type=int, default=8)
    parser.add_argument("--restarts", type=int, default=32)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="camel-jax-bench-memory-") as folder:
        csv = str(Path(folder) / "runs.csv")
        table(args.rows).to_csv(csv, index=False)
        base, _ = peak_rss([sys.executable, "-c", f"import camel_jax, pandas; pandas.read_csv({csv!r})"])
        fit = [sys.executable, "-m", "camel_jax.cli", "fit", csv, "--law", "camel-tied", "--mixture", "web,code,books",
               "--size", "size", "--target", "loss", "--resamples", str(args.resamples), "--restarts",
               str(args.restarts), "--out", str(Path(folder) / "fit")]  # fmt: skip
        peak, wall = peak_rss(fit)
    print(
        f"camel-jax fit on {args.rows:,} rows ({args.restarts} starts, {args.resamples} resamples): peak "
        f"{peak / 2**20:.0f} MiB in {wall:.0f} s; baseline (import and read the table) {base / 2**20:.0f} MiB; "
        f"{peak / base:.1f}x the baseline, {peak / BUDGET:.2f} of the 1 GiB budget (target <= 1.00)"
    )


if __name__ == "__main__":
    main()
