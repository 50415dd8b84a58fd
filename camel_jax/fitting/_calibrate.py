"""Extrapolation-calibrated uncertainty: the bootstrap's spread plus the error of predicting past the data.

A bootstrap band says how much the fit moves when the runs are resampled; it cannot see the error of the law's
form beyond the largest trained size, which is what a user extrapolating to a target size bets on. That error is
measured where the data allow it: refit (bootstrapped, as the user's band is) without the largest trained
size(s) and compare the held-out runs with the refit's predictions.

**Model** (in the units the law is fitted in: the log of the target for log residuals, the target otherwise).
At a size M beyond the largest trained size M_max, at distance d(M) = log(M / M_max) (0 inside the data),

    y(r, M) - f(r, M) = noise + d(M) * (a + b(r)),    a ~ N(0, kappa_level^2),    b(r) ~ N(0, kappa_mix^2),

with `a` one error shared by every mixture (the law's level drifts) and `b(r)` independent per mixture (its
shape drifts). A prediction at distance d gains variance d^2 (kappa_level^2 + kappa_mix^2); the difference of
two mixtures only 2 d^2 kappa_mix^2. The error grows linearly in log size: the assumption that lets one or two
held-out steps speak for the target; it is checked, not proven, by the backtest study.

**Estimate** (method of moments). Fold j = 1..`holdout` drops the j largest sizes and bootstraps the rest (all
folds are one batched fit, sharing the resamples); each dropped point p gets the error e_p of the resamples'
median. In a (fold, held-out size) cell c of H_c points at distance d_c, write e_c for the errors' mean, S_c^2
for the bootstrap variance of the resamples' mean prediction over the cell, v_c for the errors' variance about
e_c and s'^2 for the mean bootstrap variance of the points' deviations from the cell's mean; s_n^2 is the noise
variance (the median law's weighted training residuals, degrees of freedom corrected). Then

    m_c = max(0, v_c - s'^2 - s_n^2)                                   (d_c^2 kappa_mix^2: spread by mixture)
    kappa_mix^2   = sum_c H_c m_c / sum_c H_c d_c^2
    kappa_level^2 = sum_c H_c max(0, e_c^2 - S_c^2 - s_n^2 / H_c - m_c / H_c) / sum_c H_c d_c^2

The level term subtracts the noise of a mean of H_c points, not of one point: s_n^2 also holds the law's lack of
fit inside the data, which would otherwise hide a shared drift as large as the noise (it did in the zoo's
default family, where errors past the data are mostly one shift shared by all mixtures). A law that extrapolates
as well as its bootstrap says gets kappa = 0 and its bands back unchanged. The kappas rest on a few held-out
cells (3 with the default 2 folds), so the extrapolation term of a band uses the Student-t quantile with as many
degrees of freedom as cells (and `objective_draws` draws it from that t distribution): a variance estimated from
a few numbers is itself uncertain, and the normal quantile would undercover.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import betainc
from jaxtyping import Array, ArrayLike

from ..laws._base import count, n_free_parameters
from ..solver._checks import DESIGN_WARNINGS
from ..solver._options import FitOptions
from ._fit import fit, resolve_options
from ._resample import resample_weights


class Calibration(eqx.Module):
    """The extrapolation-error model of `calibrate` (see the module docstring).

    **Fields**: `kappa_level`, `kappa_mix` (per target [T], or scalars): error standard deviations per unit of
    log-size distance, in the fit's units (log of the target when `log_scale`); `size_max` the largest trained
    size; `size_index` the position of the size among the law's inputs; diagnostics `distances` (the held-out
    cells' distances), `rms_error` and `boot_sd` (per cell [.., C]: the held-out error and the bootstrap's own
    spread there) and `noise_sd`.
    """

    kappa_level: Array
    kappa_mix: Array
    size_max: float = eqx.field(static=True)
    size_index: int = eqx.field(static=True)
    log_scale: bool = eqx.field(static=True)
    distances: tuple[float, ...] = eqx.field(static=True)
    rms_error: Array
    boot_sd: Array
    noise_sd: Array

    @property
    def dof(self) -> int:
        """Degrees of freedom of the kappas: the number of held-out cells they were estimated from."""
        return max(len(self.distances), 1)

    def quantile(self, level: float) -> float:
        """The two-sided `level` quantile of the extrapolation term: Student-t with `dof` degrees of freedom."""
        return t_quantile((1 + level) / 2, self.dof)

    def distance(self, size: ArrayLike) -> Array:
        """d(M) = max(0, log(M / size_max)) [P]."""
        return jnp.maximum(0.0, jnp.log(jnp.asarray(size) / self.size_max))

    def extra_sd(self, size: ArrayLike, difference: bool = False) -> Array:
        """The extrapolation standard deviation at `size` [P] (or [T, P]); `difference=True`: of the difference
        of two mixtures at that size (the level term cancels)."""
        kappa2 = 2 * self.kappa_mix**2 if difference else self.kappa_level**2 + self.kappa_mix**2
        return jnp.multiply.outer(jnp.sqrt(kappa2), self.distance(size))

    def widen(self, pred: ArrayLike, size: ArrayLike, level: float) -> tuple[np.ndarray, np.ndarray]:
        """The calibrated band of resampled predictions `pred` [B, P] at sizes [P]: the percentile band's
        half-widths h (on the fit's scale, about the median) become sqrt(h^2 + (z d kappa)^2), z the normal
        quantile of the level for the bootstrap part and `quantile(level)` for the extrapolation part; unchanged
        inside the data."""
        q = 100 * np.array([(1 - level) / 2, 0.5, (1 + level) / 2])
        low, mid, high = np.nanpercentile(np.asarray(pred), q, axis=0)  # the plain band, then on the fit's scale
        if self.log_scale:
            low, mid, high = np.log(low), np.log(mid), np.log(high)
        extra = self.quantile(level) * np.asarray(self.extra_sd(size))
        low = np.where(extra > 0, mid - np.sqrt((mid - low) ** 2 + extra**2), low)
        high = np.where(extra > 0, mid + np.sqrt((high - mid) ** 2 + extra**2), high)
        if self.log_scale:
            low, high = np.exp(low), np.exp(high)
        return low, high


def t_quantile(p: float, dof: int) -> float:
    """The p-quantile (p in (0.5, 1)) of Student's t with `dof` degrees of freedom, by bisection on its CDF
    1 - I_{dof / (dof + t^2)}(dof / 2, 1 / 2) / 2 (I the regularized incomplete beta function)."""
    lo, hi = 0.0, 1e3
    for _ in range(100):
        mid = (lo + hi) / 2
        cdf = 1 - 0.5 * float(betainc(dof / 2, 0.5, dof / (dof + mid**2)))
        lo, hi = (mid, hi) if cdf < p else (lo, mid)
    return (lo + hi) / 2


def calibrate(
    law: Any,
    inputs: Sequence[ArrayLike],
    y: ArrayLike,
    *,
    key: Array,
    n_resamples: int = 32,
    holdout: int | None = None,
    restarts: int = 8,
    inits: Any = None,
    weights: ArrayLike | None = None,
    groups: ArrayLike | None = None,
    strata: ArrayLike | None = None,
    options: FitOptions | None = None,
) -> Calibration:
    """Measure how a law's bootstrap band understates the error of extrapolating past the largest trained size.

    Every fold, resample and target is one fit.

    **Arguments**:
    - `law`, `inputs`, `y`: the law template, its inputs and targets [P] (or [T, P]: one calibration per target),
      as for `fit`.
    - `key`: draws the resamples and the starts.
    - `n_resamples`: per fold (the folds only need the bootstrap's spread at the held-out points, not its tails:
      32 measured as well as 100 in the zoo).
    - `holdout`: the number of folds, fold j dropping the j largest sizes (each fold keeps >= 2 sizes; None: 2
      folds and 3 held-out cells, or 1 fold for 3 sizes; more folds fit on fewer sizes and overstate a
      well-specified law's error: in the tests, a fold of a true CAMEL on 3 sizes erred by 2x its own bootstrap
      spread).
    - `restarts`: random starts per fit when no `inits` are given; `inits`: warm starts (e.g. the full-data
      `fit(...).law`, batched over targets for [T, P]).
    - `weights`: [P] or [T, P] (0 leaves a point out, e.g. a missing loss); `groups`, `strata`: as for
      `bootstrap`; `options`: a `FitOptions`, as for `fit`.

    **Returns**: a `Calibration` (see the module docstring for the model).
    """
    options = resolve_options(options)
    count(n_resamples, "n_resamples", least=2)
    if holdout is not None:
        count(holdout, "holdout")
    arrays = tuple(jnp.asarray(x) for x in inputs)
    W0 = _weights(y, weights)
    size_index, size, sizes, holdout = _sizes(law, arrays, W0, holdout)
    Y = jnp.atleast_2d(jnp.asarray(y))
    if inits is not None and jnp.ndim(y) == 1:  # one target: a batch of one
        inits = jax.tree.map(lambda leaf: leaf[None], inits)
    keeps = sizes[-np.arange(2, holdout + 2)]  # fold j keeps the sizes <= keeps[j - 1]
    pred = _fold_fits(law, arrays, Y, W0, size, keeps, n_resamples, restarts, inits, dict(groups=groups, strata=strata),
                      options, key)  # fmt: skip
    cells: list[tuple[float, np.ndarray, np.ndarray, np.ndarray]] = []
    noise = []
    for keep, fold_pred in zip(keeps, pred):
        fold_cells, fold_noise = _fold_cells(law, Y, W0, size, sizes, keep, fold_pred, options)
        cells += fold_cells
        noise.append(fold_noise)
    noise_var = np.mean(noise, axis=0)  # [T]
    kappa_level, kappa_mix, rms, sd = (jnp.asarray(a) for a in _moments(cells, noise_var))
    squeeze = (lambda a: a[0]) if jnp.ndim(y) == 1 else (lambda a: a)
    return Calibration(
        kappa_level=squeeze(kappa_level),
        kappa_mix=squeeze(kappa_mix),
        size_max=float(sizes[-1]),
        size_index=int(size_index),
        log_scale=bool(options.log_residuals),
        distances=tuple(c[0] for c in cells),
        rms_error=squeeze(rms),
        boot_sd=squeeze(sd),
        noise_sd=squeeze(jnp.sqrt(jnp.asarray(noise_var))),
    )


def _weights(y: ArrayLike, weights: ArrayLike | None) -> Array:
    Y = jnp.atleast_2d(jnp.asarray(y))
    return jnp.ones(Y.shape, Y.dtype) if weights is None else jnp.broadcast_to(jnp.asarray(weights, Y.dtype), Y.shape)


def _sizes(
    law: Any, arrays: tuple[Array, ...], W0: Array, holdout: int | None
) -> tuple[int, np.ndarray, np.ndarray, int]:
    """(position of the size input, sizes [P], the distinct sizes with data, the number of folds), or an error
    naming why the design cannot be held out from."""
    where = law.size_parameters()
    if where is None:
        raise ValueError(f"{type(law).__name__} has no size input: there is no extrapolation in size to calibrate")
    size = np.asarray(arrays[where[0]], dtype=float)
    sizes = np.unique(size[np.asarray(jnp.any(W0 > 0, axis=0))])
    folds = min(2, len(sizes) - 2) if holdout is None else holdout
    if folds < 1 or len(sizes) < folds + 2:
        raise ValueError(
            f"calibration with holdout={holdout} needs >= {max(folds, 1) + 2} distinct sizes (each fold keeps >= 2); "
            f"the data hold {len(sizes)}: {sizes.tolist()}"
        )
    return where[0], size, sizes, folds


def _fold_fits(law, arrays, Y, W0, size, keeps, n_resamples, restarts, inits, resample, options, key) -> np.ndarray:
    """Every fold's bootstrap as one multi-target fit (fold j drops the sizes above keeps[j - 1]; rows
    fold-major, then target, then resample, warm-started at `inits` when given); the resamples' predictions at
    every point [folds, T, B, P]."""
    T, P = Y.shape
    n_folds = len(keeps)
    counts = resample_weights(key, P, n_resamples, **resample).astype(Y.dtype)  # [B, P], shared by the folds
    train = jnp.asarray(size[None, :] <= keeps[:, None], Y.dtype)  # [folds, P]
    Wb = (counts[None, None] * (W0[None] * train[:, None])[:, :, None]).reshape(n_folds * T * n_resamples, P)
    start = None if inits is None else jax.tree.map(lambda leaf: jnp.tile(leaf, (n_folds,) + (1,) * (leaf.ndim - 1)),
                                                    warm_starts(inits, n_resamples))  # fmt: skip
    with warnings.catch_warnings():  # a resample of a fold holds fewer points and sizes by design
        warnings.filterwarnings("ignore", message=DESIGN_WARNINGS)
        boot = fit(law, arrays, jnp.tile(jnp.repeat(Y, n_resamples, axis=0), (n_folds, 1)), weights=Wb,
                   key=jax.random.fold_in(key, 1), restarts=restarts, inits=start, options=options)  # fmt: skip
    return np.asarray(jax.vmap(lambda f: f(*arrays))(boot.law)).reshape(n_folds, T, n_resamples, P)


def _fold_cells(law, Y, W0, size, sizes, keep, pred, options):
    """A fold's held-out cells (distance, errors [T, H], resampled predictions [T, B, H], mask [T, H]) on the
    fit's scale from its resampled predictions `pred` [T, B, P], and its noise variance [T]."""
    scaled = np.log(pred) if options.log_residuals else pred
    used = np.asarray(W0) > 0  # [T, P]
    target = np.log(np.where(used, Y, 1.0)) if options.log_residuals else np.asarray(Y)
    mid = np.median(scaled, axis=1)  # [T, P]
    fitted = used & (size <= keep)[None, :]
    resid = np.where(fitted, target - mid, 0.0)
    dof = np.maximum(fitted.sum(axis=1) - n_free_parameters(law), 1)
    cells = [(float(np.log(held / keep)), (target - mid)[:, size == held], scaled[:, :, size == held],
              used[:, size == held] * 1.0) for held in sizes[sizes > keep]]  # fmt: skip
    return cells, (resid**2).sum(axis=1) / dof


def _moments(cells, noise_var: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(kappa_level [T], kappa_mix [T], rms error [T, C], bootstrap sd [T, C]) from the held-out cells, each
    (distance, errors [T, H], resampled predictions [T, B, H], 0/1 mask [T, H]) on the fit's scale."""
    level_num = mix_num = den = 0.0
    rms, sd = [], []
    for d, err, scaled, mask in cells:
        err, scaled, mask = np.asarray(err), np.asarray(scaled), np.asarray(mask)
        n = np.maximum(mask.sum(axis=1), 1.0)  # [T]
        mean_e = (mask * err).sum(axis=1) / n
        var_e = (mask * (err - mean_e[:, None]) ** 2).sum(axis=1) / np.maximum(n - 1, 1.0)
        cell_mean = (mask[:, None, :] * scaled).sum(axis=2) / n[:, None]  # [T, B]: each resample's mean prediction
        dev_var = (mask * (scaled - cell_mean[:, :, None]).var(axis=1)).sum(axis=1) / n
        level = mean_e**2 - cell_mean.var(axis=1) - noise_var / n  # the cell's shared error, less its noise
        mix = np.maximum(0.0, var_e - dev_var - noise_var)  # the spread of the errors about it, less the noise
        level_num = level_num + n * np.maximum(0.0, level - mix / n)
        mix_num = mix_num + n * mix
        den = den + n * d**2
        rms.append(np.sqrt((mask * err**2).sum(axis=1) / n))
        sd.append(np.sqrt((mask * scaled.var(axis=1)).sum(axis=1) / n))
    return np.sqrt(level_num / den), np.sqrt(mix_num / den), np.stack(rms, axis=-1), np.stack(sd, axis=-1)


def warm_starts(laws: Any, n: int) -> Any:
    """`fit` starts for a multi-target fit whose rows repeat each of T targets n times (target-major): each of the
    T laws (leading axis T) repeated n times, one start each: leaves [T * n, 1, ...]."""
    return jax.tree.map(lambda leaf: jnp.repeat(leaf, n, axis=0)[:, None], laws)
