"""Derivatives of a solution by the implicit function theorem, never through the solver's iterations.

A fit returns `x* = argmin_x f(x, data)`. At a strict local minimum with a nonsingular Hessian
`H = d^2 f / dx^2`, the stationarity condition `grad_x f(x*, data) = 0` defines x* as a smooth function of the
data, with

    dx* = -H^{-1} (d grad_x f / d data) ddata.

`implicit_solution` returns x* unchanged, wrapped in a `jax.custom_jvp` whose tangent is exactly this: a linear
map of the data's tangent (one Hessian-vector product for the right-hand side, one dense d x d solve; d, the
number of parameters of a law, is tens), which JAX transposes for reverse mode. So `jax.jvp`, `jax.grad`,
`jax.vjp`, `jax.jit` and `jax.vmap` all work, and the solver that found x* is never differentiated (its inputs
should be `jax.lax.stop_gradient`-ed: a `while_loop` stopping on a data-dependent condition has no useful
derivative, and reverse mode cannot go through it at all).

Coordinates held at an active bound (`active`) do not move with the data: their derivative is zero, and the
system is solved on the free coordinates only.

A derivative is never silently wrong. It is NaN when
- the solver did not converge (`converged=False`: its point is not a solution),
- the Hessian is not finite, or has a direction of negative curvature (not a minimum),
- the queried direction meets a flat direction of the Hessian (an eigenvalue below `rcond` times the largest in
  magnitude): in forward mode when the data move the optimum along a direction the objective does not determine,
  in reverse mode when the quantity differentiated depends on such a direction.
A flat direction that nothing queried touches is harmless and ignored: the softmax logits of a profile can all
move by a constant without changing the law (a gauge), the data never move the optimum that way, and no
prediction depends on it. `derivative_status` says which case holds for a solution, as a `DerivativeStatus`.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float

from .._deprecated import renamed_keywords


class DerivativeStatus(enum.IntEnum):
    """Whether the implicit derivative of a solution exists (see `camel_jax.solver._implicit`)."""

    OK = 0
    NOT_CONVERGED = 1  # the solver's status was not CONVERGED/STALLED: the point is not a solution
    NONFINITE = 2  # the Hessian at the point is not finite
    INDEFINITE = 3  # a direction of negative curvature: a saddle, not a minimum
    SINGULAR = 4  # a flat direction of the Hessian that the data move: the solution is not determined
    DEGENERATE = 5  # a mixture's weight at its bound with a zero multiplier: only one-sided derivatives exist

    @property
    def label(self) -> str:
        return self.name.lower().replace("_", " ").replace("nonfinite", "non-finite")

    @property
    def reason(self) -> str:
        """The cause and the fix, for messages."""
        return {
            DerivativeStatus.OK: "the derivative exists",
            DerivativeStatus.NOT_CONVERGED: (
                "the solver did not converge: for a fit raise FitOptions.max_steps or check the starts; for an "
                "optimal mixture raise polish_steps or restarts"
            ),
            DerivativeStatus.NONFINITE: "the Hessian at the fit is not finite: check the law's scales and the data",
            DerivativeStatus.INDEFINITE: (
                "the solution is a saddle point, not an optimum: rerun from more starts (restarts)"
            ),
            DerivativeStatus.SINGULAR: (
                "the data do not determine the fit (a flat direction of the objective): see "
                "FitResult.identifiability(), widen the design or simplify the law; for an optimal mixture, the "
                "score is flat along a direction of the simplex (datasets it cannot tell apart): merge them "
                "or bound one"
            ),
            DerivativeStatus.DEGENERATE: (
                "a dataset's weight sits at its bound with no pull against it (a zero multiplier): the mixture has "
                "only one-sided derivatives there; the score's value still has a derivative (envelope)"
            ),
        }[self]


def default_rcond(dtype: Any) -> float:
    """Relative eigenvalue below which a Hessian direction counts as flat: 1e4 eps (2e-12 in float64)."""
    return 1e4 * float(np.finfo(dtype).eps)


def _hessian_parts(loss: Callable, x: Array, data: Any, active: Array, rcond: float):
    """The Hessian on the free coordinates (active rows and columns zeroed), its eigen-decomposition, the mask of
    flat directions, and whether it is finite and positive semi-definite to `rcond`."""
    free = ~active
    outer = free[:, None] & free[None, :]
    hessian = jnp.where(outer, jax.hessian(loss)(x, data), 0.0)
    finite = jnp.all(jnp.isfinite(hessian))
    eigenvalues, vectors = jnp.linalg.eigh(jnp.where(finite, hessian, 0.0))
    scale = jnp.maximum(jnp.max(jnp.abs(eigenvalues)), jnp.finfo(x.dtype).tiny)
    flat = jnp.abs(eigenvalues) <= rcond * scale
    negative = jnp.any(eigenvalues < -rcond * scale)
    return eigenvalues, vectors, flat, finite, negative


def _status(loss, x, data, converged, active, rcond, quantity) -> Array:
    eigenvalues, vectors, flat, finite, negative = _hessian_parts(loss, x, data, active, rcond)
    directions = jnp.where(active[:, None], 0.0, vectors)  # active coordinates never move
    eps = jnp.finfo(x.dtype).eps

    def relevant(size: Array) -> Array:
        return size > jnp.sqrt(eps) * jnp.maximum(jnp.max(size), jnp.finfo(x.dtype).tiny)

    # How far the data move the optimum along each eigen-direction: |v^T d(grad_x f)/d(data)|, one
    # vector-Jacobian product per direction.
    _, pullback = jax.vjp(lambda d: jax.grad(loss)(x, d), data)
    moved = jax.vmap(pullback)(directions.T)[0]
    driven = relevant(_row_norms(moved))
    if quantity is not None:  # and how far each direction moves the quantity of interest
        driven = driven | relevant(_row_norms(jax.vmap(lambda v: jax.jvp(quantity, (x,), (v,))[1])(directions.T)))
    status = jnp.where(jnp.any(flat & driven), DerivativeStatus.SINGULAR, DerivativeStatus.OK)
    status = jnp.where(negative, DerivativeStatus.INDEFINITE, status)
    status = jnp.where(finite, status, DerivativeStatus.NONFINITE)
    return jnp.where(converged, status, DerivativeStatus.NOT_CONVERGED)


def _row_norms(tree: Any) -> Array:
    """The norm of each row (leading axis) of a pytree of arrays, over every floating leaf."""
    leaves = [jnp.reshape(a, (a.shape[0], -1)) for a in jax.tree.leaves(tree) if jnp.issubdtype(a.dtype, jnp.inexact)]
    return jnp.sqrt(sum(jnp.sum(a**2, axis=1) for a in leaves))


def _prepare(loss, x, data, converged, active):
    x = jax.lax.stop_gradient(jnp.asarray(x))
    if x.ndim != 1 or not jnp.issubdtype(x.dtype, jnp.floating):
        raise ValueError(f"`x` must be a flat floating vector (ravel_pytree of the parameters); got shape {x.shape}")
    active = jnp.zeros(x.shape, bool) if active is None else jnp.asarray(active)
    if active.shape != x.shape or active.dtype != jnp.bool_:
        raise ValueError(f"`active` must be a boolean mask of the shape of `x` {x.shape}; got {active.shape}")
    converged = jnp.asarray(converged)
    if converged.shape != () or converged.dtype != jnp.bool_:
        raise ValueError(f"`converged` must be a scalar boolean; got shape {converged.shape}, dtype {converged.dtype}")
    # Traced values the loss closes over (a penalty's weight, say) become explicit arguments, differentiated
    # like the data.
    closed, consts = jax.closure_convert(loss, x, data)
    return closed, x, (data, tuple(consts)), jax.lax.stop_gradient(converged), jax.lax.stop_gradient(active)


def implicit_solution(
    loss: Callable[[Array, Any], Array],
    x: Float[Array, " d"],
    data: Any,
    *,
    converged: ArrayLike = True,
    active: Bool[Array, " d"] | None = None,
    rcond: float | None = None,
) -> Float[Array, " d"]:
    """`x` (a minimizer of `loss(., data)`), whose derivatives with respect to `data` are the implicit ones.

    **Arguments**:

    - `loss`: the objective `loss(x, data) -> scalar`, twice differentiable in `x` and differentiable in `data`.
      Traced values it closes over are differentiated like `data`.
    - `x`: the solution, a flat vector (e.g. `ravel_pytree` of a law's array leaves). Its own derivative (through
      the solver) is discarded.
    - `data`: a pytree of arrays (targets, weights, inputs) the solution depends on.
    - `converged`: whether the solver reached a solution; False makes every derivative NaN.
    - `active`: a boolean mask [d] of coordinates held at an active bound (zero derivative); default none.
    - `rcond`: relative eigenvalue below which a direction counts as flat (default `default_rcond`: 2e-12 in
      float64).

    **Returns**: `x`, with `dx = -H^{-1} d(grad_x loss)/d(data) ddata` on the free coordinates, NaN where the
    derivative does not exist (see the module docstring and `derivative_status`).
    """
    closed, x, data_all, converged, active = _prepare(loss, x, data, converged, active)
    rcond = default_rcond(x.dtype) if rcond is None else float(rcond)
    return _at_solution(_unpacked(closed), rcond, x, data_all, converged, active)


def derivative_status(
    loss: Callable[[Array, Any], Array],
    x: Float[Array, " d"],
    data: Any,
    *,
    converged: ArrayLike = True,
    active: Bool[Array, " d"] | None = None,
    rcond: float | None = None,
    quantity: Callable[[Array], Any] | None = None,
) -> Array:
    """Whether `implicit_solution` has a derivative at `x`: a `DerivativeStatus` code (an int array;
    `DerivativeStatus(int(code))` names it). SINGULAR when a flat direction of the Hessian is moved by the data,
    or moves `quantity(x)` (e.g. the law's `params()`: then some parameter is not determined, and its derivative
    is NaN). Other arguments as `implicit_solution`'s."""
    closed, x, data_all, converged, active = _prepare(loss, x, data, converged, active)
    rcond = default_rcond(x.dtype) if rcond is None else float(rcond)
    return _status(_unpacked(closed), x, data_all, converged, active, rcond, quantity)


class _unpacked:
    """`loss(x, (data, consts))` from a closure-converted `loss(x, data, *consts)` (hashable by identity, so it
    can be a non-differentiable argument of the custom JVP)."""

    def __init__(self, closed: Callable):
        self.closed = closed

    def __call__(self, x: Array, data_all: Any) -> Array:
        data, consts = data_all
        return self.closed(x, data, *consts)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1))
def _at_solution(loss, rcond, x, data, converged, active):
    del loss, rcond, data, converged, active
    return x


@_at_solution.defjvp
def _at_solution_jvp(loss, rcond, primals, tangents):
    x, data, converged, active = primals
    _, data_dot, _, _ = tangents
    eigenvalues, vectors, flat, finite, negative = _hessian_parts(loss, x, data, active, rcond)
    exists = converged & finite & ~negative
    inverse = jnp.where(flat, 0.0, 1.0 / jnp.where(flat, 1.0, eigenvalues))
    free = ~active
    eps = jnp.finfo(x.dtype).eps

    def pseudo_solve(b: Array) -> tuple[Array, Array]:
        # The pseudo-inverse on the free coordinates. A right-hand side with a component along a flat direction
        # has no solution (forward mode: the data move an undetermined optimum; reverse mode: the quantity
        # differentiated depends on one).
        b = jnp.where(free, b, 0.0)
        coefficients = vectors.T @ b
        off = jnp.linalg.norm(jnp.where(flat, coefficients, 0.0)) > jnp.sqrt(eps) * jnp.linalg.norm(b)
        return jnp.where(free, vectors @ (inverse * coefficients), 0.0), exists & ~off

    def solve(_matvec: Callable, b: Array) -> Array:
        solution, ok = pseudo_solve(b)
        return jnp.where(ok, solution, jnp.nan)

    def transpose_solve(_matvec: Callable, cotangent: Array) -> Array:
        # A zero cotangent (a start of the batch that nothing queried) stays zero, so that an unconverged start
        # the caller never looked at cannot turn its reverse-mode gradient NaN.
        solution, ok = pseudo_solve(cotangent)
        return jnp.where(ok, solution, jnp.where(jnp.all(cotangent == 0), 0.0, jnp.nan))

    def matvec(v: Array) -> Array:
        return jnp.where(free, vectors @ (eigenvalues * (vectors.T @ jnp.where(free, v, 0.0))), v)

    _, rhs = jax.jvp(lambda d: jax.grad(loss)(x, d), (data,), (data_dot,))
    x_dot = -jax.lax.custom_linear_solve(matvec, rhs, solve, transpose_solve)
    return x, x_dot


# --- a maximizer on the capped simplex ---------------------------------------------------------------------------
#
# `optimal_mixture` returns r* = argmax_r f(r, data) over {lower <= r <= upper, sum r = 1}. Its KKT conditions:
# with A the datasets held at a bound (the active set) and F the free ones, grad_F f = lambda 1 (one multiplier for
# the simplex), r_A at its bounds, sum r = 1. Differentiating them with A held (a weight at its bound does not
# move): dr lies in the tangent space T = {v: v_A = 0, sum v = 0}, and with P the orthogonal projector onto T,
#
#     (-P H P) dr = P (d grad_r f / d data) ddata,
#
# H the Hessian in r; -P H P is positive definite on T at a strict maximum. The derivative exists when the ascent
# reached a KKT point, H is finite, -P H P is nonsingular and positive on T (not a saddle), and every active bound
# pulls (a nonzero multiplier: strict complementarity; at a zero one the active set changes with the data and only
# one-sided derivatives exist).


def tangent_system(hessian: Array, free: Array) -> tuple[Array, Array, Array]:
    """(P, S, scale): the projector P onto the tangent space of the free coordinates with sum zero, and
    S = -P H P + scale (I - P), which is -H reduced to that space and `scale` (the reduced Hessian's norm)
    times the identity off it, so S is invertible exactly when the reduced problem is."""
    weight = free.astype(hessian.dtype)
    projector = jnp.diag(weight) - jnp.outer(weight, weight) / jnp.maximum(jnp.sum(weight), 1.0)
    reduced = -(projector @ hessian @ projector)
    scale = jnp.maximum(jnp.linalg.norm(reduced), jnp.finfo(hessian.dtype).tiny)
    return projector, reduced + scale * (jnp.eye(hessian.shape[0], dtype=hessian.dtype) - projector), scale


def _mixture_parts(objective: Callable, r: Array, data: Any, lower: Array, upper: Array, rcond: float):
    """At r: the projector P, the eigen-decomposition of the reduced system S (`tangent_system`), its flat
    directions, and the status the point has as a maximum (convergence aside)."""
    grad = jax.grad(objective)(r, data)
    return _maximum_parts(r, grad, jax.hessian(objective)(r, data), lower, upper, rcond)


def _maximum_parts(r: Array, grad: Array, hessian: Array, lower: Array, upper: Array, rcond: float):
    finite = jnp.all(jnp.isfinite(hessian)) & jnp.all(jnp.isfinite(grad))
    active = (r <= lower) | (r >= upper)
    projector, system, scale = tangent_system(jnp.where(finite, hessian, 0.0), ~active)
    eigenvalues, vectors = jnp.linalg.eigh(system)
    flat = jnp.abs(eigenvalues) <= rcond * scale
    negative = jnp.any(eigenvalues < -rcond * scale)
    # The multiplier of each active bound: how hard the objective pulls the weight against it (>= 0 at a maximum).
    n_free = jnp.sum(jnp.where(active, 0.0, 1.0))
    simplex = jnp.sum(jnp.where(active, 0.0, grad)) / jnp.maximum(n_free, 1.0)
    pull = jnp.where(r <= lower, simplex - grad, grad - simplex)
    size = jnp.maximum(jnp.max(jnp.abs(grad)), jnp.finfo(r.dtype).tiny)
    weak = active & (lower < upper) & (pull <= jnp.sqrt(jnp.finfo(r.dtype).eps) * size)
    status = jnp.where(jnp.any(flat), DerivativeStatus.SINGULAR, DerivativeStatus.OK)
    status = jnp.where((n_free > 0) & jnp.any(weak), DerivativeStatus.DEGENERATE, status)
    status = jnp.where(negative, DerivativeStatus.INDEFINITE, status)
    status = jnp.where(finite, status, DerivativeStatus.NONFINITE)
    return projector, eigenvalues, vectors, flat, status


def _prepare_mixture(objective, r, data, converged, lower, upper) -> tuple[Any, Array, Any, Array, Array, Array]:
    r = jax.lax.stop_gradient(jnp.asarray(r))
    if r.ndim != 1 or not jnp.issubdtype(r.dtype, jnp.floating):
        raise ValueError(f"`r` must be one mixture, a floating vector [n]; got shape {r.shape}")
    bounds = []
    for name, bound in (("lower", lower), ("upper", upper)):
        bound = jnp.broadcast_to(jnp.asarray(bound, r.dtype), r.shape)
        bounds.append(jax.lax.stop_gradient(bound))
    converged = jnp.asarray(converged)
    if converged.shape != () or converged.dtype != jnp.bool_:
        raise ValueError(f"`converged` must be a scalar boolean; got shape {converged.shape}, dtype {converged.dtype}")
    closed, consts = jax.closure_convert(objective, r, data)
    return _unpacked(closed), r, (data, tuple(consts)), jax.lax.stop_gradient(converged), *bounds


@renamed_keywords(objective="score")
def implicit_mixture(
    score: Callable[[Array, Any], Array],
    r: Float[Array, " n"],
    data: Any,
    *,
    lower: ArrayLike = 0.0,
    upper: ArrayLike = 1.0,
    converged: ArrayLike = True,
    rcond: float | None = None,
) -> Float[Array, " n"]:
    """`r` (a maximizer of `score(., data)` on {lower <= r <= upper, sum r = 1}), whose derivatives with
    respect to `data` are those of its KKT conditions, the active bounds held.

    **Arguments**:

    - `score`: `score(r, data) -> scalar`, the function of the mixture maximized, twice differentiable in `r`
      and differentiable in `data`; traced values it closes over are differentiated like `data`.
    - `r`: the maximizer [n], with its active weights exactly at their bounds (as `project_capped_simplex`
      leaves them). Its own derivative (through the ascent) is discarded.
    - `data`: a pytree of arrays the maximizer depends on (e.g. a `Pipeline`'s laws).
    - `lower`, `upper`: the bounds [n] (held fixed); `converged`: whether the ascent reached a KKT point (False
      makes every derivative NaN); `rcond`: relative eigenvalue below which a direction is flat.

    **Returns**: `r`, with `dr = (-P H P)^+ P d(grad_r score)/d(data) ddata` (zero on the active weights,
    summing to zero), NaN where the derivative does not exist (see `maximum_derivative_status`).
    """
    closed, r, data_all, converged, lower, upper = _prepare_mixture(score, r, data, converged, lower, upper)
    rcond = default_rcond(r.dtype) if rcond is None else float(rcond)
    return _at_maximum(closed, rcond, r, data_all, converged, lower, upper)


@renamed_keywords(objective="score")
def maximum_derivative_status(
    score: Callable[[Array, Any], Array],
    r: Float[Array, " n"],
    data: Any,
    *,
    lower: ArrayLike = 0.0,
    upper: ArrayLike = 1.0,
    converged: ArrayLike = True,
    rcond: float | None = None,
) -> Array:
    """Whether `implicit_mixture` has a derivative at `r`: a `DerivativeStatus` code (NOT_CONVERGED, NONFINITE,
    INDEFINITE: not a maximum on the tangent space, SINGULAR: the score is flat along a direction of the
    simplex, DEGENERATE: an active bound with a zero multiplier). Arguments as `implicit_mixture`'s."""
    closed, r, data_all, converged, lower, upper = _prepare_mixture(score, r, data, converged, lower, upper)
    rcond = default_rcond(r.dtype) if rcond is None else float(rcond)
    status = _mixture_parts(closed, r, data_all, lower, upper, rcond)[-1]
    return jnp.where(converged, status, DerivativeStatus.NOT_CONVERGED)


@renamed_keywords(objective="score")
def value_at_maximum(
    score: Callable[[Array, Any], Array], r: Float[Array, " n"], data: Any, *, converged: ArrayLike = True
) -> Array:
    """`score(r, data)` at a maximizer r, differentiated by the envelope theorem: d value = the partial
    derivative in `data` at r (r's own change does not count to first order at a KKT point, so this exists even
    where r's derivative does not). NaN derivatives when `converged` is False."""
    closed, r, data_all, converged, *_ = _prepare_mixture(score, r, data, converged, 0.0, 1.0)
    return _envelope(closed, r, data_all, converged)


def _nan_unless(ok: Array, tangent: Array) -> Array:
    """`tangent`, or NaN where `ok` is False; transposes to the same (a zero cotangent stays zero: a start that
    nothing queried cannot turn a gradient NaN)."""

    def solve(_matvec: Callable, b: Array) -> Array:
        return jnp.where(ok, b, jnp.nan)

    def transpose_solve(_matvec: Callable, c: Array) -> Array:
        return jnp.where(ok, c, jnp.where(jnp.all(c == 0), 0.0, jnp.nan))

    return jax.lax.custom_linear_solve(lambda v: v, tangent, solve, transpose_solve)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _envelope(objective, r, data, converged):
    return objective(r, data)


@_envelope.defjvp
def _envelope_jvp(objective, primals, tangents):
    r, data, converged = primals
    _, data_dot, _ = tangents
    value, value_dot = jax.jvp(lambda d: objective(r, d), (data,), (data_dot,))
    return value, _nan_unless(converged, value_dot)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1))
def _at_maximum(objective, rcond, r, data, converged, lower, upper):
    del objective, rcond, data, converged, lower, upper
    return r


@_at_maximum.defjvp
def _at_maximum_jvp(objective, rcond, primals, tangents):
    r, data, converged, lower, upper = primals
    _, data_dot, *_ = tangents
    projector, eigenvalues, vectors, flat, status = _mixture_parts(objective, r, data, lower, upper, rcond)
    ok = converged & (status == DerivativeStatus.OK)
    inverse = jnp.where(flat, 0.0, 1.0 / jnp.where(flat, 1.0, eigenvalues))

    def solve(_matvec: Callable, b: Array) -> Array:
        return jnp.where(ok, vectors @ (inverse * (vectors.T @ b)), jnp.nan)

    def transpose_solve(_matvec: Callable, c: Array) -> Array:
        return jnp.where(ok, vectors @ (inverse * (vectors.T @ c)), jnp.where(jnp.all(c == 0), 0.0, jnp.nan))

    def matvec(v: Array) -> Array:
        return vectors @ (eigenvalues * (vectors.T @ v))

    _, moved = jax.jvp(lambda d: jax.grad(objective)(r, d), (data,), (data_dot,))
    return r, projector @ jax.lax.custom_linear_solve(matvec, projector @ moved, solve, transpose_solve)
