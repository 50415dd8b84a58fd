"""Fitting a law: one objective (weighted Huber of log residuals), one L-BFGS loop, restarts as a vmap."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from jaxtyping import Array, ArrayLike, Float, Int

from ._identify import Identifiability, identifiability
from ._lbfgs import CONVERGED, MAX_STEPS, NONFINITE, STALLED, minimize
from ._newton import polish
from .laws._base import count, n_free_parameters

# Under log residuals, predictions below this fraction of the target continue the log linearly (see `residuals`).
LOG_FLOOR = 1e-4

# Counts traces of the compiled fit (a test checks that a repeated call does not recompile).
_TRACES = {"fit": 0}


def huber(residual: Array, delta: float) -> Array:
    """Huber loss: r^2 / 2 for |r| <= delta, delta (|r| - delta / 2) beyond."""
    a = jnp.abs(residual)
    return jnp.where(a <= delta, 0.5 * residual**2, delta * (a - 0.5 * delta))


def residuals(prediction: Array, y: Array, log_residuals: bool) -> Array:
    """`log pred - log y` (or `pred - y`).

    A non-positive prediction has no log. Below `LOG_FLOOR * y` the log is continued by its tangent line, so the
    residual stays finite and keeps pushing the prediction up, and gradients never see log(<= 0).
    """
    if not log_residuals:
        return prediction - y
    floor = LOG_FLOOR * y
    above = prediction >= floor
    log_part = jnp.log(jnp.where(above, prediction, floor)) - jnp.log(y)
    linear_part = float(np.log(LOG_FLOOR)) + (prediction - floor) / floor  # a Python float stays weakly typed
    return jnp.where(above, log_part, linear_part)


def objective(
    law: eqx.Module,
    inputs: tuple[Array, ...],
    y: Float[Array, " P"],
    weights: Float[Array, " P"],
    *,
    delta: float = 1e-3,
    log_residuals: bool = True,
    reduction: str = "sum",
    penalty: Callable[[Any], Array] | None = None,
) -> Array:
    """The fitting objective `sum_p w_p huber(res_p)` (divided by `sum_p w_p` when `reduction="mean"`), plus
    `penalty(law)` if given. Zero-weight points contribute exactly 0, whatever their target (NaN included)."""
    mask = weights > 0
    y_safe = jnp.where(mask, y, 1.0)  # a NaN target at a masked point must not reach the gradient
    res = residuals(law(*inputs), y_safe, log_residuals)
    value = jnp.sum(jnp.where(mask, weights * huber(jnp.where(mask, res, 0.0), delta), 0.0))
    if reduction == "mean":
        value = value / jnp.sum(weights)
    if penalty is not None:
        value = value + penalty(law)
    return value


class FitResult(eqx.Module):
    """Result of `fit`.

    **Fields**:
    - `law`: the best start (lowest finite objective); batched over targets when `y` was [T, P].
    - `objective`: its objective.
    - `laws`: every optimized start, batched (leading axis R, after any target axis).
    - `objectives`, `converged`, `n_steps`, `grad_norm`, `status` [R]: per start. `status` codes: 1 converged,
      2 stalled (no decrease found even along steepest descent: optimal to working precision), 3 non-finite,
      4 hit `max_steps`. `converged` is status 1 or 2.
    - `n_failed`: starts that ended non-finite (never chosen as best).
    - `inputs`, `y`, `weights`: the fitted data; `log_residuals`: how residuals were measured.
    """

    law: Any
    objective: Float[Array, "*T"]
    laws: Any
    objectives: Float[Array, "*T R"]
    converged: Array
    n_steps: Int[Array, "*T R"]
    grad_norm: Float[Array, "*T R"]
    status: Int[Array, "*T R"]
    n_failed: Int[Array, "*T"]
    inputs: tuple[Array, ...]
    y: Array
    weights: Array
    log_residuals: bool = eqx.field(static=True, default=True)

    @property
    def n_targets(self) -> int | None:
        """T when `y` was [T, P], else None."""
        return None if self.y.ndim == 1 else int(self.y.shape[0])

    @property
    def best_status(self) -> np.ndarray:
        """The status code of the start returned as `law` (the lowest finite objective), per target."""
        status = np.asarray(self.status)
        finite = np.isfinite(np.asarray(self.objectives)) & (status != NONFINITE)
        best = np.argmin(np.where(finite, np.asarray(self.objectives), np.inf), axis=-1)
        return np.take_along_axis(status, best[..., None], axis=-1)[..., 0]

    def predict(self, *inputs: ArrayLike) -> Array:
        """Predictions of the best law at `inputs` ([P], or [T, P] for a fit over T targets)."""
        arrays = tuple(jnp.asarray(x) for x in inputs)
        if self.n_targets is None:
            return self.law(*arrays)
        return jax.vmap(lambda law: law(*arrays))(self.law)

    def identifiability(self, max_sd: float = 1.0) -> Identifiability | list[Identifiability]:
        """Which parameters of the best law the data determine (see `camel_jax._identify`): the standard
        deviation of each, and the names of those above `max_sd`. A list, one per target, for a [T, P] fit."""
        if self.n_targets is None:
            return identifiability(
                self.law, self.inputs, self.y, self.weights, log_residuals=self.log_residuals, max_sd=max_sd
            )
        return [
            identifiability(
                jax.tree.map(lambda leaf: leaf[t], self.law),
                self.inputs,
                self.y[t],
                self.weights[t],
                log_residuals=self.log_residuals,
                max_sd=max_sd,
            )
            for t in range(self.n_targets)
        ]

    def summary(self, identify: bool = True) -> dict[str, Any]:
        """Objective, R^2 and MAPE (%) on the fitted points (weighted), convergence counts and, unless
        `identify=False`, `not_identified`: the parameters the data leave free (see `identifiability`)."""
        pred = np.asarray(self.predict(*self.inputs))
        y, w = np.asarray(self.y), np.asarray(self.weights)
        mask = w > 0
        scored = mask & (y != 0)  # MAPE is undefined at a zero target (an accuracy of 0): such points are left out
        ape = np.where(scored, w * np.abs((pred - y) / np.where(scored, y, 1.0)), 0)
        status = np.asarray(self.status)
        out = {
            "objective": np.asarray(self.objective),
            "r2": r_squared(pred, y, w),
            "mape_percent": 100.0 * np.sum(ape, axis=-1) / np.sum(np.where(scored, w, 0), axis=-1),
            "n_starts": status.shape[-1],
            "n_converged": np.sum(np.asarray(self.converged), axis=-1),
            "n_max_steps": np.sum(status == 4, axis=-1),
            "n_failed": np.asarray(self.n_failed),
        }
        if identify:
            report = self.identifiability()
            reports = [report] if isinstance(report, Identifiability) else report
            names = [list(r.not_identified) for r in reports]
            out["not_identified"] = names[0] if self.n_targets is None else names
        return out


def r_squared(pred: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted R^2 over the last axis (points with zero weight left out)."""
    mask = w > 0
    mean = np.sum(np.where(mask, w * y, 0), axis=-1, keepdims=True) / np.sum(w, axis=-1, keepdims=True)
    ss_res = np.sum(np.where(mask, w * (pred - y) ** 2, 0), axis=-1)
    ss_tot = np.sum(np.where(mask, w * (y - mean) ** 2, 0), axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1.0 - ss_res / ss_tot


# --- the compiled core ----------------------------------------------------------------------------------------


def _solve_one_target(
    starts: eqx.Module,
    inputs: tuple[Array, ...],
    y: Array,
    weights: Array,
    options: dict[str, Any],
) -> dict[str, Any]:
    """Optimize R starts (a batched law) on one target; pick the best. Traced inside `_fit_core`."""
    params, static = eqx.partition(starts, eqx.is_array)
    one = jax.tree.map(lambda leaf: leaf[0], params)
    _, unravel = ravel_pytree(one)
    flat = jax.vmap(lambda p: ravel_pytree(p)[0])(params)

    def loss(x):
        law = eqx.combine(unravel(x), static)
        return objective(
            law,
            inputs,
            y,
            weights,
            delta=options["delta"],
            log_residuals=options["log_residuals"],
            reduction=options["reduction"],
            penalty=options["penalty"],
        )

    prescreen = options["prescreen"]
    if prescreen is not None and prescreen < flat.shape[0]:
        values = jax.vmap(loss)(flat)
        values = jnp.where(jnp.isfinite(values), values, jnp.inf)
        _, best = jax.lax.top_k(-values, prescreen)
        flat = flat[best]

    solution = jax.vmap(lambda x0: minimize(loss, x0, max_steps=options["max_steps"], tol=options["tol"]))(flat)
    finite = jnp.isfinite(solution.f) & (solution.status != NONFINITE)
    ranked = jnp.where(finite, solution.f, jnp.inf)
    best = jnp.argmin(ranked)
    if options["polish"] > 0:
        solution = _polish_best(loss, solution, best, finite[best], options)
    laws = eqx.combine(jax.vmap(unravel)(solution.x), static)
    return {
        "law": jax.tree.map(lambda leaf: leaf[best], laws),
        "objective": solution.f[best],
        "laws": laws,
        "objectives": solution.f,
        "converged": (solution.status == CONVERGED) | (solution.status == STALLED),
        "n_steps": solution.n_steps,
        "grad_norm": solution.grad_norm,
        "status": solution.status,
        "n_failed": jnp.sum(~finite),
        "best": best,
    }


def _polish_best(loss, solution, best, finite, options):
    """Replace the best start by its damped-Newton polish (see `_newton`); a non-finite best is left alone.

    The polish's status replaces L-BFGS's when it reached the tolerance or stalled at working precision;
    otherwise the start keeps the status L-BFGS gave it."""
    polished = polish(loss, solution.x[best], max_steps=options["polish"], tol=options["tol"])
    keep_lbfgs = (polished.status == MAX_STEPS) & (solution.status[best] != MAX_STEPS)
    status = jnp.where(finite & ~keep_lbfgs, polished.status, solution.status[best])

    def put(field, value):
        return field.at[best].set(jnp.where(finite, value, field[best]))

    return solution._replace(
        x=put(solution.x, polished.x),
        f=put(solution.f, polished.f),
        grad_norm=put(solution.grad_norm, polished.grad_norm),
        n_steps=solution.n_steps.at[best].add(jnp.where(finite, polished.n_steps, 0)),
        status=solution.status.at[best].set(status),
    )


def fit_targets(template, key, inits, inputs, Y, W, options):
    """Fit T targets (rows of Y, W), each from the same starts; R starts drawn from `key` unless `inits`.

    Pure and traceable: `fit`, `bootstrap` and the extrapolation protocol all compile this one function."""
    if inits is None:
        keys = jax.random.split(key, options["restarts"])
        structure = template.structure()
        inits = jax.vmap(lambda k: type(template).sample_init(k, **structure))(keys)
    if options.get("per_target_inits"):
        return jax.vmap(lambda starts, y, w: _solve_one_target(starts, inputs, y, w, options))(inits, Y, W)
    return jax.vmap(lambda y, w: _solve_one_target(inits, inputs, y, w, options))(Y, W)


@eqx.filter_jit
def _fit_core(template, key, inits, inputs, Y, W, options):
    _TRACES["fit"] += 1
    return fit_targets(template, key, inits, inputs, Y, W, options)


# --- the public entry point -----------------------------------------------------------------------------------


def _check_inputs(inputs: Sequence[ArrayLike], name: str = "inputs") -> tuple[Array, ...]:
    if not isinstance(inputs, (tuple, list)):
        raise TypeError(
            f"`{name}` must be a tuple of arrays passed as law(*{name}) (e.g. data.inputs); got {type(inputs).__name__}"
        )
    arrays = tuple(jnp.asarray(x) for x in inputs)
    if len(arrays) == 0:
        raise ValueError(f"`{name}` is empty")
    n = arrays[0].shape[0] if arrays[0].ndim else None
    for i, a in enumerate(arrays):
        if a.ndim == 0 or a.shape[0] != n:
            raise ValueError(
                f"every array in `{name}` must have the same leading length P; "
                f"{name}[{i}] has shape {a.shape}, {name}[0] has {arrays[0].shape}"
            )
        finite_rows = np.isfinite(np.asarray(a)).reshape(n, -1).all(axis=1)
        if not finite_rows.all():
            raise ValueError(f"`{name}[{i}]` has a non-finite value at row {int(np.argmin(finite_rows))}")
    return arrays


def _check_law_inputs(law: eqx.Module, arrays: tuple[Array, ...]) -> None:
    """`law(*inputs)` must give one prediction per point, shape (P,): checked on shapes alone (eval_shape)."""
    P = arrays[0].shape[0]
    n = law.structure().get("n_datasets") if hasattr(law, "structure") else None
    if n is not None and (arrays[0].ndim != 2 or arrays[0].shape[1] != n):
        raise ValueError(
            f"`inputs[0]` (the mixture) must have shape (P, n_datasets)=({P}, {n}) for this law; got "
            f"{arrays[0].shape}. Is a mixture column missing or extra?"
        )
    shapes = [a.shape for a in arrays]
    hint = " (size and token arrays must be 1-D, shape (P,))" if any(a.ndim > 1 for a in arrays[1:]) else ""
    try:
        out = jax.eval_shape(law, *arrays)
    except (TypeError, ValueError) as error:
        message = str(error).splitlines()[0]
        raise ValueError(f"the law cannot be evaluated on inputs of shapes {shapes}{hint}: {message}") from None
    if getattr(out, "shape", None) != (P,):
        raise ValueError(
            f"law(*inputs) has shape {getattr(out, 'shape', None)}, not ({P},): every input must have one row per "
            f"point{hint} (got shapes {shapes})"
        )


def _check_inits(law: eqx.Module, inits: eqx.Module) -> None:
    """Starts must be laws of the template's class and structure (only leading batch axes may differ)."""
    if type(inits) is not type(law) or inits.structure() != law.structure():
        raise ValueError(
            f"`inits` must be laws of the same class and structure as `law` ({type(law).__name__} "
            f"{law.structure()}); got {type(inits).__name__} "
            f"{inits.structure() if hasattr(inits, 'structure') else ''}"
        )


def _warn_sizes(law: eqx.Module, arrays: tuple[Array, ...], W: Array) -> None:
    """Warn when the design cannot support extrapolation in model size: one size, or fewer distinct sizes than
    the parameters that describe the size dependence (the law's `size_parameters()`)."""
    spec = law.size_parameters() if hasattr(law, "size_parameters") else None
    if spec is None:
        return
    position, n_size_params = spec
    sizes = np.asarray(arrays[position])
    n_sizes = min(len(np.unique(sizes[row > 0])) for row in np.asarray(W).reshape(-1, sizes.shape[0]))
    if n_sizes == 1:
        warnings.warn(
            f"the data hold one model size (inputs[{position}]): nothing determines how the loss changes with "
            "size, so the size exponents and the floor C are arbitrary and predictions at other sizes meaningless",
            stacklevel=3,
        )
    elif n_sizes < n_size_params:
        warnings.warn(
            f"the data hold {n_sizes} distinct model sizes for {n_size_params} parameters of the size dependence: "
            "the floor and the size exponents are not determined (see `FitResult.identifiability()`); "
            "extrapolation in size is unreliable",
            stacklevel=3,
        )


def check_solver_arguments(n_starts: Any, max_steps: Any, tol: Any, polish: Any) -> None:
    """Integer counts and a positive tolerance, checked before compute (no silent coercion)."""
    count(n_starts, "restarts")
    count(max_steps, "max_steps")
    count(polish, "polish", least=0)
    if tol is not None and not (isinstance(tol, (int, float)) and np.isfinite(tol) and tol > 0):
        raise ValueError(f"`tol` must be a finite number > 0 (or None for the default); got {tol!r}")


def _check_targets(y: ArrayLike, weights: ArrayLike | None, n_points: int, log_residuals: bool) -> tuple[Array, Array]:
    y = jnp.asarray(y)
    if not jnp.issubdtype(y.dtype, jnp.floating):
        y = y.astype(jnp.result_type(float))
    if y.ndim not in (1, 2) or y.shape[-1] != n_points:
        raise ValueError(
            f"`y` must have shape (P,) or (T, P) with P={n_points} (the length of the inputs); got {y.shape}"
        )
    w = jnp.ones(y.shape, y.dtype) if weights is None else jnp.asarray(weights, dtype=y.dtype)
    if w.shape != y.shape:
        try:
            w = jnp.broadcast_to(w, y.shape)
        except ValueError:
            raise ValueError(
                f"`weights` must have the shape of `y` {y.shape} (or broadcast to it); got {w.shape}"
            ) from None
    wn, yn = np.asarray(w), np.asarray(y)
    if np.any(wn < 0) or not np.all(np.isfinite(wn)):
        raise ValueError("`weights` must be finite and >= 0")
    if np.any(np.sum(wn, axis=-1) <= 0):
        raise ValueError("`weights` are zero for every point (of some target): nothing to fit")
    used = wn > 0
    bad_rows = (~np.isfinite(np.where(used, yn, 0.0))).reshape(-1, n_points).any(axis=0)
    if bad_rows.any():
        raise ValueError(f"`y` has a non-finite value at a point with positive weight (row {int(np.argmax(bad_rows))})")
    if log_residuals and np.any(yn[used] <= 0):
        raise ValueError(
            "`y` must be > 0 where weights are positive when log_residuals=True; "
            "fit proxy losses or accuracies with log_residuals=False"
        )
    return y, w


def solver_options(
    dtype: Any,
    n_starts: int,
    *,
    delta: float,
    log_residuals: bool,
    reduction: str,
    penalty: Callable[[Any], Array] | None,
    max_steps: int,
    tol: float | None,
    prescreen: int | None = None,
    per_target_inits: bool = False,
    polish: int = 50,
) -> dict[str, Any]:
    """The static options of the compiled fit (hashable, so equal options reuse the compilation).

    The default tolerance follows the data's precision: 1e-10 in float64, 1e-6 in float32."""
    if tol is None:
        tol = 1e-10 if dtype == jnp.float64 else 1e-6
    return {
        "restarts": int(n_starts),
        "prescreen": prescreen,
        "delta": float(delta),
        "log_residuals": bool(log_residuals),
        "reduction": reduction,
        "penalty": penalty,
        "max_steps": int(max_steps),
        "tol": float(tol),
        "per_target_inits": per_target_inits,
        "polish": int(polish),
    }


def fit(
    law: eqx.Module,
    inputs: Sequence[ArrayLike],
    y: ArrayLike,
    *,
    key: Array,
    restarts: int = 64,
    inits: eqx.Module | None = None,
    prescreen: int | None = None,
    weights: ArrayLike | None = None,
    delta: float = 1e-3,
    log_residuals: bool = True,
    reduction: str = "sum",
    penalty: Callable[[Any], Array] | None = None,
    max_steps: int = 1000,
    tol: float | None = None,
    polish: int = 50,
    throw: bool = False,
) -> FitResult:
    """Fit a law by multi-start L-BFGS on a weighted Huber loss of (log) residuals.

    **Arguments**:
    - `law`: any law (a structural template: its parameter values are not used unless it is passed as `inits`).
    - `inputs`: the tuple passed as `law(*inputs)`, e.g. `data.inputs`.
    - `y`: targets [P], or [T, P] to fit T targets at once (every result field then has a leading T axis).
    - `key`: a `jax.random` key; the same key gives the same result.
    - `restarts`: number of random starts from `type(law).sample_init(key, **law.structure())`.
    - `inits`: a batched law (leading axis = starts), e.g. a grid built with `from_params`; overrides `restarts`.
      With `y` [T, P], inits with two leading axes [T, R] give each target its own starts (e.g. warm starts).
    - `prescreen`: evaluate the objective once at every start and optimize only the best `prescreen`.
    - `weights`: per-point weights >= 0 ([P] or [T, P]); zero-weight points contribute exactly 0.
    - `delta`: Huber threshold. `log_residuals`: `log pred - log y` (default) or `pred - y`.
    - `reduction`: "sum" or "mean" (divide by the weight total).
    - `penalty`: optional `penalty(law) -> scalar` added to the objective (e.g. L2 on unconstrained exponents).
    - `max_steps`: cap on objective evaluations per start. `tol`: relative decrease / gradient tolerance
      (default 1e-10 in float64, 1e-6 in float32).
    - `polish`: at most this many damped-Newton steps (exact Hessian) on the best start of each target, which
      take it from where L-BFGS slowed down to a gradient at `tol` (see `_newton`); 0 turns the polish off.
    - `throw`: raise `RuntimeError` when every start ended non-finite (otherwise reported in `n_failed`).

    **Returns**: a `FitResult`. Calling again with the same shapes and options reuses the compiled program.
    """
    if reduction not in ("sum", "mean"):
        raise ValueError(f"`reduction` must be 'sum' or 'mean'; got {reduction!r}")
    if not (isinstance(delta, (int, float)) and delta > 0):
        raise ValueError(f"`delta` must be a positive number; got {delta!r}")
    if not np.isfinite(delta):
        raise ValueError(f"`delta` must be finite; got {delta!r}")
    check_solver_arguments(restarts, max_steps, tol, polish)
    arrays = _check_inputs(inputs)
    _check_law_inputs(law, arrays)
    Y, W = _check_targets(y, weights, arrays[0].shape[0], log_residuals)
    per_target_inits = False
    if inits is not None:
        _check_inits(law, inits)
        init_leaf = jax.tree.leaves(eqx.filter(inits, eqx.is_array))[0]
        core_ndim = jax.tree.leaves(eqx.filter(law, eqx.is_array))[0].ndim
        per_target_inits = init_leaf.ndim == core_ndim + 2
        if per_target_inits and (Y.ndim != 2 or init_leaf.shape[0] != Y.shape[0]):
            raise ValueError(
                f"`inits` with two leading axes (T, R) must match the T={Y.shape[0] if Y.ndim == 2 else None} "
                f"targets of `y`; got leading shape {init_leaf.shape[:2]}"
            )
        n_starts = init_leaf.shape[1] if per_target_inits else init_leaf.shape[0]
    else:
        n_starts = restarts
    if prescreen is not None and not 1 <= prescreen:
        raise ValueError(f"`prescreen` must be >= 1; got {prescreen}")
    template = law
    n_params = n_free_parameters(template)
    n_used = int(np.min(np.sum(np.asarray(W) > 0, axis=-1)))
    if n_used < n_params:
        warnings.warn(
            f"fitting {n_params} free parameters to {n_used} points: the law is not identifiable from these data; "
            "consider tied=True (CAMEL), fewer intrinsic domains, or a `penalty`",
            stacklevel=2,
        )
    _warn_sizes(law, arrays, W)
    options = solver_options(
        Y.dtype,
        n_starts,
        delta=delta,
        log_residuals=log_residuals,
        reduction=reduction,
        penalty=penalty,
        max_steps=max_steps,
        tol=tol,
        prescreen=prescreen,
        per_target_inits=per_target_inits,
        polish=polish,
    )
    batched = Y.ndim == 2
    Yb, Wb = (Y, W) if batched else (Y[None], W[None])
    out = _fit_core(template, key, inits, arrays, Yb, Wb, options)
    del out["best"]
    if not batched:
        out = jax.tree.map(lambda leaf: leaf[0], out)
    result = FitResult(**out, inputs=arrays, y=Y, weights=W, log_residuals=bool(log_residuals))
    r2 = r_squared(np.asarray(result.predict(*arrays)), np.asarray(Y), np.asarray(W))
    if np.any(np.isfinite(r2) & (r2 <= 0)):  # a non-finite fit is reported by `n_failed` instead
        warnings.warn(
            f"the best fit explains none of the variance of the targets (R^2 = {np.round(r2, 4).tolist()}): "
            "its parameters and extrapolations mean nothing; check the law, its structure and the data",
            stacklevel=2,
        )
    if throw and bool(np.any(np.asarray(result.n_failed) == np.asarray(result.objectives).shape[-1])):
        raise RuntimeError(
            f"every start ended non-finite ({int(np.max(np.asarray(result.n_failed)))} of "
            f"{np.asarray(result.objectives).shape[-1]}); check the law's scale (size_scale), the inits and the data"
        )
    return result
