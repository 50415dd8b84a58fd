"""A verdict on a recommended mixture: does it beat the reference at the target size, beyond the uncertainty?

The uncertainty has two parts: the resampled fits (a batched `Pipeline`, both stages when `fit_pipeline`
resampled them) and, past the largest trained size, the extrapolation error a `Calibration` measured (one per
benchmark, in proxy-loss units). `score_draws` draws the score of given mixtures once per resample with the
calibrated error added to every benchmark's proxy loss: a level error shared by all mixtures and benchmarks of a
draw, and a mixture error independent per mixture (shared by the benchmarks: the conservative choice, since
benchmarks read overlapping validation losses), both Student-t with the calibration's degrees of freedom. The
gain over the reference is then a difference of draws: the level error mostly cancels, the mixture error does not.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

from ..fitting._calibrate import Calibration, DecisionCalibration, t_cdf, t_quantile
from ._pipeline import Pipeline

VERDICTS = ("improves", "not resolved")


@dataclasses.dataclass(frozen=True)
class Decision:
    """The verdict on a mixture against a reference at one size (see `decide`).

    **Fields**: `gain` the median predicted score improvement over the reference, with its band
    (`gain_low`, `gain_high`) at `level`; `p_improve` the share of draws in which the mixture beats the reference;
    `value`, `value_low`, `value_high` the mixture's own score and band; `calibrated` whether the
    extrapolation error was drawn in; `min_gain` the smallest gain worth a verdict (e.g. the noise of one
    evaluation of the score). `verdict` is "improves" when the gain exceeds `min_gain` in at least `level` of
    the draws and the mixture lies within the trained mixtures' range; else "not resolved", with the `reason`.
    With a `DecisionCalibration` the gain is calibrated on held-out sizes directly: "improves" when its band
    excludes 0 and the gain reaches `min_gain`. `basis` says what the verdict rests on (held-out runs, the noise
    floor and where it came from).
    """

    gain: float
    gain_low: float
    gain_high: float
    p_improve: float
    value: float
    value_low: float
    value_high: float
    level: float
    verdict: str
    calibrated: bool
    min_gain: float = 0.0
    reason: str = ""
    basis: str = ""

    def line(self) -> str:
        """One line a person can act on."""
        band = f"{self.gain:+.3g} [{self.gain_low:+.3g}, {self.gain_high:+.3g}]"
        source = "bootstrap + extrapolation error" if self.calibrated else "bootstrap only: not calibrated"
        act = "train it" if self.verdict == "improves" else f"keep the reference ({self.reason})"
        if self.basis:
            source = self.basis
        return (
            f"verdict: {self.verdict} (gain over the reference {band} at {self.level:.0%}, "
            f"P(improves) = {self.p_improve:.2f}; {source}): {act}"
        )


def score_draws(
    pipelines: Pipeline,
    r: ArrayLike,
    size: float,
    *,
    key: Array,
    calibration: Calibration | None = None,
) -> Array:
    """The score of mixtures r [K, n] at `size`, one draw per resample of a batched pipeline: [B, K], with
    the `calibration`'s extrapolation error (per benchmark, in the order of `benchmark_weights`) drawn in.

    **Arguments**:

    - `pipelines`: a batched `Pipeline` (B resamples); `r`: mixtures [K, n]; `size`: the model size.
    - `key`: draws the calibration's error; `calibration`: None for the bootstrap's spread only.

    **Returns**: the score's draws [B, K].
    """
    if not pipelines.batch_shape:
        raise ValueError("score draws need a batched Pipeline: fit it with `fit_pipeline(..., n_resamples=B)`")
    if calibration is not None and calibration.log_scale:
        raise ValueError("the pipeline's calibration must be in proxy-loss units (log_scale=False)")
    r = jnp.atleast_2d(jnp.asarray(r))
    return _draws(pipelines, r, jnp.full(r.shape[0], float(size)), key, calibration)


@eqx.filter_jit
def _draws(pipelines: Pipeline, r: Array, M: Array, key: Array, calibration: Calibration | None) -> Array:
    """`score_draws` after its checks, compiled as one program."""
    K = r.shape[0]
    names = [b for b, _ in pipelines.benchmark_weights]
    proxy = jax.vmap(lambda laws: jnp.stack([laws[b](r, M) for b in names]))(pipelines.loss_laws)  # [B, T, K]
    B = proxy.shape[0]
    if calibration is not None:
        kl = jnp.broadcast_to(calibration.kappa_level, (len(names),))
        km = jnp.broadcast_to(calibration.kappa_mix, (len(names),))
        k_level, k_mix = jax.random.split(key)
        level = jax.random.t(k_level, calibration.dof, (B, 1, 1))  # the kappas rest on `dof` held-out cells
        mix = jax.random.t(k_mix, calibration.dof, (B, 1, K))
        d = calibration.distance(M)[None, None, :]
        proxy = proxy + d * (kl[None, :, None] * level + km[None, :, None] * mix)

    def accuracy(bench, p):  # one resample: benchmarks' laws and proxies [T, K] -> score [K]
        acc = [w * bench[b].from_proxy(p[i]) for i, (b, w) in enumerate(pipelines.benchmark_weights)]
        return functools.reduce(operator.add, acc)

    return jax.vmap(accuracy)(pipelines.benchmark_laws, proxy)


def decide(
    pipelines: Pipeline,
    r: ArrayLike,
    reference: ArrayLike,
    *,
    model_size: float,
    key: Array,
    calibration: Calibration | None = None,
    level: float = 0.95,
    min_gain: float = 0.0,
    support: tuple[ArrayLike, ArrayLike] | None = None,
    decision_calibration: DecisionCalibration | None = None,
) -> Decision:
    """Does mixture `r` beat `reference` at `model_size`? Draws both with `score_draws` (the same draw of
    every resample's fit and level error for both) and reads the gain's distribution; see `Decision`.

    `min_gain`: a gain below it is not worth a verdict (`fit_pipeline` measures the noise of one evaluation of
    the score as `score_noise`). `support`: the (lower [n], upper [n]) range of the trained mixtures'
    weights; a mixture outside it is an extrapolation in mixture space that no calibration here measures, so
    it gets "not resolved" whatever its draws say.

    **Arguments**:

    - `pipelines`: a batched `Pipeline` (B resamples); `r`: the mixture [n]; `reference`: the mixture [n] to beat.
    - `model_size`: the size to decide at; `key`: draws the calibration's error.
    - `calibration`: the extrapolation error to draw in (None: the bootstrap's spread only).
    - `level`: the share of draws the gain must win in; `min_gain`, `support`: see above.
    - `decision_calibration`: the score's and the gain's error measured on held-out sizes
      (`fit_pipeline` keeps one): the bands are the bootstrap's widened by it (when its scale follows the size,
      `trended`, each band's variance is the larger of the bootstrap's and the held-out one, which already holds
      the folds' own bootstrap error, plus, for the gain, the scale's error), the gain scaled by its `scale_at`,
      and the verdict is "improves" when the gain's band excludes 0 and the gain reaches `min_gain` (the
      `calibration` of the proxy losses is then not drawn in).

    **Returns**: a `Decision` (gain and band, `p_improve`, `verdict`, `reason`).
    """
    if not 0 < level < 1:
        raise ValueError(f"`level` must be in (0, 1); got {level}")
    if not (np.isfinite(min_gain) and min_gain >= 0):
        raise ValueError(f"`min_gain` must be finite and >= 0; got {min_gain}")
    both = jnp.stack([jnp.asarray(r, float), jnp.asarray(reference, float)])
    if decision_calibration is not None:
        draws = np.asarray(score_draws(pipelines, both, model_size, key=key))
        return _calibrated(draws, np.asarray(r, float), float(model_size), decision_calibration, level, min_gain,
                           support)  # fmt: skip
    draws = np.asarray(score_draws(pipelines, both, model_size, key=key, calibration=calibration))
    draws = draws[np.all(np.isfinite(draws), axis=1)]
    if len(draws) == 0:
        raise ValueError("every resample's score is non-finite at these mixtures: no verdict")
    gain = draws[:, 0] - draws[:, 1]
    q = 100 * np.array([(1 - level) / 2, 0.5, (1 + level) / 2])
    g_low, g_mid, g_high = np.percentile(gain, q)
    v_low, v_mid, v_high = np.percentile(draws[:, 0], q)
    p_improve = float(np.mean(gain > 0))
    reason = _doubt(gain, np.asarray(r, float), level, min_gain, support)
    return Decision(
        gain=float(g_mid),
        gain_low=float(g_low),
        gain_high=float(g_high),
        p_improve=p_improve,
        value=float(v_mid),
        value_low=float(v_low),
        value_high=float(v_high),
        level=float(level),
        verdict=VERDICTS[1] if reason else VERDICTS[0],
        calibrated=calibration is not None,
        min_gain=float(min_gain),
        reason=reason,
    )


def _doubt(gain: np.ndarray, r: np.ndarray, level: float, min_gain: float, support: Any) -> str:
    """Why the verdict is "not resolved" ("" when it is "improves")."""
    outside = _outside(r, support)
    if outside:
        return outside
    if np.mean(gain > min_gain) < level:
        floor = f" above the noise floor {min_gain:.2g}" if min_gain > 0 else ""
        return f"the gain is not positive{floor} in {level:.0%} of the draws"
    return ""


def _calibrated(draws: np.ndarray, r: np.ndarray, size: float, cal: DecisionCalibration, level: float,
                min_gain: float, support: Any) -> Decision:  # fmt: skip
    """The decision from the bootstrap's draws [B, 2] (mixture, reference) and a held-out calibration."""
    draws = draws[np.all(np.isfinite(draws), axis=1)]
    if len(draws) < 2:
        raise ValueError("fewer than 2 resamples give a finite score at these mixtures: no verdict")
    boot_gain = draws[:, 0] - draws[:, 1]
    median_gain = float(np.median(boot_gain))
    scale, scale_se = cal.scale_at(size)
    gain = scale * median_gain
    gain_var = (scale * np.std(boot_gain, ddof=1)) ** 2
    if cal.trended:  # the score at r: the reference's plus the scaled gain; the held-out errors hold the folds' own
        # bootstrap error, so each band takes the larger of the two variances, not both (the gain adds the scale's)
        value = float(np.median(draws[:, 1])) + gain
        value_sd = float(np.sqrt(max(float(np.var(draws[:, 1], ddof=1)), cal.value_sd(size) ** 2)))
        gain_sd = float(np.sqrt(max(gain_var, cal.gain_sd(size, 0.0) ** 2) + (median_gain * scale_se) ** 2))
    else:  # the estimator of format <= 9: the score at r from its own draws; the bootstrap's variance plus the excess
        value = float(np.median(draws[:, 0]))
        value_sd = float(np.sqrt(float(np.var(draws[:, 0], ddof=1)) + cal.value_sd(size) ** 2))
        gain_sd = float(np.sqrt(gain_var + cal.gain_sd(size, median_gain) ** 2))
    q = t_quantile((1 + level) / 2, cal.dof)
    p_improve = t_cdf(gain / gain_sd, cal.dof) if gain_sd > 0 else float(gain > 0)
    reason = _outside(r, support)
    if not reason and gain - q * gain_sd <= 0:
        reason = f"the gain's calibrated {level:.0%} band reaches 0"
    if not reason and gain < min_gain:
        reason = f"the gain is below the noise floor {min_gain:.2g}"
    return Decision(
        gain=gain,
        gain_low=gain - q * gain_sd,
        gain_high=gain + q * gain_sd,
        p_improve=float(p_improve),
        value=value,
        value_low=value - q * value_sd,
        value_high=value + q * value_sd,
        level=float(level),
        verdict=VERDICTS[1] if reason else VERDICTS[0],
        calibrated=True,
        min_gain=float(min_gain),
        reason=reason,
        basis=f"bootstrap + held-out gain x{scale:.2f} at this size: {cal.summary()}",
    )


def _outside(r: np.ndarray, support: Any) -> str:
    """Why a mixture outside the trained mixtures' range gets no verdict ("" inside it)."""
    if support is None:
        return ""
    lower, upper = (np.asarray(b, float) for b in support)
    outside = np.flatnonzero((r < lower - 1e-9) | (r > upper + 1e-9))
    if not len(outside):
        return ""
    j = int(outside[0])
    return (f"dataset {j} at {r[j]:.3f} lies outside the trained mixtures' range [{lower[j]:.3f}, "
            f"{upper[j]:.3f}]: train runs there first")  # fmt: skip
