"""The optimal mixture: gradient ascent on the simplex, with exact bounds, vmapped starts and resamples."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pandas as pd
from jaxtyping import Array, ArrayLike, Float

from ._pipeline import Pipeline


def project_capped_simplex(v: Float[Array, " n"], lower: Float[Array, " n"], upper: Float[Array, " n"]) -> Array:
    """Euclidean projection onto {lower <= r <= upper, sum r = 1}: r = clip(v - tau, lower, upper).

    s(tau) = sum clip(v - tau, lower, upper) is decreasing and linear between the 2n breakpoints v - upper and
    v - lower, so tau is found exactly (at any scale of v) by evaluating s at the breakpoints and interpolating
    linearly on the segment where it crosses 1. The clip makes the bounds hold exactly.
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

    **Fields**: `r` the best start's mixture [n] (or [B, n] per resample); `value` its objective; `kkt_residual`
    the projected-gradient norm |r - P(r + grad)|_inf (0 at an optimum); `starts_r` [S, n] and `starts_value`
    [S] every start's final mixture and value; `lower`, `upper` the effective bounds.
    """

    r: Array
    value: Array
    kkt_residual: Array
    starts_r: Array
    starts_value: Array
    lower: Array
    upper: Array


def _bounds(n: int, lower, upper, reference, max_shift) -> tuple[np.ndarray, np.ndarray]:
    lo = np.zeros(n) if lower is None else _bound_array(lower, n, "lower")
    hi = np.ones(n) if upper is None else _bound_array(upper, n, "upper")
    if reference is not None and max_shift is None:
        raise ValueError("`reference` is only used with `max_shift` (the trust region): give both, or neither")
    if max_shift is not None:
        if reference is None:
            raise ValueError("`max_shift` needs a `reference` mixture")
        ref = np.asarray(reference, dtype=float)
        if ref.shape != (n,) or abs(ref.sum() - 1) > 1e-9 or np.any(ref < 0):
            raise ValueError(f"`reference` must be a mixture of length {n}; got {ref}")
        if not (np.isfinite(max_shift) and max_shift > 0):
            raise ValueError(f"`max_shift` must be finite and > 0; got {max_shift}")
        lo = np.maximum(lo, ref * (1 - max_shift))
        hi = np.minimum(hi, ref * (1 + max_shift))
    bad = np.flatnonzero(lo > hi)
    if len(bad):
        j = bad[0]
        raise ValueError(f"infeasible bounds: dataset {j} has lower {lo[j]:.6g} > upper {hi[j]:.6g}")
    if lo.sum() > 1 + 1e-12:
        raise ValueError(f"infeasible bounds: the lower bounds sum to {lo.sum():.6g} > 1")
    if hi.sum() < 1 - 1e-12:
        raise ValueError(f"infeasible bounds: the upper bounds sum to {hi.sum():.6g} < 1")
    if np.any(lo < 0) or np.any(hi > 1):
        raise ValueError("bounds must lie in [0, 1]")
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


def _ascend(f, params, z0, lower, upper, adam_steps: int, polish_steps: int, learning_rate: float, bounded: bool):
    """One start: Adam on softmax logits (mapped into the bounds), then projected-gradient ascent with a carried
    Armijo step to a KKT point. Maximizes f(params, r). Vmappable over z0 and params."""

    def to_r(z):
        r = jax.nn.softmax(z)
        return project_capped_simplex(r, lower, upper) if bounded else r  # softmax is already on the simplex

    optimizer = optax.adam(learning_rate)
    negative = jax.value_and_grad(lambda z: -f(params, to_r(z)))

    def adam_step(_, carry):
        z, state = carry
        _, g = negative(z)
        with jax.numpy_dtype_promotion("standard"):  # optax's bias correction mixes int and float
            updates, state = optimizer.update(g, state, z)
        return optax.apply_updates(z, updates), state

    z, _ = jax.lax.fori_loop(0, adam_steps, adam_step, (z0, optimizer.init(z0)))
    r = to_r(z)
    value_grad = jax.value_and_grad(lambda x: f(params, x))

    def polish(_, carry):
        r, value, grad, step = carry
        trial = project_capped_simplex(r + step * grad, lower, upper)
        trial_value, trial_grad = value_grad(trial)
        ok = jnp.isfinite(trial_value) & (trial_value >= value + 1e-4 * jnp.vdot(grad, trial - r))
        return (
            jnp.where(ok, trial, r),
            jnp.where(ok, trial_value, value),
            jnp.where(ok, trial_grad, grad),
            jnp.where(ok, jnp.minimum(step * 2.0, 1e6), step * 0.5),  # bounded: a linear objective accepts every step
        )

    value, grad = value_grad(r)
    r, value, grad, _ = jax.lax.fori_loop(0, polish_steps, polish, (r, value, grad, jnp.ones((), r.dtype)))
    kkt = jnp.max(jnp.abs(r - project_capped_simplex(r + grad, lower, upper)))
    return r, value, kkt


def _best_of_starts(f, params, z0, lower, upper, adam_steps, polish_steps, learning_rate, bounded):
    r, value, kkt = jax.vmap(
        lambda z: _ascend(f, params, z, lower, upper, adam_steps, polish_steps, learning_rate, bounded)
    )(z0)
    best = jnp.argmax(jnp.where(jnp.isfinite(value), value, -jnp.inf))
    return r[best], value[best], kkt[best], r, value


@eqx.filter_jit
def _solve(f, params, z0, lower, upper, adam_steps, polish_steps, learning_rate, per_resample, bounded):
    """`f(params, r)` is static (a module-level function, or the user's callable via `_call`), `params` traced:
    calling again with new laws of the same shapes reuses the compiled program."""
    if per_resample:
        pipeline, size = params
        return jax.vmap(
            lambda p: _best_of_starts(f, (p, size), z0, lower, upper, adam_steps, polish_steps, learning_rate, bounded)
        )(pipeline)
    return _best_of_starts(f, params, z0, lower, upper, adam_steps, polish_steps, learning_rate, bounded)


def _call(objective, r):
    return objective(r)


def _pipeline_value(params, r):
    pipeline, size = params
    return pipeline.objective(r[None, :], size)[..., 0]


def _pipeline_mean(params, r):
    return jnp.mean(_pipeline_value(params[:2], r))


def _pipeline_quantile(params, r):
    return jnp.quantile(_pipeline_value(params[:2], r), params[2])


def optimal_mixture(
    objective: Callable[[Array], Array] | Pipeline,
    n_datasets: int,
    *,
    key: Array,
    model_size: float | None = None,
    starts: int = 16,
    steps: int = 100,
    polish_steps: int = 100,
    learning_rate: float = 0.1,
    lower: ArrayLike | None = None,
    upper: ArrayLike | None = None,
    reference: ArrayLike | None = None,
    max_shift: float | None = None,
    robust: str | tuple[str, float] | None = None,
) -> MixtureResult:
    """Maximize an objective over mixtures on the simplex.

    **Arguments**:
    - `objective`: `objective(r) -> scalar` for a mixture r [n], or a `Pipeline` with `model_size`.
    - `n_datasets`: n. `key`: draws the `starts` (vmapped) initial softmax logits.
    - `steps`: Adam steps on the softmax parameterization; `polish_steps`: projected-gradient steps after it.
    - `lower`, `upper`: per-dataset bounds (e.g. data availability: tokens available x allowed epochs / total
      tokens); `reference`, `max_shift`: a trust region r_j in ref_j (1 +- max_shift) (the paper's +-20% design).
      Infeasible bounds raise `ValueError` before any compute. Bounds hold exactly in the result.
    - `robust`: for a batched `Pipeline` (B resamples): None gives one optimal mixture per resample (r [B, n]:
      their spread is the uncertainty band); "mean" or ("quantile", q) gives one mixture maximizing the mean or
      the q-quantile of the objective across resamples.

    **Returns**: a `MixtureResult`.
    """
    if not (isinstance(n_datasets, int) and n_datasets >= 2):
        raise ValueError(f"`n_datasets` must be an integer >= 2; got {n_datasets!r}")
    lo, hi = _bounds(n_datasets, lower, upper, reference, max_shift)
    if starts < 1 or steps < 0 or polish_steps < 0:
        raise ValueError("`starts` must be >= 1 and `steps`, `polish_steps` >= 0")
    per_resample = False
    if isinstance(objective, Pipeline):
        if model_size is None:
            raise ValueError("a Pipeline objective needs `model_size` (the target model size, in the laws' units)")
        size = jnp.asarray([check_model_size(model_size)])
        batched = bool(objective.batch_shape)
        if not batched:
            if robust is not None:
                raise ValueError("`robust` applies to a batched Pipeline (one with resamples)")
            f, params = _pipeline_value, (objective, size)
        elif robust is None:
            f, params, per_resample = _pipeline_value, (objective, size), True
        elif robust == "mean":
            f, params = _pipeline_mean, (objective, size)
        else:
            q = _quantile_level(robust)
            f, params = _pipeline_quantile, (objective, size, jnp.asarray(q))
    else:
        if robust is not None:
            raise ValueError("`robust` applies to a batched Pipeline objective")
        if not callable(objective):
            raise TypeError(f"`objective` must be a callable or a Pipeline; got {type(objective).__name__}")
        f, params = _call, objective
    z0 = 0.5 * jax.random.normal(key, (starts, n_datasets))
    lower_j, upper_j = jnp.asarray(lo), jnp.asarray(hi)
    bounded = bool(np.any(lo > 0) or np.any(hi < 1))
    out = _solve(f, params, z0, lower_j, upper_j, steps, polish_steps, learning_rate, per_resample, bounded)
    r, value, kkt, starts_r, starts_value = out
    return MixtureResult(
        r=r, value=value, kkt_residual=kkt, starts_r=starts_r, starts_value=starts_value, lower=lower_j, upper=upper_j
    )


def _quantile_level(robust: Any) -> float:
    if isinstance(robust, tuple) and len(robust) == 2 and robust[0] == "quantile" and 0 < float(robust[1]) < 1:
        return float(robust[1])
    raise ValueError(f"`robust` must be None, 'mean' or ('quantile', q) with 0 < q < 1; got {robust!r}")


def mixture_path(
    pipeline: Pipeline,
    sizes: ArrayLike,
    *,
    key: Array,
    datasets: list[str] | None = None,
    level: float = 0.95,
    **options: Any,
) -> pd.DataFrame:
    """The optimal mixture as a function of model size (paper Figure "Optimal mixture weights across model
    sizes"), as a tidy frame with columns size, dataset, weight (and low, high across resamples for a batched
    pipeline without `robust`)."""
    n = _n_datasets(pipeline)
    names = datasets or [f"r{j}" for j in range(n)]
    rows = []
    for size in [check_model_size(s, "sizes") for s in np.atleast_1d(np.asarray(sizes, dtype=float))]:
        result = optimal_mixture(pipeline, n, key=key, model_size=float(size), **options)
        r = np.asarray(result.r)
        for j, name in enumerate(names):
            row = {"size": size, "dataset": name}
            if r.ndim == 2:
                row["weight"] = float(np.median(r[:, j]))
                row["low"], row["high"] = np.percentile(r[:, j], [50 * (1 - level), 50 * (1 + level)])
            else:
                row["weight"] = float(r[j])
            rows.append(row)
    return pd.DataFrame(rows)


def _n_datasets(pipeline: Pipeline) -> int:
    law = next(iter(pipeline.loss_laws.values()))
    structure = law.structure() if not pipeline.batch_shape else jax.tree.map(lambda a: a[0], law).structure()
    if "n_datasets" not in structure:
        raise ValueError("the pipeline's loss laws do not declare `n_datasets` in structure()")
    return int(structure["n_datasets"])
