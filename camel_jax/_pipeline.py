"""The paper's end-to-end map: mixture -> benchmark-proxy loss -> benchmark accuracy -> weighted objective.

Arrays in, arrays out: the frame-taking front end (`fit_benchmarks`) lives in `_tables`.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ._bootstrap import resample_weights
from ._fit import FitResult, fit, resolve_options
from ._options import FitOptions
from .laws import LossToBenchmark

if TYPE_CHECKING:  # the data layer imports pandas; the core only reads MixtureData's arrays
    from ._io import MixtureData

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

    where `w_b` are the `benchmark_weights`, `L_b` is a mixture law (CAMEL by default; any law taking `(r, M)`
    can stand in) fitted on the benchmark-proxy loss k_b . L of benchmark b, and (A_b, B_b, C_b) come from its
    `LossToBenchmark` law (Li, Gu & Zhang 2026, Section 2.2). A batched pipeline (every law with a leading
    resample axis B, e.g. from bootstrap results drawn with the same resamples) gives distributions: `accuracy`
    and `objective` then return a leading B axis.
    """

    loss_laws: dict[str, Any]
    benchmark_laws: dict[str, LossToBenchmark]
    benchmark_weights: tuple[tuple[str, float], ...] = eqx.field(static=True)

    def __init__(
        self,
        loss_laws: Mapping[str, Any],
        benchmark_laws: Mapping[str, LossToBenchmark],
        benchmark_weights: Mapping[str, float],
    ):
        names = list(benchmark_weights)
        if not names:
            raise ValueError("`benchmark_weights` is empty: name at least one benchmark and its weight")
        for b in names:
            w = benchmark_weights[b]
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
        self.benchmark_weights = tuple((b, float(w)) for b, w in benchmark_weights.items())

    @property
    def batch_shape(self) -> tuple[int, ...]:
        """Leading resample axes (empty for a single pipeline): those of the benchmark laws beyond one law's."""
        return next(iter(self.benchmark_laws.values())).batch_shape()

    @property
    def n_datasets(self) -> int:
        """The number of datasets n a mixture r [n] of this pipeline has."""
        structure = next(iter(self.loss_laws.values())).structure()
        if "n_datasets" not in structure:
            raise ValueError("the pipeline's loss laws do not declare `n_datasets` in structure()")
        return int(structure["n_datasets"])

    def accuracy(self, r: Float[Array, "P n"], size: Float[Array, " P"]) -> dict[str, Array]:
        """Predicted accuracy per benchmark: {b: [P]} (or [B, P] for a batched pipeline)."""
        if self.batch_shape:
            return jax.vmap(lambda p: p.accuracy(r, size))(self)
        out = {}
        for b, _ in self.benchmark_weights:
            law = self.benchmark_laws[b]
            out[b] = law.from_proxy(self.loss_laws[b](r, size))
        return out

    def objective(self, r: Float[Array, "P n"], size: Float[Array, " P"]) -> Array:
        """The weighted benchmark objective sum_b w_b Acc_b: [P] (or [B, P])."""
        acc = self.accuracy(r, size)
        return functools.reduce(operator.add, [w * acc[b] for b, w in self.benchmark_weights])


# The loss-to-benchmark fit: least squares on accuracies in [0, 1] (Huber with delta=1.0 on plain residuals); the
# collinear validation losses need more steps than most laws.
BENCHMARK_OPTIONS = FitOptions(delta=1.0, max_steps=5000, log_residuals=False)
# Proxy losses k_b . L can be <= 0: the mixture laws are fitted on plain residuals.
PROXY_OPTIONS = FitOptions(log_residuals=False)


def _plain_residuals(options: FitOptions | None, default: FitOptions, what: str) -> FitOptions:
    options = default if options is None else resolve_options(options)
    if options.log_residuals:
        raise ValueError(f"{what} are fitted on plain residuals: pass options with log_residuals=False")
    return options


class BenchmarkFits(eqx.Module):
    """Result of `fit_benchmarks`: one `LossToBenchmark` per benchmark (`laws`), the multi-target fit (`result`),
    and each run's benchmark-proxy loss k_b . L (`proxy`: {name: [P]})."""

    laws: dict[str, LossToBenchmark]
    result: FitResult
    proxy: dict[str, Array]


def fit_benchmark_laws(
    L: ArrayLike,
    Y: ArrayLike,
    weights: ArrayLike | None = None,
    *,
    names: Sequence[str],
    key: Array,
    restarts: int = 64,
    monotone: bool = True,
    options: FitOptions | None = None,
) -> BenchmarkFits:
    """The loss-to-benchmark law of every row of accuracies Y [T, P] from validation losses L [P, V], as one
    multi-target fit (`weights` [P] or [T, P], e.g. one train mask per split); `names` key the result.

    Validation losses are strongly collinear: by default (`monotone=True`) the law is fitted with k >= 0 and
    0 <= A <= 1 (see `LossToBenchmark`), which makes the fit well-posed. `options` default to
    `BENCHMARK_OPTIONS` (plain residuals, delta=1.0, max_steps=5000)."""
    options = _plain_residuals(options, BENCHMARK_OPTIONS, "accuracies")
    L, Y = jnp.asarray(L), jnp.asarray(Y)
    if len(names) != Y.shape[0]:
        raise ValueError(f"`names` must have one entry per row of Y ({Y.shape[0]}); got {len(names)}")
    W = None if weights is None else jnp.broadcast_to(jnp.asarray(weights, dtype=Y.dtype), Y.shape)
    template = LossToBenchmark.sample_init(key, n_losses=L.shape[1], monotone=monotone)
    result = fit(template, (L,), Y, key=key, restarts=restarts, weights=W, options=options)
    laws = _rows(result.law, names)
    return BenchmarkFits(laws=laws, result=result, proxy={b: laws[b].proxy_loss(L) for b in names})


class PipelineFit(eqx.Module):
    """Result of `fit_pipeline`: the point-estimate `pipeline`, the batched `pipelines` over bootstrap
    resamples (None without resamples), the multi-target mixture-law fit `loss_fit`, and the `resamples`
    [B, P] shared by every benchmark (None without resamples)."""

    pipeline: Pipeline
    pipelines: Pipeline | None
    loss_fit: FitResult
    resamples: Array | None


def fit_pipeline(
    data: MixtureData,
    benchmarks: BenchmarkFits,
    objective: Mapping[str, float],
    *,
    law: Any,
    key: Array,
    n_resamples: int = 0,
    restarts: int = 16,
    groups: ArrayLike | None = None,
    strata: ArrayLike | None = None,
    options: FitOptions | None = None,
) -> PipelineFit:
    """Fit the mixture law on every benchmark's proxy loss and assemble the end-to-end `Pipeline`.

    `data` is a MixtureData of the training runs (its `y` is not used), `benchmarks` the `fit_benchmarks`
    result on the same rows, `objective` the benchmark weights (e.g. `OBJECTIVES["balanced"]`), `law` the
    mixture-law template (e.g. a tied CAMEL). Proxy losses are fitted with plain residuals (they can be <= 0;
    `options` default to `PROXY_OPTIONS`). All benchmarks are one multi-target fit; with `n_resamples`, every
    benchmark is refitted on the same bootstrap resamples (of points, or of `groups` within `strata`),
    warm-started from the full-data fits, as one further multi-target fit, giving the batched `pipelines`.
    """
    options = _plain_residuals(options, PROXY_OPTIONS, "proxy losses")
    names = [b for b in objective if objective[b] != 0]
    missing = [b for b in names if b not in benchmarks.proxy]
    if missing:
        raise ValueError(f"no fitted loss-to-benchmark law for {missing}; have {sorted(benchmarks.laws)}")
    Y = jnp.stack([jnp.asarray(benchmarks.proxy[b]) for b in names])
    if Y.shape[1] != data.n_points:
        raise ValueError(
            f"`benchmarks` has {Y.shape[1]} rows but `data` has {data.n_points}: fit both on the same runs"
        )
    k_fit, k_boot, k_draw = jax.random.split(key, 3)
    W = jnp.broadcast_to(data.weight, Y.shape)
    loss_fit = fit(law, data.inputs, Y, weights=W, key=k_fit, restarts=restarts, options=options)
    weights = {b: objective[b] for b in names}
    pipeline = Pipeline(_rows(loss_fit.law, names), {b: benchmarks.laws[b] for b in names}, weights)
    if n_resamples <= 0:
        return PipelineFit(pipeline=pipeline, pipelines=None, loss_fit=loss_fit, resamples=None)
    counts = resample_weights(k_draw, data.n_points, n_resamples, groups=groups, strata=strata).astype(Y.dtype)
    counts = counts * data.weight[None, :]
    T, B = len(names), n_resamples
    warm = jax.tree.map(lambda leaf: jnp.repeat(leaf, B, axis=0)[:, None], loss_fit.law)  # each its own optimum
    boot = fit(
        law,
        data.inputs,
        jnp.repeat(Y, B, axis=0),
        weights=jnp.tile(counts, (T, 1)),
        key=k_boot,
        inits=warm,
        options=options,
    )  # rows benchmark-major: the same resamples for every benchmark
    batched = _rows(jax.tree.map(lambda leaf: leaf.reshape((T, B) + leaf.shape[1:]), boot.law), names)
    bench = {b: jax.tree.map(lambda leaf: jnp.broadcast_to(leaf, (B,) + leaf.shape), benchmarks.laws[b]) for b in names}
    return PipelineFit(
        pipeline=pipeline, pipelines=Pipeline(batched, bench, weights), loss_fit=loss_fit, resamples=counts
    )


def _rows(batched: Any, names: Sequence[str]) -> dict[str, Any]:
    """{name: the i-th law} of a law batched over len(names) targets (its leading axis)."""
    return {b: jax.tree.map(lambda leaf, i=i: leaf[i], batched) for i, b in enumerate(names)}
