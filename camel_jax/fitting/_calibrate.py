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

    m_c = v_c - s'^2 - s_n^2           (0 for H_c < 2)             (d_c^2 kappa_mix^2: spread by mixture)
    kappa_mix^2   = max(0, sum_c H_c m_c / sum_c H_c d_c^2)
    kappa_level^2 = max(0, sum_c H_c (e_c^2 - S_c^2 - s_n^2 / H_c - m_c / H_c) / sum_c H_c d_c^2)

The level term subtracts the noise of a mean of H_c points, not of one point: s_n^2 also holds the law's lack of
fit inside the data, which would otherwise hide a shared drift as large as the noise (it did in the zoo's
default family, where errors past the data are mostly one shift shared by all mixtures); with m_c as it stands,
s_n^2 cancels from it (e_c^2 - S_c^2 - (v_c - s'^2) / H_c, the between-cell variance of a one-way random-effects
analysis). Each cell's moment is an unbiased estimate and may be negative; the sums are truncated at 0 once. (A
truncation per cell, as before the fifth session, kept every cell whose errors happened to fall below the noise at
0 instead of below it: biased upward, the more so the more cells are summed. On dmsl, 7 losses x 3 cells pooled,
it made kappa 0.0123 where the sums give 0.0084, and the 95% band at 2.7B 3.0-3.3x the held-out RMS error where
the sums give 2.4x, still covering 0.96 of the rows.) A law that extrapolates
as well as its bootstrap says gets kappa = 0 and its bands back unchanged. The kappas rest on a few held-out
cells (3 with the default 2 folds), so the extrapolation term of a band uses the Student-t quantile with as many
degrees of freedom as cells (and `score_draws` draws it from that t distribution): a variance estimated from
a few numbers is itself uncertain, and the normal quantile would undercover.

**Pooled across targets** (`pool`; the default for several targets fitted on log residuals). Several targets
fitted on the same runs (a world's validation losses) are calibrated together: the sums above run over every
target's cells, so all targets share one kappa_level and one kappa_mix, read with as many degrees of freedom as
cells over all targets (T x 3 by default). In relative units the targets' errors per unit of log size are
comparable; each target's own kappas, estimated from 3 numbers, scatter widely: in study 5 (20 worlds of two
families, five validation losses each, 100 resamples) the separate kappas covered 0.915-0.93 at 2.2-2.8x the
RMSE, the pooled ones 0.935-0.99 at 1.8-2.2x.

**Past the data in tokens too** (laws that read tokens: the input after the size, `tokens_index`). A prediction
can leave the trained runs in tokens as well as in size (Data Mixing Laws' 5Mix: its 1B runs saw 21B tokens, fewer
than any run of 302M, 31B), and a law's error there is no smaller. The distance is then measured in the plane of
log size and log tokens,

    d(M, D) = sqrt(d_M^2 + d_D^2),    d_M = max(0, log(M / M_max)),    d_D = max(0, log(D_min / D), log(D / D_max)),

with [D_min, D_max] the trained tokens range: the model above with an error per unit of log tokens as large as per
unit of log size (two independent drifts of equal kappas, a + a' and b + b'; the extrapolation error is isotropic in
the log plane). Each fold's held-out points are measured the same way from the fold's own trained runs (its largest
size, its tokens range), and a (fold, size) cell's distance d_c is the root mean square of its points' (exact for
the spread by mixture, whose expected sum over the cell is kappa_mix^2 sum_p d_p^2; for the shared drift it
overstates (mean d_p)^2 by the points' variance of d_p, a conservative error). Where no held-out point lies outside
its fold's tokens (every fold holds out sizes trained to the same tokens), the cells and kappas are those of the
size-only model, and so are the bands inside the trained tokens. A direction (fewer tokens than D_min, more than
D_max) is *measured* when some held-out cell extrapolated that way (`tokens_measured`); a fold that held out more
tokens (the largest sizes of a table whose tokens grow with the size, as dmsl's do) does not speak for fewer. A
prediction outside the trained tokens in a direction no cell measured still gets the d_D term at the measured kappa
(an assumption: the size's error per unit stands in for the tokens'), and `uncalibrated` flags it: its band is not
calibrated (`camel-jax predict` says so per row). On 5Mix at 1B the law (log-linear-size) erred by 2.0-2.6% at
202M-302M when read at 21B tokens (inside the trained sizes, 0.41 below the trained tokens in log), against 0.5-0.6%
at their trained 31B: about half of its 5% error at 1B is the tokens', which no fold of that table can measure (its
runs trained to more tokens than 31B are 8, fewer than the law's 10 parameters per loss).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import betainc
from jaxtyping import Array, ArrayLike

from .._progress import progress_bar
from .._warn import user_stacklevel
from ..data._checks import DESIGN_WARNINGS
from ..laws._base import count, n_free_parameters
from ..solver._options import FitOptions
from ._fit import FitResult, FitWarning, fit, from_data, is_mixture_data, resolve_options, unconverged_hint
from ._resample import resample_weights
from ._student import t_quantile


class Calibration(eqx.Module):
    """The extrapolation-error model of `calibrate` (see the module docstring).

    **Fields**: `kappa_level`, `kappa_mix` (per target [T], or scalars): error standard deviations per unit of
    log-size distance, in the fit's units (log of the target when `log_scale`); `size_max` the largest trained
    size; `size_index` the position of the size among the law's inputs; diagnostics `distances` (the held-out
    cells' distances), `rms_error` and `boot_sd` (per cell [.., C]: the held-out error and the bootstrap's own
    spread there), `noise_sd`, and `pooled` (how many targets share the kappas: 1 unless pooled). For a law that
    reads tokens: `tokens_index` (their position among the inputs; None: a law of size alone, or a calibration
    made before tokens were counted), `tokens_range` (the trained (min, max)) and `tokens_measured` (whether a
    held-out cell extrapolated to fewer, to more tokens than its fold trained on).
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
    pooled: int = eqx.field(static=True, default=1)
    tokens_index: int | None = eqx.field(static=True, default=None)
    tokens_range: tuple[float, float] | None = eqx.field(static=True, default=None)
    tokens_measured: tuple[bool, bool] = eqx.field(static=True, default=(False, False))

    @property
    def dof(self) -> int:
        """Degrees of freedom of the kappas: the number of held-out cells they were estimated from (over the
        `pooled` targets that share them; a cell counts for every target, even one without points in it)."""
        return max(len(self.distances), 1) * self.pooled

    def summary(self) -> str:
        """What the calibration rests on, in one phrase: its held-out cells, whether targets share its kappas, the
        t quantile's degrees of freedom and the extrapolation error per unit of log size."""
        k = np.atleast_1d(np.hypot(np.asarray(self.kappa_level), np.asarray(self.kappa_mix)))
        shared = f" x {self.pooled} targets, pooled" if self.pooled > 1 else ""
        kappa = f"{k[0]:.3g}" if self.pooled > 1 or k.size == 1 else f"{k.min():.3g}-{k.max():.3g} by target"
        unit = " (relative)" if self.log_scale else ""
        text = (f"calibrated on {len(self.distances)} held-out (fold, size) cells{shared}, Student-t at {self.dof} "
                f"dof; extrapolation error {kappa}{unit} per unit of log size past {self.size_max:g}")  # fmt: skip
        if self.tokens_range is not None:
            low, high = self.tokens_range
            measured = [way for way, m in zip(("fewer", "more"), self.tokens_measured) if m]
            said = " and ".join(measured) + " measured" if measured else "neither direction measured"
            text += f" or of log tokens outside [{low:g}, {high:g}] ({said})"
        return text

    def quantile(self, level: float) -> float:
        """The two-sided `level` quantile of the extrapolation term: Student-t with `dof` degrees of freedom."""
        return t_quantile((1 + level) / 2, self.dof)

    def tokens_distance(self, tokens: ArrayLike) -> Array:
        """d_D = max(0, log(D_min / D), log(D / D_max)) [P]: how far `tokens` lie outside the trained tokens
        range, in log tokens (0 for a calibration without tokens)."""
        log_d = jnp.log(jnp.asarray(tokens))
        if self.tokens_range is None:
            return jnp.zeros_like(log_d)
        low, high = float(np.log(self.tokens_range[0])), float(np.log(self.tokens_range[1]))
        return jnp.maximum(0.0, jnp.maximum(low - log_d, log_d - high))

    def distance(self, size: ArrayLike, tokens: ArrayLike | None = None) -> Array:
        """d(M, D) = sqrt(d_M^2 + d_D^2) [P], d_M = max(0, log(M / size_max)) and d_D the `tokens_distance`
        (without `tokens`, or for a calibration without tokens: d_M)."""
        d_size = jnp.maximum(0.0, jnp.log(jnp.asarray(size) / self.size_max))
        if tokens is None or self.tokens_range is None:
            return d_size
        return jnp.hypot(d_size, self.tokens_distance(tokens))

    def uncalibrated(self, tokens: ArrayLike | None) -> np.ndarray:
        """[P] bool: the points outside the trained tokens in a direction no held-out cell measured (fewer tokens
        than the trained minimum, or more than the maximum): their band's tokens part is assumed, not calibrated
        (all False without `tokens`, or for a calibration without tokens)."""
        if tokens is None:
            return np.zeros((), bool)
        D = np.asarray(tokens, float)
        if self.tokens_range is None:
            return np.zeros(D.shape, bool)
        below, above = D < self.tokens_range[0] * (1 - 1e-9), D > self.tokens_range[1] * (1 + 1e-9)
        return (below & (not self.tokens_measured[0])) | (above & (not self.tokens_measured[1]))

    def tokens_of(self, inputs: Sequence[ArrayLike]) -> ArrayLike | None:
        """The tokens among a law's `inputs` (None for a calibration without tokens)."""
        if self.tokens_index is None or self.tokens_index >= len(inputs):
            return None
        return inputs[self.tokens_index]

    def extra_sd(self, size: ArrayLike, difference: bool = False, tokens: ArrayLike | None = None) -> Array:
        """The extrapolation standard deviation at `size` [P] (and `tokens` [P], for a calibration with tokens):
        [P] (or [T, P]); `difference=True`: of the difference of two mixtures there (the level term cancels)."""
        kappa2 = 2 * self.kappa_mix**2 if difference else self.kappa_level**2 + self.kappa_mix**2
        return jnp.multiply.outer(jnp.sqrt(kappa2), self.distance(size, tokens))

    def widen(
        self, pred: ArrayLike, size: ArrayLike, level: float, tokens: ArrayLike | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The calibrated band of resampled predictions `pred` [B, P] at sizes [P] (and `tokens` [P]): the
        percentile band's half-widths h (on the fit's scale, about the median) become sqrt(h^2 + (z d kappa)^2),
        d = `distance(size, tokens)`, z the normal quantile of the level for the bootstrap part and
        `quantile(level)` for the extrapolation part; unchanged inside the data."""
        q = 100 * np.array([(1 - level) / 2, 0.5, (1 + level) / 2])
        low, mid, high = np.nanpercentile(np.asarray(pred), q, axis=0)  # the plain band, then on the fit's scale
        if self.log_scale:
            low, mid, high = np.log(low), np.log(mid), np.log(high)
        extra = self.quantile(level) * np.asarray(self.extra_sd(size, tokens=tokens))
        low = np.where(extra > 0, mid - np.sqrt((mid - low) ** 2 + extra**2), low)
        high = np.where(extra > 0, mid + np.sqrt((high - mid) ** 2 + extra**2), high)
        if self.log_scale:
            low, high = np.exp(low), np.exp(high)
        return low, high




def calibrate(
    law: Any,
    inputs: Any,
    y: ArrayLike | None = None,
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
    pool: bool | None = None,
    tokens_index: int | str | None = "auto",
    devices: Sequence[jax.Device] | None = None,
    progress: bool = True,
) -> Calibration:
    """Measure how a law's bootstrap band understates the error of extrapolating past the largest trained size.

    Every fold, resample and target is one fit.

    **Arguments**:

    - `law`, `inputs`, `y`: the law template, its inputs and targets [P] (or [T, P]: one calibration per target),
      as for `fit`. `inputs` may be a `MixtureData`: it then also gives `y`, `weights` and, unless `groups` is
      passed, its `group` (the checkpoints of one run resampled together).
    - `key`: draws the resamples and the starts.
    - `n_resamples`: per fold (the folds only need the bootstrap's spread at the held-out points, not its tails:
      32 measured as well as 100 in the zoo).
    - `holdout`: the number of folds, fold j dropping the j largest sizes (each fold keeps >= 2 sizes; None: 2
      folds and 3 held-out cells, or 1 fold for 3 sizes; more folds fit on fewer sizes and overstate a
      well-specified law's error: in the tests, a fold of a true CAMEL on 3 sizes erred by 2x its own bootstrap
      spread).
    - `restarts`: random starts per fit when no `inits` are given; `inits`: warm starts (e.g. the full-data
      `fit(...).law`, batched over targets for [T, P]), or the full-data `FitResult` itself: its best law, and
      its own `FitOptions` when `options` is None.
    - `weights`: [P] or [T, P] (0 leaves a point out, e.g. a missing loss); `groups`, `strata`: as for
      `bootstrap`; `options`: a `FitOptions`, as for `fit`.
    - `pool`: for targets [T, P], one pair of kappas for all targets, estimated from every target's held-out cells
      (see the module docstring). None (default): pooled when the fit is on log residuals (relative errors,
      comparable across targets), per target otherwise (errors in each target's own units).
    - `tokens_index`: the position of the tokens among the inputs, whose distance outside the trained range
      counts as the size's does (see the module docstring); "auto" (default): the input after the size, when the
      inputs have one (the house's order: mixture, size, tokens); None: a law of size alone.
    - `devices`: the devices every fold's resamples (times targets and starts) are spread over, as for `fit`
      (default: every local device); the answer equals one device's.
    - `progress`: draw a bar with the folds fitted so far on stderr (only when it is a terminal).

    **Returns**: a `Calibration` (see the module docstring for the model).
    """
    calibration, _ = calibrate_folds(law, inputs, y, key=key, n_resamples=n_resamples, holdout=holdout,
                                     restarts=restarts, inits=inits, weights=weights, groups=groups, strata=strata,
                                     options=options, pool=pool, tokens_index=tokens_index, devices=devices,
                                     progress=progress)  # fmt: skip
    return calibration


def calibrate_folds(
    law: Any,
    inputs: Any,
    y: ArrayLike | None = None,
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
    pool: bool | None = None,
    tokens_index: int | str | None = "auto",
    devices: Sequence[jax.Device] | None = None,
    progress: bool = False,
) -> tuple[Calibration, HeldOut]:
    """`calibrate`, and the folds it fitted (`HeldOut`: each fold's median prediction at every run), for
    calibrations in other units (the score and the gain of `calibrate_decision`) at no further fit."""
    inputs, y, weights, groups, inits, options = _arguments(law, inputs, y, weights, groups, inits, options, pool,
                                                            n_resamples, holdout)  # fmt: skip
    arrays = tuple(jnp.asarray(x) for x in inputs)
    W0 = _weights(y, weights)
    size_index, size, sizes, holdout = _sizes(law, arrays, W0, holdout)
    tokens_index = _tokens_index(tokens_index, size_index, len(arrays))
    tokens = None if tokens_index is None else np.asarray(arrays[tokens_index], dtype=float)
    Y = jnp.atleast_2d(jnp.asarray(y))
    if inits is not None and jnp.ndim(y) == 1:  # one target: a batch of one
        inits = jax.tree.map(lambda leaf: leaf[None], inits)
    keeps = sizes[-np.arange(2, holdout + 2)]  # fold j keeps the sizes <= keeps[j - 1]
    pred = _fold_fits(law, arrays, Y, W0, size, keeps, n_resamples, restarts, inits, dict(groups=groups, strata=strata),
                      options, key, devices, progress)  # fmt: skip
    folds = [_fold_cells(law, Y, W0, size, sizes, keep, fold_pred, options, tokens)
             for keep, fold_pred in zip(keeps, pred)]  # fmt: skip
    cells: list[tuple[float, np.ndarray, np.ndarray, np.ndarray]] = [cell for fold, _, _ in folds for cell in fold]
    ways = {way for _, _, fold_ways in folds for way in fold_ways}  # -1: fewer tokens measured, +1: more
    noise_var = np.mean([fold_noise for _, fold_noise, _ in folds], axis=0)  # [T]
    pooled = Y.shape[0] if (options.log_residuals if pool is None else pool) else 1
    kappa_level, kappa_mix, rms, sd = (jnp.asarray(a) for a in _moments(cells, noise_var, pool=pooled > 1))
    squeeze = (lambda a: a[0]) if jnp.ndim(y) == 1 else (lambda a: a)
    calibration = Calibration(
        kappa_level=squeeze(kappa_level),
        kappa_mix=squeeze(kappa_mix),
        size_max=float(sizes[-1]),
        size_index=int(size_index),
        log_scale=bool(options.log_residuals),
        distances=tuple(c[0] for c in cells),
        rms_error=squeeze(rms),
        boot_sd=squeeze(sd),
        noise_sd=squeeze(jnp.sqrt(jnp.asarray(noise_var))),
        pooled=pooled,
        tokens_index=tokens_index,
        tokens_range=None if tokens is None else _tokens_range(tokens, np.asarray(jnp.any(W0 > 0, axis=0))),
        tokens_measured=(-1 in ways, 1 in ways),
    )
    median = np.median(pred, axis=2)  # [folds, T, P]
    held = HeldOut(keeps=np.asarray(keeps, float), size=size, median=median if jnp.ndim(y) > 1 else median[:, 0])
    return calibration, held


def _arguments(
    law: Any, inputs: Any, y: Any, weights: Any, groups: Any, inits: Any, options: FitOptions | None, pool: Any,
    n_resamples: int, holdout: int | None,
) -> tuple[Any, Any, Any, Any, Any, FitOptions]:
    """`calibrate_folds`' arguments checked and read: a `FitResult` as `inits` gives its best law and its own
    options (issue 57), a `MixtureData` as `inputs` its arrays and its groups; (inputs, y, weights, groups, inits,
    options)."""
    if isinstance(inits, FitResult):
        inits, options = inits.law, inits.fit_options if options is None else options
    options = resolve_options(options, law)
    if groups is None and is_mixture_data(inputs):
        groups = inputs.group
    inputs, y, weights, _, _ = from_data(inputs, y, weights, None, None)
    if pool is not None and not isinstance(pool, bool):
        raise TypeError(f"`pool` must be True, False or None; got {pool!r}")
    count(n_resamples, "n_resamples", least=2)
    if holdout is not None:
        count(holdout, "holdout")
    return inputs, y, weights, groups, inits, options


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


def _tokens_index(tokens_index: int | str | None, size_index: int, n_inputs: int) -> int | None:
    """The position of the tokens among `n_inputs` inputs (`calibrate`'s `tokens_index`), or None."""
    if tokens_index == "auto":
        return size_index + 1 if size_index + 1 < n_inputs else None
    if tokens_index is None:
        return None
    if isinstance(tokens_index, bool) or not isinstance(tokens_index, (int, np.integer)):
        raise TypeError(f"`tokens_index` must be an input position, 'auto' or None; got {tokens_index!r}")
    if not 0 <= tokens_index < n_inputs or tokens_index == size_index:
        raise ValueError(f"`tokens_index` must name an input other than the size (0..{n_inputs - 1}, not "
                         f"{size_index}); got {tokens_index}")  # fmt: skip
    return int(tokens_index)


def _tokens_range(tokens: np.ndarray, trained: np.ndarray) -> tuple[float, float]:
    """(min, max) of the `tokens` [P] at the `trained` [P] points."""
    return float(tokens[trained].min()), float(tokens[trained].max())


def _fold_fits(law, arrays, Y, W0, size, keeps, n_resamples, restarts, inits, resample, options, key, devices=None,
               progress=False) -> np.ndarray:  # fmt: skip
    """Every fold's bootstrap as a multi-target fit (fold j drops the sizes above keeps[j - 1]; rows target-major,
    then resample, warm-started at `inits` when given), one fold after the other: each fold is one program of the
    same shape (compiled once), and the bar counts the folds. The resamples' predictions at every point
    [folds, T, B, P]."""
    T, P = Y.shape
    counts = resample_weights(key, P, n_resamples, **resample).astype(Y.dtype)  # [B, P], shared by the folds
    start = None if inits is None else warm_starts(inits, n_resamples)
    targets = jnp.repeat(Y, n_resamples, axis=0)  # [T * B, P]
    pred, unconverged = [], 0
    for fold, keep in enumerate(keeps):
        if progress:
            progress_bar(fold, len(keeps), "calibration", "folds")
        train = jnp.asarray(size <= keep, Y.dtype)  # [P]
        Wb = (counts[None] * (W0 * train[None])[:, None]).reshape(T * n_resamples, P)
        with warnings.catch_warnings():  # a resample of a fold holds fewer points and sizes by design
            warnings.filterwarnings("ignore", message=DESIGN_WARNINGS)
            warnings.simplefilter("ignore", FitWarning)  # its rows are resamples, not targets: counted below
            boot = fit(law, arrays, targets, weights=Wb, key=jax.random.fold_in(key, 1), restarts=restarts,
                       inits=start, options=options, devices=devices)  # fmt: skip
        unconverged += boot._unconverged()[1].size
        pred.append(np.asarray(jax.vmap(lambda f: f(*arrays))(boot.law)).reshape(T, n_resamples, P))
    if progress:
        progress_bar(len(keeps), len(keeps), "calibration", "folds")
    if unconverged:
        total = len(keeps) * T * n_resamples
        warnings.warn(FitWarning(
            f"calibration: the best start of {unconverged} of {total} fold fits ({len(keeps)} folds x {T} targets x "
            f"{n_resamples} resamples) did not converge: the extrapolation error is estimated partly from where they "
            f"stopped; {unconverged_hint(law)}", unconverged, total),
            stacklevel=user_stacklevel())  # fmt: skip
    return np.stack(pred)


def _fold_cells(law, Y, W0, size, sizes, keep, pred, options, tokens=None):
    """A fold's held-out cells (distance, errors [T, H], resampled predictions [T, B, H], mask [T, H]) on the
    fit's scale from its resampled predictions `pred` [T, B, P], its noise variance [T], and the tokens
    directions its held-out points measured (-1: fewer tokens than the fold trained on, +1: more). With `tokens`
    [P], a cell's distance is the root mean square of its points' sqrt(d_M^2 + d_D^2), d_D from the fold's
    trained tokens range (see the module docstring)."""
    scaled = np.log(pred) if options.log_residuals else pred
    used = np.asarray(W0) > 0  # [T, P]
    target = np.log(np.where(used, Y, 1.0)) if options.log_residuals else np.asarray(Y)
    mid = np.median(scaled, axis=1)  # [T, P]
    fitted = used & (size <= keep)[None, :]
    resid = np.where(fitted, target - mid, 0.0)
    dof = np.maximum(fitted.sum(axis=1) - n_free_parameters(law), 1)
    cells, ways = [], []
    low, high = (1.0, 1.0) if tokens is None else _tokens_range(tokens, fitted.any(axis=0))
    for held in sizes[sizes > keep]:
        at = size == held
        distance = float(np.log(held / keep))
        if tokens is not None:
            log_t = np.log(tokens[at])
            d_tokens = np.maximum(0.0, np.maximum(np.log(low) - log_t, log_t - np.log(high)))
            d_tokens = np.where(d_tokens > 1e-9, d_tokens, 0.0)  # rounding at the range's ends is inside
            distance = float(np.sqrt(np.mean(distance**2 + d_tokens**2)))
            with_data = used[:, at].any(axis=0)
            ways += [way for way, side in ((-1, log_t < np.log(low)), (1, log_t > np.log(high)))
                     if np.any(with_data & side & (d_tokens > 0))]  # fmt: skip
        cells.append((distance, (target - mid)[:, at], scaled[:, :, at], used[:, at] * 1.0))
    return cells, (resid**2).sum(axis=1) / dof, ways


def _moments(
    cells, noise_var: np.ndarray, pool: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(kappa_level [T], kappa_mix [T], rms error [T, C], bootstrap sd [T, C]) from the held-out cells, each
    (distance, errors [T, H], resampled predictions [T, B, H], 0/1 mask [T, H]) on the fit's scale; `pool`: the
    moments summed over the targets too (every target gets the same kappas)."""
    T = len(np.atleast_1d(noise_var))
    level_num, mix_num, den = np.zeros(T), np.zeros(T), np.zeros(T)
    rms, sd = [], []
    for d, err, scaled, mask in cells:
        err, scaled, mask = np.asarray(err), np.asarray(scaled), np.asarray(mask)
        held = mask.sum(axis=1)  # [T]: a target's points in the cell (0: e.g. its loss missing at that size)
        n = np.maximum(held, 1.0)
        mean_e = (mask * err).sum(axis=1) / n
        var_e = (mask * (err - mean_e[:, None]) ** 2).sum(axis=1) / np.maximum(n - 1, 1.0)
        cell_mean = (mask[:, None, :] * scaled).sum(axis=2) / n[:, None]  # [T, B]: each resample's mean prediction
        dev_var = (mask * (scaled - cell_mean[:, :, None]).var(axis=1)).sum(axis=1) / n
        level = mean_e**2 - cell_mean.var(axis=1) - noise_var / n  # the cell's shared error, less its noise
        # the spread of the errors about it, less the noise (none measured in a cell of one point); unbiased, so
        # negative at times: truncating each cell at 0 would bias the sums upward (see the module docstring)
        mix = np.where(held >= 2, var_e - dev_var - noise_var, 0.0)
        level_num = level_num + held * (level - mix / n)  # an empty cell weighs nothing
        mix_num = mix_num + held * mix
        den = den + held * d**2
        rms.append(np.sqrt((mask * err**2).sum(axis=1) / n))
        sd.append(np.sqrt((mask * scaled.var(axis=1)).sum(axis=1) / n))
    if pool:  # one estimate from every target's cells, each target's points weighted alike
        level_num, mix_num, den = (np.full(T, np.sum(a)) for a in (level_num, mix_num, den))
    safe = np.where(den > 0, den, 1.0)  # a target without held-out points: kappa 0, its bands the bootstrap's
    level, mix = np.maximum(0.0, level_num / safe), np.maximum(0.0, mix_num / safe)  # truncated once, at the sums
    return np.sqrt(level), np.sqrt(mix), np.stack(rms, axis=-1), np.stack(sd, axis=-1)


def warm_starts(laws: Any, n: int) -> Any:
    """`fit` starts for a multi-target fit whose rows repeat each of T targets n times (target-major): each of the
    T laws (leading axis T) repeated n times, one start each: leaves [T * n, 1, ...]."""
    return jax.tree.map(lambda leaf: jnp.repeat(leaf, n, axis=0)[:, None], laws)


@dataclasses.dataclass(frozen=True)
class HeldOut:
    """The folds of a calibration: fold j trained on the sizes <= `keeps[j]`; `median` [folds, P] (or
    [folds, T, P]) its resamples' median prediction at every run, whose sizes are `size` [P]."""

    keeps: np.ndarray
    size: np.ndarray
    median: np.ndarray


class DecisionCalibration(eqx.Module):
    """What held-out sizes say about the score and about the gain of one mixture over another, in score
    units (see `calibrate_decision`).

    At a size M, at distance d(M) = max(0, log M - `center`) / `spread` from the trained sizes (their mean log size
    and the square root of their log sizes' sum of squared deviations, as a regression in log size measures
    leverage), beyond what the bootstrap sees (when the scale follows the size, `trended`, the whole error of a
    fold's prediction, its own bootstrap error included: `decide` takes the larger of it and the bootstrap's):
    - the score of a mixture errs by N(0, value_floor^2 + value_slope^2 d^2) (when the scale follows the size,
      `trended`, the score of r is read as the reference's plus the scaled gain, and this is the error of the
      held-out runs' scaled predictions);
    - the true gain of r over r0 is `scale_at(M)` times the predicted one plus N(0, 2 (gain_floor^2 +
      gain_slope^2 d^2)): each mixture's own error, the error both share cancelling. The scale follows the size,
      `scale_at(M) = scale * exp(scale_exponent * (log M - scale_center))` (a law that shrinks the mixture's
      effect as the size grows, as CAMEL's capacity terms do where the truth keeps it, predicts a smaller share
      of it at every larger size), known to the standard errors `scale_se` and `exponent_se` and their
      covariance `scale_exponent_cov`.

    **Fields** (scalars): those above, `noise_sd` (one run's measured score: the noise floor),
    `n_cells` (held-out (fold, size) cells), `n_runs` (held-out runs over all folds), `replicated` (1 when the
    noise came from repeated runs, 0 when from the loss-to-benchmark fits' residuals), `size_max` (the largest
    trained size). Calibrations saved before format 7 measured the distance from `size_max` in plain log size
    (`center` = log size_max, `spread` = 1), and load so; those saved before format 10 hold one scale for
    every size (`scale_exponent` = 0), and load so.
    """

    size_max: Array
    value_floor: Array
    value_slope: Array
    scale: Array
    scale_se: Array
    gain_floor: Array
    gain_slope: Array
    noise_sd: Array
    n_cells: Array
    n_runs: Array
    replicated: Array
    center: Array
    spread: Array
    scale_center: Array
    scale_exponent: Array
    exponent_se: Array
    scale_exponent_cov: Array

    def distance(self, size: float) -> float:
        """d(M) = max(0, log M - center) / spread."""
        return max(0.0, float(np.log(size)) - float(self.center)) / float(self.spread)

    def value_sd(self, size: float) -> float:
        """The score's error at `size` that the bootstrap does not see (`trended`: a fold prediction's whole error,
        its own resampling error included; `decide` takes the larger of it and the bootstrap's)."""
        d = self.distance(size)
        return float(np.sqrt(float(self.value_floor) ** 2 + (float(self.value_slope) * d) ** 2))

    def scale_at(self, size: float) -> tuple[float, float]:
        """The gain's scale at `size` and its standard error (delta method in the scale and the exponent).

        exp(b x) with an estimated b is biased high by exp(se_b^2 x^2 / 2) (the mean of a log-normal), which
        grows with the distance x = log size - `scale_center`; both numbers are divided by it (study 5: at
        M=20 the uncorrected scale left the true gain 0.73-0.76x the calibrated one, corrected 0.81-0.89x)."""
        x = float(np.log(size)) - float(self.scale_center)
        grow = float(np.exp(float(self.scale_exponent) * x))
        scale, slope = float(self.scale) * grow, float(self.scale) * x * grow  # d scale_at / d (scale, exponent)
        var = (grow * float(self.scale_se)) ** 2 + (slope * float(self.exponent_se)) ** 2
        var += 2 * grow * slope * float(self.scale_exponent_cov)
        unbias = float(np.exp(-0.5 * (float(self.exponent_se) * x) ** 2))
        return scale * unbias, float(np.sqrt(max(var, 0.0))) * unbias

    @property
    def trended(self) -> bool:
        """Whether the gain's scale follows the size (a trend was measured: `exponent_se` > 0)."""
        return float(self.exponent_se) > 0

    def gain_sd(self, size: float, predicted: float) -> float:
        """The error of the scaled gain `scale_at(size)[0] * predicted` at `size` that the bootstrap does not see
        (`trended`: its own-error part is a fold prediction's whole error; see `value_sd`)."""
        d = self.distance(size)
        own = float(self.gain_floor) ** 2 + (float(self.gain_slope) * d) ** 2
        return float(np.sqrt(2 * own + (predicted * self.scale_at(size)[1]) ** 2))

    @property
    def dof(self) -> int:
        """Degrees of freedom of the gain's error scale: held-out runs less one mean per cell and the scale."""
        return max(int(self.n_runs) - int(self.n_cells) - 1, 1)

    def summary(self) -> str:
        """What the calibration rests on, in one phrase."""
        source = "repeated runs" if float(self.replicated) else "the benchmark fits' residuals"
        trend = f"; gain scale x size^{float(self.scale_exponent):.2f}" if self.trended else ""
        return (f"calibrated on {int(self.n_runs)} held-out runs in {int(self.n_cells)} (fold, size) cells; "
                f"noise floor {float(self.noise_sd):.3g} from {source}{trend}")  # fmt: skip


def calibrate_decision(
    predicted: ArrayLike,
    measured: ArrayLike,
    size: ArrayLike,
    keeps: ArrayLike,
    *,
    noise_sd: float,
    used: ArrayLike | None = None,
    replicated: bool = False,
    fitted: ArrayLike | None = None,
) -> DecisionCalibration:
    """Calibrate the score and the gain on held-out sizes (method of moments, see `DecisionCalibration`).

    Fold j was fitted on the runs of size <= keeps[j] and predicted the score `predicted[j]` at every run;
    each larger size it did not see is a cell c of H_c runs. Its distance d_c = (log size - mean_j) / spread_j
    is measured from the fold's own trained runs (mean_j: their mean log size; spread_j: the square root of
    their log sizes' sum of squared deviations), as the final fit's distance is from all the runs: a fold
    trained on 4 of 6 sizes extrapolates worse than the full fit does by as far, and the leverage of a
    regression in log size says by how much (study 5: in plain log size the score's band at M=20 was 4.0-4.4x
    its error, read at twice the largest held-out distance). With e_p = predicted - measured and
    s^2 = `noise_sd`^2 when it is the scatter of repeated runs (`replicated`), else s^2 = 0 (one run's pure
    measurement noise is then unknown: the benchmark fits' residuals also hold their law's lack of fit, which a
    prediction at the pick suffers as much as one at a held-out run, and subtracting them left the gain's own
    error at zero and its band covering 45-60% in the zoo's default family):
    - the score: value_floor^2 + value_slope^2 d^2 fitted (least squares, both >= 0) to e_p^2 - s^2 (with a
      trend, below, e_p is the error of the fold's scaled prediction, its mean over the cell plus its scaled
      deviation, and s^2 = `noise_sd`^2 is subtracted as from the own error: the truth at the pick holds no
      measurement noise);
    - the gain, from deviations within a size (the runs' predicted and measured scores less the size's means:
      the error every mixture shares cancels, as in a gain): measured dev = scale x predicted dev + u.
      Without `fitted`, one scale (least squares through the origin) over the held-out cells, and
      gain_floor^2 + gain_slope^2 d^2 fitted to u_p^2 H_c / (H_c - 1) - s^2 (each mixture's own error).
      With `fitted` (the final fit's in-sample score at every run) and >= 3 trained sizes, the scale follows
      the size: scale(M) = scale exp(b (log M - mean log size)), fitted (least squares) on every trained
      size's deviations of the final fit, and read at the target size. A law that shrinks the mixture's effect
      as the size grows where the truth keeps it (tied CAMEL on the zoo's default family predicts a third of
      it at the trained sizes and less further out) then predicts the gain at the target without the bias of
      one scale measured nearer. Each fold with >= 3 trained sizes does the same on its own runs, and its
      held-out residuals u give the own error, with s^2 = `noise_sd`^2 subtracted (the trend leaves little lack
      of fit in them; study 5's decision table measures the result).

    **Arguments**:

    - `predicted`: [folds, P] each fold's predicted score at every run; `measured`: [P] the measured one.
    - `size`: [P] the runs' sizes; `keeps`: [folds] each fold's largest trained size.
    - `noise_sd`: one run's measurement noise (from repeated runs, or the benchmark fits' residuals): the
      noise floor the calibration reports; subtracted only when `replicated` (or with `fitted`, see above).
    - `used`: [P] runs that count (default all); `replicated`: whether `noise_sd` is the repeats' scatter.
    - `fitted`: [P] the final fit's predicted score at every run (None: one scale for every size).

    **Returns**: a `DecisionCalibration`.
    """
    predicted, measured = np.atleast_2d(np.asarray(predicted, float)), np.asarray(measured, float)
    size, keeps = np.asarray(size, float), np.asarray(keeps, float)
    used = np.ones(len(size), bool) if used is None else np.asarray(used, bool)
    noise_var = float(noise_sd) ** 2
    noise2 = noise_var if replicated else 0.0
    cells = _held_out_cells(predicted, size, keeps, used)
    if not cells:
        raise ValueError("no held-out cell with >= 2 runs past >= 2 trained sizes: the decision cannot be calibrated")
    value = [(d2, e**2 - noise2) for fold, _, cell, d2 in cells for e in predicted[fold][cell] - measured[cell]]
    fp = np.concatenate([_deviations(predicted[fold], cell) for fold, _, cell, _ in cells])
    ym = np.concatenate([_deviations(measured, cell) for _, _, cell, _ in cells])
    spread_dev = float(fp @ fp)
    scale = float(fp @ ym) / spread_dev if spread_dev > 0 else 1.0
    u = ym - scale * fp
    n_runs = len(u)
    scale_se = float(np.sqrt(u @ u / max(n_runs - len(cells) - 1, 1) / spread_dev)) if spread_dev > 0 else 0.0
    own = _own_errors(cells, u, noise2)
    center, spread = _leverage(size[used])
    trend = None if fitted is None else _scale_trend(np.asarray(fitted, float), measured, size, used)
    if trend is None:
        trend = (scale, 0.0, center, np.diag([scale_se**2, 0.0]))
    else:  # each fold's own trend, read at its held-out sizes, leaves the own error (the measurement's removed)
        kept, residuals, scaled = _trend_residuals(predicted, measured, size, keeps, used, cells)
        if residuals is not None:
            own = _own_errors(kept, residuals, noise_var)
        value = [(d2, e2 - noise_var) for d2, e2 in scaled]
    gain_floor, gain_slope = _floor_and_slope(np.asarray(own))
    value_floor, value_slope = _floor_and_slope(np.asarray(value))
    s, b, scale_center, cov = trend
    scalars = (float(size[used].max()), value_floor, value_slope, s, np.sqrt(cov[0, 0]), gain_floor, gain_slope,
               float(noise_sd), len(cells), n_runs, float(replicated), center, spread, scale_center, b,
               np.sqrt(cov[1, 1]), cov[0, 1])  # fmt: skip
    return DecisionCalibration(*(jnp.asarray(float(x)) for x in scalars))


def _deviations(values: np.ndarray, cell: np.ndarray) -> np.ndarray:
    """`values` at the runs of `cell` less their mean there."""
    return values[cell] - values[cell].mean()


def _held_out_cells(predicted: np.ndarray, size: np.ndarray, keeps: np.ndarray, used: np.ndarray) -> list:
    """The (fold, held-out size, runs [P] bool, squared leverage distance) of every held-out cell with >= 2 runs
    of a fold with >= 2 trained sizes."""
    cells = []
    for fold, (keep, pred) in enumerate(zip(keeps, predicted)):
        trained = size[used & (size <= keep)]
        if len(np.unique(trained)) < 2:  # no leverage to measure a distance by
            continue
        center, spread = _leverage(trained)
        for held in np.unique(size[used & (size > keep)]):
            cell = used & (size == held) & np.isfinite(pred)
            if cell.sum() >= 2:
                cells.append((fold, float(held), cell, ((float(np.log(held)) - center) / spread) ** 2))
    return cells


def _own_errors(cells: list, u: np.ndarray, noise2: float) -> list[tuple[float, float]]:
    """(d^2, u_p^2 H_c / (H_c - 1) - s^2) per held-out run, `u` in the cells' order."""
    own, start = [], 0
    for _, _, cell, d2 in cells:
        H = int(cell.sum())
        own += [(d2, x**2 * H / (H - 1) - noise2) for x in u[start : start + H]]
        start += H
    return own


def _scale_trend(fitted: np.ndarray, measured: np.ndarray, size: np.ndarray, used: np.ndarray):
    """(scale, exponent b, center, covariance [2, 2] of (scale, b)) of measured dev = scale exp(b (log M -
    center)) x fitted dev over the trained sizes (deviations from each size's mean; center: the runs' mean log
    size), or None with fewer than 3 sizes of >= 2 runs, or when the trend is not measured: a scale <= 0 (the
    law's mixture effect does not follow the measured one) or b on the edge of its search range [-3, 3]."""
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    center = float(np.mean(np.log(size[used])))
    for held in np.unique(size[used]):
        cell = used & (size == held) & np.isfinite(fitted)
        if cell.sum() >= 2:
            offset = np.full(int(cell.sum()), np.log(held) - center)
            parts.append((_deviations(fitted, cell), _deviations(measured, cell), offset))
    if len(parts) < 3:
        return None
    n_sizes = len(parts)
    fp, ym, x = (np.concatenate([part[i] for part in parts]) for i in range(3))
    if not float(fp @ fp) > 0:
        return None

    def profile(b: float) -> tuple[float, float]:  # the residual sum of squares and the scale, given b
        g = np.exp(b * x) * fp
        s = float(g @ ym) / float(g @ g)
        return float(np.sum((ym - s * g) ** 2)), s

    grid = np.linspace(-3.0, 3.0, 121)
    i = int(np.argmin([profile(b)[0] for b in grid]))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    for _ in range(60):  # golden-section search inside the grid's bracket
        m1, m2 = lo + 0.381966 * (hi - lo), lo + 0.618034 * (hi - lo)
        lo, hi = (lo, m2) if profile(m1)[0] < profile(m2)[0] else (m1, hi)
    b = 0.5 * (lo + hi)
    rss, s = profile(b)
    if s <= 0 or i in (0, len(grid) - 1):
        return None
    g = np.exp(b * x) * fp
    J = np.stack([g, s * x * g], axis=1)  # d (scale_at x fitted dev) / d (scale, b)
    cov = rss / max(len(ym) - n_sizes - 2, 1) * np.linalg.pinv(J.T @ J)
    return s, b, center, cov


def _trend_scale(trend: tuple, size: float) -> float:
    """A `_scale_trend`'s scale at `size`, less exp(b x)'s log-normal bias (as `DecisionCalibration.scale_at`)."""
    s, b, center, cov = trend
    x = float(np.log(size)) - center
    return float(s * np.exp(b * x - 0.5 * cov[1, 1] * x**2))


def _trend_residuals(predicted, measured, size, keeps, used, cells) -> tuple[list, np.ndarray | None, list]:
    """Each fold's own scale trend (`_scale_trend` on its trained runs, scale 1 for a fold with fewer than 3
    trained sizes) read at its held-out cells (`_trend_scale`): the cells of folds with a trend and their
    residuals u = measured dev - scale x predicted dev (None without such a fold), and every held-out run's
    (d^2, squared error) of the scaled prediction (the cell's mean prediction plus the scaled deviation)."""
    kept, residuals, value = [], [], []
    trends = [_scale_trend(pred, measured, size, used & (size <= keep)) for keep, pred in zip(keeps, predicted)]
    for fold, held, cell, d2 in cells:
        trend, pred = trends[fold], predicted[fold]
        scale = 1.0 if trend is None else _trend_scale(trend, held)
        value += [(d2, e**2) for e in pred[cell].mean() + scale * _deviations(pred, cell) - measured[cell]]
        if trend is not None:
            residuals.append(_deviations(measured, cell) - scale * _deviations(pred, cell))
            kept.append((fold, held, cell, d2))
    return kept, (np.concatenate(residuals) if kept else None), value


def _leverage(sizes: np.ndarray) -> tuple[float, float]:
    """The trained runs' mean log size and the square root of their log sizes' sum of squared deviations."""
    logs = np.log(sizes)
    return float(logs.mean()), float(np.sqrt(np.sum((logs - logs.mean()) ** 2)))


def _floor_and_slope(rows: np.ndarray) -> tuple[float, float]:
    """(a, b) >= 0 with a^2 + b^2 d^2 the least-squares fit of rows (d^2, excess squared error)."""
    d2, target = rows[:, 0], rows[:, 1]
    X = np.stack([np.ones_like(d2), d2], axis=1)
    floor2, slope2 = np.linalg.lstsq(X, target, rcond=None)[0]
    if slope2 < 0:
        floor2, slope2 = target.mean(), 0.0
    if floor2 < 0:
        floor2, slope2 = 0.0, float(d2 @ target / max(d2 @ d2, 1e-300))
    return float(np.sqrt(max(floor2, 0.0))), float(np.sqrt(max(slope2, 0.0)))


def t_cdf(x: float, dof: int) -> float:
    """Student's t CDF with `dof` degrees of freedom at x."""
    tail = 0.5 * float(betainc(dof / 2, 0.5, dof / (dof + x**2)))
    return 1 - tail if x >= 0 else tail


def replicate_noise(
    r: ArrayLike, size: ArrayLike, values: ArrayLike, used: ArrayLike | None = None
) -> tuple[float, int]:
    """Measurement noise from repeated runs: the pooled within-group standard deviation of `values` [P] over
    runs sharing a mixture r [P, n] and a size [P] (rounded to 1e-9), and its degrees of freedom (0: no
    repeats, noise NaN).

    **Arguments**: `r`, `size`, `values` per run; `used` [P]: the runs that count (default all).

    **Returns**: (standard deviation, degrees of freedom).
    """
    r, size, values = np.asarray(r, float), np.asarray(size, float), np.asarray(values, float)
    used = np.ones(len(values), bool) if used is None else np.asarray(used, bool)
    used = used & np.isfinite(values)
    keys = np.round(np.column_stack([r, size]), 9)[used]
    _, group = np.unique(keys, axis=0, return_inverse=True)
    group = np.ravel(group)
    v = values[used]
    sums, counts = np.bincount(group, v), np.bincount(group)
    dof = int(np.sum(counts - 1))
    if dof == 0:
        return float("nan"), 0
    ss = float(np.sum((v - (sums / counts)[group]) ** 2))
    return float(np.sqrt(ss / dof)), dof


def replicate_weights(
    r: ArrayLike, size: ArrayLike, values: ArrayLike, used: ArrayLike | None = None, *, prior_dof: float = 2.0
) -> np.ndarray:
    """Fit weights from repeated runs: 1 / each mixture's noise variance, relative to the pooled one.

    A mixture's variance is the scatter of its repeats (runs sharing its r [P, n] and a size [P]) pooled over
    its sizes, shrunk toward the variance pooled over all mixtures with `prior_dof` degrees of freedom
    ((ss_m + prior_dof * var) / (dof_m + prior_dof): a mixture repeated twice says little on its own); a
    mixture without repeats gets the pooled variance. Noise can differ by mixture many times over (the marin
    project measured a factor 25 in repeat variance), and a fit that weights every run alike follows the
    noisiest.

    **Arguments**: `r`, `size` per run; `values` [P] or [T, P] (one weighting per target); `used` [P]: the runs
    that count (default all); `prior_dof`: the pooled variance's weight in each mixture's.

    **Returns**: weights of the shape of `values`, with mean 1 over the used runs of each target (all 1 for a
    target with fewer than 2 degrees of freedom of repeats).
    """
    values = np.asarray(values, float)
    rows = np.atleast_2d(values)
    r, size = np.asarray(r, float), np.asarray(size, float)
    used = np.ones(rows.shape[1], bool) if used is None else np.asarray(used, bool)
    _, cell = np.unique(np.round(np.column_stack([r, size]), 9), axis=0, return_inverse=True)
    _, mixture = np.unique(np.round(r, 9), axis=0, return_inverse=True)
    cell, mixture = np.ravel(cell), np.ravel(mixture)
    out = np.ones_like(rows)
    for t, v in enumerate(rows):
        ok = used & np.isfinite(v)
        counts = np.bincount(cell[ok], minlength=cell.max() + 1)
        means = np.bincount(cell[ok], v[ok], minlength=cell.max() + 1) / np.maximum(counts, 1)
        ss = np.bincount(mixture[ok], (v[ok] - means[cell[ok]]) ** 2, minlength=mixture.max() + 1)
        cell_mixture = np.zeros(cell.max() + 1, int)
        cell_mixture[cell[ok]] = mixture[ok]  # every run of a (mixture, size) cell has its mixture
        n_mix = mixture.max() + 1
        n_cells = np.bincount(cell_mixture[np.unique(cell[ok])], minlength=n_mix)
        dof = np.bincount(mixture[ok], minlength=n_mix) - n_cells
        if dof.sum() < 2 or ss.sum() <= 0:
            continue
        pooled = ss.sum() / dof.sum()
        variance = (ss + prior_dof * pooled) / (dof + prior_dof)
        w = np.where(ok, pooled / variance[mixture], 0.0)
        out[t] = np.where(ok, w / w[ok].mean(), 1.0)
    return out.reshape(values.shape)
