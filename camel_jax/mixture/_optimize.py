"""The optimal mixture: gradient ascent on the simplex, with exact bounds, vmapped starts and resamples."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Sequence
from typing import Any, cast

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, ArrayLike, Float

from .._deprecated import renamed_keywords
from .._warn import user_stacklevel
from ..data._checks import check_key
from ..fitting._calibrate import Calibration
from ..laws._base import count
from ..solver._implicit import DerivativeStatus, implicit_mixture, maximum_derivative_status, value_at_maximum
from ._decide import VERDICTS, Decision, decide
from ._pipeline import Pipeline, PipelineFit


def project_capped_simplex(v: Float[Array, " n"], lower: Float[Array, " n"], upper: Float[Array, " n"]) -> Array:
    """Euclidean projection onto {lower <= r <= upper, sum r = 1}: r = clip(v - tau, lower, upper).

    s(tau) = sum clip(v - tau, lower, upper) is decreasing and linear between the 2n breakpoints v - upper and
    v - lower, so tau is found exactly (at any scale of v) by evaluating s at the breakpoints and interpolating
    linearly on the segment where it crosses 1. The clip makes the bounds hold exactly.

    **Arguments**:

    - `v`: the point to project [n]; `lower`, `upper`: the bounds [n] (sum lower <= 1 <= sum upper).

    **Returns**: the projection r [n].
    """
    breaks = jnp.sort(jnp.concatenate([v - upper, v - lower]))
    sums = jax.vmap(lambda tau: jnp.sum(jnp.clip(v - tau, lower, upper)))(breaks)  # decreasing
    i = jnp.clip(jnp.sum(sums >= 1.0) - 1, 0, breaks.shape[0] - 2)
    t0, t1, s0, s1 = breaks[i], breaks[i + 1], sums[i], sums[i + 1]
    drop = s0 - s1
    tau = jnp.where(drop > 0, t0 + (s0 - 1.0) * (t1 - t0) / jnp.where(drop > 0, drop, 1.0), t0)
    return jnp.clip(v - tau, lower, upper)


class MixtureResult(eqx.Module):
    """Result of `optimal_mixture`.

    **Fields**: `r` the best start's mixture [n] (or [B, n] per resample); `value` its score; `kkt_residual`
    the projected-gradient norm |r - P(r + grad)|_inf (0 at an optimum); `starts_r` [S, n] and `starts_value`
    [S] every start's final mixture and value; `lower`, `upper` the effective bounds; `decision` the verdict
    against the `reference` (a `Decision`: gain with its band, `p_improve`, `verdict`) when one was asked for;
    `converged` (and `starts_converged` [S]) whether the ascent reached a KKT point (residual below sqrt(eps) of
    the gradient's size). `r` and `value` are differentiable (`jax.grad`, `jax.jvp`, `jax.vjp`) with respect to
    the score's arrays (a `Pipeline`'s laws, and so through `fit_arrays` the runs' losses and weights), at the
    solution and never through the ascent: `r` by its KKT conditions with the active bounds held
    (`implicit_mixture`), `value` by the envelope theorem; NaN where the derivative does not exist
    (`mixture_derivative_status` says why).
    """

    r: Array
    value: Array
    kkt_residual: Array
    starts_r: Array
    starts_value: Array
    lower: Array
    upper: Array
    decision: Decision | None = None
    converged: Array | None = None
    starts_converged: Array | None = None


# Bounds read from a file or typed by hand are rounded: sums within this of 1 are feasible (and made exact).
BOUND_TOLERANCE = 1e-8


def _bounds(n: int, lower, upper, reference, max_shift) -> tuple[np.ndarray, np.ndarray]:
    lo = np.zeros(n) if lower is None else _bound_array(lower, n, "lower")
    hi = np.ones(n) if upper is None else _bound_array(upper, n, "upper")
    if max_shift is not None:
        if reference is None:
            raise ValueError("`max_shift` needs a `reference` mixture")
        ref = _reference_mixture(reference, n)
        if not (np.isfinite(max_shift) and max_shift > 0):
            raise ValueError(f"`max_shift` must be finite and > 0; got {max_shift}")
        if max_shift > 1:  # a percentage given as a number (20 for 20%): below the reference it would allow 0
            raise ValueError(
                f"`max_shift` is a fraction of the reference (0.2 for +-20%); got {max_shift:g}: above 1 the lower "
                "bound would be negative, so it bounds nothing; give a fraction <= 1"
            )
        lo = np.maximum(lo, ref * (1 - max_shift))
        hi = np.minimum(hi, ref * (1 + max_shift))
    bad = np.flatnonzero(lo > hi)
    if len(bad):
        j = bad[0]
        raise ValueError(f"infeasible bounds: dataset {j} has lower {lo[j]:.6g} > upper {hi[j]:.6g}")
    if lo.sum() > 1 + BOUND_TOLERANCE:
        raise ValueError(f"infeasible bounds: the lower bounds sum to {lo.sum():.10g} > 1")
    if hi.sum() < 1 - BOUND_TOLERANCE:
        raise ValueError(f"infeasible bounds: the upper bounds sum to {hi.sum():.10g} < 1")
    if np.any(lo < 0) or np.any(hi > 1):
        raise ValueError("bounds must lie in [0, 1]")
    if lo.sum() > 1:  # within rounding of the simplex: the only feasible mixture is `lo` itself
        lo = lo / lo.sum()
        hi = np.maximum(hi, lo)
    if hi.sum() < 1:
        hi = hi / hi.sum()
        lo = np.minimum(lo, hi)
    return lo, hi


def _bound_array(value: ArrayLike, n: int, name: str) -> np.ndarray:
    try:
        bound = np.broadcast_to(np.asarray(value, dtype=float), (n,)).copy()
    except ValueError:
        raise ValueError(f"`{name}` must be a number or one value per dataset ({n}); got {value!r}") from None
    if not np.all(np.isfinite(bound)):
        raise ValueError(f"`{name}` must be finite; dataset {int(np.argmin(np.isfinite(bound)))} has {value!r}")
    return bound


def check_model_size(size: Any, name: str = "model_size") -> float:
    """A target model size: a finite number > 0."""
    try:
        value = float(size)
    except (TypeError, ValueError):
        raise TypeError(f"`{name}` must be a number; got {size!r}") from None
    if not (np.isfinite(value) and value > 0):
        raise ValueError(f"`{name}` must be finite and > 0 (a model size, in the laws' units); got {size!r}")
    return value


# A target size this many times beyond the trained sizes (either way) is an extrapolation far from the data.
FAR = 4.0


def extrapolation_problem(fitted: Any, size: float) -> str | None:
    """A sentence when `size` lies far outside the model sizes a fit was trained on (more than `FAR` times beyond
    the largest or below the smallest, counting points of positive weight), else None.

    **Arguments**:

    - `fitted`: a `FitResult` whose `inputs[1]` are the model sizes (a mixture law of (r, size, ...)).
    - `size`: the target model size, in the fit's units.

    **Returns**: the sentence, or None (also for a fit without a size input).
    """
    if fitted is None or len(fitted.inputs) < 2 or np.ndim(fitted.inputs[1]) != 1:
        return None
    sizes = np.asarray(fitted.inputs[1])
    sizes = sizes[np.asarray(fitted.weights).reshape(-1, len(sizes)).max(0) > 0]
    low, high = float(sizes.min()), float(sizes.max())
    if low / FAR <= size <= FAR * high:
        return None
    return (
        f"size {size:g} is far outside the trained sizes [{low:g}, {high:g}] ({size / high:.3g}x the largest): the "
        "prediction there rests on the law's form alone, not on data"
    )


@dataclasses.dataclass(frozen=True)
class AscentOptions:
    """The ascent of `optimal_mixture` (frozen; checked when built; a new value compiles anew).

    **Fields**: `adam_steps` (>= 0), Adam steps on the softmax logits; `polish_steps` (>= 0), projected-gradient
    steps on the bounded simplex after them, always taken (past the KKT rule they settle the weights to rounding,
    which their implicit derivative needs); `max_polish_steps` (>= `polish_steps`; None: 10 x `polish_steps`), the
    most polish steps while the best start is not yet at its KKT point: the pick's polish stops on its own
    rule, not on a count (a pick on a flat face, a share at 0, needed ~300-1000 steps); `learning_rate` (> 0),
    Adam's step size.
    """

    adam_steps: int = 100
    polish_steps: int = 100
    learning_rate: float = 0.1
    max_polish_steps: int | None = None

    def __post_init__(self) -> None:
        count(self.adam_steps, "AscentOptions.adam_steps", least=0)
        count(self.polish_steps, "AscentOptions.polish_steps", least=0)
        if self.max_polish_steps is not None:
            count(self.max_polish_steps, "AscentOptions.max_polish_steps", least=0)
            if self.max_polish_steps < self.polish_steps:
                raise ValueError(f"`AscentOptions.max_polish_steps` ({self.max_polish_steps}) must be >= "
                                 f"`polish_steps` ({self.polish_steps})")  # fmt: skip
        rate = self.learning_rate
        if isinstance(rate, bool) or not (isinstance(rate, float | int) and np.isfinite(rate) and rate > 0):
            raise ValueError(f"`AscentOptions.learning_rate` must be a finite number > 0; got {rate!r}")

    def steps(self, lower: ArrayLike, upper: ArrayLike) -> _Ascent:
        """The ascent on the bounded simplex [lower, upper] with these settings."""
        lo, hi = np.asarray(lower, float), np.asarray(upper, float)
        most = 10 * self.polish_steps if self.max_polish_steps is None else self.max_polish_steps
        return _Ascent(jnp.asarray(lo), jnp.asarray(hi), self.adam_steps, self.polish_steps, most,
                       float(self.learning_rate), bool(np.any(lo > 0) or np.any(hi < 1)))  # fmt: skip


def at_kkt(value: Array, grad: Array, residual: Array) -> Array:
    """Converged: a KKT `residual` (`_Ascent.kkt`) below sqrt(eps) of the gradient's size (1.5e-8 in float64; the
    polish gets to rounding), where the implicit derivative is exact to about that order; a start short of it gets
    NaN derivatives (DerivativeStatus.NOT_CONVERGED)."""
    size = jnp.maximum(jnp.max(jnp.abs(grad)), jnp.finfo(grad.dtype).tiny)
    return jnp.isfinite(value) & (residual <= jnp.sqrt(jnp.finfo(grad.dtype).eps) * size)


class _Ascent(eqx.Module):
    """The ascent's settings (static: a new setting compiles anew) and bounds (traced)."""

    lower: Array
    upper: Array
    adam_steps: int = eqx.field(static=True)
    polish_steps: int = eqx.field(static=True)
    max_polish_steps: int = eqx.field(static=True)
    learning_rate: float = eqx.field(static=True)
    bounded: bool = eqx.field(static=True)

    def to_mixture(self, z: Array) -> Array:
        r = jax.nn.softmax(z)
        return project_capped_simplex(r, self.lower, self.upper) if self.bounded else r  # softmax is on the simplex

    def adam(self, f: Callable[[Array], Array], z0: Array) -> Array:
        """Adam on the softmax logits (mapped into the bounds), maximizing f."""
        optimizer = optax.adam(self.learning_rate)
        negative = jax.grad(lambda z: -f(self.to_mixture(z)))

        def step(_, carry):
            z, state = carry
            with jax.numpy_dtype_promotion("standard"):  # optax's bias correction mixes int and float
                updates, state = optimizer.update(negative(z), state, z)
            return optax.apply_updates(z, updates), state

        z, _ = jax.lax.fori_loop(0, self.adam_steps, step, (z0, optimizer.init(z0)))
        return self.to_mixture(z)

    def polish(self, f: Callable[[Array], Array], r: Array) -> tuple[Array, Array, Array, Array]:
        """Projected-gradient ascent with a carried Armijo step from every start r [S, n] to a KKT point: (r, value,
        KKT residual, converged), each per start. Once f's gains are below its rounding, a step that keeps f to
        rounding and lowers the KKT residual is still taken: the weights then settle to rounding, which their
        implicit derivative (and a finite-difference check of it) needs. `polish_steps` steps always; then more
        while the best start is short of its KKT rule, up to `max_polish_steps` (the loop follows the best start,
        so a slow start that will not be the pick does not hold the others, nor a batch of resamples, to the cap)."""
        value_grad = jax.vmap(jax.value_and_grad(f))
        kkt = jax.vmap(self.kkt)
        slack = 1e3 * jnp.finfo(r.dtype).eps

        def running(carry):
            i, (_, value, grad, res, _) = carry
            best = best_start(value)
            return (i < self.polish_steps) | ((i < self.max_polish_steps) & ~at_kkt(value[best], grad[best], res[best]))

        def step(carry):
            i, (r, value, grad, res, size) = carry
            trial = jax.vmap(lambda r, grad, size: project_capped_simplex(r + size * grad, self.lower, self.upper))(
                r, grad, size)  # fmt: skip
            trial_value, trial_grad = value_grad(trial)
            trial_res = kkt(trial, trial_grad)
            rounding = slack * jnp.abs(value)  # a change below it is no evidence: the KKT residual decides
            armijo = trial_value >= value + 1e-4 * jnp.sum(grad * (trial - r), axis=-1)
            rises = armijo & (trial_value > value + rounding)
            settles = (trial_value >= value - rounding) & (trial_res < res)
            ok = jnp.isfinite(trial_value) & (rises | settles)
            return i + 1, (
                jnp.where(ok[:, None], trial, r),
                jnp.where(ok, trial_value, value),
                jnp.where(ok[:, None], trial_grad, grad),
                jnp.where(ok, trial_res, res),
                jnp.where(ok, jnp.minimum(size * 2.0, 1e6), size * 0.5),  # bounded: a linear f accepts every step
            )

        value, grad = value_grad(r)
        start = (jnp.zeros((), jnp.int32), (r, value, grad, kkt(r, grad), jnp.ones(value.shape, r.dtype)))
        _, (r, value, grad, res, _) = jax.lax.while_loop(running, step, start)
        return r, value, res, jax.vmap(at_kkt)(value, grad, res)

    def ascend(self, f: Callable[[Array], Array], z0: Array) -> tuple[Array, Array, Array, Array]:
        """Adam (vmapped) then the polish from every start [S, n]: (r, value, KKT residual, converged) of each. The
        ascent climbs f divided by its typical size at the starts (`score_unit`), so that its steps, Adam's epsilon
        and the KKT rule read the same numbers whatever units f is in (a loss in nats or in micro-nats: issue 56);
        the values returned are f's own."""
        unit = score_unit(f, jax.vmap(self.to_mixture)(z0))
        g = lambda r: f(r) / unit  # noqa: E731
        r, value, kkt, converged = self.polish(g, jax.vmap(lambda z: self.adam(g, z))(z0))
        return r, value * unit, kkt, converged

    def kkt(self, r: Array, grad: Array) -> Array:
        return jnp.max(jnp.abs(r - project_capped_simplex(r + grad, self.lower, self.upper)))

    def best_of(self, f: Callable[[Array], Array], z0: Array) -> MixtureResult:
        """Every start [S, n] ascended (vmapped); the best finite one reported. The ascent runs on f with its
        arrays' derivatives stopped; each start's mixture and value are then differentiated at the solution
        (`implicit_mixture`, `value_at_maximum`), never through the ascent's iterations."""
        score, data = _split(f)
        frozen = jax.lax.stop_gradient(data)
        g = lambda r: score(r, frozen)  # noqa: E731
        r, _, kkt, converged = self.ascend(g, z0)
        r_live = jax.vmap(
            lambda r, c: implicit_mixture(score, r, data, lower=self.lower, upper=self.upper, converged=c)
        )(r, converged)
        value = jax.vmap(lambda r, c: value_at_maximum(score, r, data, converged=c))(r, converged)
        best = best_start(jax.lax.stop_gradient(value))
        return MixtureResult(r_live[best], value[best], kkt[best], r_live, value, self.lower, self.upper,
                             converged=converged[best], starts_converged=converged)  # fmt: skip


# Starts whose values lie within this fraction of the best one's are tied (rounding): the first of them is the pick
TIE_RTOL = 1e-12


def best_start(value: Array) -> Array:
    """The index of the best start: the first whose finite value is within `TIE_RTOL` of the highest. On a face of
    optima (a loss that reads the mixture through fewer weighted sums than it has shares) every start ends at
    another point of equal value, and the plain argmax let rounding in the last bit choose among them, so a loss in
    other units picked another point."""
    finite = jnp.where(jnp.isfinite(value), value, -jnp.inf)
    top = jnp.max(finite)
    return jnp.argmax(finite >= top - TIE_RTOL * jnp.abs(top))


def score_unit(f: Callable[[Array], Array], r: Array) -> Array:
    """The typical size of a score at mixtures r [S, n]: the mean of |f| over its finite nonzero values (1 when there
    are none), with no derivative: dividing by it makes the ascent's path the same in any units of the score."""
    values = jax.lax.stop_gradient(jax.vmap(f)(r))
    used = jnp.isfinite(values) & (values != 0)
    mean = jnp.sum(jnp.where(used, jnp.abs(values), 0.0)) / jnp.maximum(jnp.sum(used).astype(values.dtype), 1.0)
    return jnp.where(jnp.any(used), mean, jnp.ones_like(mean))


def _split(f: Any) -> tuple[Callable[[Array, Any], Array], Any]:
    """`score(r, data)` and `data`: a Module's floating arrays are its data (differentiated); a plain
    callable's traced closure is found by `implicit_mixture`'s closure conversion."""
    if isinstance(f, eqx.Module):
        data, static = eqx.partition(f, eqx.is_inexact_array)
        return lambda r, d: eqx.combine(d, static)(r), data
    return lambda r, d: f(r), ()


class _PipelineValue(eqx.Module):
    """r -> the pipeline's score at one size: per resample (batched pipelines) or one value."""

    pipeline: Pipeline
    size: Array

    def __call__(self, r: Array) -> Array:
        return self.pipeline.score(r[None, :], self.size)[..., 0]


class _Robust(eqx.Module):
    """r -> the mean, or the q-quantile, of a batched pipeline's score across resamples."""

    value: _PipelineValue
    q: Array | None

    def __call__(self, r: Array) -> Array:
        values = self.value(r)
        return jnp.mean(values) if self.q is None else jnp.quantile(values, self.q)


@eqx.filter_jit
def _solve(score: Any, z0: Array, ascent: _Ascent, per_resample: bool) -> MixtureResult:
    """`score` is a Module (its arrays traced: new laws of the same shapes reuse the compiled program) or the
    user's callable (static)."""
    if per_resample:
        return jax.vmap(lambda p: ascent.best_of(_PipelineValue(p, score.size), z0))(score.pipeline)
    return ascent.best_of(score, z0)


@eqx.filter_jit
def _solve_robust_each(pipelines: Pipeline, size: Array, q: Array | None, z0: Array, ascent: _Ascent) -> MixtureResult:
    return jax.vmap(lambda p: ascent.best_of(_Robust(_PipelineValue(p, size), q), z0))(pipelines)


def robust_mixtures(
    pipelines: Pipeline,
    *,
    key: Array,
    model_size: float,
    robust: str | tuple[str, float],
    restarts: int = 16,
    reference: ArrayLike | None = None,
    max_shift: float | None = None,
) -> MixtureResult:
    """`optimal_mixture(..., robust=robust)` for each of C problems at once: `pipelines` batched [C, B] (C
    independent decisions, B resamples each) gives one robust mixture per decision (r [C, n]), in one program."""
    if len(pipelines.batch_shape) != 2:
        raise ValueError(f"`pipelines` must be batched [C, B]; got batch shape {pipelines.batch_shape}")
    q = None if robust == "mean" else jnp.asarray(_quantile_level(robust))
    n = pipelines.n_datasets
    lo, hi = _bounds(n, None, None, reference if max_shift is not None else None, max_shift)
    ascent = AscentOptions().steps(lo, hi)
    size = jnp.asarray([check_model_size(model_size)])
    return _solve_robust_each(pipelines, size, q, 0.5 * jax.random.normal(key, (restarts, n)), ascent)


def _score_of(score: Any, model_size: float | None, robust: Any) -> tuple[Any, bool]:
    """The function to maximize, and whether it is one per resample of a batched pipeline."""
    if not isinstance(score, Pipeline):
        if robust is not None:
            raise ValueError("`robust` applies to a batched Pipeline score")
        if not callable(score):
            raise TypeError(f"`score` must be a callable, a Pipeline or a PipelineFit; got {type(score).__name__}")
        return score, False
    if model_size is None:
        raise ValueError("a Pipeline score needs `model_size` (the target model size, in the laws' units)")
    value = _PipelineValue(score, jnp.asarray([check_model_size(model_size)]))
    if not score.batch_shape:
        if robust is not None:
            raise ValueError("`robust` applies to a batched Pipeline (one with resamples)")
        return value, False
    if robust is None:
        return value, True
    return _Robust(value, None if robust == "mean" else jnp.asarray(_quantile_level(robust))), False


@renamed_keywords(objective="score")
def optimal_mixture(
    score: Callable[[Array], Array] | Pipeline | PipelineFit,
    n_datasets: int,
    *,
    key: Array,
    model_size: float | None = None,
    restarts: int = 16,
    ascent: AscentOptions | None = None,
    lower: ArrayLike | None = None,
    upper: ArrayLike | None = None,
    reference: ArrayLike | None = None,
    max_shift: float | None = None,
    robust: str | tuple[str, float] | None = None,
    calibration: Calibration | None = None,
    level: float = 0.95,
) -> MixtureResult:
    """Maximize a score over mixtures on the simplex.

    **Arguments**:

    - `score`: what to maximize: a callable `score(r) -> scalar` for a mixture r [n], or a `Pipeline` with
      `model_size` (its score, the weighted benchmark accuracy), or a `PipelineFit` (its batched `pipelines` when
      it has resamples, with its `calibration`; else its `pipeline`).
    - `n_datasets`: n. `key`: draws the `restarts` (vmapped) initial softmax logits.
    - `restarts`: random starts of the ascent; `ascent`: its `AscentOptions` (steps and step size; default
      `AscentOptions()`).
    - `lower`, `upper`: per-dataset bounds (e.g. data availability: tokens available x allowed epochs / total
      tokens); `reference`, `max_shift`: a trust region r_j in ref_j (1 +- max_shift) (the paper's +-20% design).
      Infeasible bounds raise `ValueError` before any compute. Bounds hold exactly in the result.
    - `robust`: for a batched `Pipeline` (B resamples): None gives one optimal mixture per resample (r [B, n]:
      their spread is the uncertainty band); "mean" or ("quantile", q) gives one mixture maximizing the mean or
      the q-quantile of the score across resamples.
    - The verdict: for a batched pipeline with `robust` and a `reference` (with or without `max_shift`), the
      result's `decision` says whether the chosen mixture beats the reference at `model_size` (`decide`, with
      the `calibration`'s extrapolation error when given, at `level`): its gain and band, `p_improve` and
      `verdict` ("improves" / "not resolved"). Given a `PipelineFit`, the verdict also uses its calibration,
      its `score_noise` as the smallest gain worth a verdict, its trained mixtures' range as the region
      a verdict can speak for, and its `decision_calibration` (the gain calibrated on held-out sizes).

    **Returns**: a `MixtureResult`.
    """
    check_key(key)
    count(n_datasets, "n_datasets", least=2)
    count(restarts, "restarts")
    if ascent is None:
        ascent = AscentOptions()
    if not isinstance(ascent, AscentOptions):
        raise TypeError(f"`ascent` must be an AscentOptions (e.g. cj.mixture.AscentOptions(adam_steps=200)); "
                        f"got {ascent!r}")
    rules: dict[str, Any] = {}
    fitted = score if isinstance(score, PipelineFit) else None
    if fitted is not None:
        far = None if model_size is None else extrapolation_problem(fitted.loss_fit, check_model_size(model_size))
        if far is not None:
            warnings.warn(far, stacklevel=user_stacklevel())
        calibration = fitted.calibration if calibration is None else calibration
        rules = {"min_gain": fitted.score_noise, "support": fitted.support(),
                 "decision_calibration": fitted.decision_calibration}  # fmt: skip
        score = fitted.pipeline if fitted.pipelines is None else fitted.pipelines
    verdict = reference is not None and isinstance(score, Pipeline) and bool(score.batch_shape)
    _check_reference(reference, max_shift, verdict and robust is not None)
    lo, hi = _bounds(n_datasets, lower, upper, reference if max_shift is not None else None, max_shift)
    f, per_resample = _score_of(score, model_size, robust)
    if not isinstance(f, eqx.Module):
        _check_score(f, n_datasets, jnp.result_type(float))
    steps = ascent.steps(lo, hi)
    result = _solve(f, 0.5 * jax.random.normal(key, (restarts, n_datasets)), steps, per_resample)
    _check_finite_value(result)
    _warn_unconverged(result)
    if not (verdict and robust is not None):
        return result
    void = [] if fitted is None else _withheld_by(fitted)  # read only for a verdict
    return _with_decision(result, cast(Pipeline, score), reference, cast(float, model_size), key, calibration,
                          level, rules, void)  # fmt: skip


@renamed_keywords(objective="score")
def mixture_derivative_status(
    result: MixtureResult,
    score: Callable[[Array], Array] | Pipeline | PipelineFit,
    *,
    model_size: float | None = None,
    robust: str | tuple[str, float] | None = None,
) -> Any:
    """Whether `result.r` (from `optimal_mixture`) has derivatives with respect to the score's arrays.

    Not OK means `jax.grad`/`jax.jvp` of `result.r` give NaN, and `.reason` says why: the ascent did not reach a
    KKT point (NOT_CONVERGED), the score is flat along a direction of the simplex (SINGULAR: the data cannot
    tell some datasets apart there), the point is not a maximum on its face (INDEFINITE), or a weight sits at its
    bound with no pull against it (DEGENERATE: one-sided derivatives only). `result.value` is differentiable
    wherever the ascent converged (envelope theorem), whatever the status.

    **Arguments**: `result` and the `score` (a callable r -> value to maximize, a `Pipeline` or a `PipelineFit`),
    `model_size` and `robust` that `optimal_mixture` was given.

    **Returns**: a `DerivativeStatus` (one per resample, as an int array, for a per-resample result).
    """
    if isinstance(score, PipelineFit):
        score = score.pipeline if score.pipelines is None else score.pipelines
    f, per_resample = _score_of(score, model_size, robust)
    if result.converged is None:
        raise ValueError("`result` has no `converged` field: recompute it with this version's `optimal_mixture`")
    codes = np.asarray(_status_of(f, result.r, result.converged, result.lower, result.upper, per_resample))
    return codes if codes.ndim else DerivativeStatus(int(codes))


@eqx.filter_jit
def _status_of(f: Any, r: Array, converged: Array, lower: Array, upper: Array, per_resample: bool) -> Array:
    def one(f: Any, r: Array, converged: Array) -> Array:
        score, data = _split(f)
        return maximum_derivative_status(score, r, data, lower=lower, upper=upper, converged=converged)

    if per_resample:
        return jax.vmap(lambda p, r, c: one(_PipelineValue(p, f.size), r, c))(f.pipeline, r, converged)
    return one(f, r, converged)


def _with_decision(result, pipelines: Pipeline, reference: Any, model_size: float, key, calibration, level, rules,
                   void: Sequence[str] = ()):
    """The result with its verdict against `reference` (see `decide`); an "improves" withheld for the reasons
    `void` gives (`_withheld_by`: a fit of the score's benchmarks that supports no prediction)."""
    ref = _reference_mixture(reference, result.r.shape[-1])
    decision = decide(pipelines, result.r, ref, model_size=float(model_size), key=jax.random.fold_in(key, 1),
                      calibration=calibration, level=level, **rules)  # fmt: skip
    if void and decision.verdict == VERDICTS[0]:
        reason = f"{'; '.join(void)} (see `problems()`): the score's prediction built on it means nothing"
        decision = dataclasses.replace(decision, verdict=VERDICTS[1], reason=reason)
    return dataclasses.replace(result, decision=decision)


def _withheld_by(fitted: PipelineFit) -> list[str]:
    """Why no verdict rests on a pipeline fit, one phrase per kind ([] when nothing withholds it): the proxy-loss
    fits of the score's benchmarks that support no prediction (degenerate, or R^2 <= 0), and the score's
    loss-to-benchmark laws that are degenerate. A loss-to-benchmark law with R^2 <= 0 does not withhold it: a
    benchmark near chance explains little and pulls the pick little, and its problem is said with the decision."""
    out = []
    proxies = _meaningless_proxies(fitted)
    if proxies:
        out.append(f"the proxy-loss fit of {', '.join(proxies)} is degenerate or explains none of the variance")
    if fitted.degenerate_benchmarks:
        out.append(f"the loss-to-benchmark law of {', '.join(fitted.degenerate_benchmarks)} is degenerate")
    return out


def _meaningless_proxies(fitted: PipelineFit) -> list[str]:
    """The benchmarks of a pipeline's score whose proxy-loss fit supports no prediction
    (`FitResult.meaningless_targets` of its `loss_fit`, one target per benchmark of nonzero weight, in order)."""
    names = [b for b, _ in fitted.pipeline.benchmark_weights]
    return [names[int(t)] for t in fitted.loss_fit.meaningless_targets()]


def _check_score(f: Callable[[Array], Array], n: int, dtype: Any) -> None:
    """A callable score takes a mixture r [n] and returns a scalar: checked on shapes alone (`jax.eval_shape`), so
    that a score of another number of datasets is one line naming `n_datasets`, not an error deep in the ascent."""
    try:
        out = jax.eval_shape(f, jax.ShapeDtypeStruct((n,), dtype))
    except (TypeError, ValueError, IndexError) as error:
        message = str(error).strip().splitlines()[0].rstrip(".") if str(error).strip() else type(error).__name__
        raise ValueError(
            f"`score` cannot be evaluated on a mixture of n_datasets={n} weights: {message}; is `n_datasets` the "
            "number of datasets the score's law was fitted on?"
        ) from None
    if getattr(out, "shape", None) != ():
        shape = getattr(out, "shape", None)
        raise ValueError(f"`score(r)` must return a scalar for a mixture r [{n}]; got shape {shape}")


def _check_finite_value(result: MixtureResult) -> None:
    """Every start's score is non-finite (NaN or infinite): there is no mixture to report (a traced result, under
    `jax.grad` or `jax.jit`, is left as it is)."""
    values = result.starts_value
    if isinstance(values, jax.core.Tracer):
        return
    dead = ~np.isfinite(np.asarray(values)).any(axis=-1)
    if np.any(dead):
        raise ValueError(
            f"the score is not finite (NaN or infinite) at any of the {np.shape(values)[-1]} starts' mixtures"
            + (f" (resample {int(np.argmax(np.ravel(dead)))})" if np.ndim(dead) else "")
            + ": no mixture can be chosen; check what the score returns, e.g. score(jnp.full(n, 1 / n))"
        )


def ascent_problems(reached: np.ndarray) -> tuple[str, ...]:
    """The ascents that stopped at `AscentOptions.max_polish_steps` short of their KKT point: the pick's (first) is
    then not an optimum of the objective; a resample's moves the band."""
    said = []
    if not reached[0]:
        said.append("the ascent to the pick stopped short of its optimum (KKT point): the pick is not an optimum of "
                    "the objective; raise AscentOptions(max_polish_steps=...) or restarts")  # fmt: skip
    late = int(np.sum(~reached[1:]))
    if late:
        said.append(f"the ascent of {late} of {reached.size - 1} resamples stopped short of its optimum: the "
                    "pick's band rests on them")  # fmt: skip
    return tuple(said)


def _warn_unconverged(result: MixtureResult) -> None:
    """Warn when the pick (or a resample's) stopped short of its KKT point (a traced result is left as it is)."""
    if isinstance(result.converged, jax.core.Tracer):
        return
    for problem in result_ascent_problems(result.converged):
        warnings.warn(problem, stacklevel=user_stacklevel())


def result_ascent_problems(converged: Any) -> tuple[str, ...]:
    """`ascent_problems` of a `MixtureResult`'s `converged`: one pick, or one per resample (said as the
    resamples')."""
    if converged is None:
        return ()
    reached = np.ravel(np.asarray(converged, bool))
    return ascent_problems(reached if reached.size == 1 else np.concatenate([[True], reached]))


def _check_reference(reference: Any, max_shift: Any, verdict: bool) -> None:
    if reference is not None and max_shift is None and not verdict:
        raise ValueError(
            "`reference` is only used with `max_shift` (the trust region) or, for a batched Pipeline with `robust`, "
            "for the verdict against it: give `max_shift`, or `robust` with a batched pipeline, or no `reference`"
        )


def _reference_mixture(reference: ArrayLike, n: int) -> np.ndarray:
    try:
        ref = np.asarray(reference, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"`reference` must be a mixture: {n} numbers summing to 1; got {reference!r:.60}") from None
    if ref.shape != (n,):
        raise ValueError(f"`reference` must be a mixture of length {n} (one weight per dataset); got shape {ref.shape}")
    if not np.all(np.isfinite(ref)) or np.any(ref < 0):
        raise ValueError(f"`reference` must hold finite weights >= 0; got {ref}")
    if abs(ref.sum() - 1) > 1e-6:
        raise ValueError(f"`reference` must sum to 1 (a mixture); its weights sum to {ref.sum():.6g}: {ref}")
    return ref / ref.sum()


def _quantile_level(robust: Any) -> float:
    if isinstance(robust, tuple) and len(robust) == 2 and robust[0] == "quantile" and 0 < float(robust[1]) < 1:
        return float(robust[1])
    raise ValueError(f"`robust` must be None, 'mean' or ('quantile', q) with 0 < q < 1; got {robust!r}")
