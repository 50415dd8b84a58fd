"""`minimise`: the solver's one entry point, in the shape of `optimistix.minimise`. A scalar function of a pytree,
a batch of starts, its arguments and options in; a `Solution` with every start's end point and status out.

Every start of a batch of problems is a lane: optimized side by side (L-BFGS, then the damped-Newton finish),
the finished lanes set aside (`_lanes`), spread over devices (`_shard`), the best start of each problem chosen,
and every start's end point differentiated by the implicit function theorem (`_implicit`). It knows nothing of
laws or data: `fitting` builds the objective of a law on data and calls `minimise` once (`solve_targets`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree
from jax.sharding import Mesh
from jaxtyping import Array, ArrayLike

from . import _lbfgs as lbfgs
from . import _newton as newton
from ._implicit import implicit_solution
from ._lanes import lane_width, polish_width, run_lanes
from ._options import STUCK_FACTOR, FitOptions, Status
from ._shard import across_devices, padded


class Solution(eqx.Module):
    """What `minimise` returns: every start's end point and how it ended, and the best start of each problem.

    **Fields** (leading axes [*T, R]: the T problems of a batched call, R starts each):

    - `value`: every start's end point, a pytree of the starts' structure.
    - `objectives`: `fn` at each end point; `n_steps`: the objective evaluations each start took (L-BFGS and
      Newton); `grad_norm`: the gradient's inf-norm there.
    - `status`: how each start ended, a `Status` code (`Status(int(code))` names it): CONVERGED, STALLED,
      NONFINITE, MAX_STEPS, SLOW, or STUCK (stalled with a gradient above `STUCK_FACTOR` x `tol`: not a solution).
    - `best` [*T]: the index of each problem's best start (the lowest finite objective whose status is not
      NONFINITE).
    """

    value: Any
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
    def best_value(self) -> Any:
        """The best start's end point (of each problem)."""
        return jax.tree.map(self.take_best, self.value)

    @property
    def converged(self) -> Array:
        """Whether each start met its stopping rule (CONVERGED or STALLED)."""
        return (self.status == Status.CONVERGED) | (self.status == Status.STALLED)

    @property
    def finite(self) -> Array:
        """Whether each start ended at a finite objective."""
        return jnp.isfinite(self.objectives) & (self.status != Status.NONFINITE)


def minimise(
    fn: Callable[[Any, Any], Array],
    starts: Any,
    args: Any = None,
    options: FitOptions = FitOptions(),
    *,
    batched: bool = False,
    tol: ArrayLike | None = None,
    points: int | None = None,
    mesh: Mesh | None = None,
) -> Solution:
    """Minimise a scalar function of a pytree from a batch of starts: L-BFGS from every start, then a damped-Newton
    finish, each start until it meets its own stopping rule; differentiable by the implicit function theorem.

    The starts (and, `batched`, those of every problem) are lanes of one solve: the lanes that finish are set aside
    (`solver._lanes`) and, given a `mesh`, each device solves its share. Traceable: call it under `jax.jit` (or
    `equinox.filter_jit`), `jax.vmap`, `jax.grad`. Derivatives of the solution with respect to `args` and to the
    values `fn` closes over are taken at each start's end point (`implicit_solution`), never through the solver's
    loops: NaN for a start that did not converge, and the objectives' by the envelope theorem.

    **Arguments**:

    - `fn`: `fn(y, args) -> scalar`, twice differentiable in `y` (the Newton finish takes its Hessian).
    - `starts`: the starts, a pytree (e.g. an `equinox.Module`) whose array leaves have a leading axis R (one
      problem), or [T, R] when `batched`; its other leaves are static.
    - `args`: a pytree of arrays passed to `fn` (with a leading axis T when `batched`); default None.
    - `options`: a `FitOptions`; its solver fields are read (`max_steps`, `polish`, `prescreen`, `lanes`, and
      `tol` when `tol` is None).
    - `batched`: T problems at once, each with its `args` (a row of every leaf) and its R starts.
    - `tol`: the bound on the gradient's inf-norm that counts as converged, a scalar or [T]; default
      `options.tolerance(dtype)` (1e-7 in float64).
    - `points`: how many data points `fn` sums over, if it does (a memory hint: on large data fewer lanes are
      solved side by side and Newton's Hessian is built a few columns at a time); default None (no limit).
    - `mesh`: the devices the lanes are spread over (`lane_mesh`); default None (one device).

    **Returns**: a `Solution`, leading axes [R] (or [T, R] when `batched`).
    """
    if not batched:
        params, static = eqx.partition(starts, eqx.is_array)
        starts = eqx.combine(jax.tree.map(lambda leaf: leaf[None], params), static)
        args = jax.tree.map(lambda a: jnp.asarray(a)[None], args)
        tol = None if tol is None else jnp.reshape(jnp.asarray(tol), (1,))
    T, dtype = _problems(starts, args)
    tol = options.tolerance(dtype) if tol is None else tol
    tol = jnp.broadcast_to(jnp.asarray(tol, dtype), (T,))
    solution = _solve_and_differentiate(fn, starts, args, tol, options, points, mesh)
    if batched:
        return solution
    params, static = eqx.partition(solution, eqx.is_array)
    return eqx.combine(jax.tree.map(lambda leaf: leaf[0], params), static)


def _problems(starts: Any, args: Any) -> tuple[int, Any]:
    """(T, the starts' dtype): `starts` [T, R, ...] of floating arrays and `args` [T, ...], checked when traced."""
    leaves = jax.tree.leaves(eqx.filter(starts, eqx.is_array))
    if not leaves or any(leaf.ndim < 2 for leaf in leaves):
        raise ValueError("`starts` must hold arrays with a leading axis of starts R ([T, R] when `batched`); got "
                         f"shapes {[leaf.shape for leaf in leaves]}")  # fmt: skip
    if not all(jnp.issubdtype(leaf.dtype, jnp.floating) for leaf in leaves):
        raise TypeError(f"`starts` must hold floating arrays; got dtypes {sorted({str(x.dtype) for x in leaves})}")
    T = leaves[0].shape[0]
    for leaf in leaves + jax.tree.leaves(args):
        if jnp.ndim(leaf) == 0 or jnp.shape(leaf)[0] != T:
            raise ValueError(f"every array of `starts` and `args` needs the leading axis of the T={T} problems "
                             f"(batched=True); got shape {jnp.shape(leaf)}")  # fmt: skip
    return T, jnp.result_type(*leaves)


# --- issue 32: implicit derivatives of a fit (the one hook; re-apply after reworking the solver) ---------------
def _solve_and_differentiate(
    fn: Callable[[Any, Any], Array], starts: Any, args: Any, tol: Array, options: FitOptions, points: int | None,
    mesh: Mesh | None = None,
) -> Solution:  # fmt: skip
    """Optimize the starts [T, R] of T problems: L-BFGS from each start, then a damped-Newton finish of every start;
    derivatives by the implicit function theorem at each start's optimum (`_implicit`), never through the solver's
    loops, which see constants. `mesh`: the devices the lanes are spread over (`solver._shard`; None: one)."""
    params, structure = eqx.partition(starts, eqx.is_array)
    constant = jax.lax.stop_gradient((params, args, tol))
    solved = _solve_lanes(fn, eqx.combine(constant[0], structure), *constant[1:], options, points, mesh)
    return jax.vmap(lambda lanes, args: differentiable_lanes(lanes, fn, args))(solved, args)


# --- end of the issue 32 hook ----------------------------------------------------------------------------------


def differentiable_lanes(lanes: Solution, fn: Callable[[Any, Any], Array], args: Any) -> Solution:
    """One problem's lanes (solved on constant data) with every start's end point and objective made
    differentiable in `args` and in what `fn` closes over: end points by `implicit_solution` at the start's optimum
    (NaN for a start that did not converge), objectives by the envelope theorem (`df*/d data = df/d data` at x*).
    The values are unchanged."""
    params, static = eqx.partition(lanes.value, eqx.is_array)
    _, unravel = ravel_pytree(jax.tree.map(lambda leaf: leaf[0], params))
    flat = jax.vmap(lambda p: ravel_pytree(p)[0])(params)

    def loss(x: Array, args: Any) -> Array:
        return fn(eqx.combine(unravel(x), static), args)

    def one(x: Array, value: Array, converged: Array) -> tuple[Array, Array]:
        x = implicit_solution(loss, x, args, converged=converged)
        recomputed = loss(x, args)
        return x, value + (recomputed - jax.lax.stop_gradient(recomputed))

    flat, values = jax.vmap(one)(flat, lanes.objectives, lanes.converged)
    value = eqx.combine(jax.vmap(unravel)(flat), static)
    return eqx.tree_at(lambda lanes: (lanes.value, lanes.objectives), lanes, (value, values))


# Iterations a lane is advanced per round when the lanes are compacted (`solver._lanes.run_lanes`): short enough
# that a round's slowest lane wastes little, long enough that the rounds' fixed cost stays small.
ROUND_STEPS = 50
ROUND_NEWTON_STEPS = 4


def _solve_lanes(
    fn: Callable[[Any, Any], Array], starts: Any, args: Any, tol: Array, options: FitOptions, points: int | None,
    mesh: Mesh | None = None,
) -> Solution:  # fmt: skip
    """Optimize the starts [T, R] of T problems (rows of `args`, `tol`): L-BFGS from each start, then a
    damped-Newton finish of every start, whose status is the start's (see `_newton`). The T x R starts are lanes
    of one solve, so that the finished lanes of every problem are set aside together (`solver._lanes`); with a
    `mesh`, each device solves its share of the lanes on its own (`solver._shard.across_devices`)."""
    params, static = eqx.partition(starts, eqx.is_array)
    _, unravel = ravel_pytree(jax.tree.map(lambda leaf: leaf[0, 0], params))
    flat = jax.vmap(jax.vmap(lambda p: ravel_pytree(p)[0]))(params)  # [T, R, d]

    def flat_fn(x: Array, args: Any) -> Array:
        return fn(eqx.combine(unravel(x), static), args)

    def constant_loss(X: Array, data: tuple[Any, ...]) -> Callable[[Array, Any], Array]:
        """The objective of a lane whose problem's (args, tolerance) are `data`, with what `fn` closes over held
        constant in the solver's loops (its derivatives are `differentiable_lanes`'). Converted where it is used
        (inside a device's share of the lanes, `across_devices`), so that its values live on that side."""
        closed, consts = jax.closure_convert(flat_fn, X[0], jax.tree.map(lambda a: a[0], data[0]))
        consts = jax.lax.stop_gradient(consts)
        return lambda x, data: closed(x, data[0], *consts)

    if options.prescreen is not None and options.prescreen < flat.shape[1]:
        loss = constant_loss(flat[0], (args, None))
        values = jax.vmap(lambda xs, a: jax.vmap(lambda x: loss(x, (a, None)))(xs))(flat, args)
        _, kept = jax.lax.top_k(-jnp.where(jnp.isfinite(values), values, jnp.inf), options.prescreen)
        flat = jnp.take_along_axis(flat, kept[..., None], axis=1)
    T, R, d = flat.shape
    # each lane carries its problem's data: its row of `args` repeated per start, and the problem's tolerance
    data = jax.tree.map(lambda a: jnp.repeat(a, R, axis=0), (args, tol))
    per_device = padded(T * R, mesh) // (1 if mesh is None else mesh.size)
    side_by_side = T * R if points is None else starts_side_by_side(points, flat.dtype.itemsize)
    width = lane_width(per_device, side_by_side, options.lanes)
    handoff = options.handoff_tolerance(flat.dtype)
    solution = across_devices(
        lambda X, data: _in_lanes(lbfgs, constant_loss(X, data), X, data, width, ROUND_STEPS, options.max_steps,
                                  handoff=handoff),
        mesh, flat.reshape(T * R, d), data,
    )  # fmt: skip
    if options.polish > 0:
        newton_width = polish_width(per_device, width, options.lanes)
        solution = across_devices(
            lambda solution, data: _finish(constant_loss(solution.x, data), solution, data, options.polish, points,
                                           newton_width),
            mesh, solution, data,
        )  # fmt: skip
    solution = jax.tree.map(lambda leaf: leaf.reshape((T, R) + leaf.shape[1:]), solution)
    # a `tol` tighter than the default asks for more precision; it does not make a precision-limited stall stuck
    looser = max(1.0, FitOptions().tolerance(flat.dtype) / options.tolerance(flat.dtype))
    stuck = (solution.status == Status.STALLED) & (solution.grad_norm > STUCK_FACTOR * looser * tol[:, None])
    solution = solution._replace(status=jnp.where(stuck, int(Status.STUCK), solution.status))
    finite = jnp.isfinite(solution.f) & (solution.status != Status.NONFINITE)
    best = jnp.argmin(jnp.where(finite, solution.f, jnp.inf), axis=-1)
    value = eqx.combine(jax.vmap(jax.vmap(unravel))(solution.x), static)
    return Solution(value, solution.f, solution.n_steps, solution.grad_norm, solution.status, best)


def _in_lanes(solver: Any, loss: Any, X: Array, data: Any, width: int, round_steps: int, max_steps: int,
              **settings: Any) -> lbfgs.Solution:  # fmt: skip
    """`solver` (`_lbfgs` or `_newton`: start, advance, running, solution) from every row of X, lane i minimizing
    `loss(., data[i])` to the tolerance `data[i][-1]`, `width` lanes at a time (`solver._lanes.run_lanes`), in rounds
    of `round_steps` when not all lanes run together. `settings`: the solver's own (`handoff`, `points`)."""
    steps = max_steps if width >= X.shape[0] else min(round_steps, max_steps)

    def advance(carry: Any, lane: Any) -> Any:
        return solver.advance(partial(loss, data=lane), carry, steps=steps, max_steps=max_steps, tol=lane[-1],
                              **settings)  # fmt: skip

    carry = jax.vmap(lambda x, lane: solver.start(partial(loss, data=lane), x, lane[-1]))(X, data)
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


def _finish(loss: Any, solution: lbfgs.Solution, data: Any, max_steps: int, points: int | None,
            width: int) -> lbfgs.Solution:  # fmt: skip
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
