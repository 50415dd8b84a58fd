"""L-BFGS with one value-and-gradient per iteration, for lockstep execution under `jax.vmap`.

optax's `lbfgs` pairs the L-BFGS direction with a zoom line search: a nested while loop which, under vmap, runs
in lockstep so that every lane pays for the slowest lane's search. Here the line search is unrolled into the
outer loop instead: each iteration evaluates one trial point `x + step * d`; an Armijo success accepts it and
asks optax's `scale_by_lbfgs` for the next direction, a failure shrinks the step (safeguarded quadratic
interpolation) and tries again on the next iteration. Every lane thus costs one `value_and_grad` per iteration,
and a lane that has stopped keeps its state unchanged (the batched `while_loop` selects per lane).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Bool, Float, Int

from ._options import Status

# A lane's status codes, as plain ints inside traced code (see `Status`).
RUNNING, CONVERGED, STALLED, NONFINITE, MAX_STEPS, SLOW = (
    int(s) for s in (Status.RUNNING, Status.CONVERGED, Status.STALLED, Status.NONFINITE, Status.MAX_STEPS, Status.SLOW)
)

_ARMIJO_C1 = 1e-4
_MEMORY = 10
_MIN_STEP = 1e-12  # relative to the first trial step of a direction


class _State(NamedTuple):
    x: Float[Array, " d"]
    f: Float[Array, ""]
    g: Float[Array, " d"]
    direction: Float[Array, " d"]
    step: Float[Array, ""]
    lbfgs: optax.ScaleByLBFGSState
    steepest: Bool[Array, ""]  # the direction is (capped) steepest descent, with no curvature memory
    n_steps: Int[Array, ""]
    status: Int[Array, ""]


class Solution(NamedTuple):
    """Result of one lane: the final point, objective, gradient norm (inf-norm), iterations and status."""

    x: Float[Array, " d"]
    f: Float[Array, ""]
    grad_norm: Float[Array, ""]
    n_steps: Int[Array, ""]
    status: Int[Array, ""]


def small_decrease_count(f: Array, f_new: Array, count: Array, tol: float) -> Array:
    """`count + 1` when the step from `f` to `f_new` lowered the objective by a relative `tol` or less, else 0:
    the stopping rule both solvers share (two such accepted steps in a row count as converged)."""
    decrease = (f - f_new) / jnp.maximum(jnp.abs(f_new), jnp.finfo(f_new.dtype).tiny)
    return jnp.where(decrease <= tol, count + 1, 0)


def _steepest(lbfgs: optax.GradientTransformation, x: Array, g: Array):
    """Capped steepest descent -g min(1, 1/|g|) and the L-BFGS state after it, with empty memory.

    This is exactly what optax's `scale_by_lbfgs` returns on its first update; building it directly saves a
    two-loop recursion per iteration.
    """
    scale = jnp.minimum(1.0, 1.0 / jnp.linalg.norm(g))
    state = lbfgs.init(x)._replace(count=jnp.ones((), jnp.int32), params=x, updates=g)
    return -scale * g, state


def _lbfgs_direction(lbfgs: optax.GradientTransformation, x: Array, g: Array, state: optax.ScaleByLBFGSState):
    """The L-BFGS direction at (x, g) and whether it is a usable descent direction (without a Wolfe curvature
    check the memory can make it non-descent or non-finite)."""
    # optax mixes int32 and int64 indices internally; keep it working when a user enables strict promotion.
    with jax.numpy_dtype_promotion("standard"):
        precond, new_state = lbfgs.update(g, state, x)
    # optax keeps its memory weights in the default float dtype: keep a float32 fit in float32.
    direction = (-precond).astype(x.dtype)
    ok = (jnp.vdot(direction, g) < 0) & jnp.all(jnp.isfinite(direction))
    return direction, new_state, ok


def _init(value_and_grad: Callable, lbfgs: optax.GradientTransformation, x0: Array, tol: float | Array) -> _State:
    """The state at `x0`: steepest descent first; NONFINITE at a non-finite start, CONVERGED at a stationary one."""
    f0, g0 = value_and_grad(x0)
    finite0 = jnp.isfinite(f0) & jnp.all(jnp.isfinite(g0))
    g0 = jnp.where(finite0, g0, 0.0)
    d0, lbfgs0 = _steepest(lbfgs, x0, g0)
    status0 = jnp.where(finite0, RUNNING, NONFINITE)
    status0 = jnp.where(finite0 & (jnp.max(jnp.abs(g0)) <= tol), CONVERGED, status0)
    return _State(x0, f0, g0, d0, jnp.ones((), x0.dtype), lbfgs0, jnp.array(True), jnp.array(1), status0)


def _shrink(state: _State, f_try: Array, finite: Array, slope: Array) -> Array:
    """After a rejected trial: the next step, by safeguarded quadratic interpolation on f along the direction."""
    curvature = f_try - state.f - state.step * slope
    quad = -slope * state.step**2 / (2.0 * curvature)
    return jnp.where(finite & (curvature > 0), jnp.clip(quad, 0.1 * state.step, 0.5 * state.step), 0.1 * state.step)


class Carry(NamedTuple):
    """One lane's L-BFGS state between rounds (see `advance`): the state and its count of small decreases."""

    state: _State
    small: Int[Array, ""]


def start(fun: Callable[[Array], Array], x0: Float[Array, " d"], tol: float | Array) -> Carry:
    """The L-BFGS carry at `x0` (see `minimize`)."""
    lbfgs = optax.scale_by_lbfgs(memory_size=_MEMORY)
    return Carry(_init(jax.value_and_grad(fun), lbfgs, x0, tol), jnp.array(0))


def running(carry: Carry, max_steps: int) -> Array:
    """Whether the lane has not stopped yet (status RUNNING and under the step cap)."""
    return (carry.state.status == RUNNING) & (carry.state.n_steps < max_steps)


def advance(
    fun: Callable[[Array], Array], carry: Carry, *, steps: int, max_steps: int, tol: float | Array, handoff: float
) -> Carry:
    """At most `steps` more L-BFGS iterations of one lane (vmappable); a lane that stopped is returned unchanged.
    Rounds of `advance` give exactly the iterates of one uninterrupted run (`minimize`), so that lanes can be
    advanced a round at a time and the finished ones set aside (`solver._lanes.run_lanes`)."""
    value_and_grad = jax.value_and_grad(fun)
    lbfgs = optax.scale_by_lbfgs(memory_size=_MEMORY)
    one = jnp.ones((), carry.state.x.dtype)

    def cond(loop):
        return running(loop[0], max_steps) & (loop[1] < steps)

    def body(loop):
        (state, small), done = loop
        slope = jnp.vdot(state.g, state.direction)
        x_try = state.x + state.step * state.direction
        f_try, g_try = value_and_grad(x_try)
        finite = jnp.isfinite(f_try) & jnp.all(jnp.isfinite(g_try))
        accept = finite & (f_try <= state.f + _ARMIJO_C1 * state.step * slope)

        # Accepted: new point, new L-BFGS direction (or steepest descent if that is unusable), unit step.
        g_acc = jnp.where(accept, g_try, state.g)
        d_acc, lbfgs_acc, usable = _lbfgs_direction(lbfgs, x_try, g_acc, state.lbfgs)
        small_acc = small_decrease_count(state.f, f_try, small, handoff)
        status_acc = jnp.where(small_acc >= 2, SLOW, RUNNING)
        status_acc = jnp.where(jnp.max(jnp.abs(g_try)) <= tol, CONVERGED, status_acc)

        shrunk = _shrink(state, f_try, finite, slope)
        exhausted = shrunk < _MIN_STEP
        # An exhausted L-BFGS direction restarts as steepest descent; an exhausted steepest descent has stalled.
        restart = exhausted & ~state.steepest
        status_rej = jnp.where(exhausted & state.steepest, STALLED, RUNNING)

        # Steepest descent from the new point (accepted but unusable L-BFGS direction) or the old one (restart).
        x_new = jnp.where(accept, x_try, state.x)
        d_sd, lbfgs_sd = _steepest(lbfgs, x_new, g_acc)
        use_lbfgs = accept & usable
        use_sd = (accept & ~usable) | (~accept & restart)

        def choose(lbfgs_value, sd_value, unchanged):
            return jnp.where(use_lbfgs, lbfgs_value, jnp.where(use_sd, sd_value, unchanged))

        new = _State(
            x=x_new,
            f=jnp.where(accept, f_try, state.f),
            g=g_acc,
            direction=choose(d_acc, d_sd, state.direction),
            step=jnp.where(accept | restart, one, shrunk),
            lbfgs=jax.tree.map(choose, lbfgs_acc, lbfgs_sd, state.lbfgs),
            steepest=choose(jnp.array(False), jnp.array(True), state.steepest),
            n_steps=state.n_steps + 1,
            status=jnp.where(accept, status_acc, status_rej),
        )
        return Carry(new, jnp.where(accept, small_acc, small)), done + 1

    carry, _ = jax.lax.while_loop(cond, body, (carry, jnp.array(0)))
    return carry


def solution(carry: Carry, max_steps: int) -> Solution:
    """The lane's result once it stopped: a lane still RUNNING at the step cap is MAX_STEPS."""
    state = carry.state
    status = jnp.where((state.status == RUNNING) & (state.n_steps >= max_steps), MAX_STEPS, state.status)
    return Solution(state.x, state.f, jnp.max(jnp.abs(state.g)), state.n_steps, status)


def minimize(
    fun: Callable[[Array], Array], x0: Float[Array, " d"], *, max_steps: int, tol: float | Array, handoff: float
) -> Solution:
    """Minimize `fun` from `x0` by L-BFGS; vmappable over `x0` (and over data closed over by `fun`).

    Stops a lane when the gradient's inf-norm falls to `tol` (`CONVERGED`), when the relative decrease of two
    accepted steps in a row falls to `handoff` (`SLOW`: progress too slow for L-BFGS, not a convergence; `fit`
    hands such lanes to Newton), when no decrease can be found even along steepest descent (`STALLED`: an optimum
    to working precision), when the start is non-finite (`NONFINITE`), or after `max_steps` evaluations.
    The same as `start`, then `advance` until it stops, then `solution`.
    """
    carry = advance(fun, start(fun, x0, tol), steps=max_steps, max_steps=max_steps, tol=tol, handoff=handoff)
    return solution(carry, max_steps)
