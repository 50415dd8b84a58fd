"""The solver's lanes: every start of a batch of problems, optimized side by side (L-BFGS, then the damped-Newton
finish), the finished lanes set aside (`_lanes`), spread over devices (`_shard`), the best start of each problem
chosen, and every start's end point differentiated by the implicit function theorem (`_implicit`).

Moved from `fitting/_fit.py` (issue 58), whole functions.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree
from jax.sharding import Mesh
from jaxtyping import Array

from . import _lbfgs as lbfgs
from . import _newton as newton
from ._implicit import implicit_solution
from ._lanes import lane_width, polish_width, run_lanes
from ._lbfgs import Solution
from ._options import FitOptions, Status
from ._shard import across_devices, padded


class Lanes(eqx.Module):
    """Every optimized start of one or more targets (leading axes [*T, R]) and the best start of each."""

    laws: Any
    objectives: Array
    n_steps: Array
    grad_norm: Array
    status: Array
    best: Array  # [*T]: the lowest finite objective whose status is not NONFINITE

    def take_best(self, leaf: Array) -> Array:
        """`leaf[..., best, ...]`: the best start's entry of a per-start array [*T, R, ...]."""
        index = self.best.reshape(self.best.shape + (1,) * (leaf.ndim - self.best.ndim))
        return jnp.take_along_axis(leaf, index, axis=self.best.ndim)[(slice(None),) * self.best.ndim + (0,)]

    @property
    def law(self) -> Any:
        return jax.tree.map(self.take_best, self.laws)

    @property
    def converged(self) -> Array:
        return (self.status == Status.CONVERGED) | (self.status == Status.STALLED)

    @property
    def finite(self) -> Array:
        return jnp.isfinite(self.objectives) & (self.status != Status.NONFINITE)


# --- issue 32: implicit derivatives of a fit (the one hook; re-apply after reworking the solver) ---------------
def _solve_and_differentiate(
    starts: Any, inputs: tuple[Array, ...], Y: Array, W: Array, options: FitOptions, mesh: Mesh | None = None
) -> Lanes:
    """Optimize the starts [T, R] of T targets: L-BFGS from each start, then a damped-Newton finish of every start;
    derivatives by the implicit function theorem at each start's optimum (`_implicit`), never through the solver's
    loops, which see constants. `mesh`: the devices the lanes are spread over (`solver._shard`; None: one)."""
    params, structure = eqx.partition(starts, eqx.is_array)
    constant = jax.lax.stop_gradient((params, inputs, Y, W))
    solved = _solve_lanes(eqx.combine(constant[0], structure), *constant[1:], options, mesh)
    return jax.vmap(lambda lanes, y, w: differentiable_lanes(lanes, inputs, y, w, options))(solved, Y, W)


# --- end of the issue 32 hook ----------------------------------------------------------------------------------


def differentiable_lanes(lanes: Any, inputs: tuple[Array, ...], y: Array, weights: Array, options: Any) -> Any:
    """A fit's lanes (`_fit.Lanes`, solved on constant data) with every start's parameters and objective made
    differentiable in `inputs`, `y` and `weights`: parameters by `implicit_solution` at the start's optimum (NaN
    for a start that did not converge), objectives by the envelope theorem (`df*/d data = df/d data` at x*).
    The values are unchanged."""
    from ..fitting._fit import objective  # for this pure move only: the next commit passes the objective in

    params, static = eqx.partition(lanes.laws, eqx.is_array)
    _, unravel = ravel_pytree(jax.tree.map(lambda leaf: leaf[0], params))
    flat = jax.vmap(lambda p: ravel_pytree(p)[0])(params)
    data = (inputs, y, weights)

    def loss(x: Array, data: Any) -> Array:
        inputs, y, weights = data
        return objective(eqx.combine(unravel(x), static), inputs, y, weights, options)

    def one(x: Array, value: Array, converged: Array) -> tuple[Array, Array]:
        x = implicit_solution(loss, x, data, converged=converged)
        recomputed = loss(x, data)
        return x, value + (recomputed - jax.lax.stop_gradient(recomputed))

    flat, values = jax.vmap(one)(flat, lanes.objectives, lanes.converged)
    laws = eqx.combine(jax.vmap(unravel)(flat), static)
    return eqx.tree_at(lambda lanes: (lanes.laws, lanes.objectives), lanes, (laws, values))


# Iterations a lane is advanced per round when the lanes are compacted (`solver._lanes.run_lanes`): short enough
# that a round's slowest lane wastes little, long enough that the rounds' fixed cost stays small.
ROUND_STEPS = 50
ROUND_NEWTON_STEPS = 4


def _solve_lanes(
    starts: Any, inputs: tuple[Array, ...], Y: Array, W: Array, options: FitOptions, mesh: Mesh | None = None
) -> Lanes:
    """Optimize the starts [T, R] (a batched law) of T targets (rows of Y, W): L-BFGS from each start, then a
    damped-Newton finish of every start, whose status is the start's (see `_newton`). The T x R starts are lanes
    of one solve, so that the finished lanes of every target are set aside together (`solver._lanes`); with a
    `mesh`, each device solves its share of the lanes on its own (`solver._shard.across_devices`)."""
    from ..fitting._fit import objective  # for this pure move only: the next commit passes the objective in

    params, static = eqx.partition(starts, eqx.is_array)
    _, unravel = ravel_pytree(jax.tree.map(lambda leaf: leaf[0, 0], params))
    flat = jax.vmap(jax.vmap(lambda p: ravel_pytree(p)[0]))(params)  # [T, R, d]

    def loss(x: Array, data: tuple[Any, ...]) -> Array:
        """The objective of a lane whose target's (y, weights, tolerance) are `data`."""
        return objective(eqx.combine(unravel(x), static), inputs, data[0], data[1], options)

    if options.prescreen is not None and options.prescreen < flat.shape[1]:
        values = jax.vmap(lambda xs, y, w: jax.vmap(lambda x: loss(x, (y, w, None)))(xs))(flat, Y, W)
        _, kept = jax.lax.top_k(-jnp.where(jnp.isfinite(values), values, jnp.inf), options.prescreen)
        flat = jnp.take_along_axis(flat, kept[..., None], axis=1)
    T, R, d = flat.shape
    # each lane carries its target's data: rows of Y and W repeated per start, and the target's tolerance
    tol = jax.vmap(options.gradient_tolerance)(W)
    data = tuple(jnp.repeat(a, R, axis=0) for a in (Y, W, tol))
    per_device = padded(T * R, mesh) // (1 if mesh is None else mesh.size)
    width = lane_width(per_device, starts_side_by_side(Y.shape[-1], flat.dtype.itemsize), options.lanes)
    handoff = options.handoff_tolerance(flat.dtype)
    solution = across_devices(
        lambda X, data: _in_lanes(lbfgs, loss, X, data, width, ROUND_STEPS, options.max_steps, handoff=handoff),
        mesh, flat.reshape(T * R, d), data,
    )  # fmt: skip
    if options.polish > 0:
        newton_width = polish_width(per_device, width, options.lanes)
        solution = across_devices(
            lambda solution, data: _finish(loss, solution, data, options.polish, Y.shape[-1], newton_width),
            mesh, solution, data,
        )  # fmt: skip
    solution = jax.tree.map(lambda leaf: leaf.reshape((T, R) + leaf.shape[1:]), solution)
    finite = jnp.isfinite(solution.f) & (solution.status != Status.NONFINITE)
    best = jnp.argmin(jnp.where(finite, solution.f, jnp.inf), axis=-1)
    laws = eqx.combine(jax.vmap(jax.vmap(unravel))(solution.x), static)
    return Lanes(laws, solution.f, solution.n_steps, solution.grad_norm, solution.status, best)


def _in_lanes(solver: Any, loss: Any, X: Array, data: Any, width: int, round_steps: int, max_steps: int,
              **settings: Any) -> Solution:  # fmt: skip
    """`solver` (`_lbfgs` or `_newton`: start, advance, running, solution) from every row of X, lane i minimizing
    `loss(., data[i])` to the tolerance `data[i][2]`, `width` lanes at a time (`solver._lanes.run_lanes`), in rounds
    of `round_steps` when not all lanes run together. `settings`: the solver's own (`handoff`, `points`)."""
    steps = max_steps if width >= X.shape[0] else min(round_steps, max_steps)

    def advance(carry: Any, lane: Any) -> Any:
        return solver.advance(partial(loss, data=lane), carry, steps=steps, max_steps=max_steps, tol=lane[2],
                              **settings)  # fmt: skip

    carry = jax.vmap(lambda x, lane: solver.start(partial(loss, data=lane), x, lane[2]))(X, data)
    carry = run_lanes(advance, carry, data, lambda c: solver.running(c, max_steps), width)
    return jax.vmap(lambda c: solver.solution(c, max_steps))(carry)


# Memory a start holds per data point while it is solved (the objective, its gradient and Hessian-vector products,
# with XLA's temporaries), in bytes per float64 point: ~3.5 KB measured on tied CAMEL with 100,000 points.
BYTES_PER_POINT = 4096
# Memory the starts of one fit (or of one bootstrap chunk) may hold side by side.
START_MEMORY_BYTES = 1 << 29


def start_bytes(points: int, itemsize: int = 8) -> int:
    """The per-point memory one start holds while it is solved on `points` points of `itemsize`-byte floats."""
    return points * BYTES_PER_POINT * itemsize // 8


def starts_side_by_side(points: int, itemsize: int = 8) -> int:
    """How many starts (lanes) are solved at once on `points` data points (at least one): all of them on small
    tables, a few on large ones (100,000 points and 32 starts side by side took 3 GB; one at a time, 0.9 GB)."""
    return max(1, START_MEMORY_BYTES // start_bytes(points, itemsize))


def _finish(loss: Any, solution: Solution, data: Any, max_steps: int, points: int, width: int) -> Solution:
    """Damped Newton from every L-BFGS end point (see `_newton`), `width` lanes at a time: it takes a point near an
    optimum to the first-order tolerance in a few steps where L-BFGS crawls. A non-finite lane is left alone;
    otherwise the Newton status is the lane's (a lane L-BFGS already converged is CONVERGED at Newton's first
    check)."""
    finite = jnp.isfinite(solution.f) & (solution.status != Status.NONFINITE)
    polished = _in_lanes(newton, loss, solution.x, data, width, ROUND_NEWTON_STEPS, max_steps, points=points)
    keep = ~finite

    def pick(new, old):
        return jnp.where(keep.reshape(keep.shape + (1,) * (new.ndim - 1)), old, new)

    return solution._replace(
        x=pick(polished.x, solution.x),
        f=pick(polished.f, solution.f),
        grad_norm=pick(polished.grad_norm, solution.grad_norm),
        n_steps=solution.n_steps + jnp.where(finite, polished.n_steps, 0),
        status=pick(polished.status, solution.status),
    )
