"""The table front ends: functions that take or return pandas DataFrames and convert at the edge.

The core (`_fit`, `_bootstrap`, `_pipeline`, `_optimize`, the laws) works on arrays; these wrap it for users who hold
runs tables.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np
import pandas as pd
from jaxtyping import Array, ArrayLike

from ..data._containers import BenchmarkData
from ..solver._options import FitOptions
from ._optimize import AscentOptions, check_model_size, optimal_mixture
from ._pipeline import BenchmarkFits, Pipeline, fit_benchmark_laws


def benchmark_arrays(df: pd.DataFrame, losses: Sequence[str], benchmarks: Sequence[str]) -> tuple[Array, Array]:
    """Validated validation losses L [P, V] and accuracies Y [B, P] of a runs table (errors name the column)."""
    if len(benchmarks) == 0:
        raise ValueError("`benchmarks` must name at least one column")
    data = [BenchmarkData.from_frame(df, losses=losses, target=b) for b in benchmarks]
    return data[0].L, jnp.stack([d.y for d in data])


def fit_benchmarks(
    df: pd.DataFrame,
    *,
    losses: Sequence[str],
    benchmarks: Sequence[str],
    key: Array,
    names: Sequence[str] | None = None,
    restarts: int = 64,
    weights: ArrayLike | None = None,
    monotone: bool = True,
    options: FitOptions | None = None,
) -> BenchmarkFits:
    """Fit the multi-loss loss-to-benchmark law for several benchmarks of a runs table at once (one compiled
    multi-target fit, `fit_benchmark_laws`).

    Residuals are plain (`pred - y`, accuracies); the default options (`BENCHMARK_OPTIONS`, delta=1.0) make the
    Huber loss a least-squares fit on accuracies in [0, 1]. With `monotone=True` (default) the fit is well-posed:
    on gadre2024 two keys give the same objective and held-out predictions to 1e-6. `weights` [P] (e.g. a 0/1
    train mask) apply to every benchmark. `names` (default: the benchmark columns) key the laws and the proxy
    losses, e.g. the BENCHMARK_WEIGHTS keys "mmlu", "gsm8k", ....

    **Arguments**:

    - `df`: the runs table (not modified); `losses`: its validation-loss columns; `benchmarks`: its accuracy
      columns, one law each.
    - `key`: draws the `restarts` random starts of every law; `names`: the laws' keys (default: `benchmarks`).
    - `weights`: [P] per-row weights (e.g. a 0/1 train mask), applied to every benchmark.
    - `monotone`: fit with k >= 0 and 0 <= A <= 1 (see `LossToBenchmark`); `options`: default `BENCHMARK_OPTIONS`.

    **Returns**: a `BenchmarkFits` (the fitted law of every benchmark, keyed by `names`, and the loss columns).
    """
    names = list(benchmarks) if names is None else list(names)
    if len(names) != len(benchmarks):
        raise ValueError(f"`names` must have one entry per benchmark ({len(benchmarks)}); got {len(names)}")
    L, Y = benchmark_arrays(df, losses, benchmarks)
    return fit_benchmark_laws(
        L, Y, weights, names=names, key=key, restarts=restarts, monotone=monotone, options=options
    )


def mixture_path(
    pipeline: Pipeline,
    sizes: ArrayLike,
    *,
    key: Array,
    datasets: list[str] | None = None,
    level: float = 0.95,
    restarts: int = 16,
    ascent: AscentOptions | None = None,
    lower: ArrayLike | None = None,
    upper: ArrayLike | None = None,
    reference: ArrayLike | None = None,
    max_shift: float | None = None,
    robust: str | tuple[str, float] | None = None,
) -> pd.DataFrame:
    """The optimal mixture as a function of model size (paper Figure "Optimal mixture weights across model
    sizes"), as a tidy frame with columns size, dataset, weight (and low, high across resamples for a batched
    pipeline without `robust`).

    **Arguments**:

    - `pipeline`: a `Pipeline` (point or batched over resamples); `sizes`: the model sizes.
    - `key`: the ascent's random starts; `datasets`: names of the mixture components (default `r0`, `r1`, ...).
    - `level`: the band's coverage for a batched pipeline.
    - `restarts`, `ascent`, `lower`, `upper`, `reference`, `max_shift`, `robust`: as `optimal_mixture`'s, at
      every size.

    **Returns**: a tidy `DataFrame`, one row per (size, dataset).
    """
    n = pipeline.n_datasets
    names = datasets or [f"r{j}" for j in range(n)]
    rows = []
    for size in [check_model_size(s, "sizes") for s in np.atleast_1d(np.asarray(sizes, dtype=float))]:
        r = np.asarray(optimal_mixture(pipeline, n, key=key, model_size=float(size), restarts=restarts, ascent=ascent,
                                       lower=lower, upper=upper, reference=reference, max_shift=max_shift,
                                       robust=robust).r)  # fmt: skip
        for j, name in enumerate(names):
            row = {"size": size, "dataset": name}
            if r.ndim == 2:
                row["weight"] = float(np.median(r[:, j]))
                row["low"], row["high"] = np.percentile(r[:, j], [50 * (1 - level), 50 * (1 + level)])
            else:
                row["weight"] = float(r[j])
            rows.append(row)
    return pd.DataFrame(rows)
