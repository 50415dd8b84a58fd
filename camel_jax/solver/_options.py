"""How a law is fitted, in one typed value, and how each start ended, as a named status.

`FitOptions` is shared by every entry point that fits (`fit`, `fit_arrays`, `bootstrap`, `fit_benchmarks`,
`fit_pipeline`, `extrapolation_error`, ...): it is hashable, so equal options reuse one compiled program, and it is
checked when it is built, before any compute.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array


class Status(enum.IntEnum):
    """How one start (one lane of the vmapped solver) ended: an integer code (`FitResult.status` holds them) that
    prints as its name (`str(Status.CONVERGED)` is "Status.CONVERGED"; `Status(3)` names a code)."""

    RUNNING = 0
    CONVERGED = 1  # first-order conditions: the gradient's inf-norm <= tol
    STALLED = 2  # no decrease to working precision (even a heavily damped step fails): optimal to working precision
    NONFINITE = 3  # the start (or every trial from it) was not finite
    MAX_STEPS = 4  # the step cap ended it
    SLOW = 5  # L-BFGS's relative decrease fell below its hand-off tolerance before the gradient met `tol`
    # No step lowers the objective, yet the gradient's inf-norm is above STUCK_FACTOR x `tol`: not an optimum to
    # working precision but a point the solver cannot leave (a ratio of two vanishing numbers, a kink)
    STUCK = 6

    def __str__(self) -> str:
        # An IntEnum prints as its number ("3") since Python 3.11; a status names itself (issue 57)
        return f"Status.{self.name}"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec) if not spec or spec[-1] not in "dxXobn" else format(int(self), spec)

    @property
    def label(self) -> str:
        """A lower-case label for reports ("max steps")."""
        return self.name.lower().replace("_", " ").replace("nonfinite", "non-finite")

    @property
    def is_converged(self) -> bool:
        return self in (Status.CONVERGED, Status.STALLED)


# A stalled start whose gradient inf-norm exceeds this many times its tolerance (the default tolerance, when a
# tighter `tol` is asked for) is STUCK, not STALLED. The default tolerance is what residuals of 1e-10 (relative)
# exert; a million times it, the gradient of 1e-4 residuals, is a first-order change that working precision cannot
# hide. (A fit asked for tol=1e-13 stalls at its precision, far above that tol: not stuck.) Stalls seen on real
# tables: 1.3 to 3.5e4 x tol on CAMELData (dmsl, 3Mix, 5Mix), 1.4 to 922 on camel-mixture, and two at 6e8 and 9e8
# where a dataset's column had fallen to 1e-34.
STUCK_FACTOR = 1e6


def _integer(value: Any, name: str, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"`{name}` must be an integer; got {value!r}")
    if value < least:
        raise ValueError(f"`{name}` must be >= {least}; got {value}")


@dataclasses.dataclass(frozen=True)
class FitOptions:
    """The objective and the solver of a fit.

    **Objective**: `sum_p w_p huber(res_p, delta)` (divided by `sum_p w_p` when `reduction="mean"`), plus
    `penalty(law)` if given, where `res_p = log pred_p - log y_p` when `log_residuals` (the default) and
    `(pred_p - y_p) / s` otherwise, s the targets' weighted root mean square: either way a residual is a fraction
    of the targets' size, so `delta` = 1e-3 is a 0.1% error and the targets' units do not change the fit.

    **Solver**: multi-start L-BFGS (`_lbfgs`), at most `max_steps` objective evaluations per start, until the
    gradient's inf-norm reaches `tol` relative to what 0.1% residuals exert (see `gradient_tolerance`; None: 1e-7 in
    float64, 1e-4 in float32) or progress slows below a relative
    decrease of 1e-9 per step; then at most `polish` damped-Newton steps from every start (`_newton`; 0 turns the
    finish off). **Converged** means the first-order conditions hold: the gradient's inf-norm in the law's free
    coordinates is <= `tol` (CONVERGED), or no step lowers the objective beyond working precision (STALLED). With
    `prescreen`, the objective is evaluated once at every start and only the best `prescreen` are optimized.

    **Lanes**: every start of every target (and of every resample of a bootstrap chunk) is a lane. `lanes` caps how
    many are advanced together; the others wait, and a lane that has stopped is set aside between rounds of 50
    L-BFGS (4 Newton) steps, so that the time follows the lanes' typical step count rather than the slowest
    lane's. None (default): all lanes together on an accelerator, and on a CPU all up to 256 lanes, a quarter of
    them (at least 256) beyond, and the Newton polish 1/32 of them (at least 8: a Newton step costs a Hessian
    per lane, so a lane that needs hundreds of steps then costs its own); never more than the memory allows on
    large tables. A given `lanes` sets both. The answer does not depend on it: each lane takes the same steps, up
    to rounding in the last bit.

    Build variants with `dataclasses.replace(options, max_steps=5000)` or `options.replace(max_steps=5000)`.
    """

    max_steps: int = 1000
    tol: float | None = None
    polish: int = 300
    delta: float = 1e-3
    log_residuals: bool = True
    reduction: str = "sum"
    penalty: Callable[[Any], Array] | None = None
    prescreen: int | None = None
    lanes: int | None = None

    def __post_init__(self) -> None:
        _integer(self.max_steps, "max_steps", 1)
        _integer(self.polish, "polish", 0)
        if self.prescreen is not None:
            _integer(self.prescreen, "prescreen", 1)
        if self.lanes is not None:
            _integer(self.lanes, "lanes", 1)
        tol = self.tol
        if tol is not None and not (isinstance(tol, (int, float)) and np.isfinite(tol) and tol > 0):
            raise ValueError(f"`tol` must be a finite number > 0 (or None for the default); got {tol!r}")
        delta = self.delta
        if isinstance(delta, bool) or not (isinstance(delta, (int, float)) and np.isfinite(delta) and delta > 0):
            raise ValueError(f"`delta` must be a finite number > 0; got {delta!r}")
        if not isinstance(self.log_residuals, bool):
            raise TypeError(f"`log_residuals` must be True or False; got {self.log_residuals!r}")
        if self.reduction not in ("sum", "mean"):
            raise ValueError(f"`reduction` must be 'sum' or 'mean'; got {self.reduction!r}")
        if self.penalty is not None and not callable(self.penalty):
            raise TypeError(f"`penalty` must be a callable penalty(law) -> scalar; got {self.penalty!r}")

    def replace(self, **changes: Any) -> FitOptions:
        """A copy with some fields changed (checked like the original)."""
        return dataclasses.replace(self, **changes)

    def handoff_tolerance(self, dtype: Any) -> float:
        """The relative decrease below which L-BFGS hands a start to the Newton finish (or, without a finish,
        reports it `SLOW`): 1e-9 in float64, 1e-5 in float32 (1e-10 and 1e-6 when the finish is off)."""
        double = np.dtype(dtype) == np.float64
        if self.polish == 0:
            return 1e-10 if double else 1e-6
        return 1e-9 if double else 1e-5

    def tolerance(self, dtype: Any) -> float:
        """`tol`, or the default for the data's precision: 1e-7 in float64, 1e-4 in float32 (relative; see
        `gradient_tolerance`)."""
        if self.tol is not None:
            return float(self.tol)
        return 1e-7 if np.dtype(dtype) == np.float64 else 1e-4

    def gradient_tolerance(self, weights: Array) -> Array:
        """The absolute bound on the gradient's inf-norm that counts as converged: `tol` times the gradient that
        residuals of size r0 exert on a unit-sensitivity coordinate, `r0 * sum(weights)` (`r0` under
        `reduction="mean"`), with r0 = min(`delta`, 1e-3): a 0.1% error, under log residuals and under plain ones
        alike (those are in units of the targets' root mean square). It does not depend on the units of loss or
        size nor on the number of points."""
        r0 = min(self.delta, 1e-3)
        scale = r0 * (weights.sum() if self.reduction == "sum" else 1.0)
        return self.tolerance(weights.dtype) * jnp.asarray(scale, weights.dtype)
