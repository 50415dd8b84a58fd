"""The paper's end-to-end map: mixture -> benchmark-proxy loss -> benchmark accuracy -> weighted objective."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from jaxtyping import Array, Float

from ._fit import FitResult, fit
from ._io import BenchmarkData
from .laws import LossToBenchmark

# Paper Appendix "Details of Benchmark Weights", Table benchmark-weights (exactly).
OBJECTIVES: dict[str, dict[str, float]] = {
    "balanced": {
        "mmlu": 0.20,
        "arc_c": 0.10,
        "bbh": 0.15,
        "gsm8k": 0.15,
        "math": 0.15,
        "humaneval": 0.15,
        "ceval": 0.10,
    },
    "math": {"mmlu": 0.12, "arc_c": 0.08, "bbh": 0.12, "gsm8k": 0.15, "math": 0.30, "humaneval": 0.15, "ceval": 0.08},
    "code": {"mmlu": 0.10, "arc_c": 0.10, "bbh": 0.10, "gsm8k": 0.15, "math": 0.15, "humaneval": 0.25, "ceval": 0.15},
    "knowledge": {
        "mmlu": 0.30,
        "arc_c": 0.16,
        "bbh": 0.14,
        "gsm8k": 0.10,
        "math": 0.04,
        "humaneval": 0.04,
        "ceval": 0.22,
    },
}


class Pipeline(eqx.Module):
    """Mixture -> accuracy for several benchmarks, and their weighted objective.

        Acc_b(r, M) = C_b + A_b sigmoid(-(L_b(r, M) + B_b)),     objective(r, M) = sum_b w_b Acc_b(r, M)

    where `L_b` is a mixture law (CAMEL by default; any law taking `(r, M)` can stand in) fitted on the
    benchmark-proxy loss k_b . L of benchmark b, and (A_b, B_b, C_b) come from its `LossToBenchmark` law
    (Li, Gu & Zhang 2026, Section 2.2). A batched pipeline (every law with a leading resample axis B, e.g. from
    bootstrap results drawn with the same resample weights) gives distributions: `accuracy` and `objective`
    then return a leading B axis.
    """

    loss_laws: dict[str, Any]
    benchmark_laws: dict[str, LossToBenchmark]
    weights: tuple[tuple[str, float], ...] = eqx.field(static=True)

    def __init__(
        self, loss_laws: Mapping[str, Any], benchmark_laws: Mapping[str, LossToBenchmark], weights: Mapping[str, float]
    ):
        names = list(weights)
        if not names:
            raise ValueError("`weights` is empty: name at least one benchmark and its weight")
        for b in names:
            w = weights[b]
            if isinstance(w, bool) or not isinstance(w, (int, float, np.integer, np.floating)) or not np.isfinite(w):
                raise ValueError(f"benchmark {b!r} has weight {w!r}: weights must be finite numbers")
            if w < 0:
                raise ValueError(f"benchmark {b!r} has a negative weight {w}: the objective maximizes sum_b w_b Acc_b")
            if b not in loss_laws:
                raise ValueError(f"benchmark {b!r} has a weight but no loss law; loss laws: {sorted(loss_laws)}")
            if b not in benchmark_laws:
                raise ValueError(
                    f"benchmark {b!r} has a weight but no LossToBenchmark law; have: {sorted(benchmark_laws)}"
                )
        self.loss_laws = {b: loss_laws[b] for b in names}
        self.benchmark_laws = {b: benchmark_laws[b] for b in names}
        self.weights = tuple((b, float(w)) for b, w in weights.items())

    @property
    def batch_shape(self) -> tuple[int, ...]:
        """Leading resample axes (empty for a single pipeline), read off the benchmark laws' scalar `A`."""
        return tuple(next(iter(self.benchmark_laws.values())).A.shape)

    def accuracy(self, r: Float[Array, "P n"], size: Float[Array, " P"]) -> dict[str, Array]:
        """Predicted accuracy per benchmark: {b: [P]} (or [B, P] for a batched pipeline)."""
        if self.batch_shape:
            return jax.vmap(lambda p: p.accuracy(r, size))(self)
        out = {}
        for b, _ in self.weights:
            law = self.benchmark_laws[b]
            out[b] = law.from_proxy(self.loss_laws[b](r, size))
        return out

    def objective(self, r: Float[Array, "P n"], size: Float[Array, " P"]) -> Array:
        """The weighted benchmark objective sum_b w_b Acc_b: [P] (or [B, P])."""
        acc = self.accuracy(r, size)
        return sum(w * acc[b] for b, w in self.weights)


class BenchmarkFits(eqx.Module):
    """Result of `fit_benchmarks`: one `LossToBenchmark` per benchmark, the multi-target fit, and each run's
    benchmark-proxy loss k_b . L."""

    laws: dict[str, LossToBenchmark]
    result: FitResult
    proxy: pd.DataFrame = eqx.field(static=True)


def benchmark_arrays(df: pd.DataFrame, losses: Sequence[str], benchmarks: Sequence[str]) -> tuple[Array, Array]:
    """Validated validation losses L [P, V] and accuracies Y [B, P] of a runs table (errors name the column)."""
    if len(benchmarks) == 0:
        raise ValueError("`benchmarks` must name at least one column")
    data = [BenchmarkData.from_frame(df, losses=losses, target=b) for b in benchmarks]
    return data[0].L, jnp.stack([d.y for d in data])


def fit_logistic(
    L: Array,
    Y: Array,
    W: Array | None,
    *,
    key: Array,
    restarts: int,
    delta: float = 1.0,
    max_steps: int = 5000,
    monotone: bool = True,
    **fit_options: Any,
) -> FitResult:
    """The loss-to-benchmark fit of `fit_benchmarks` on arrays: one `LossToBenchmark` per row of Y [T, P]
    (weights W [T, P], e.g. one train mask per split), as one multi-target fit on plain residuals."""
    template = LossToBenchmark.sample_init(key, n_losses=L.shape[1], monotone=monotone)
    return fit(
        template,
        (L,),
        Y,
        key=key,
        restarts=restarts,
        weights=W,
        log_residuals=False,
        delta=delta,
        max_steps=max_steps,
        **fit_options,
    )


def fit_benchmarks(
    df: pd.DataFrame,
    *,
    losses: Sequence[str],
    benchmarks: Sequence[str],
    key: Array,
    names: Sequence[str] | None = None,
    restarts: int = 64,
    weights: Array | None = None,
    delta: float = 1.0,
    max_steps: int = 5000,
    monotone: bool = True,
    **fit_options: Any,
) -> BenchmarkFits:
    """Fit the multi-loss loss-to-benchmark law for several benchmarks at once (one compiled multi-target fit).

    Residuals are plain (`pred - y`, accuracies); `delta=1.0` makes the Huber loss a least-squares fit on
    accuracies in [0, 1]. Validation losses are strongly collinear: by default (`monotone=True`) the law is fitted
    with k >= 0 and 0 <= A <= 1 (see `LossToBenchmark`), which makes the fit well-posed: on gadre2024 two keys
    give the same objective and held-out predictions to 1e-6. It still needs more L-BFGS steps than most laws
    (`max_steps=5000`). `weights` [P] (e.g. a 0/1 train mask) apply to every benchmark. The returned `proxy`
    frame has one column `proxy_<name>` per benchmark, aligned with `df`'s index; `names` (default: the benchmark
    columns) key the laws and proxies, e.g. the OBJECTIVES keys "mmlu", "gsm8k", ....
    """
    names = list(benchmarks) if names is None else list(names)
    if len(names) != len(benchmarks):
        raise ValueError(f"`names` must have one entry per benchmark ({len(benchmarks)}); got {len(names)}")
    L, Y = benchmark_arrays(df, losses, benchmarks)
    W = None if weights is None else jnp.broadcast_to(jnp.asarray(weights, dtype=Y.dtype), Y.shape)
    result = fit_logistic(
        L, Y, W, key=key, restarts=restarts, delta=delta, max_steps=max_steps, monotone=monotone, **fit_options
    )
    laws = {b: jax.tree.map(lambda leaf, i=i: leaf[i], result.law) for i, b in enumerate(names)}
    proxy = pd.DataFrame({f"proxy_{b}": np.asarray(laws[b].proxy_loss(L)) for b in names}, index=df.index)
    return BenchmarkFits(laws=laws, result=result, proxy=proxy)


class PipelineFit(eqx.Module):
    """Result of `fit_pipeline`: the point-estimate `pipeline`, the batched `pipelines` over bootstrap
    resamples (None without resamples), the multi-target mixture-law fit `loss_fit`, and the resample
    `weights` [B, P] shared by every benchmark."""

    pipeline: Pipeline
    pipelines: Pipeline | None
    loss_fit: FitResult
    weights: Array | None


def fit_pipeline(
    data: Any,
    benchmarks: BenchmarkFits,
    objective: Mapping[str, float],
    *,
    law: Any,
    key: Array,
    n_resamples: int = 0,
    restarts: int = 16,
    groups: Any = None,
    strata: Any = None,
    **fit_options: Any,
) -> PipelineFit:
    """Fit the mixture law on every benchmark's proxy loss and assemble the end-to-end `Pipeline`.

    `data` is a MixtureData of the training runs (its `y` is not used), `benchmarks` the `fit_benchmarks`
    result on the same rows, `objective` the benchmark weights (e.g. `OBJECTIVES["balanced"]`), `law` the
    mixture-law template (e.g. a tied CAMEL). Proxy losses are fitted with plain residuals (they can be <= 0).
    All benchmarks are one multi-target fit; with `n_resamples`, every benchmark is refitted on the same
    bootstrap resamples (of points, or of `groups` within `strata`), warm-started from the full-data fits, as
    one further multi-target fit, giving the batched `pipelines`.
    """
    from ._bootstrap import resample_weights

    names = [b for b in objective if objective[b] != 0]
    missing = [b for b in names if f"proxy_{b}" not in benchmarks.proxy.columns]
    if missing:
        raise ValueError(f"no fitted loss-to-benchmark law for {missing}; have {sorted(benchmarks.laws)}")
    Y = jnp.stack([jnp.asarray(benchmarks.proxy[f"proxy_{b}"].to_numpy()) for b in names])
    if Y.shape[1] != data.n_points:
        raise ValueError(
            f"`benchmarks` has {Y.shape[1]} rows but `data` has {data.n_points}: fit both on the same runs"
        )
    k_fit, k_boot, k_weights = jax.random.split(key, 3)
    W = jnp.broadcast_to(data.weight, Y.shape)
    loss_fit = fit(law, data.inputs, Y, weights=W, key=k_fit, restarts=restarts, log_residuals=False, **fit_options)
    laws = {b: jax.tree.map(lambda leaf, i=i: leaf[i], loss_fit.law) for i, b in enumerate(names)}
    pipeline = Pipeline(laws, {b: benchmarks.laws[b] for b in names}, {b: objective[b] for b in names})
    if n_resamples <= 0:
        return PipelineFit(pipeline=pipeline, pipelines=None, loss_fit=loss_fit, weights=None)
    counts = resample_weights(k_weights, data.n_points, n_resamples, groups=groups, strata=strata).astype(Y.dtype)
    counts = counts * data.weight[None, :]
    T, B = len(names), n_resamples
    Y_all = jnp.repeat(Y, B, axis=0)  # [T * B, P], benchmark-major
    W_all = jnp.tile(counts, (T, 1))  # the same resamples for every benchmark
    warm = jax.tree.map(lambda leaf: jnp.repeat(leaf, B, axis=0)[:, None], loss_fit.law)  # each its own optimum
    boot = fit(law, data.inputs, Y_all, weights=W_all, key=k_boot, inits=warm, log_residuals=False, **fit_options)
    batched = {b: jax.tree.map(lambda leaf, i=i: leaf[i * B : (i + 1) * B], boot.law) for i, b in enumerate(names)}
    bench = {b: jax.tree.map(lambda leaf: jnp.broadcast_to(leaf, (B,) + leaf.shape), benchmarks.laws[b]) for b in names}
    pipelines = Pipeline(batched, bench, {b: objective[b] for b in names})
    return PipelineFit(pipeline=pipeline, pipelines=pipelines, loss_fit=loss_fit, weights=counts)
