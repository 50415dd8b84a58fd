"""Fitting a law: one objective (weighted Huber of log residuals), one L-BFGS loop, restarts as a vmap.

`fit_arrays` is the traceable core: it runs under the user's `jax.jit` and `jax.vmap` (checks that need values
are `eqx.error_if`). `fit` makes the same checks on the host, with messages that name the row, and runs the same
program without the run-time checks (`fit_compiled`: JAX's persistent cache stores it), plus the design warnings
and `throw`.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from jaxtyping import Array, ArrayLike, Float, Int

from .._deprecated import keyword_only
from .._warn import user_stacklevel
from ..data._checks import (
    check_inputs,
    check_key,
    check_law_inputs,
    check_names,
    check_targets,
    design_problems,
    warn_design,
)
from ..laws._base import UNCONVERGED_HINT, count, n_free_parameters
from ..laws._checks import check_inits
from ..solver._minimise import Solution, minimise
from ..solver._options import FitOptions, Status
from ..solver._shard import lane_mesh
from ._degenerate import DEGENERATE_HINT, degenerate_batch, degenerate_parameters
from ._identify import Identifiability, identifiability, paper_params
from ._residuals import fit_residuals
from ._student import t_quantile
from ._support import SUPPORT_FACTOR, rows_outside
from ._units import starts_in_data_units


def huber(residual: Array, delta: float) -> Array:
    """Huber loss: r^2 / 2 for |r| <= delta, delta (|r| - delta / 2) beyond.

    **Arguments**:

    - `residual`: residuals, any shape; `delta`: where the loss turns from quadratic to linear.

    **Returns**: the loss of each residual, elementwise.
    """
    a = jnp.abs(residual)
    return jnp.where(a <= delta, 0.5 * residual**2, delta * (a - 0.5 * delta))


def objective(
    law: Any,
    inputs: tuple[Array, ...],
    y: Float[Array, " P"],
    weights: Float[Array, " P"],
    options: FitOptions = FitOptions(),
) -> Array:
    """The fitting objective `sum_p w_p huber(res_p, delta)` (divided by `sum_p w_p` when `reduction="mean"`), plus
    `penalty(law)` if given (see `FitOptions`). Zero-weight points contribute exactly 0, whatever their target
    (NaN included).

    **Arguments**:

    - `law`: the law; `inputs`: the tuple passed as `law(*inputs)`; `y`: targets [P]; `weights`: [P], >= 0.
    - `options`: a `FitOptions` (`delta`, `log_residuals`, `reduction`, `penalty` are read).

    **Returns**: the objective, a scalar array.
    """
    mask = weights > 0
    y_safe = jnp.where(mask, y, 1.0)  # a NaN target at a masked point must not reach the gradient
    res = fit_residuals(law(*inputs), y_safe, weights, options.log_residuals)
    value = jnp.sum(jnp.where(mask, weights * huber(jnp.where(mask, res, 0.0), options.delta), 0.0))
    if options.reduction == "mean":
        value = value / jnp.sum(weights)
    if options.penalty is not None:
        value = value + options.penalty(law)
    return value


@eqx.filter_jit
def evaluate(law: Any, inputs: tuple[Array, ...], batched: bool = False) -> Array:
    """`law(*inputs)` (over the law's leading axis when `batched`), compiled: one program per law and shape
    rather than one small program per operation of an eager evaluation."""
    if batched:
        return jax.vmap(lambda one: one(*inputs))(law)
    return law(*inputs)


# A fit in float32 (JAX's default, `jax_enable_x64` off) stops by float32's rule (gradient tolerance 1e-4, not
# 1e-7), and float32 cannot resolve the optimum better: on a 60-run tied CAMEL fit (5 sizes, 0.3% noise) every start
# "converged" at an objective 23% above float64's (a tighter `tol` stalled at the same point) and the prediction at
# 4x the largest size moved 2.1%. Said in `problems()`, so that it travels with the fit to every decision.
FLOAT32_PROBLEM = (
    "the fit ran in float32 (jax_enable_x64 off): its stopping rule is float32's and float32 cannot resolve the "
    "optimum (its objective can sit tens of percents above float64's, its predictions percents off); enable "
    'float64 (jax.config.update("jax_enable_x64", True)) before any array is made, and refit'
)


def unconverged_hint(law: Any) -> str:
    """What an unconverged start of `law` calls for (`AbstractLaw.unconverged_hint`; the general advice for a
    user's law without it)."""
    return getattr(law, "unconverged_hint", lambda: UNCONVERGED_HINT)()


class FitWarning(UserWarning):
    """Warned by `fit` when its answer is unreliable: one warning per sentence of `FitResult.problems()`.

    A `UserWarning`, so it shows by default; filter it by category (`warnings.simplefilter("error", FitWarning)`
    makes every unreliable fit raise, as `fit(..., throw=True)` does). It names the line of your code that led to
    the fit, however deep inside camel_jax the fit ran (`fit_benchmarks`, `fit_pipeline`, `backtest`), as every
    warning of the package does. **Fields**: `unconverged`, how many targets' best starts did not meet their
    stopping rule (0 for a warning about R^2), of `targets` fitted.
    """

    def __init__(self, message: str, unconverged: int = 0, targets: int = 1) -> None:
        super().__init__(message)
        self.unconverged, self.targets = int(unconverged), int(targets)


class FitResult(eqx.Module):
    """Result of `fit`.

    **Fields**:

    - `law`: the best start (lowest finite objective); batched over targets when `y` was [T, P].
    - `objective`: its objective.
    - `laws`: every optimized start, batched (leading axis R, after any target axis).
    - `objectives`, `converged`, `n_steps`, `grad_norm`, `status` [R]: per start. `status` holds `Status` codes
      (`Status(int(code))` names one): CONVERGED (gradient inf-norm <= tol), STALLED (no decrease beyond working
      precision: optimal to working precision), NONFINITE, MAX_STEPS, SLOW (L-BFGS alone, without the Newton
      finish, stopped on slow progress), STUCK (no decrease, yet a gradient a million times the tolerance: a point
      the solver cannot leave, not an optimum). `converged` is CONVERGED or STALLED.
    - `n_failed`: starts that ended non-finite (never chosen as best).
    - `inputs`, `y`, `weights`: the fitted data; `log_residuals`: how residuals were measured.
    - `names`: the mixture columns of `inputs[0]`, in order (None when unknown); tables are matched by them.
    - `targets`: the names of the targets (the validation losses), in the order of `y`'s rows (None when unknown).
    - `bootstrap`: the fit's resampled laws (a `BootstrapResult`, e.g. from `cj.bootstrap_fit`; None unless
      attached), kept so that bands and verdicts (`prediction_band`, `decide_loss`) need no refit, and saved with
      the fit; `calibration`: its extrapolation error past the largest trained size (a `Calibration`; None unless
      attached).
    - `options`: the `FitOptions` the fit ran with (its objective and solver), so that whatever rereads the fit
      (`influence`, `fit_derivative_status`, a warm-started bootstrap, a calibration, a saved file) uses the same
      objective by default (`fit_options`). None only for a result built by hand or read from an old file.
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
    names: tuple[str, ...] | None = eqx.field(static=True, default=None)  # the mixture columns, when known
    targets: tuple[str, ...] | None = eqx.field(static=True, default=None)  # the target names, when known
    bootstrap: Any = None  # a BootstrapResult (fitting/_bootstrap imports this module)
    calibration: Any = None  # a Calibration
    options: FitOptions | None = eqx.field(static=True, default=None)  # how the fit was made (issue 57)

    @property
    def fit_options(self) -> FitOptions:
        """The `FitOptions` this fit ran with: `options`, or for a result that does not record them (built by hand,
        read from a file written before they were saved) `FitOptions()` with the result's residuals."""
        return self.options if self.options is not None else FitOptions(log_residuals=self.log_residuals)

    @property
    def n_targets(self) -> int | None:
        """T when `y` was [T, P], else None."""
        return None if self.y.ndim == 1 else int(self.y.shape[0])

    @property
    def best_status(self) -> np.ndarray:
        """The status code of the start returned as `law` (the lowest finite objective), per target."""
        status = np.asarray(self.status)
        finite = np.isfinite(np.asarray(self.objectives)) & (status != Status.NONFINITE)
        best = np.argmin(np.where(finite, np.asarray(self.objectives), np.inf), axis=-1)
        return np.take_along_axis(status, best[..., None], axis=-1)[..., 0]

    def predict(self, *inputs: ArrayLike) -> Array:
        """Predictions of the best law at `inputs` ([P], or [T, P] for a fit over T targets)."""
        arrays = tuple(jnp.asarray(x) for x in inputs)
        return evaluate(self.law, arrays, self.n_targets is not None)

    def identifiability(
        self, max_sd: float = 1.0, coordinates: Callable[[Any], dict[str, Any]] = paper_params
    ) -> Identifiability | list[Identifiability]:
        """Which parameters of the best law the data determine (see `camel_jax.fitting._identify`): the standard
        deviation of each, and the names of those above `max_sd`. A list, one per target, for a [T, P] fit.
        `coordinates`: the parameters reported, a function of the law (default its `params()`; for CAMEL in the
        log-law limit, `cj.CAMEL.log_limit_params`)."""
        common: dict[str, Any] = dict(log_residuals=self.log_residuals, max_sd=max_sd, coordinates=coordinates)
        if self.n_targets is None:
            return identifiability(self.law, self.inputs, self.y, self.weights, **common)
        return [
            identifiability(law, self.inputs, self.y[t], self.weights[t], **common)
            for t, law in enumerate(self.target_laws())
        ]

    def target_laws(self) -> list[Any]:
        """The best law of each target, unbatched (a list of one for a fit of one target)."""
        if self.n_targets is None:
            return [self.law]
        return [jax.tree.map(lambda leaf: leaf[t], self.law) for t in range(self.n_targets)]

    def target_fit(self, t: int) -> FitResult:
        """Target t of a fit of several targets as a fit of that target alone: its best law, every start, its row
        of `y` and `weights`, so that `problems()`, `degenerate()` and `predict` speak of that target only. The
        bootstrap and calibration, shared by the targets, are not carried (None). A fit of one target: itself
        (t = 0)."""
        n = 1 if self.n_targets is None else self.n_targets
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
            raise TypeError(f"`t` must be an integer target index; got {t!r}")
        if not 0 <= t < n:
            raise ValueError(f"`t` must be a target index in [0, {n}); got {t}")
        if self.n_targets is None:
            return self
        weights = jnp.asarray(self.weights)
        return dataclasses.replace(
            self, law=jax.tree.map(lambda leaf: leaf[t], self.law), objective=self.objective[t],
            laws=jax.tree.map(lambda leaf: leaf[t], self.laws), objectives=self.objectives[t],
            converged=self.converged[t], n_steps=self.n_steps[t], grad_norm=self.grad_norm[t], status=self.status[t],
            n_failed=self.n_failed[t], y=self.y[t], weights=weights[t] if weights.ndim == 2 else weights,
            targets=None if self.targets is None else (self.targets[t],), bootstrap=None, calibration=None,
        )  # fmt: skip

    def best_laws(self, k: int = 4) -> Any:
        """The k starts of lowest objective, converged starts first, as a batched law [k, ...]: warm starts for a
        bootstrap (`bootstrap(..., inits=result.best_laws())`) that cost k lanes per resample, not every start.
        A fit of T targets gives [T, k, ...], each target's own best."""
        k = count(k, "k")
        objectives = np.asarray(self.objectives)
        if k > objectives.shape[-1]:
            raise ValueError(f"`k` = {k} is more than the fit's {objectives.shape[-1]} starts")
        value = np.where(np.isfinite(objectives), objectives, np.inf)
        late = ~np.asarray(self.converged, dtype=bool)
        rows = np.reshape(value, (-1, value.shape[-1])), np.reshape(late, (-1, value.shape[-1]))
        order = np.stack([np.lexsort((v, u))[:k] for v, u in zip(*rows)]).reshape((*value.shape[:-1], k))
        if self.n_targets is None:
            return jax.tree.map(lambda leaf: leaf[order], self.laws)
        T = np.arange(order.shape[0])[:, None]
        return jax.tree.map(lambda leaf: leaf[T, order], self.laws)

    def _unconverged(self) -> tuple[np.ndarray, np.ndarray]:
        """(the best start's status of every target [T] (one for a single target), the indices of the targets whose
        best start did not meet its stopping rule)."""
        best = np.atleast_1d(np.asarray(self.best_status))
        return best, np.flatnonzero(~np.isin(best, [Status.CONVERGED, Status.STALLED]))

    def problems(self) -> list[str]:
        """What makes this fit's answer unreliable, one sentence each with its cause and fix ([] when the best start
        of every target met its stopping rule and explains the targets' variance, the design determines the law (as
        many points as free parameters, enough model sizes, two or more mixtures) and the fit ran in float64).
        Every decision resting on the fit repeats them (the command line prints them before its answer)."""
        out = []
        best, unconverged = self._unconverged()
        if unconverged.size:
            which = (
                "the best start"
                if self.n_targets is None
                else f"the best start of {unconverged.size} of {best.size} targets (rows {unconverged[:10].tolist()})"
            )
            labels = sorted({Status(int(code)).label for code in best[unconverged]})
            hint = unconverged_hint(self.law)
            out.append(
                f"{which} did not converge ({', '.join(labels)}): its parameters are not an optimum of the objective; "
                f"{hint}"
            )
        r2, unexplained = self._unexplained()
        bad = np.flatnonzero(unexplained)
        if bad.size:
            finite = r2[bad][np.isfinite(r2[bad])]
            worst = f"{float(finite.min()):.4f}" if finite.size else "NaN"
            which = (
                f"R^2 = {worst}"
                if self.n_targets is None
                else f"{bad.size} of {r2.size} targets, rows {bad[:10].tolist()}{' ...' if bad.size > 10 else ''}; "
                f"worst R^2 = {worst}"
            )
            out.append(
                f"the best fit explains none of the variance of the targets ({which}): its parameters and "
                "extrapolations mean nothing; check the law, its structure and the data"
            )
        degenerate = self.degenerate()
        if degenerate:
            listed = "; ".join(f"{name}: {reason}" for name, reason in list(degenerate.items())[:6])
            out.append(
                f"degenerate fit: {listed}{' ...' if len(degenerate) > 6 else ''}. These are limits the solver ran to, "
                f"not estimates, and the extrapolations built on them mean nothing; {DEGENERATE_HINT}"
            )
        out += self._design_problems()
        return out

    def _unexplained(self) -> tuple[np.ndarray, np.ndarray]:
        """(R^2 of the best law on the fitted points, whether it explains none of the variance: R^2 <= 0 or NaN),
        per target ([1] for a fit of one target): the rule `problems()` and `meaningless_targets` share."""
        pred = np.asarray(self.predict(*self.inputs))
        r2 = np.atleast_1d(r_squared(pred, np.asarray(self.y), np.asarray(self.weights)))
        return r2, ~np.isfinite(r2) | (r2 <= 0)

    def meaningless_targets(self) -> np.ndarray:
        """The targets whose best law supports no prediction, by this fit's own `problems()`: a degenerate parameter
        (`degenerate_by_target`: a limit the solver ran to, a step in size) or R^2 <= 0 (or NaN). Indices into the
        targets ([0] or [] for a fit of one target). A decision resting on such a target gives no verdict
        (`decide_loss`). A best start at its step cap is not among them: it is a problem of the fit, said with
        every decision, but its predictions can be right where the design leaves a direction free."""
        _, void = self._unexplained()
        void |= np.array([bool(found) for found in self.degenerate_by_target()])
        return np.flatnonzero(void)

    def degenerate(self) -> dict[str, str]:
        """The parameter elements of the best law that are not estimates: {name: why}, in the user's units
        (`degenerate_parameters`); {} for a fit whose every parameter is a finite value in its law's range. For a
        fit of several targets the names carry the target (`loss_1: C`)."""
        if self.n_targets is None:
            return self.degenerate_by_target()[0]
        return {f"target {t}: {name}": why for t, found in enumerate(self.degenerate_by_target())
                for name, why in found.items()}  # fmt: skip

    def degenerate_by_target(self) -> list[dict[str, str]]:
        """`degenerate`, one {name: why} per target (a list of one for a fit of one target)."""
        if self.n_targets is None:
            return [degenerate_parameters(self.law, self.inputs, self.y, self.weights)]
        return [degenerate_parameters(law, self.inputs, self.y[t], self.weights[t])
                for t, law in enumerate(self.target_laws())]  # fmt: skip

    def degenerate_resamples(self, bootstrap: Any = None) -> np.ndarray:
        """Which resampled laws of the bootstrap (the fit's own, or the one given) are degenerate by the rule of
        `degenerate` (`degenerate_parameters`: a limit the solver ran to, a step inside the trained sizes), each
        checked on the targets it was fitted to under its resample's weights (the fit's own weights for a bootstrap
        that does not record them, `BootstrapResult.of_laws`): [B] booleans ([B, T] for a fit of T targets)."""
        boot = self.bootstrap if bootstrap is None else bootstrap
        if boot is None:
            raise ValueError("this fit holds no bootstrap: pass `bootstrap=`")
        y, w = np.asarray(self.y, dtype=float), self._resample_weights(boot)
        if w is None:  # laws without their weights (`of_laws`): the fit's own
            weights = np.asarray(self.weights, dtype=float)
            w = np.broadcast_to(weights, (boot.n_resamples,) + weights.shape)
        if self.n_targets is None:
            return np.array([bool(f) for f in degenerate_batch(boot.laws, self.inputs, y, w)], dtype=bool)
        out = np.zeros((boot.n_resamples, self.n_targets), dtype=bool)
        for t in range(self.n_targets):
            laws = jax.tree.map(lambda leaf, t=t: leaf[:, t] if eqx.is_array(leaf) else leaf, boot.laws)
            found = degenerate_batch(laws, self.inputs, y[t], w[:, t] if w.ndim == 3 else w)
            out[:, t] = [bool(f) for f in found]
        return out

    def bootstrap_problems(self, bootstrap: Any = None) -> list[str]:
        """What makes the bootstrap's spread unreliable (the fit's own, or the one given): its own `problems()`
        (resamples that did not converge or are not finite), then how many of its resampled laws are degenerate
        (`degenerate_resamples`): their bands and the decisions' draws include limits, not estimates. [] without
        a bootstrap."""
        boot = self.bootstrap if bootstrap is None else bootstrap
        if boot is None:
            return []
        out = list(boot.problems())
        found = self.degenerate_resamples(boot)
        if found.any():
            which = "resamples" if found.ndim == 1 else f"resampled fits ({int(found.any(axis=0).sum())} of " \
                f"{found.shape[1]} targets)"  # fmt: skip
            out.append(f"{int(found.sum())} of {found.size} {which} are degenerate (a limit the solver ran to, or a "
                       "step inside the trained sizes): the bands and the verdict include laws that are not "
                       f"estimates, and the data barely determine this law; {DEGENERATE_HINT}")  # fmt: skip
        return out

    def _design_problems(self) -> list[str]:
        """What the design cannot determine (`design_problems`: too few points, sizes or mixtures for the law),
        and a fit whose stopping rule was float32's (see `FLOAT32_PROBLEM`)."""
        one = self.target_laws()[0]
        weights = np.asarray(self.weights)  # [P], or [T, P] for several targets: a point any target measures
        out = design_problems(one, self.inputs, weights if weights.ndim == 1 else weights.max(axis=0))
        if np.asarray(self.objectives).dtype == np.float32:
            out.append(FLOAT32_PROBLEM)
        return out

    def outside_support(self, r: ArrayLike, factor: float = SUPPORT_FACTOR) -> np.ndarray | None:
        """Which mixtures lie outside where the fit's terms were measured: a term variable of the best law
        (`AbstractLaw.term_variables`, CAMEL's <t_i, r>) below 1 / `factor` of its smallest value over the fitted
        rows, where a power-law term extrapolates without limit (see `camel_jax.fitting._support`).

        **Arguments**:

        - `r`: mixtures [P, n], in the fit's dataset order.
        - `factor`: how far below the smallest trained value a variable may lie (default 10).

        **Returns**: [P] booleans (or [T, P] for a fit of T targets); None for a law without term variables (log-linear,
        DML, SODM: nothing to flag).
        """
        return rows_outside(self.law, self.inputs[0], self.weights, r, self.n_targets is not None, factor)

    def prediction_band(
        self,
        *inputs: ArrayLike,
        level: float = 0.95,
        bootstrap: Any = None,
        calibration: Any = None,
        new_runs: bool = True,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The best law's predictions at `inputs` with their band: (predicted, lower, upper), each [P] (or [T, P]
        for a fit of T targets). The band is the resamples' percentile band at `level` (the fit's own `bootstrap`,
        or the one given), widened past the largest trained size by the `calibration` (the fit's own, or the one
        given; none: the bootstrap's spread only, which understates the error of an extrapolation), and, for
        `new_runs` (the default), by the fit's run-to-run scatter (`run_scatter`): the band in which a new run's
        measured loss falls, not only the law's mean. Half-widths add in quadrature, on the fit's residual scale
        (log residuals: log(upper / predicted)), the scatter's part at Student-t's quantile.

        **Arguments**:

        - `inputs`: the law's inputs (mixtures [P, n], sizes [P], ...).
        - `level`: the band's coverage; `bootstrap`, `calibration`: instead of the fit's own.
        - `new_runs`: include the scatter of one run about the law (True), or band the law's mean only (False).

        **Returns**: three float arrays: the prediction, the band's lower and upper ends.
        """
        boot = self.bootstrap if bootstrap is None else bootstrap
        if boot is None:
            raise ValueError("this fit holds no bootstrap: attach one, "
                             "`dataclasses.replace(result, bootstrap=cj.bootstrap_fit(result, key=...))`, or pass "
                             "`bootstrap=`")  # fmt: skip
        cal = self.calibration if calibration is None else calibration
        low, high = boot.prediction_interval(*inputs, level=level, calibration=cal,
                                             drop=self._outside_resample_support(boot, inputs[0]))  # fmt: skip
        pred, low, high = np.asarray(self.predict(*inputs)), np.asarray(low), np.asarray(high)
        if not new_runs:
            return pred, low, high
        sd, dof = self.run_scatter()
        if dof < 1:
            return pred, low, high
        half = t_quantile((1 + level) / 2, dof) * (np.asarray(sd) if pred.ndim == 1 else np.asarray(sd)[:, None])
        log = self.log_residuals and bool(np.all(pred > 0)) and bool(np.all(low > 0))
        if log:
            below, above = np.log(np.maximum(pred / low, 1.0)), np.log(np.maximum(high / pred, 1.0))
            return pred, pred * np.exp(-np.hypot(below, half)), pred * np.exp(np.hypot(above, half))
        below, above = np.maximum(pred - low, 0.0), np.maximum(high - pred, 0.0)
        scale = half * np.abs(pred) if self.log_residuals else half  # a log scatter read as a relative one
        return pred, pred - np.hypot(below, scale), pred + np.hypot(above, scale)

    def _outside_resample_support(self, boot: Any, r: ArrayLike) -> np.ndarray | None:
        """[B, P] (or [B, T, P]): the points outside each resample's own support (its law's term variables below a
        tenth of their smallest value over the rows that resample weighted; see `outside_support`), left out of
        the band there: on RegMix a resample whose term ran far below its trained range put a band's end at 1e10.
        None for a law without term variables, or resamples that do not weight this fit's rows."""
        w = self._resample_weights(boot)
        return None if w is None else rows_outside(boot.laws, self.inputs[0], w, r, 1 if self.n_targets is None else 2)

    def _resample_weights(self, boot: Any) -> np.ndarray | None:
        """Each resample's weights of the fit's points: its counts [B, P] times the fit's weights, [B, P] (or [B, T,
        P] for weights per target); None when the bootstrap does not record counts of this fit's rows
        (`BootstrapResult.of_laws`)."""
        resamples = np.asarray(boot.resamples, float)
        if resamples.ndim != 2 or resamples.shape[1] != np.shape(self.inputs[0])[0]:
            return None
        weights = np.asarray(self.weights, float)
        return resamples[:, None, :] * weights[None] if weights.ndim == 2 else resamples * weights[None]

    def run_scatter(self) -> tuple[np.ndarray | float, int]:
        """The scatter of one run about the best law, from the fit's residuals (on the fit's scale: log(pred / y)
        under log residuals): (sd, dof), sd = sqrt(sum w r^2 / sum w * n / dof) with n the points of positive
        weight and dof = n minus the law's free parameters (per target: sd [T] for a fit of T targets; dof from
        the target with the fewest points). dof 0 (as many parameters as points): no estimate."""
        pred = np.asarray(self.predict(*self.inputs), float)
        y, w = np.asarray(self.y, float), np.asarray(self.weights, float)
        if pred.ndim == 1:
            pred, y, w = pred[None], y[None], w[None]
        w = np.where(np.isfinite(y) & np.isfinite(pred), np.broadcast_to(w, y.shape), 0.0)
        safe = np.where(w > 0, y, 1.0)
        if self.log_residuals:
            r = np.log(np.where((w > 0) & (pred > 0), pred, safe) / safe)
        else:
            r = np.where(w > 0, pred - safe, 0.0)
        n = (w > 0).sum(axis=1)
        params = n_free_parameters(self.law) // (1 if self.n_targets is None else max(self.n_targets, 1))
        dof = int(n.min()) - params
        if dof < 1:
            return (0.0 if self.n_targets is None else np.zeros(len(n))), 0
        sd = np.sqrt(np.sum(w * r**2, axis=1) / np.maximum(np.sum(w, axis=1), 1e-300) * n / (n - params))
        return (float(sd[0]) if self.n_targets is None else sd), dof

    def summary(self, identify: bool = True) -> dict[str, Any]:
        """`problems` first (see `problems`: an unconverged best start, R^2 <= 0 or NaN), then the objective,
        R^2 and MAPE (%) on the fitted points (weighted), convergence counts and, unless `identify=False`,
        `not_identified`: the parameters the data leave free (see `identifiability`)."""
        pred = np.asarray(self.predict(*self.inputs))
        y, w = np.asarray(self.y), np.asarray(self.weights)
        mask = w > 0
        scored = mask & (y != 0)  # MAPE is undefined at a zero target (an accuracy of 0): such points are left out
        ape = np.where(scored, w * np.abs((pred - y) / np.where(scored, y, 1.0)), 0)
        status = np.asarray(self.status)
        out = {
            "problems": self.problems(),
            "objective": np.asarray(self.objective),
            "r2": r_squared(pred, y, w),
            "mape_percent": 100.0 * np.sum(ape, axis=-1) / np.sum(np.where(scored, w, 0), axis=-1),
            "n_starts": status.shape[-1],
            "n_converged": np.sum(np.asarray(self.converged), axis=-1),
            "n_max_steps": np.sum(status == Status.MAX_STEPS, axis=-1),
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


# --- the traceable core --------------------------------------------------------------------------------------


def random_starts(template: Any, key: Array, restarts: int) -> Any:
    """`restarts` random starts of the template's class and structure, as one batched law."""
    keys = jax.random.split(key, restarts)
    structure = template.structure()
    return jax.vmap(lambda k: type(template).sample_init(k, **structure))(keys)


@eqx.filter_jit
def starts_compiled(template: Any, key: Array, restarts: int) -> Any:
    """`random_starts`, compiled on its own (see `fit`): the same starts as inside `fit_arrays` for the same key."""
    return random_starts(template, key, restarts)


def solve_targets(
    starts: Any,
    inputs: tuple[Array, ...],
    Y: Array,
    W: Array,
    options: FitOptions,
    *,
    per_target: bool = False,
    mesh: Mesh | None = None,
) -> Solution:
    """Fit T targets (rows of Y, W) from `starts`: a batched law [R] shared by every target, or, with `per_target`,
    [T, R] (each target its own starts). Pure and traceable: `fit_arrays`, `bootstrap` and the extrapolation
    protocol all compile this function. `mesh`: the devices the T x R lanes are spread over (`solver._shard`).

    The fitting room's one call into the solver: the objective of a law on these inputs (`objective`, the
    options' Huber loss of residuals), one problem per target (its row of Y and W, and its gradient tolerance,
    `FitOptions.gradient_tolerance`), solved by `camel_jax.solver.minimise`."""
    if not per_target:
        params, static = eqx.partition(starts, eqx.is_array)
        shared = jax.tree.map(lambda leaf: jnp.broadcast_to(leaf, (Y.shape[0],) + leaf.shape), params)
        starts = eqx.combine(shared, static)

    def target_objective(law: Any, target: tuple[Array, Array]) -> Array:
        return objective(law, inputs, target[0], target[1], options)

    tol = jax.vmap(options.gradient_tolerance)(jax.lax.stop_gradient(W))
    return minimise(target_objective, starts, (Y, W), options, batched=True, tol=tol, points=Y.shape[-1], mesh=mesh)


def batch_axes(law: Any, batched: Any) -> int:
    """How many leading batch axes `batched` has beyond those of the (single) `law`."""
    leaf = jax.tree.leaves(eqx.filter(batched, eqx.is_array))[0]
    return leaf.ndim - jax.tree.leaves(eqx.filter(law, eqx.is_array))[0].ndim


def _checked(arrays: tuple[Array, ...], Y: Array, W: Array, options: FitOptions, values: bool = True):
    """Shape checks at trace time (`ValueError`), value checks at run time (`eqx.error_if`) when `values`."""
    P = arrays[0].shape[0]
    for i, a in enumerate(arrays):
        if a.ndim == 0 or a.shape[0] != P:
            raise ValueError(f"inputs[{i}] has shape {a.shape}; every input needs the leading length P={P}")
    if Y.ndim not in (1, 2) or Y.shape[-1] != P:
        raise ValueError(f"`y` must have shape (P,) or (T, P) with P={P}; got {Y.shape}")
    if W.shape != Y.shape:
        raise ValueError(f"`weights` must have the shape of `y` {Y.shape}; got {W.shape}")
    if not values:
        return arrays, Y, W
    arrays = tuple(
        eqx.error_if(a, ~jnp.all(jnp.isfinite(a)), f"`inputs[{i}]` has a non-finite value")
        for i, a in enumerate(arrays)
    )
    W = eqx.error_if(W, ~jnp.all(jnp.isfinite(W) & (W >= 0)), "`weights` must be finite and >= 0")
    W = eqx.error_if(W, jnp.any(jnp.sum(W, axis=-1) <= 0), "`weights` are zero for every point of some target")
    bad = ~jnp.isfinite(Y) | (Y <= 0) if options.log_residuals else ~jnp.isfinite(Y)
    Y = eqx.error_if(Y, jnp.any((W > 0) & bad), "`y` must be finite (and > 0 under log residuals) where weights > 0")
    return arrays, Y, W


@keyword_only("weights")
def fit_arrays(
    law: Any,
    inputs: Sequence[ArrayLike],
    y: ArrayLike,
    *,
    key: Array,
    weights: ArrayLike | None = None,
    restarts: int = 64,
    inits: Any = None,
    options: FitOptions = FitOptions(),
    names: Sequence[str] | None = None,
    targets: Sequence[str] | None = None,
) -> FitResult:
    """The traceable core of `fit`: the same fit, jit-compiled, usable inside the caller's `jax.jit` and
    `jax.vmap` (e.g. vmapped over datasets of one shape).

    Shapes are checked when traced (`ValueError`); values (non-finite inputs, negative weights, a non-positive
    target under log residuals) by `eqx.error_if` when run. It issues no warnings and never raises for a
    numerical failure (see `FitResult.status`): `fit` adds the host-side checks with messages that name rows,
    the design warnings and `throw`.

    With concrete data the law's units are set from the data first (`data_template`), as `fit` does; under the
    caller's own `jit` (traced data) the template's units are used as given, so pass `data_template(law, inputs, y)`
    built outside for a fit that does not depend on the data's units.

    Under the caller's `jax.jit` a bad value raises JAX's runtime error with the message inside a long callback
    traceback; under `equinox.filter_jit` the same check raises `equinox.EquinoxRuntimeError`, printed with the
    message as its last line (or set `EQX_ON_ERROR=nan` to get NaN results instead).

    Differentiable (`jax.grad`, `jax.jvp`, under `jit` and `vmap`) in `y`, `weights` and `inputs`: every start's
    parameters by the implicit function theorem at its optimum, the objectives by the envelope theorem; NaN
    where no derivative exists (see `camel_jax.solver._implicit`, `fit_derivative_status`).

    **Arguments** (as `fit`'s):

    - `law`: the law template; `inputs`: the tuple passed as `law(*inputs)`; `y`: targets [P] or [T, P].
    - `weights`: per-point weights >= 0 ([P] or [T, P]), default all 1; keyword-only, as in `fit` (by position it
      still works, with a `DeprecationWarning`, for one release).
    - `key`: draws the `restarts` random starts; `inits`: explicit batched starts instead (as in `fit`: moved to
      the data's units when they carry none of their own, else solved in their own).
    - `options`: a `FitOptions` (not None); `names`: the mixture columns of `inputs[0]`, kept in the result;
      `targets`: the names of the targets, kept in the result. `inputs` may be a `MixtureData` (see `fit`).

    **Returns**: a `FitResult`.
    """
    options = resolve_options(options, law)
    if not isinstance(key, jax.core.Tracer):
        check_key(key)
    inputs, y, weights, names, targets = from_data(inputs, y, weights, names, targets)
    names = check_names(names, inputs)
    targets = check_target_names(targets, np.shape(y))
    if inits is None:
        law = data_template(law, inputs, y)
    else:
        inits = starts_in_data_units(inits, inputs, y)
    result = _fit_arrays_jit(law, inputs, y, weights, key=key, restarts=restarts, inits=inits, options=options,
                             mesh=lane_mesh())  # fmt: skip
    return dataclasses.replace(result, names=names, targets=targets)


def is_mixture_data(value: Any) -> bool:
    """Whether `value` is a `MixtureData` (the data layer's container, read by its fields: the core imports no
    pandas, which the data layer does)."""
    return all(hasattr(value, field) for field in ("inputs", "y", "weight", "columns", "targets", "group"))


def from_data(inputs: Any, y: Any, weights: Any, names: Any, targets: Any) -> tuple[Any, Any, Any, Any, Any]:
    """`(inputs, y, weights, names, targets)` of a fit: a `MixtureData` passed as `inputs` gives its arrays and names
    (the arguments given win); anything else is returned as given (`y` then required)."""
    from ..data._checks import named_columns
    if is_mixture_data(inputs):
        data = inputs
        for given, own, what in ((names, named_columns(data.columns), "datasets"), (targets, data.targets, "targets")):
            if given is not None and own and tuple(given) != tuple(own):
                raise ValueError(f"the data's {what} {list(own)} differ from the {what} named {list(given)}: match "
                                 "the table to the fit by name (the same columns, in the fit's order)")  # fmt: skip
        y = data.y if y is None else y
        weights = data.weight if weights is None else weights
        names = named_columns(data.columns) if names is None else names
        targets = (data.targets or None) if targets is None else targets
        inputs = data.inputs
    elif y is None:
        raise TypeError("`y` (the targets) is required unless `inputs` is a MixtureData (e.g. from cj.read_runs)")
    return inputs, y, weights, names, targets


def check_target_names(targets: Any, shape: tuple[int, ...]) -> tuple[str, ...] | None:
    """`targets=` of a fit: one distinct, non-empty name per target (per row of `y` [T, P]; one for `y` [P])."""
    if targets is None:
        return None
    if isinstance(targets, str):
        targets = [targets]
    if not isinstance(targets, Sequence):
        raise TypeError(f"`targets` must be a sequence of target names (e.g. ['c4_loss']); got {targets!r}")
    n = shape[0] if len(shape) == 2 else 1
    if len(targets) != n or not all(isinstance(x, str) and x for x in targets) or len(set(targets)) != n:
        raise ValueError(f"`targets` needs {n} distinct non-empty names, one per target of `y` {shape}; "
                         f"got {list(targets)!r}")  # fmt: skip
    return tuple(targets)


def check_used_datasets(law: Any, arrays: tuple[Array, ...], names: tuple[str, ...] | None) -> None:
    """A dataset no run trained on (a mixture column that is zero in every row) has no measurable effect, and a
    law extrapolates it freely (an optimal mixture would then give it any weight): refused, naming it."""
    n = law.structure().get("n_datasets") if hasattr(law, "structure") else None
    if n is None or np.ndim(arrays[0]) != 2:
        return
    unused = np.flatnonzero(~np.any(np.asarray(arrays[0]) > 0, axis=0))
    if unused.size:
        j = int(unused[0])
        which = f"dataset {names[j]!r}" if names is not None else f"dataset {j} (column {j} of inputs[0])"
        raise ValueError(
            f"{which} is zero in every run: a dataset no run trained on has no measurable effect, and the law would "
            "extrapolate it freely; drop it, or pass keep_unused=True to fit it anyway"
        )


@eqx.filter_jit
def _fit_arrays_jit(law, inputs, y, weights, *, key, restarts, inits, options, mesh=None) -> FitResult:
    return _fit_lanes(law, inputs, y, weights, key, restarts, inits, options, check_values=True, mesh=mesh)


def data_template(law: Any, inputs: Sequence[ArrayLike], y: ArrayLike) -> Any:
    """`law` with its static units set from the data (`AbstractLaw.with_data_scales`: e.g. CAMEL's `loss_scale`
    and `size_scale`, the orders of magnitude of the targets and sizes, or tied CAMEL's smallest size), so that the
    random starts and the conditioning of a fit are the same in any units. The law itself is returned when it
    declares no data units, or when the data are traced (inside a `jit`, where units must be static).

    **Arguments**:

    - `law`: a law (a structural template).
    - `inputs`: the tuple passed as `law(*inputs)`.
    - `y`: the targets ([P] or [T, P]).

    **Returns**: a law of the same class and structure but for its units (parameter values are not meaningful: it
    is a template for `sample_init`).
    """
    scales = getattr(law, "with_data_scales", None)
    if scales is None or any(isinstance(a, jax.core.Tracer) for a in (*inputs, y)):
        return law
    structure = law.structure()
    changes = {k: v for k, v in scales(tuple(inputs), y).items() if structure.get(k) != v}
    if not changes:
        return law
    return type(law).sample_init(jax.random.key(0), **{**structure, **changes})


@eqx.filter_jit
def fit_compiled(
    law: Any, inputs: tuple[Array, ...], y: Array, weights: Array, inits: Any, options: FitOptions,
    mesh: Mesh | None = None,
) -> FitResult:  # fmt: skip
    """`fit_arrays` from given starts (`inits`) and without the run-time value checks, for callers that drew the
    starts and made the checks on the host (`fit`); the starts' lanes spread over `mesh` (`solver._shard`).

    `eqx.error_if` compiles to a host callback, and JAX's persistent compilation cache does not store programs
    with host callbacks: this program, the one `fit` runs, is stored, so a second process reuses it."""
    return _fit_lanes(law, inputs, y, weights, None, 1, inits, options, check_values=False, mesh=mesh)


def _fit_lanes(law, inputs, y, weights, key, restarts, inits, options, check_values: bool, mesh=None) -> FitResult:
    arrays = tuple(jnp.asarray(x) for x in inputs)
    Y = jnp.asarray(y)
    if not jnp.issubdtype(Y.dtype, jnp.floating):
        Y = Y.astype(jnp.result_type(float))
    W = jnp.ones_like(Y) if weights is None else jnp.broadcast_to(jnp.asarray(weights, Y.dtype), Y.shape)
    arrays, Y, W = _checked(arrays, Y, W, options, check_values)
    single = Y.ndim == 1
    starts = random_starts(law, key, restarts) if inits is None else inits
    per_target = inits is not None and batch_axes(law, inits) == 2
    Yb, Wb = (Y[None], W[None]) if single else (Y, W)
    lanes = solve_targets(starts, arrays, Yb, Wb, options, per_target=per_target, mesh=mesh)
    if single:
        lanes = jax.tree.map(lambda leaf: leaf[0], lanes)
    return FitResult(
        law=lanes.best_value,
        objective=lanes.take_best(lanes.objectives),
        laws=lanes.value,
        objectives=lanes.objectives,
        converged=lanes.converged,
        n_steps=lanes.n_steps,
        grad_norm=lanes.grad_norm,
        status=lanes.status,
        n_failed=jnp.sum(~lanes.finite, axis=-1),
        inputs=arrays,
        y=Y,
        weights=W,
        log_residuals=options.log_residuals,
        options=options,
    )


# --- the public entry point -----------------------------------------------------------------------------------


def resolve_options(options: FitOptions | None, law: Any = None) -> FitOptions:
    """`options`, or the defaults (with the Newton polish `law` asks for, `AbstractLaw.default_polish`); anything but
    a `FitOptions` is a `TypeError` (options are typed, not a dict)."""
    if options is None:
        hook = None if isinstance(law, type) else getattr(law, "default_polish", None)  # a class: refused later
        polish = None if hook is None else hook()
        return FitOptions() if polish is None else FitOptions(polish=polish)
    if not isinstance(options, FitOptions):
        raise TypeError(f"`options` must be a camel_jax.FitOptions (e.g. FitOptions(max_steps=5000)); got {options!r}")
    return options


def _refuse_traced(arguments: Any) -> None:
    """`fit` reads its data's values on the host (its checks name rows; its warnings need numbers): under
    `jax.jit`, `jax.vmap` or `jax.grad` it would crash deep inside with a tracer error, so it refuses in one line."""
    traced = any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(arguments))
    if traced or isinstance(jnp.zeros(()), jax.core.Tracer):  # the second: inside a jit, even of constant data
        raise TypeError(
            "`fit` checks its data on the host and cannot run under jax.jit, jax.vmap or jax.grad: use "
            "`fit_arrays` there (the same fit, traceable and differentiable), or call `fit` outside the transform"
        )


def warm_from_fit(inits: Any, options: FitOptions | None, k: int = 4) -> tuple[Any, FitOptions | None]:
    """`(inits, options)` for a refit (bootstrap, calibration) given `inits`: a `FitResult` gives its `k` best
    starts (`best_laws`) and, when `options` is None, the options it was fitted with; anything else is returned
    as it is."""
    if not isinstance(inits, FitResult):
        return inits, options
    if inits.n_targets is not None:
        raise ValueError("`inits` is a fit of several targets: warm-start from one target's fit (or pass `.laws`)")
    n_starts = int(np.shape(inits.objectives)[-1])
    return inits.best_laws(min(k, n_starts)), inits.fit_options if options is None else options


def _check_starts(law: Any, inits: Any, Y: Array) -> None:
    check_inits(law, inits)
    if batch_axes(law, inits) == 2:
        leading = jax.tree.leaves(eqx.filter(inits, eqx.is_array))[0].shape[:2]
        if Y.ndim != 2 or leading[0] != Y.shape[0]:
            raise ValueError(
                f"`inits` with two leading axes (T, R) must match the T={Y.shape[0] if Y.ndim == 2 else None} "
                f"targets of `y`; got leading shape {leading}"
            )


def fit(
    law: Any,
    inputs: Any,
    y: ArrayLike | None = None,
    *,
    key: Array,
    restarts: int = 64,
    inits: Any = None,
    weights: ArrayLike | None = None,
    options: FitOptions | None = None,
    throw: bool = False,
    names: Sequence[str] | None = None,
    targets: Sequence[str] | None = None,
    keep_unused: bool = False,
    devices: Sequence[jax.Device] | None = None,
) -> FitResult:
    """Fit a law by multi-start L-BFGS on a weighted Huber loss of (log) residuals.

    **Arguments**:

    - `law`: any law (a structural template: its parameter values are not used unless it is passed as `inits`).
    - `inputs`: the tuple passed as `law(*inputs)`, e.g. `data.inputs`; or a `MixtureData` (e.g. from
      `cj.read_runs`), which also gives `y`, `weights`, `names` and `targets` unless they are passed.
    - `y`: targets [P], or [T, P] to fit T targets at once (every result field then has a leading T axis).
    - `key`: a `jax.random` key; the same key gives the same result.
    - `restarts`: number of random starts from `type(law).sample_init(key, **law.structure())`.
    - `inits`: a batched law (leading axis = starts), e.g. a grid built with `from_params`; overrides `restarts`.
      Starts that carry no units of their own (every unit at its default, e.g. a grid built with `from_params`
      in raw parameters and tokens) are re-expressed, as the same functions, in the units the fit sets from the
      data, where they condition as random starts do; starts that carry units (warm starts from another fit, a
      grid built with `in_units`) are solved in them.
      With `y` [T, P], inits with two leading axes [T, R] give each target its own starts (e.g. warm starts).
    - `weights`: per-point weights >= 0 ([P] or [T, P]); zero-weight points contribute exactly 0.
    - `options`: a `FitOptions` (objective and solver: `max_steps`, `tol`, `polish`, `delta`, `log_residuals`,
      `reduction`, `penalty`, `prescreen`, `lanes`); default `FitOptions()`, with the Newton polish the law asks
      for (`AbstractLaw.default_polish`: CAMELData without tokens runs 1,000 steps).
    - `throw`: raise `RuntimeError` when every start ended non-finite (otherwise reported in `n_failed`).
    - `names`: the mixture columns of `inputs[0]`, in order (e.g. `data.mixture_columns`); kept in the result
      (`FitResult.names`) and its saved file, so that tables are later matched by name. Default None.
    - `targets`: the names of the targets, one per row of `y` [T, P] (or one for `y` [P]); kept in the result
      (`FitResult.targets`) and its saved file. Default None.
    - `keep_unused`: fit a mixture law even when a dataset is zero in every run (by default refused, naming it:
      no run measures its effect, and the law would extrapolate it freely).
    - `devices`: the devices the starts (times the targets) are spread over, each solving its share on its own
      (default: every local device; see `bootstrap`). The answer equals one device's to ~1e-14 in the objective.

    **Returns**: a `FitResult`. Calling again with the same shapes and options reuses the compiled program
    (`fit_arrays`' solver; `fit` adds checks that name the offending row, and design warnings).
    """
    _refuse_traced((inputs, y, weights, key, inits))
    options = resolve_options(options, law)
    check_key(key)
    count(restarts, "restarts")
    inputs, y, weights, names, targets = from_data(inputs, y, weights, names, targets)
    arrays = check_inputs(inputs)
    check_law_inputs(law, arrays)
    names = check_names(names, arrays)
    if not keep_unused:
        check_used_datasets(law, arrays, names)
    Y, W = check_targets(y, weights, arrays[0].shape[0], options.log_residuals)
    targets = check_target_names(targets, Y.shape)
    if inits is not None:
        _check_starts(law, inits, Y)
        inits = starts_in_data_units(inits, arrays, Y)  # starts without units of their own: the data's
    else:
        law = data_template(law, arrays, Y)
    warn_design(law, arrays, W)
    design = design_problems(law, arrays, W)
    # The random starts are drawn by a program of their own (`starts_compiled`, one per law structure and count),
    # so that the fit's program holds no random-number generator (a fifth of its compile time) and serves drawn
    # starts and a caller's `inits` of the same shape alike. The values were checked above, so the program
    # without run-time checks runs (and can be cached on disk).
    if inits is None:
        inits = starts_compiled(law, key, restarts)
    result = fit_compiled(law, arrays, Y, W, inits, options, lane_mesh(devices))
    result = dataclasses.replace(result, names=names, targets=targets)
    problems = result.problems()
    best, unconverged = result._unconverged()
    for problem in problems:
        if problem in design:  # warned above, before the compute
            continue
        # problems() lists the unconverged targets first, when there are any
        counted = unconverged.size if problem is problems[0] else 0
        warnings.warn(FitWarning(problem, counted, best.size), stacklevel=user_stacklevel())
    n_starts = np.asarray(result.objectives).shape[-1]
    if throw and bool(np.any(np.asarray(result.n_failed) == n_starts)):
        raise RuntimeError(
            f"every start ended non-finite ({int(np.max(np.asarray(result.n_failed)))} of {n_starts}); "
            "check the law's units, the inits and the data"
        )
    if throw and problems:
        raise RuntimeError(problems[0])
    return result
