"""The paper's end-to-end map: mixture -> benchmark-proxy loss -> benchmark accuracy -> score (weighted accuracy).

Arrays in, arrays out: the frame-taking front end (`fit_benchmarks`) lives in `_tables`.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import warnings
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, cast

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from .._deprecated import renamed_keywords, warn_renamed
from .._warn import user_stacklevel
from ..data._checks import check_key, check_several_mixtures, named_columns
from ..fitting._calibrate import (
    Calibration,
    DecisionCalibration,
    HeldOut,
    calibrate_decision,
    calibrate_folds,
    replicate_noise,
    replicate_weights,
    warm_starts,
)
from ..fitting._degenerate import DEGENERATE_HINT, degenerate_batch
from ..fitting._fit import FitResult, fit, resolve_options
from ..fitting._resample import resample_weights
from ..laws import LossToBenchmark
from ..solver._options import FitOptions, Status

if TYPE_CHECKING:  # the data layer imports pandas; the core only reads MixtureData's arrays
    from ..data._containers import MixtureData

# Paper Appendix "Details of Benchmark Weights", Table benchmark-weights (exactly).
_BENCHMARK_WEIGHTS: dict[str, dict[str, float]] = {
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
BENCHMARK_WEIGHTS: Mapping[str, Mapping[str, float]] = MappingProxyType(
    {name: MappingProxyType(weights) for name, weights in _BENCHMARK_WEIGHTS.items()}
)
"""The paper's four named benchmark weightings (Balanced, Math, Code, Knowledge) {name: {benchmark: w_b}}: each
makes a score sum_b w_b Acc_b for `fit_pipeline`; read-only (copy with `dict`)."""


# Benchmark weights summing to less than this leave a score whose differences between mixtures are lost to
# rounding (or underflow): every mixture would look optimal.
MIN_TOTAL_WEIGHT = 1e-8


def check_benchmark_weights(weights: Mapping[str, float], name: str = "benchmark_weights") -> None:
    """Benchmark weights are finite numbers >= 0 whose sum is positive (not vanishingly small): otherwise every
    mixture scores alike and the "optimal mixture" is arbitrary. Raised before any compute."""
    if not isinstance(weights, Mapping):
        raise TypeError(f"`{name}` must be a mapping {{benchmark: weight}}; got {type(weights).__name__}")
    if not weights:
        raise ValueError(f"`{name}` is empty: name at least one benchmark and its weight")
    for b, w in weights.items():
        if isinstance(w, bool) or not isinstance(w, (int, float, np.integer, np.floating)) or not np.isfinite(w):
            raise ValueError(f"benchmark {b!r} has weight {w!r}: weights must be finite numbers")
        if w < 0:
            raise ValueError(f"benchmark {b!r} has a negative weight {w}: the score sum_b w_b Acc_b is maximized")
    total = float(sum(float(w) for w in weights.values()))
    if total < MIN_TOTAL_WEIGHT:
        raise ValueError(
            f"the weights in `{name}` sum to {total:g}: the score is (numerically) constant, so every mixture "
            "would be 'optimal'; give the benchmarks you care about positive weights (e.g. summing to 1)"
        )


class Pipeline(eqx.Module):
    """Mixture -> accuracy for several benchmarks, and their weighted sum, the score.

        Acc_b(r, M) = C_b + A_b sigmoid(-(L_b(r, M) + B_b)),     score(r, M) = sum_b w_b Acc_b(r, M)

    where `w_b` are the `benchmark_weights`, `L_b` is a mixture law (CAMEL by default; any law taking `(r, M)`
    can stand in) fitted on the benchmark-proxy loss k_b . L of benchmark b, and (A_b, B_b, C_b) come from its
    `LossToBenchmark` law (Li, Gu & Zhang 2026, Section 2.2). A batched pipeline (every law with a leading
    resample axis B, e.g. from bootstrap results drawn with the same resamples) gives distributions: `accuracy`
    and `score` then return a leading B axis. `datasets` names the mixture columns, in order (None when
    unknown): tables of candidate runs are matched by them.
    """

    loss_laws: dict[str, Any]
    benchmark_laws: dict[str, LossToBenchmark]
    benchmark_weights: tuple[tuple[str, float], ...] = eqx.field(static=True)
    datasets: tuple[str, ...] | None = eqx.field(static=True, default=None)

    def __init__(
        self,
        loss_laws: Mapping[str, Any],
        benchmark_laws: Mapping[str, LossToBenchmark],
        benchmark_weights: Mapping[str, float],
        datasets: Sequence[str] | None = None,
    ):
        check_benchmark_weights(benchmark_weights)
        names = list(benchmark_weights)
        for b in names:
            if b not in loss_laws:
                raise ValueError(f"benchmark {b!r} has a weight but no loss law; loss laws: {sorted(loss_laws)}")
            if b not in benchmark_laws:
                raise ValueError(
                    f"benchmark {b!r} has a weight but no LossToBenchmark law; have: {sorted(benchmark_laws)}"
                )
        self.loss_laws = {b: loss_laws[b] for b in names}
        self.benchmark_laws = {b: benchmark_laws[b] for b in names}
        self.benchmark_weights = tuple((b, float(w)) for b, w in benchmark_weights.items())
        self.datasets = None if datasets is None else tuple(str(d) for d in datasets)

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
        return _accuracy(self, jnp.asarray(r), jnp.asarray(size), len(self.batch_shape))

    def score(self, r: Float[Array, "P n"], size: Float[Array, " P"]) -> Array:
        """The score, the weighted benchmark accuracy sum_b w_b Acc_b: [P] (or [B, P])."""
        return _score(self, jnp.asarray(r), jnp.asarray(size), len(self.batch_shape))

    def objective(self, r: Float[Array, "P n"], size: Float[Array, " P"]) -> Array:
        """Deprecated name of `score`."""
        warn_renamed("Pipeline.objective", "Pipeline.score")
        return self.score(r, size)


def _accuracy_of(pipeline: Pipeline, r: Array, size: Array, batch_axes: int) -> dict[str, Array]:
    if batch_axes:
        return jax.vmap(lambda one: _accuracy_of(one, r, size, batch_axes - 1))(pipeline)
    laws, proxies = pipeline.benchmark_laws, pipeline.loss_laws
    return {b: laws[b].from_proxy(proxies[b](r, size)) for b, _ in pipeline.benchmark_weights}


@eqx.filter_jit
def _accuracy(pipeline: Pipeline, r: Array, size: Array, batch_axes: int) -> dict[str, Array]:
    """`Pipeline.accuracy`, compiled (one program per pipeline and shape, not one per eager operation)."""
    return _accuracy_of(pipeline, r, size, batch_axes)


@eqx.filter_jit
def _score(pipeline: Pipeline, r: Array, size: Array, batch_axes: int) -> Array:
    """`Pipeline.score`, compiled."""
    acc = _accuracy_of(pipeline, r, size, batch_axes)
    return functools.reduce(operator.add, [w * acc[b] for b, w in pipeline.benchmark_weights])


# The loss-to-benchmark fit: least squares on accuracies in [0, 1] (Huber with delta=1.0 on plain residuals); the
# collinear validation losses need more steps than most laws.
BENCHMARK_OPTIONS = FitOptions(delta=1.0, max_steps=5000, log_residuals=False)
# Proxy losses k_b . L can be <= 0: the mixture laws are fitted on plain residuals, which are in units of the
# proxies' root mean square (issue 29), so that delta = 1e-3 is 0.1% of their size as under log residuals. Before,
# delta was 1e-3 in the proxies' own units (6-170 in a backtest world): 81% of the residuals lay beyond it, the
# fit was nearly least absolute deviations, kinked at every point, and 13% of the best starts ran to the step cap.
PROXY_OPTIONS = FitOptions(log_residuals=False)
# The calibration's folds refit at most this many resamples each: what the decision study measured its coverage
# with (study 5, `--resamples 16`); 32 cost 2.1-2.6x the plain bootstrap at B = 100 (`bench_calibration.py`).
FOLD_RESAMPLES = 16


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
    `BENCHMARK_OPTIONS` (plain residuals, delta=1.0, max_steps=5000).

    **Arguments**:

    - `L`: validation losses [P, V]; `Y`: accuracies [T, P], one row per benchmark.
    - `weights`: [P] or [T, P] per-point weights (e.g. a train mask).
    - `names`: T names that key the result; `key`: draws the `restarts` random starts.
    - `monotone`: fit with k >= 0 and 0 <= A <= 1; `options`: default `BENCHMARK_OPTIONS`.

    **Returns**: a `BenchmarkFits`.
    """
    options = _plain_residuals(options, BENCHMARK_OPTIONS, "accuracies")
    L, Y = jnp.asarray(L), jnp.asarray(Y)
    if len(names) != Y.shape[0]:
        raise ValueError(f"`names` must have one entry per row of Y ({Y.shape[0]}); got {len(names)}")
    W = None if weights is None else jnp.broadcast_to(jnp.asarray(weights, dtype=Y.dtype), Y.shape)
    template = LossToBenchmark.sample_init(key, n_losses=L.shape[1], monotone=monotone)
    result = fit_at_center(template, L, Y, key=key, restarts=restarts, weights=W, options=options)
    laws = _rows(result.law, names)
    return BenchmarkFits(laws=laws, result=result, proxy={b: laws[b].proxy_loss(L) for b in names})


def fit_at_center(template: LossToBenchmark, L: Array, Y: Array, *, inits: Any = None, **kwargs: Any) -> FitResult:
    """`fit` of loss-to-benchmark laws on the losses `L` [P, V], run as the same fit of `L - c` by laws whose
    `center` is 0 (`kwargs` go to `fit`, which sets the other unit, the losses' spread, as usual). c is the center
    the fit would set from the data (`with_data_scales`), or that of `inits` (warm starts). A law stores its
    intercept at its center, B_c = B + k . c, so a law of L - c centred at 0 and a law of L centred at c have the
    same leaves and compute the same residuals: only the static center differs. The compiled programs then do not
    depend on where the losses lie, and a new table, world or resample reuses them (a backtest world compiled the
    loss-to-benchmark fit anew for its centers: 3 s of 25).

    **Returns**: the `FitResult` in the original losses (inputs `(L,)`, laws centred at c), as `fit` on L."""
    L = jnp.asarray(L)
    center = inits.center if inits is not None else template.with_data_scales((L,), Y).get("center")
    if center is None:  # too few finite rows to set a center from: the fit as it is
        return fit(template, (L,), Y, inits=inits, **kwargs)
    zero = tuple(0.0 for _ in center)
    shifted = L - jnp.asarray(center, L.dtype)[None, :]
    moved = None if inits is None else dataclasses.replace(inits, center=zero)
    result = fit(dataclasses.replace(template, center=zero), (shifted,), Y, inits=moved, **kwargs)
    # the fit may still move the center by a rounding unit (a mean of L - c on the edge): add what it set
    back = functools.partial(dataclasses.replace, center=tuple(c + s for c, s in zip(center, result.law.center)))
    return dataclasses.replace(result, law=back(result.law), laws=back(result.laws), inputs=(L,))


class PipelineFit(eqx.Module):
    """Result of `fit_pipeline`: the point-estimate `pipeline`, the batched `pipelines` over bootstrap
    resamples (None without resamples), the multi-target mixture-law fit `loss_fit`, the `resamples` [B, P]
    shared by every benchmark and both stages (None without resamples), the `calibration` of the proxy-loss
    laws' extrapolation error (one per benchmark of the score; None unless calibrated), and
    `score_noise`, the noise of one evaluation of the score: sqrt(sum_b w_b^2 s_b^2) with s_b the rms
    residual of benchmark b's loss-to-benchmark fit (a gain below it could not be confirmed by training the run),
    or, when the runs repeat a (mixture, size), the scatter of the repeats' measured score.
    `decision_calibration` (None unless calibrated) is the score's and the gain's error measured on the
    same held-out sizes, in score units (`calibrate_decision`): `decide` and `optimal_mixture` read the
    verdict from it. `support()` is the range of the trained mixtures. `benchmark_problems` are the problems of
    the score's loss-to-benchmark fits (`FitResult.problems()` of each benchmark's, naming it), and
    `degenerate_benchmarks` the benchmarks whose loss-to-benchmark law is degenerate (a parameter the solver ran to
    a limit): no verdict rests on those. `resample_problems` say how many of the resampled fits (both stages) did not
    converge, or hold a degenerate law. `problems()` says them all."""

    pipeline: Pipeline
    pipelines: Pipeline | None
    loss_fit: FitResult
    resamples: Array | None
    calibration: Calibration | None = None
    score_noise: float = 0.0
    decision_calibration: DecisionCalibration | None = None
    benchmark_problems: tuple[str, ...] = eqx.field(static=True, default=())
    degenerate_benchmarks: tuple[str, ...] = eqx.field(static=True, default=())
    resample_problems: tuple[str, ...] = eqx.field(static=True, default=())

    def problems(self) -> list[str]:
        """What makes a decision on this fit unreliable, one sentence each: the proxy-loss fit's (`loss_fit.problems()`,
        its targets the score's benchmarks in order), the score's loss-to-benchmark fits' (`benchmark_problems`), and
        the resampled fits' (`resample_problems`: those that did not converge or are degenerate). Every decision
        resting on the fit repeats them."""
        return self.loss_fit.problems() + list(self.benchmark_problems) + list(self.resample_problems)

    @property
    def objective_noise(self) -> float:
        """Deprecated name of `score_noise`."""
        warn_renamed("PipelineFit.objective_noise", "PipelineFit.score_noise")
        return self.score_noise

    def support(self) -> tuple[np.ndarray, np.ndarray]:
        """(lower [n], upper [n]): each dataset's smallest and largest weight among the trained mixtures."""
        r = np.asarray(self.loss_fit.inputs[0])[np.asarray(jnp.any(jnp.atleast_2d(self.loss_fit.weights) > 0, 0))]
        return r.min(axis=0), r.max(axis=0)


@renamed_keywords(objective="benchmark_weights")
def fit_pipeline(
    data: MixtureData,
    benchmarks: BenchmarkFits,
    benchmark_weights: Mapping[str, float],
    *,
    law: Any,
    key: Array,
    n_resamples: int = 0,
    restarts: int = 16,
    groups: ArrayLike | None = None,
    strata: ArrayLike | None = None,
    options: FitOptions | None = None,
    two_stage: bool = True,
    calibrate: bool = True,
    replicates: bool = True,
) -> PipelineFit:
    """Fit the mixture law on every benchmark's proxy loss and assemble the end-to-end `Pipeline`.

    `data` is a MixtureData of the training runs (its `y` is not used), `benchmarks` the `fit_benchmarks`
    result on the same rows, `benchmark_weights` the weights w_b of the score sum_b w_b Acc_b (e.g.
    `BENCHMARK_WEIGHTS["balanced"]`), `law` the mixture-law template (e.g. a tied CAMEL). Proxy losses are fitted
    with plain residuals (they can be <= 0; `options` default to `PROXY_OPTIONS`). All benchmarks are one
    multi-target fit.

    With `n_resamples` = B, the runs are resampled (points, or `groups` within `strata`) B times and every fit
    is redone on each resample, warm-started from the full-data fits, giving the batched `pipelines`:

    - `two_stage` (default): both stages. The loss-to-benchmark laws are refitted on the resample's runs (with
      `BENCHMARK_OPTIONS`), each resample's proxy losses k_b . L follow its own laws, and the mixture laws are
      fitted on those; otherwise only the mixture laws are resampled and the benchmark laws are the point fits.
    - `calibrate` (default): also measure the mixture laws' extrapolation error past the largest trained size
      (`calibrate`: 2 folds, holding out the largest and the two largest sizes, or 1 fold for 3 sizes; skipped
      with a warning for fewer), kept in `calibration` for `decide`, `score_draws` and
      `optimal_mixture`'s verdict. Its folds are one fit of min(B, `FOLD_RESAMPLES`) resamples each. The same folds'
      predictions of the score at the held-out runs, against the runs' measured score, give the
      `decision_calibration` (no further fit).
    - `replicates` (default): when runs repeat a (mixture, size), the noise of one run's score (the noise
      floor `score_noise` and the decision calibration's noise) is the repeats' pooled scatter, not the
      benchmark fits' residuals, and each mixture's runs are weighted by 1 / its repeats' variance in the
      proxy-loss fits (`replicate_weights`; all weights 1 without repeats).

    **Arguments**:

    - `data`: the training runs as a `MixtureData` (its `y` is not used); `benchmarks`: `fit_benchmarks` on the
      same rows.
    - `benchmark_weights`: the weights of the score sum_b w_b Acc_b, {benchmark: w_b} (e.g.
      `BENCHMARK_WEIGHTS["balanced"]`; the old keyword `objective=` is deprecated).
    - `law`: the mixture-law template (e.g. a tied CAMEL); `key`: draws the starts and the resamples;
      `restarts`: random starts of the point fits.
    - `n_resamples`: B bootstrap resamples (0: the point pipeline only); `groups`, `strata`: as for `bootstrap`.
    - `options`: of the proxy-loss fits (default `PROXY_OPTIONS`); `two_stage`, `calibrate`, `replicates`: see
      above.

    **Returns**: a `PipelineFit`: the point `pipeline`, the batched `pipelines` (with resamples), the fits, the
    `calibration` and the `score_noise`.
    """
    check_benchmark_weights(benchmark_weights)
    check_key(key)
    check_several_mixtures(data.r, data.weight, "`data`")
    options = _plain_residuals(options, PROXY_OPTIONS, "proxy losses")
    names, Y = _proxy_targets(benchmarks, benchmark_weights, data.n_points)
    k_fit, k_boot, k_draw = jax.random.split(key, 3)
    noisy = _noise_weights(data, Y) if replicates else jnp.ones(Y.shape, Y.dtype)  # [T, P]
    W = jnp.broadcast_to(data.weight, Y.shape) * noisy
    loss_fit = fit(law, data.inputs, Y, weights=W, key=k_fit, restarts=restarts, options=options)
    loss_fit = dataclasses.replace(loss_fit, names=named_columns(data.columns))
    said, degenerate = _benchmark_fit_problems(benchmarks, names)
    weights = {b: benchmark_weights[b] for b in names}
    datasets = named_columns(data.columns)
    pipeline = Pipeline(_rows(loss_fit.law, names), {b: benchmarks.laws[b] for b in names}, weights, datasets)
    noise = _score_noise(benchmarks, weights)
    measured, runs_used = _measured_score(benchmarks, weights, data.weight)
    repeated = replicates and _repeats(data, measured, runs_used) is not None
    if repeated:
        noise = cast(float, _repeats(data, measured, runs_used))
    if n_resamples <= 0:
        return PipelineFit(pipeline=pipeline, pipelines=None, loss_fit=loss_fit, resamples=None,
                           score_noise=noise, benchmark_problems=said, degenerate_benchmarks=degenerate)  # fmt: skip
    counts = resample_weights(k_draw, data.n_points, n_resamples, groups=groups, strata=strata).astype(Y.dtype)
    counts = counts * data.weight[None, :]
    if two_stage:
        bench, Y_boot, resampled = _resampled_benchmarks(benchmarks, names, counts, k_boot)
    else:
        bench = {b: jax.tree.map(lambda leaf: jnp.broadcast_to(leaf, (n_resamples,) + leaf.shape), benchmarks.laws[b])
                 for b in names}  # fmt: skip
        Y_boot, resampled = jnp.repeat(Y, n_resamples, axis=0), []
    batched, said_of_proxies = _resampled_loss_laws(law, data, Y_boot, counts, noisy, loss_fit, names, k_boot, options)
    calibration, decision = None, None
    if calibrate:  # its folds need their median prediction at the held-out runs, not the bootstrap's tails
        folds = _calibration(law, data, Y, W, loss_fit, (groups, strata, min(n_resamples, FOLD_RESAMPLES)), options,
                             k_draw)  # fmt: skip
        if folds is not None:
            calibration = folds[0]
            predicted = _fold_score(pipeline, folds[1])
            fitted_score = np.asarray(pipeline.score(data.r, jnp.asarray(folds[1].size)))
            decision = _decision_calibration(predicted, measured, folds[1], noise, runs_used, repeated, fitted_score)
    return PipelineFit(pipeline=pipeline, pipelines=Pipeline(batched, bench, weights, datasets), loss_fit=loss_fit,
                       resamples=counts, calibration=calibration, score_noise=noise,
                       decision_calibration=decision, benchmark_problems=said, degenerate_benchmarks=degenerate,
                       resample_problems=tuple(said_of_proxies + resampled))  # fmt: skip


def _benchmark_fit_problems(
    benchmarks: BenchmarkFits, names: Sequence[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the problems of the loss-to-benchmark fit of each benchmark in `names`, each naming its benchmark, the
    benchmarks among them whose law is degenerate): each read from its own row of the multi-target fit
    (`FitResult.target_fit`), in the order of `names`."""
    result, order = benchmarks.result, list(benchmarks.laws)
    said: list[str] = []
    degenerate: list[str] = []
    for b in names:
        one = result.target_fit(order.index(b))
        said += [f"the loss-to-benchmark fit of {b}: {problem}" for problem in one.problems()]
        if one.degenerate():
            degenerate.append(b)
    return tuple(said), tuple(degenerate)


def _decision_calibration(
    predicted, measured, held: HeldOut, noise, used, repeated, fitted
) -> DecisionCalibration | None:
    """`calibrate_decision` on the folds (the gain's scale following the size of the point pipeline's score
    `fitted` at the runs), or None (with a warning) when no held-out size holds 2 measured runs."""
    try:
        return calibrate_decision(predicted, measured, held.size, held.keeps, noise_sd=noise, used=used,
                                  replicated=repeated, fitted=fitted)  # fmt: skip
    except ValueError as error:
        warnings.warn(f"{error}: verdicts fall back to the proxy losses' calibration", stacklevel=user_stacklevel())
        return None


def _measured_score(benchmarks: BenchmarkFits, weights: Mapping[str, float], run_weight: Array):
    """Each run's measured score sum_b w_b Acc_b [P], and whether every benchmark of it was measured [P]."""
    order = list(benchmarks.laws)
    y = np.asarray(benchmarks.result.y)
    w = np.broadcast_to(np.asarray(benchmarks.result.weights), y.shape)
    measured = sum(wb * y[order.index(b)] for b, wb in weights.items())
    used = np.asarray(run_weight) > 0
    for b in weights:
        used = used & (w[order.index(b)] > 0)
    return np.asarray(measured), used


def _repeats(data: MixtureData, measured: np.ndarray, used: np.ndarray) -> float | None:
    """The repeats' pooled scatter of the measured score, or None with fewer than 2 degrees of freedom."""
    size = np.zeros(len(measured)) if data.size is None else np.asarray(data.size)
    sd, dof = replicate_noise(np.asarray(data.r), size, measured, used)
    return sd if dof >= 2 and sd > 0 else None


def _noise_weights(data: MixtureData, Y: Array) -> Array:
    """Each proxy loss's fit weights [T, P] from repeated runs (`replicate_weights`; all 1 without repeats)."""
    size = np.zeros(data.n_points) if data.size is None else np.asarray(data.size)
    w = replicate_weights(np.asarray(data.r), size, np.asarray(Y), np.asarray(data.weight) > 0)
    return jnp.asarray(w, Y.dtype)


def _fold_score(pipeline: Pipeline, held: HeldOut) -> np.ndarray:
    """Each fold's predicted score at every run [folds, P] from its proxy losses [folds, T, P] (the point
    fits' loss-to-benchmark laws)."""
    total = np.zeros(held.median.shape[::2])
    for i, (b, w) in enumerate(pipeline.benchmark_weights):
        total = total + w * np.asarray(pipeline.benchmark_laws[b].from_proxy(jnp.asarray(held.median[:, i, :])))
    return total


def _proxy_targets(benchmarks: BenchmarkFits, weights: Mapping[str, float], n_points: int) -> tuple[list, Array]:
    """The score's benchmarks (nonzero weight) and their proxy losses [T, P], checked against the runs."""
    names = [b for b in weights if weights[b] != 0]
    missing = [b for b in names if b not in benchmarks.proxy]
    if missing:
        raise ValueError(f"no fitted loss-to-benchmark law for {missing}; have {sorted(benchmarks.laws)}")
    Y = jnp.stack([jnp.asarray(benchmarks.proxy[b]) for b in names])
    if Y.shape[1] != n_points:
        raise ValueError(f"`benchmarks` has {Y.shape[1]} rows but `data` has {n_points}: fit both on the same runs")
    return names, Y


def _resampled_loss_laws(law, data, Y_boot, counts, noisy, loss_fit, names, key, options) -> tuple[dict, list]:
    """The mixture laws refitted on every resample ({b: law batched [B]}): one multi-target fit of the rows
    [T * B] (benchmark-major: the same resamples for every benchmark, weighted by `noisy` [T, P]), each
    warm-started at its full-data fit; and that fit's problems (`_resample_problems`)."""
    T, (B, P) = len(names), counts.shape
    warm = warm_starts(loss_fit.law, B)
    weights = (counts[None] * noisy[:, None, :]).reshape(T * B, P)
    boot = fit(law, data.inputs, Y_boot, weights=weights, key=key, inits=warm, options=options)
    fix = "raise `fit_pipeline(options=FitOptions(max_steps=..., polish=...))`"
    said = _resample_problems(boot, "proxy-loss", fix, (loss_fit.y, DEGENERATE_HINT))
    return _rows(jax.tree.map(lambda leaf: leaf.reshape((T, B) + leaf.shape[1:]), boot.law), names), said


def _resample_problems(refit: FitResult, what: str, fix: str, degenerate: tuple[Any, str]) -> list[str]:
    """What makes a batch of resampled fits unreliable, as `FitResult.bootstrap_problems()` says it of a loss fit's:
    the rows whose chosen start did not meet its stopping rule, those whose objective is not finite, and those whose
    law is degenerate (`_degenerate_rows`; `degenerate` is (the point fit's targets [T, P], what such a row calls
    for))."""
    best, late = refit._unconverged()  # the rule `FitResult.problems()` reads
    out = []
    if late.size:
        labels = ", ".join(sorted({Status(int(code)).label for code in best[late]}))
        out.append(f"{late.size} of {best.size} resampled {what} fits did not converge ({labels}): the bands "
                   f"and the verdict include where those fits stopped, not only what the data determine; {fix}")
    bad = int(np.sum(~np.isfinite(np.asarray(refit.objective))))
    if bad:
        out.append(f"{bad} of {best.size} resampled {what} fits have a non-finite objective")
    targets, hint = degenerate
    found = _degenerate_rows(refit, np.asarray(targets, dtype=float))
    if found:
        out.append(f"{found} of {best.size} resampled {what} fits are degenerate (a limit the solver ran to, or a "
                   "step inside the trained sizes): the bands and the verdict include laws that are not estimates, "
                   f"and the data barely determine this law; {hint}")  # fmt: skip
    return out


def _degenerate_rows(refit: FitResult, targets: np.ndarray) -> int:
    """How many rows of a resampled multi-target fit (benchmark-major: T benchmarks x B resamples) hold a degenerate
    law, each by the rule of `FitResult.degenerate` under its own row's weights, read on its benchmark's targets
    of the point fit `targets` [T, P] (the level and the data's units a limit is measured in; a two-stage
    resample's own proxy losses differ from them by the resample's spread, far below the rule's factors of 1e6)."""
    T = targets.shape[0]
    B = int(np.shape(refit.y)[0]) // T
    weights = np.broadcast_to(np.asarray(refit.weights, dtype=float), np.shape(refit.y)).reshape(T, B, -1)
    count = 0
    for t in range(T):
        rows = jax.tree.map(lambda leaf, t=t: leaf[t * B : (t + 1) * B] if eqx.is_array(leaf) else leaf, refit.law)
        count += sum(bool(found) for found in degenerate_batch(rows, refit.inputs, targets[t], weights[t]))
    return count


def _score_noise(benchmarks: BenchmarkFits, weights: Mapping[str, float]) -> float:
    """sqrt(sum_b w_b^2 s_b^2), s_b the weighted rms residual of benchmark b's loss-to-benchmark fit."""
    result = benchmarks.result
    order = list(benchmarks.laws)
    pred = np.asarray(result.predict(*result.inputs))  # [T, P]
    y = np.asarray(result.y)
    w = np.broadcast_to(np.asarray(result.weights), y.shape)
    total = 0.0
    for b, wb in weights.items():
        i = order.index(b)
        total += wb**2 * float(np.sum(w[i] * (y[i] - pred[i]) ** 2) / np.sum(w[i]))
    return float(np.sqrt(total))


def _resampled_benchmarks(
    benchmarks: BenchmarkFits, names: Sequence[str], counts: Array, key: Array
) -> tuple[dict[str, LossToBenchmark], Array, list[str]]:
    """The loss-to-benchmark laws refitted on every resample ({b: law batched [B]}), the resamples' proxy
    losses [T * B, P] (benchmark-major), as one multi-target fit warm-started from the point fits, and that fit's
    problems (`_resample_problems`)."""
    result = benchmarks.result  # a multi-target fit: every leaf has a leading benchmark axis
    order = list(benchmarks.laws)
    index = jnp.asarray([order.index(b) for b in names])
    B, P = counts.shape
    (L,) = result.inputs
    point = jax.tree.map(lambda leaf: leaf[index], result.law)  # [T, ...]
    warm = warm_starts(point, B)  # [T * B, 1, ...]
    weights = (jnp.broadcast_to(result.weights, result.y.shape)[index][:, None, :] * counts[None]).reshape(-1, P)
    refit = fit_at_center(jax.tree.map(lambda leaf: leaf[0], point), L, jnp.repeat(result.y[index], B, axis=0),
                          weights=weights, key=key, inits=warm, options=BENCHMARK_OPTIONS)  # fmt: skip
    laws = jax.tree.map(lambda leaf: leaf.reshape((len(names), B) + leaf.shape[1:]), refit.law)
    per_benchmark = _rows(laws, names)
    proxy = jnp.concatenate([jax.vmap(lambda law: law.proxy_loss(L))(per_benchmark[b]) for b in names])
    fix = "they run at `BENCHMARK_OPTIONS`; `fit_pipeline(two_stage=False)` keeps the full-data fits in every resample"
    kept = "`fit_pipeline(two_stage=False)` keeps the full-data loss-to-benchmark fits in every resample"
    return per_benchmark, proxy, _resample_problems(refit, "loss-to-benchmark", fix, (result.y[index], kept))


def _calibration(law, data, Y, W, loss_fit, resampling, options, key) -> tuple[Calibration, HeldOut] | None:
    """The proxy-loss laws' extrapolation error and its folds, or None (with a warning) when the data hold < 3
    sizes."""
    n_sizes = len(np.unique(np.asarray(data.size)))
    if n_sizes < 3:
        warnings.warn(
            f"the runs hold {n_sizes} distinct size(s): the extrapolation error cannot be calibrated (it needs a "
            "held-out size and 2 to fit), so bands and verdicts are the bootstrap's alone",
            stacklevel=user_stacklevel(),
        )
        return None
    groups, strata, n_resamples = resampling
    # per benchmark: the proxy losses' errors are in their own units, and the score's draws were measured so
    return calibrate_folds(law, data.inputs, Y, key=jax.random.fold_in(key, 7), n_resamples=max(n_resamples, 2),
                           inits=loss_fit.law, weights=W, groups=groups, strata=strata, options=options,
                           pool=False)  # fmt: skip


def _rows(batched: Any, names: Sequence[str]) -> dict[str, Any]:
    """{name: the i-th law} of a law batched over len(names) targets (its leading axis)."""
    return {b: jax.tree.map(lambda leaf, i=i: leaf[i], batched) for i, b in enumerate(names)}
