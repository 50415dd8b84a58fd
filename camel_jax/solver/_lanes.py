"""Many lanes of one iterative solver, with the finished lanes set aside (issue 29: converged lanes stop costing).

A vmapped `while_loop` runs every lane until the slowest one stops, and on a CPU each of its iterations costs in
proportion to the number of lanes, finished or not: a bootstrap of 1,000 resamples x 4 warm starts spent ~8x the
L-BFGS iterations its lanes needed (median 109, slowest 938) and ~24x the Newton steps (mean 4, slowest 100).
`run_lanes` advances the lanes in rounds instead: each round gathers up to `width` lanes still running, advances
them a bounded number of iterations, and scatters them back, until none runs. Every lane goes through exactly the
iterates of one uninterrupted run (the solvers' `advance` is resumable), so the answer does not depend on `width`
beyond rounding (a program's last bits depend on how many lanes it holds); the work done for finished lanes does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array

# Lanes below this count always run side by side: a round of few lanes costs what its fixed overhead costs.
COMPACT_ABOVE = 256


def lane_width(n_lanes: int, side_by_side: int, requested: int | None = None) -> int:
    """How many of `n_lanes` lanes `run_lanes` advances at once: `requested` (`FitOptions.lanes`) when given, else
    all of them on an accelerator (where lanes run in parallel and rounds would only add sequential steps) and on
    a CPU up to `COMPACT_ABOVE` lanes; beyond, on a CPU, a quarter of them (at least `COMPACT_ABOVE`). Never more
    than `side_by_side`, the count the memory allows."""
    width = n_lanes
    if requested is not None:
        width = min(n_lanes, requested)
    elif jax.default_backend() == "cpu" and n_lanes > COMPACT_ABOVE:
        width = max(COMPACT_ABOVE, n_lanes // 4)
    return max(1, min(width, side_by_side))


# Newton lanes advanced at once on a CPU, at least: a Newton step costs a Hessian per lane, so its rounds gather the
# few lanes still polishing instead of carrying every finished lane along.
POLISH_LANES_MIN = 8
# On a CPU the polish advances this fraction of the lanes at once. Most lanes need a few Newton steps or none, and the
# few that need hundreds (3% of the README's bootstrap) run them at the full polish width, finished lanes padding
# the rounds: at an eighth of the lanes that tail was half of the bootstrap's time (1,000 resamples x 4 starts,
# 300 Newton steps: 20.2 s at 1/8, 10.5 s at 1/32, 10.0 s at 1/128, the same 971 resamples converged; a backtest
# world of tied CAMEL 56.0 -> 48.1 s at 1/32).
POLISH_FRACTION = 32


def polish_width(n_lanes: int, width: int, requested: int | None = None) -> int:
    """How many of `n_lanes` lanes the Newton polish advances at once: `width` (the L-BFGS lanes' width,
    `lane_width`) on an accelerator or when `requested`; on a CPU 1/`POLISH_FRACTION` of the lanes (at least
    `POLISH_LANES_MIN`, at most `width`). Most lanes need a few Newton steps or none; a lane that needs hundreds
    (a saddle, a slow valley) then costs its own Hessians, not every lane's."""
    if requested is not None or jax.default_backend() != "cpu":
        return width
    return max(1, min(width, max(POLISH_LANES_MIN, n_lanes // POLISH_FRACTION)))


def run_lanes(
    advance: Callable[[Any, Any], Any],
    carry: Any,
    lane_data: Any,
    running: Callable[[Any], Array],
    width: int,
) -> Any:
    """Advance every lane of `carry` until `running` is false for all of them, `width` lanes at a time.

    **Arguments**:

    - `advance(carry, data)`: a bounded number of iterations of one lane (a lane that stopped is unchanged).
    - `carry`: the lanes' states, a pytree whose leaves have a leading lane axis N.
    - `lane_data`: per-lane inputs of `advance` (leading axis N), e.g. which target a lane fits.
    - `running(carry)`: whether one lane still runs.
    - `width`: lanes advanced together; `width >= N` is one vmapped call of `advance` per round over all lanes.

    **Returns**: the lanes' final states, in their original order.
    """
    n = jax.tree.leaves(carry)[0].shape[0]
    lanes_running = jax.vmap(running)

    def any_running(carry: Any) -> Array:
        return jnp.any(lanes_running(carry))

    if width >= n:
        return jax.lax.while_loop(any_running, lambda c: jax.vmap(advance)(c, lane_data), carry)

    def round_(carry: Any) -> Any:
        # The lanes still running first (a stable order, so the same lanes are picked on every platform).
        chosen = jnp.argsort(~lanes_running(carry), stable=True)[:width]
        some = jax.vmap(advance)(*jax.tree.map(lambda leaf: leaf[chosen], (carry, lane_data)))
        return jax.tree.map(lambda leaf, new: leaf.at[chosen].set(new), carry, some)

    return jax.lax.while_loop(any_running, round_, carry)
