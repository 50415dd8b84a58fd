"""A damped Newton polish: a few exact-Hessian steps that take an L-BFGS point to working precision.

L-BFGS stops when its relative decrease stalls, which on an ill-conditioned objective (collinear validation
losses, C trading against the K_i) can leave the gradient 1e3 times above tolerance while the objective agrees to
1e-9: equally good starts then disagree in their predictions. From such a point Newton's method converges
quadratically. Each step solves `(|H| + mu I) p = -g`, where `|H|` is the Hessian with its eigenvalues replaced by
their absolute values (a saddle or a kink of the Huber loss then still gives a descent direction) and `mu` is a
Levenberg-Marquardt damping, relative to the largest eigenvalue, that shrinks after a successful step and grows
after a failed one. A step is accepted only when it lowers the objective, so the polish never makes a fit worse.
The parameter count of a law is small (tens), so an exact Hessian costs a few dozen gradients.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from ._lbfgs import CONVERGED, MAX_STEPS, NONFINITE, RUNNING, STALLED, Solution, small_decrease_count

_DAMPING_START = 1e-8
_DAMPING_MIN = 1e-14
_DAMPING_GIVE_UP = 1e8  # a step this damped is a tiny gradient step: if even it fails, the point is optimal
_PRECISION = 100.0  # two accepted steps in a row that lower f by <= this many epsilons (relative): optimal to
# working precision (STALLED)


class _State(NamedTuple):
    x: Float[Array, " d"]
    f: Float[Array, ""]
    g: Float[Array, " d"]
    damping: Float[Array, ""]
    n_steps: Int[Array, ""]
    status: Int[Array, ""]
    small: Int[Array, ""]  # consecutive accepted steps whose relative decrease was <= tol


# The Hessian pushes d tangents through every point at once (`jax.hessian`); when d times the number of points
# exceeds this, it is built a few columns at a time (`jax.lax.map` over Hessian-vector products), so that its
# memory stays that of a few gradients (100,000 points, 22 parameters and 32 starts took gigabytes at once).
_TANGENT_POINTS = 2**17


def hessian(fun: Callable[[Array], Array], points: int | None = None) -> Callable[[Array], Array]:
    """The Hessian of `fun` (forward over reverse). `points`: the data size `fun` sums over; when d * points
    exceeds `_TANGENT_POINTS`, the columns are computed `_TANGENT_POINTS // points` at a time (at least one)."""

    def matrix(x: Array) -> Array:
        d = x.shape[0]
        if points is None or d * points <= _TANGENT_POINTS:
            return jax.hessian(fun)(x)
        grad = jax.grad(fun)
        hvp = lambda v: jax.jvp(grad, (x,), (v,))[1]  # noqa: E731
        batch = max(1, _TANGENT_POINTS // points)
        return jax.lax.map(hvp, jnp.eye(d, dtype=x.dtype), batch_size=batch)  # symmetric: rows are columns

    return matrix


def start(fun: Callable[[Array], Array], x0: Float[Array, " d"], tol: float | Array) -> _State:
    """The Newton state at `x0`: NONFINITE at a non-finite start, CONVERGED at one that meets `tol` already."""
    f0, g0 = jax.value_and_grad(fun)(x0)
    finite0 = jnp.isfinite(f0) & jnp.all(jnp.isfinite(g0))
    status0 = jnp.where(finite0, RUNNING, NONFINITE)
    status0 = jnp.where(finite0 & (jnp.max(jnp.abs(g0)) <= tol), CONVERGED, status0)
    return _State(x0, f0, g0, jnp.asarray(_DAMPING_START, x0.dtype), jnp.array(0), status0, jnp.array(0))


def running(state: _State, max_steps: int) -> Array:
    """Whether the lane has not stopped yet (status RUNNING and under the step cap)."""
    return (state.status == RUNNING) & (state.n_steps < max_steps)


def advance(
    fun: Callable[[Array], Array],
    state: _State,
    *,
    steps: int,
    max_steps: int,
    tol: float | Array,
    points: int | None = None,
) -> _State:
    """At most `steps` more Newton steps of one lane (vmappable); rounds of it give the iterates of one
    uninterrupted `polish` (see `_lbfgs.advance`)."""
    value_and_grad = jax.value_and_grad(fun)
    hess = hessian(fun, points)
    precision = _PRECISION * float(jnp.finfo(state.x.dtype).eps)

    def cond(loop) -> Array:
        return running(loop[0], max_steps) & (loop[1] < steps)

    def body(loop):
        state, done = loop
        eigenvalues, vectors = jnp.linalg.eigh(hess(state.x))
        magnitude = jnp.abs(eigenvalues)
        scale = jnp.maximum(jnp.max(magnitude), jnp.finfo(state.x.dtype).tiny)
        step = -vectors @ ((vectors.T @ state.g) / (magnitude + state.damping * scale))
        x_try = state.x + step
        f_try, g_try = value_and_grad(x_try)
        accept = jnp.isfinite(f_try) & jnp.all(jnp.isfinite(g_try)) & (f_try < state.f)
        damping = jnp.where(accept, jnp.maximum(state.damping / 10, _DAMPING_MIN), state.damping * 100)
        g = jnp.where(accept, g_try, state.g)
        small = jnp.where(accept, small_decrease_count(state.f, f_try, state.small, precision), state.small)
        status = jnp.where((small >= 2) | (~accept & (damping > _DAMPING_GIVE_UP)), STALLED, RUNNING)
        status = jnp.where(jnp.max(jnp.abs(g)) <= tol, CONVERGED, status)
        new = _State(
            x=jnp.where(accept, x_try, state.x),
            f=jnp.where(accept, f_try, state.f),
            g=g,
            damping=damping,
            n_steps=state.n_steps + 1,
            status=status,
            small=small,
        )
        return new, done + 1

    state, _ = jax.lax.while_loop(cond, body, (state, jnp.array(0)))
    return state


def solution(state: _State, max_steps: int) -> Solution:
    """The lane's result once it stopped: a lane still RUNNING at the step cap is MAX_STEPS (as `_lbfgs.solution`)."""
    status = jnp.where((state.status == RUNNING) & (state.n_steps >= max_steps), MAX_STEPS, state.status)
    return Solution(state.x, state.f, jnp.max(jnp.abs(state.g)), state.n_steps, status)


def polish(
    fun: Callable[[Array], Array],
    x0: Float[Array, " d"],
    *,
    max_steps: int,
    tol: float | Array,
    points: int | None = None,
) -> Solution:
    """Damped Newton from `x0`; vmappable. Stops at a gradient inf-norm <= `tol` (CONVERGED: the first-order
    conditions hold), when even a heavily damped step cannot lower `fun` or two accepted steps in a row lower it by
    at most 100 machine epsilons (relative) (STALLED: optimal to working precision), or after `max_steps` Hessians
    (MAX_STEPS). A non-finite start is returned unchanged (NONFINITE). `points`: the data size `fun` sums over,
    which sets how the Hessian is built (see `hessian`). The same as `start`, `advance` until it stops, `solution`."""
    state = start(fun, x0, tol)
    return solution(advance(fun, state, steps=max_steps, max_steps=max_steps, tol=tol, points=points), max_steps)
