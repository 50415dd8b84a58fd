"""Decisions from losses alone: the mixture a loss law's fit recommends, inside what the runs support, with a band,
the gain over a reference and a verdict.

Most published swarms hold validation losses only. A fit of one loss (or of several, combined by
`target_weights` into one objective, their weighted mean) and its bootstrap give, as `fit_pipeline` does for
benchmark scores:

- the **pick**: the mixture minimizing the fit's predicted objective at the target size (and tokens);
- its **band**: each resample's own optimum, whose spread per share says how firmly the data place the pick;
- the **gain** over a reference mixture, objective(reference) - objective(pick) (a loss reduction: > 0 improves),
  drawn once per resample for both mixtures (the same resample's law for both), with its band and P(improves);
- a **verdict** ("improves" / "not resolved", the pipeline's `VERDICTS`): "improves" when the gain's band at `level`
  lies above 0, its median reaches the noise floor (the noise of one run's objective: a smaller gain could not be
  confirmed by training the run) and the pick lies in the support region, as the pipeline's calibrated verdict
  reads it; the `reason` says why not otherwise. It is also withheld where the objective rests on a target whose
  fit supports no prediction by its own problems (`FitResult.meaningless_targets`: a degenerate parameter, R^2 <= 0):
  its extrapolations mean nothing, so they cannot recommend training a mixture. A best start at its step cap is
  said with the decision (its `problems`) but does not withhold the verdict.

With a `Calibration` (`cj.calibrate` on the same fit's data), the extrapolation error past the largest trained size is
drawn into every resample's objective as the pipeline's verdict draws it (`score_draws`): a level error shared by
both mixtures and a mixture error independent per mixture, Student-t with the calibration's degrees of freedom, in
the calibration's units (relative for a fit on log residuals), so that the gain's band holds the law's error in
mixture effects at the target size, which the bootstrap cannot see.

**The support region.** A law fitted on runs whose shares of a dataset span [a, b] says little about shares far
outside it: an optimizer left on the whole simplex readily puts weight where no run trained (the issue's examples:
five zero shares where no trained run had more than three). By default the search keeps each share within its
trained range widened by `SUPPORT_MARGIN` (25%) of that range on each side, clipped to [0, 1]: a box, not the convex
hull, since the optimizer's exact projection is onto a box on the simplex, and since a box is what a user can read and
check share by share. `support="simplex"` searches the whole simplex and warns, naming each share of the pick outside
the trained range; explicit bounds (`lower`, `upper`, `max_shift`) replace the region, with the same warning. A pick
outside the region gets no "improves" verdict.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

from .._warn import user_stacklevel
from ..data._checks import check_key
from ..fitting._bootstrap import BootstrapResult
from ..fitting._calibrate import Calibration, replicate_noise
from ..fitting._fit import FitResult, evaluate
from ..laws._base import count
from ._decide import VERDICTS, Decision, _outside
from ._objective import target_weights
from ._optimize import (
    AscentOptions,
    _Ascent,
    _bounds,
    _reference_mixture,
    ascent_problems,
    best_start,
    check_model_size,
)

SUPPORT_MARGIN = 0.25
"""The default support region's margin: each share's trained range is widened by this fraction of itself on each
side (`data_support`, `decide_loss`)."""


def data_support(
    result: FitResult | ArrayLike, *, margin: float = SUPPORT_MARGIN
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The support region of a fit's trained mixtures: each share within its trained range widened by `margin`
    of that range on each side, clipped to [0, 1].

    **Arguments**:

    - `result`: a `FitResult` (its mixtures with a positive weight for some target) or mixtures [P, n].
    - `margin`: the widening, as a fraction of each share's trained range (>= 0; 0: the trained range itself).

    **Returns**: (lower [n], upper [n], trained_low [n], trained_high [n]): the region and the trained range.
    """
    if not (np.isfinite(margin) and margin >= 0):
        raise ValueError(f"`margin` must be finite and >= 0; got {margin!r}")
    if isinstance(result, FitResult):
        r = np.asarray(result.inputs[0], float)
        if r.ndim != 2:
            raise ValueError("the fit's first input is not a mixture [P, n]: a law of mixtures has no support region")
        used = np.any(np.atleast_2d(np.asarray(result.weights)) > 0, axis=0)
        r = r[used]
    else:
        r = np.asarray(result, float)
        if r.ndim != 2 or len(r) == 0:
            raise ValueError(f"mixtures must have shape (P, n) with P >= 1; got {r.shape}")
    low, high = r.min(axis=0), r.max(axis=0)
    width = high - low
    return np.clip(low - margin * width, 0.0, 1.0), np.clip(high + margin * width, 0.0, 1.0), low, high


@dataclasses.dataclass(frozen=True)
class LossDecision:
    """The decision of `decide_loss`: the pick, its band, and the verdict against a reference.

    **Fields**: `mixture` the pick [n] (the fit's optimum of the objective in the search region) and `value` its
    predicted objective; `mixture_low`, `mixture_high` [n] the band of the resamples' optima at `level` (NaN without
    a bootstrap); `optima` [B, n] every resample's optimum; `reference` [n] (None when none was given) and
    `reference_value` its predicted objective; `decision` the `Decision` (its `gain` is objective(reference) -
    objective(pick), a loss reduction, with its band, `p_improve`, `verdict` and `reason`; None without a
    reference); `recommended` [n]: the pick when the verdict is "improves", else the reference (the pick when there
    is no reference); `lower`, `upper` [n] the search region; `trained_low`, `trained_high` [n] the trained range;
    `outside` the shares of the pick outside the trained range, one phrase each; `weights` [T] the objective's
    weights over the targets (`targets` their names); `names` the mixture's dataset names; `problems` what makes the
    fit or its bootstrap unreliable (`FitResult.problems()` and `FitResult.bootstrap_problems()`: resamples
    unconverged, not finite or degenerate), to be read first.
    """

    mixture: np.ndarray
    value: float
    mixture_low: np.ndarray
    mixture_high: np.ndarray
    optima: np.ndarray
    reference: np.ndarray | None
    reference_value: float
    decision: Decision | None
    recommended: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    trained_low: np.ndarray
    trained_high: np.ndarray
    outside: tuple[str, ...]
    weights: np.ndarray
    targets: tuple[str, ...]
    names: tuple[str, ...]
    size: float | None
    tokens: float | None
    support: str
    calibrated: bool
    problems: tuple[str, ...] = ()

    @property
    def verdict(self) -> str:
        """The verdict's word: "improves" or "not resolved" ("not resolved" without a reference)."""
        return VERDICTS[1] if self.decision is None else self.decision.verdict


class _LossObjective(eqx.Module):
    """r -> minus the objective (the weighted predicted losses) at one size: what the ascent maximizes. A Module,
    so a new law of the same shapes reuses the compiled ascent."""

    law: Any
    weights: Array
    inputs: tuple[Array, ...]
    several: bool = eqx.field(static=True)

    def __call__(self, r: Array) -> Array:
        return -objective_of(self.law, r[None, :], self.inputs, self.weights, self.several)[0]


def objective_of(law: Any, r: Array, inputs: tuple[Array, ...], weights: Array, several: bool) -> Array:
    """The objective of mixtures r [K, n] at the other inputs (each [1], broadcast): sum_t w_t L_t(r) [K]."""
    K = r.shape[0]
    rest = tuple(jnp.broadcast_to(x, (K,)) for x in inputs)
    pred = evaluate(law, (r, *rest), several)  # [K] or [T, K]
    return weights @ pred if several else pred


@eqx.filter_jit
def _optima(laws: Any, weights: Array, inputs: tuple[Array, ...], several: bool, z0: Array, ascent: _Ascent):
    """The optimum of every law of a batch (the point fit and its resamples): mixtures [B, n] and objectives [B],
    in one program, and whether each reached its KKT point [B]. The ascent's best start, without the implicit
    derivatives `optimal_mixture` also builds."""

    def one(law: Any) -> tuple[Array, Array, Array]:
        f = _LossObjective(law, weights, inputs, several)
        r, value, _, converged = ascent.ascend(f, z0)
        best = best_start(value)
        return r[best], -value[best], converged[best]

    return jax.vmap(one)(laws)


@eqx.filter_jit
def _resample_objectives(laws: Any, r: Array, inputs: tuple[Array, ...], weights: Array, several: bool) -> Array:
    """[B, T, K] (T = 1 for one target): every resample's predicted losses at mixtures r [K, n]."""
    K = r.shape[0]
    rest = tuple(jnp.broadcast_to(x, (K,)) for x in inputs)
    pred = jax.vmap(lambda law: evaluate(law, (r, *rest), several))(laws)
    return pred if several else pred[:, None, :]


def loss_draws(
    bootstrap: BootstrapResult,
    r: ArrayLike,
    inputs: Sequence[float],
    *,
    weights: ArrayLike | None = None,
    key: Array,
    calibration: Calibration | None = None,
) -> np.ndarray:
    """The objective at mixtures r [K, n], one draw per resample: [B, K] (resamples with a non-finite objective
    left out), with the `calibration`'s extrapolation error drawn in (see the module docstring).

    **Arguments**:

    - `bootstrap`: the resampled laws of the fit (of one target, or [B, T] of T targets).
    - `r`: mixtures [K, n]; `inputs`: the other inputs of the law at the decision (size, and tokens), numbers.
    - `weights`: [T] the objective's weights over the targets (from `target_weights`; default their mean).
    - `key`: draws the calibration's error; `calibration`: None for the bootstrap's spread only.

    **Returns**: the objective's draws [B, K].
    """
    several = np.ndim(bootstrap.objectives) > 1
    T = int(np.shape(bootstrap.objectives)[1]) if several else 1
    w = np.full(T, 1.0 / T) if weights is None else np.asarray(weights, float)
    if w.shape != (T,):
        raise ValueError(f"`weights` must have one weight per target ({T}); got shape {w.shape}")
    r = jnp.atleast_2d(jnp.asarray(r, float))
    rest = tuple(jnp.asarray([float(x)]) for x in inputs)
    laws = jax.tree.map(lambda leaf: leaf[bootstrap.finite()], bootstrap.laws)
    pred = np.asarray(_resample_objectives(laws, r, rest, jnp.asarray(w), several))  # [B, T, K]
    if calibration is not None:
        B, K = pred.shape[0], pred.shape[2]
        k_level, k_mix = jax.random.split(key)
        level = np.asarray(jax.random.t(k_level, calibration.dof, (B, 1, 1)))
        mix = np.asarray(jax.random.t(k_mix, calibration.dof, (B, 1, K)))
        size = float(inputs[calibration.size_index - 1])  # the law's inputs after the mixture
        d = float(np.asarray(calibration.distance(size)))
        kl = np.broadcast_to(np.asarray(calibration.kappa_level, float), (T,))[None, :, None]
        km = np.broadcast_to(np.asarray(calibration.kappa_mix, float), (T,))[None, :, None]
        error = d * (kl * level + km * mix)
        pred = pred * np.exp(error) if calibration.log_scale else pred + error
    return np.einsum("t,btk->bk", w, pred)


def loss_noise(result: FitResult, weights: ArrayLike | None = None) -> tuple[float, str]:
    """The noise of one run's objective: the pooled scatter of runs repeating a (mixture, size) when there are
    such repeats (at least 2 degrees of freedom), else the fit's weighted rms residual (sqrt(sum_t w_t^2 s_t^2)
    over the targets), in the objective's units (relative residuals times the runs' mean loss under log residuals).

    **Returns**: (the noise, a phrase saying where it came from).
    """
    y = np.atleast_2d(np.asarray(result.y, float))
    W = np.broadcast_to(np.atleast_2d(np.asarray(result.weights, float)), y.shape)
    w = np.full(len(y), 1.0 / len(y)) if weights is None else np.asarray(weights, float)
    used = np.all(W > 0, axis=0)
    if len(result.inputs) >= 2 and used.any():
        measured = w @ y
        size = np.asarray(result.inputs[1], float)
        if len(result.inputs) >= 3:  # runs repeat a (mixture, size, tokens)
            size = size * 1e3 + np.log(np.asarray(result.inputs[2], float))
        sd, dof = replicate_noise(np.asarray(result.inputs[0]), size, measured, used)
        if dof >= 2 and sd > 0:
            return float(sd), f"the scatter of repeated runs ({dof} dof)"
    pred = np.atleast_2d(np.asarray(result.predict(*result.inputs), float))
    residual = np.log(y / pred) * y.mean(axis=1, keepdims=True) if result.log_residuals else y - pred
    residual = np.where(W > 0, residual, 0.0)
    s2 = np.sum(W * residual**2, axis=1) / np.maximum(np.sum(W, axis=1), 1e-300)
    return float(np.sqrt(np.sum(w**2 * s2))), "the fit's rms residual"


def decide_loss(
    result: FitResult,
    *,
    key: Array,
    size: float | None = None,
    tokens: float | None = None,
    reference: ArrayLike | None = None,
    bootstrap: BootstrapResult | None = None,
    calibration: Calibration | None = None,
    weights: str | Mapping[str, float] | None = None,
    targets: Sequence[str] | None = None,
    support: str | tuple[ArrayLike, ArrayLike] = "data",
    lower: ArrayLike | None = None,
    upper: ArrayLike | None = None,
    max_shift: float | None = None,
    level: float = 0.95,
    min_gain: float | None = None,
    restarts: int = 8,
    ascent: AscentOptions | None = None,
) -> LossDecision:
    """The mixture a loss fit recommends at `size` (and `tokens`), with its band and its verdict against
    `reference` (see the module docstring).

    **Arguments**:

    - `result`: a `FitResult` of a law of mixtures (one target, or T targets [T, P]).
    - `key`: draws the ascent's starts and the calibration's error (the same key gives the same decision).
    - `size`, `tokens`: the law's other inputs at the decision (a law of the mixture alone takes neither; a law of
      tokens needs both).
    - `reference`: the mixture [n] to beat (e.g. the mixture in use); None: the pick and its band only.
    - `bootstrap`: the fit's resamples (default `result.bootstrap`; `bootstrap_fit` makes one); without one, the
      pick comes with no band and the verdict is "not resolved".
    - `calibration`: the extrapolation error (default `result.calibration`); None: the bootstrap's spread only.
    - `weights`: the objective over T targets (`target_weights`): None or "mean", a target's name, or {name: w};
      `targets`: the T targets' names, in the fit's order (default the fit's own `targets`, else "target 0", ...).
    - `support`: "data" (default: the trained range widened by `SUPPORT_MARGIN`, `data_support`), "simplex", or
      (lower [n], upper [n]). `lower`, `upper`, `max_shift` (with `reference`: r_j within ref_j (1 +- max_shift)):
      explicit bounds, replacing the region.
    - `level`: the bands' level (the gain's must lie above 0 for "improves"); `min_gain`: the smallest gain worth a
      verdict (default `loss_noise`: the noise of one run's objective).
    - `restarts`, `ascent`: starts and steps of the ascent (`AscentOptions`), for the pick and every resample.

    **Returns**: a `LossDecision`. Shares of the pick outside the trained range are warned about, one name each.
    """
    _check_arguments(result, key, restarts, level)
    n = _n_datasets(result)
    inputs = _other_inputs(result, size, tokens)
    several = result.n_targets is not None
    names_t = _targets(result, targets)
    w = target_weights(names_t, weights) if several else np.ones(1)
    ref = None if reference is None else _reference_mixture(reference, n)
    lo, hi, region = _region(result, n, support, lower, upper, ref, max_shift)
    d_low, d_high, t_low, t_high = data_support(result)
    boot = result.bootstrap if bootstrap is None else bootstrap
    cal = result.calibration if calibration is None else calibration
    found, values, reached, rest, wj, k_draw = _search(result, boot, key, n, lo, hi, inputs, w, several, restarts,
                                                       ascent)  # fmt: skip
    pick, value = found[0], float(values[0])
    names = tuple(result.names) if result.names is not None else tuple(f"dataset {j}" for j in range(n))
    outside = _outside_trained(pick, t_low, t_high, names)
    if outside and region != "data":
        warnings.warn(f"the pick puts {'; '.join(outside)}: outside what the runs trained on, the law "
                      "extrapolates in mixture", stacklevel=user_stacklevel())  # fmt: skip
    beyond_terms = _outside_term_support(result, pick)  # inside the shares' region, where a term was never measured
    outside += [beyond_terms] if beyond_terms else []
    problems = tuple(result.problems()) + tuple(result.bootstrap_problems(boot))
    problems += ascent_problems(reached)
    optima, band = _optima_band(found, n, level)
    ref_value = np.nan
    decision = None
    if ref is not None:
        ref_value, decision = _against_reference(result, boot, pick, ref, value, inputs, rest, w, wj, several,
                                                 k_draw, cal, level, min_gain, (d_low, d_high))  # fmt: skip
    decision = _withheld(decision, result, w, names_t, beyond_terms)
    recommended = pick if ref is None or decision is None or decision.verdict == VERDICTS[0] else ref
    return LossDecision(
        mixture=pick, value=value, mixture_low=np.asarray(band[0]), mixture_high=np.asarray(band[1]), optima=optima,
        reference=ref, reference_value=ref_value, decision=decision, recommended=np.asarray(recommended),
        lower=lo, upper=hi, trained_low=t_low, trained_high=t_high, outside=tuple(outside), weights=w,
        targets=tuple(names_t), names=names, size=None if size is None else float(size),
        tokens=None if tokens is None else float(tokens), support=region, calibrated=cal is not None,
        problems=problems,
    )  # fmt: skip


def _withheld(decision: Decision | None, result: FitResult, w: np.ndarray, names: Sequence[str],
              beyond_terms: str | None) -> Decision | None:
    """The verdict "not resolved", with its reason, where an "improves" would rest on what supports no prediction:
    a pick where a term of the law was never measured (`beyond_terms`), or a target of the objective (weight > 0)
    whose fit is degenerate or explains none of its variance (`FitResult.meaningless_targets`): a fit whose
    extrapolations "mean nothing", by its own problems, cannot recommend training a mixture."""
    if decision is None or decision.verdict != VERDICTS[0]:
        return decision
    if beyond_terms:
        return dataclasses.replace(decision, verdict=VERDICTS[1], reason=f"the pick puts {beyond_terms}")
    void = [int(t) for t in result.meaningless_targets() if w[t] > 0]
    if not void:
        return decision
    which = "the fit behind it" if result.n_targets is None else "the fit of " + ", ".join(names[t] for t in void)
    reason = (f"{which} is degenerate or explains none of the variance (see the problems): its extrapolation means "
              "nothing; refit with a law that handles these data" + ("" if result.n_targets is None else
                                                                     ", or weight those targets out"))  # fmt: skip
    return dataclasses.replace(decision, verdict=VERDICTS[1], reason=reason)


def _check_arguments(result: FitResult, key: Array, restarts: int, level: float) -> None:
    """`decide_loss`'s checks of its key, restarts, level and fit."""
    check_key(key)
    count(restarts, "restarts")
    if not 0 < level < 1:
        raise ValueError(f"`level` must be in (0, 1); got {level}")
    if not isinstance(result, FitResult):
        raise TypeError(f"`result` must be a FitResult (of `fit`); got {type(result).__name__}")


def _search(result, boot, key, n, lo, hi, inputs, w, several, restarts, ascent):
    """The optimum in the region [lo, hi] of the point fit and of every finite resample: (mixtures [1 + B, n],
    objectives [1 + B], the other inputs as arrays, the objective's weights as an array, the key for the draws)."""
    ascent = AscentOptions() if ascent is None else ascent
    steps = ascent.steps(lo, hi)
    k_start, k_draw = jax.random.split(key)
    z0 = 0.5 * jax.random.normal(k_start, (restarts, n))
    rest = tuple(jnp.asarray([x]) for x in inputs)
    wj = jnp.asarray(w) if several else jnp.ones(())
    laws = jax.tree.map(lambda leaf: leaf[None], result.law)
    if boot is not None:  # the point fit and every resample: one program
        resampled = jax.tree.map(lambda leaf: leaf[boot.finite()], boot.laws)
        laws = jax.tree.map(lambda a, b: jnp.concatenate([a, b.astype(a.dtype)]), laws, resampled)
    found, values, reached = (np.asarray(x) for x in _optima(laws, wj, rest, several, z0, steps))
    return found, values, reached, rest, wj, k_draw


def _optima_band(found: np.ndarray, n: int, level: float) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """The resamples' optima [B, n] (rows 1: of `found`, the finite ones) and their band at `level`."""
    optima = found[1:][np.all(np.isfinite(found[1:]), axis=1)]  # a resample whose ascent failed has no optimum
    band = (np.full(n, np.nan), np.full(n, np.nan))
    if len(optima):
        q = 100 * np.array([(1 - level) / 2, (1 + level) / 2])
        band = tuple(np.percentile(optima, q, axis=0))  # type: ignore[assignment]
    return optima, band


def _against_reference(result, boot, pick, ref, value, inputs, rest, w, wj, several, key, cal, level, min_gain,
                       region) -> tuple[float, Decision]:  # fmt: skip
    """The reference's predicted objective, the noise floor and the verdict of the pick against the reference."""
    both = jnp.asarray(np.stack([pick, ref]))
    ref_value = float(np.asarray(objective_of(result.law, both, rest, wj, several))[1])
    if min_gain is None:
        floor, floor_source = loss_noise(result, w if several else None)
    else:
        if not (np.isfinite(min_gain) and min_gain >= 0):
            raise ValueError(f"`min_gain` must be finite and >= 0; got {min_gain}")
        floor, floor_source = float(min_gain), "given"
    decision = _verdict(boot, pick, ref, value, ref_value, inputs, w, key, cal, level, floor, floor_source, region)
    return ref_value, decision


def _verdict(boot, pick, ref, value, ref_value, inputs, w, key, cal, level, floor, floor_source, region) -> Decision:
    """The gain objective(reference) - objective(pick) over the resamples' draws, and its verdict."""
    if boot is None:
        return Decision(gain=ref_value - value, gain_low=np.nan, gain_high=np.nan, p_improve=np.nan, value=value,
                        value_low=np.nan, value_high=np.nan, level=float(level), verdict=VERDICTS[1],
                        calibrated=False, min_gain=floor,
                        reason="the fit holds no bootstrap, so the gain has no band: refit with resamples "
                               "(`camel-jax fit --resamples 200`, or `cj.bootstrap_fit`)",
                        basis="the point fit only")  # fmt: skip
    draws = loss_draws(boot, np.stack([pick, ref]), inputs, weights=w, key=key, calibration=cal)
    draws = draws[np.all(np.isfinite(draws), axis=1)]
    if len(draws) == 0:
        raise ValueError("every resample's objective is non-finite at these mixtures: no verdict")
    gain = draws[:, 1] - draws[:, 0]
    q = 100 * np.array([(1 - level) / 2, 0.5, (1 + level) / 2])
    g_low, g_mid, g_high = np.percentile(gain, q)
    v_low, _, v_high = np.percentile(draws[:, 0], q)
    reason = _outside(pick, region)
    if not reason and g_low <= 0:
        reason = f"the gain's {level:.0%} band reaches 0"
    if not reason and g_mid < floor:
        reason = f"the gain is below the noise floor {floor:.2g} ({floor_source})"
    source = "bootstrap + extrapolation error" if cal is not None else "bootstrap only: not calibrated"
    return Decision(
        gain=float(g_mid), gain_low=float(g_low), gain_high=float(g_high), p_improve=float(np.mean(gain > 0)),
        value=value, value_low=float(v_low), value_high=float(v_high), level=float(level),
        verdict=VERDICTS[1] if reason else VERDICTS[0], calibrated=cal is not None, min_gain=floor, reason=reason,
        basis=f"{source}, {len(draws)} resamples; noise floor {floor:.3g} from {floor_source}",
    )  # fmt: skip


def _n_datasets(result: FitResult) -> int:
    r = result.inputs[0] if len(result.inputs) else None
    if r is None or np.ndim(r) != 2:
        raise ValueError(f"a {type(result.law).__name__} fit has no mixture to decide on")
    return int(np.shape(r)[1])


def _other_inputs(result: FitResult, size: Any, tokens: Any) -> tuple[float, ...]:
    """The law's inputs after the mixture at the decision: (), (size,) or (size, tokens), checked."""
    n_inputs = len(result.inputs)
    law = type(result.law).__name__
    if n_inputs == 1:
        if size is not None or tokens is not None:
            raise ValueError(f"a {law} fit describes the one size it was fitted at: give no `size` or `tokens`")
        return ()
    if size is None:
        raise ValueError(f"a {law} fit needs `size`, the target model size (in the fit's units)")
    out = (check_model_size(size, "size"),)
    if n_inputs == 2:
        if tokens is not None:
            raise ValueError(f"a {law} fit takes no tokens: give no `tokens`")
        return out
    if tokens is None:
        raise ValueError(f"a {law} fit also takes training tokens: give `tokens` at the target size")
    return out + (check_model_size(tokens, "tokens"),)


def _targets(result: FitResult, targets: Sequence[str] | None) -> list[str]:
    T = result.n_targets
    if T is None:
        return ["target"] if targets is None else [str(t) for t in targets][:1]
    if targets is None:  # the fit's own names (`fit(..., targets=)`, a file of `camel-jax fit`)
        own = getattr(result, "targets", None)
        return [str(t) for t in own] if own is not None and len(own) == T else [f"target {t}" for t in range(T)]
    names = [str(t) for t in targets]
    if len(names) != T:
        raise ValueError(f"`targets` must name the fit's {T} targets; got {len(names)}")
    return names


def _region(result: FitResult, n: int, support: Any, lower: Any, upper: Any, ref: Any, max_shift: Any):
    """The search region (lower [n], upper [n]) and its kind: "data", "simplex", "given" or "bounds"."""
    explicit = lower is not None or upper is not None or max_shift is not None
    if explicit:
        lo, hi = _bounds(n, lower, upper, ref if max_shift is not None else None, max_shift)
        return lo, hi, "bounds"
    if isinstance(support, str):
        if support == "data":
            lo, hi, _, _ = data_support(result)
            return lo, hi, "data"
        if support == "simplex":
            return np.zeros(n), np.ones(n), "simplex"
        raise ValueError(f"`support` must be 'data', 'simplex' or (lower, upper); got {support!r}")
    try:
        given_lo, given_hi = support
    except (TypeError, ValueError):
        raise ValueError(f"`support` must be 'data', 'simplex' or (lower, upper); got {support!r}") from None
    lo, hi = _bounds(n, given_lo, given_hi, None, None)
    return lo, hi, "given"


def _outside_term_support(result: FitResult, r: np.ndarray) -> str:
    """A phrase when mixture r lies outside the fit's term support (`FitResult.outside_support`: a term variable of
    the law, CAMEL's <t_i, r>, below a tenth of its smallest trained value, for any target), warned about; else
    ""."""
    flags = result.outside_support(np.asarray(r, float)[None, :])
    if flags is None or not np.any(flags):
        return ""
    phrase = ("a term's mixture variable below a tenth of its smallest value over the runs (the law's power-law "
              "terms extrapolate without limit there)")  # fmt: skip
    warnings.warn(f"the pick puts {phrase}: no verdict of 'improves' rests on it", stacklevel=user_stacklevel())
    return phrase


def _outside_trained(r: np.ndarray, low: np.ndarray, high: np.ndarray, names: Sequence[str]) -> list[str]:
    """One phrase per share of r outside the trained range [low, high]."""
    out = []
    for j in np.flatnonzero((r < low - 1e-6) | (r > high + 1e-6)):
        out.append(f"{names[int(j)]} at {r[j]:.3f} (trained {low[j]:.3f}-{high[j]:.3f})")
    return out
