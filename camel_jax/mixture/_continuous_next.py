"""Gradient-based design (issue 60): the next runs' mixtures as continuous variables, chosen by ascending the
decision variance they are expected to remove per FLOP, then rounded to trainable shares.

Where `next_runs` scores a table of candidates, this optimizes each new run's mixture at each offered size: the
score of a run g = f(r, M) given the runs already chosen (outcomes F_c, measured with noise s) is the conditional
form of `variance_reduction`,

    (Cov(q, g) - Cov(q, F_c) K^-1 Cov(F_c, g))^2 / (Var g - Cov(g, F_c) K^-1 Cov(F_c, g) + s^2),  K = Cov(F_c) + s^2 I,

read off the resample ensemble (a differentiable function of r through the laws), ascended in softmax coordinates
from several starts at once (vmapped), and the best (size, mixture) per FLOP is added to the batch.

`score="band"` reads the same question off the one fitted law instead, through the implicit function theorem: near
the fit's optimum x* the parameters move with the data as a (weighted) least-squares fit does, so their covariance is
about s^2 (J^T W J + J_new^T J_new)^-1, with J the Jacobian of the fit's residuals at x* (W the fit's weights over
their positive mean, so that a new run weighs 1), J_new the rows the new runs would add (their residuals' Jacobian
at the law's prediction) and s the noise of one run in residual units. The decision's gain (the predicted loss at
the pick minus at the reference, the pick held fixed: the envelope theorem makes that its derivative also when the
pick moves) then has variance g^T Cov g, g = d gain / dx. Each new run's mixture (softmax logits) and log size (in
the offered range, the cost interpolated log-log between the offered sizes) ascend the variance they remove per
FLOP with `jax.grad`; the result is rounded to `decimals` and to the nearest offered size. The Gauss-Newton form
with the fit's weights, not Huber's 0/1 curvature at each residual, because under a Huber fit the parameters'
asymptotic covariance is proportional to (J^T W J)^-1 (Huber 1981, 7.6): the curvature at each old residual is a
noisy draw of the same factor a new run's unknown residual would have, and at the default `delta` below the noise
it would count a new run as many old ones. Cheap (one Jacobian of the fit, no bootstrap); first order: a fit that
bends over the new runs' scale is what the ensemble score sees and this does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from jaxtyping import Array

from ..data._checks import check_key
from ..fitting._bootstrap import BootstrapResult
from ..fitting._fit import FitResult
from ..fitting._influence import _best_start, _loss
from ..fitting._residuals import fit_residuals, target_scale
from ._next import _law_outcomes, _MeanLoss
from ._optimize import check_model_size, optimal_mixture


def _conditional_score(q: Array, Fc: Array, g: Array, noise2: float | Array) -> Array:
    """The variance of q that observing g (noise variance noise2) removes, given the chosen outcomes Fc [B, k]."""
    B = q.shape[0]
    Z = jnp.concatenate([q[:, None], Fc, g[:, None]], axis=1)
    Z = Z - Z.mean(axis=0, keepdims=True)
    S = Z.T @ Z / (B - 1)
    k = Fc.shape[1]
    cov_qg, var_g = S[0, -1], S[-1, -1]
    if k:
        K = S[1 : k + 1, 1 : k + 1] + noise2 * jnp.eye(k)
        solve_g = jnp.linalg.solve(K, S[1 : k + 1, -1])
        cov_qg = cov_qg - S[0, 1 : k + 1] @ solve_g
        var_g = var_g - S[-1, 1 : k + 1] @ solve_g
    return cov_qg**2 / (var_g + noise2)


def continuous_next_runs(
    fitted: BootstrapResult | FitResult,
    sizes: Sequence[float] | np.ndarray,
    costs: Sequence[float] | np.ndarray,
    *,
    target_size: float,
    noise: float,
    key: Array,
    batch: int = 4,
    budget: float = float("inf"),
    starts: int = 8,
    steps: int = 150,
    learning_rate: float = 0.1,
    decimals: int = 3,
    names: Sequence[str] | None = None,
    score: str = "ensemble",
    reference: Any = None,
    min_share: float = 0.0,
) -> pd.DataFrame:
    """The next `batch` runs, each a (size, mixture) whose mixture is optimized by gradient ascent on the decision
    variance it removes (given the runs chosen before it), per FLOP.

    **Arguments**:

    - `fitted`: a `BootstrapResult` of a law of (r, M) (lower is better) for `score="ensemble"`, or the
      `FitResult` of one such law for `score="band"`; `noise`: the sd of one measured outcome (loss units).
    - `sizes`, `costs`: the sizes a run may have and the FLOPs of one run at each.
    - `target_size`: the decision's size; `key`: the optimizers' starts.
    - `batch`: at most this many runs; `budget`: FLOPs they may spend (default: no limit).
    - `starts`, `steps`, `learning_rate`: Adam on softmax logits (and, for "band", the log size), vmapped over
      starts (`starts` per offered size).
    - `decimals`: the trainable shares are rounded to this many decimals (then renormalized).
    - `names`: the mixture columns of the result (default r_0, r_1, ...).
    - `score`: `"ensemble"` (the resample ensemble's conditional variance of the decision, at each offered size) or
      `"band"` (the fitted law's Gauss-Newton band of the gain through the implicit function theorem, the size a
      continuous variable too; see the module's docstring).
    - `reference`: a mixture [n]; the decision is then the gain (loss at the pick minus at the reference) rather
      than the loss at the pick.
    - `min_share`: score="band" only: each new run gives every dataset at least this share (its mixture is
      `min_share + (1 - n min_share) softmax(z)`): a linearized fit trusts the law where it extrapolates wildly
      (a share near 0 can predict a loss of 1e12, whose derivatives then look most informative).

    **Returns**: a DataFrame, one row per chosen run in order: the mixture columns, `size`, `flops`, `score`
    (variance of the decision removed), `score_per_flop` and `sd_after`; `attrs["recommended"]` and
    `attrs["sd_before"]`.
    """
    check_key(key)
    target_size = check_model_size(target_size, "target_size")
    sizes_arr, costs_arr = _check_sizes_costs(sizes, costs)
    if score not in ("ensemble", "band"):
        raise ValueError(f"`score` must be 'ensemble' or 'band'; got {score!r}")
    wanted = BootstrapResult if score == "ensemble" else FitResult
    if not isinstance(fitted, wanted):
        raise TypeError(f"score={score!r} needs `fitted` to be a {wanted.__name__}; got {type(fitted).__name__}")
    if score == "band":
        assert isinstance(fitted, FitResult)  # for mypy: checked above
        return _band_next_runs(fitted, sizes_arr, costs_arr, float(target_size), float(noise), key, batch, budget,
                               starts, steps, learning_rate, decimals, names, reference, min_share)  # fmt: skip
    laws = fitted.laws
    n = int(laws.structure()["n_datasets"])
    names = list(names) if names is not None else [f"r_{j}" for j in range(n)]
    M_t = jnp.full(1, float(target_size))
    key_opt, key_starts = jax.random.split(key)
    choice = optimal_mixture(_MeanLoss(laws, M_t), n, key=key_opt)
    q = _law_outcomes(laws, jnp.asarray(choice.r)[None, :], M_t)[:, 0]
    if reference is not None:
        q = q - _law_outcomes(laws, _check_reference(reference, n)[None, :], M_t)[:, 0]
    noise2 = float(noise) ** 2 + (1e-12 * float(jnp.std(q))) ** 2
    # the chosen runs' outcomes, zero-padded to `batch` columns: a constant column has no covariance with anything,
    # so it drops out of the conditional score, and every pick of every call reuses one compiled ascent
    Fc = jnp.zeros((q.shape[0], batch), q.dtype)
    rows: list[dict[str, Any]] = []
    spent = 0.0
    ascent = (jnp.asarray(noise2, q.dtype), jnp.asarray(learning_rate, q.dtype), steps)
    for j, k in enumerate(jax.random.split(key_starts, batch)):
        best = _best_run(laws, ascent, q, Fc, sizes_arr, costs_arr, k, n, starts, decimals, spent, budget)
        if best is None:
            break
        r, s, c, score_j, g = best[1]
        spent += c
        Fc = Fc.at[:, j].set(g)
        rows.append({**dict(zip(names, r)), "size": s, "flops": c, "score": score_j, "score_per_flop": score_j / c})
    sd = float(jnp.std(q, ddof=1))
    return _result_table(rows, sd, choice)


def _check_reference(reference: Any, n: int) -> Array:
    ref = np.asarray(reference, float)
    if ref.shape != (n,) or not np.all(np.isfinite(ref)) or np.any(ref < 0) or abs(ref.sum() - 1) > 1e-6:
        raise ValueError(f"`reference` must be a mixture of shape ({n},) with shares >= 0 summing to 1")
    return jnp.asarray(ref)


# ---- score="band": the fitted law's Gauss-Newton band of the gain, through the implicit function theorem ----


def _residual_scale(y: Array, weights: Array, log_residuals: bool) -> Array:
    """The outcome size that turns a noise in loss units into residual units: the positive-weight mean of y under
    log residuals (d log y = dy / y), else the fit's own `target_scale`."""
    if log_residuals:
        mask = weights > 0
        return jnp.sum(jnp.where(mask, y, 0.0)) / jnp.sum(mask.astype(y.dtype))
    return target_scale(y, weights)


@eqx.filter_jit
def _band_setup(law: Any, inputs: tuple[Array, ...], y: Array, weights: Array, options: Any, pick: Array,
                reference: Array | None, target: Array, noise: Array) -> tuple[Array, Array, Array, Array]:  # fmt: skip
    """At the fit's optimum x*: the information J^T W J [d, d] (W the weights over their positive mean), the gain's
    gradient g [d] (the pick held fixed), the noise variance of one run in residual units, and a ridge for the
    directions the data leave flat. Jitted: one compiled program for every fit of the same shapes."""
    x, unravel, static, _ = _loss(law, options)
    at = lambda z: eqx.combine(unravel(z), static)  # noqa: E731
    mask = weights > 0
    safe_y = jnp.where(mask, y, 1.0)
    unit = weights * jnp.sum(mask.astype(weights.dtype)) / jnp.sum(weights)
    J = jax.jacfwd(lambda z: fit_residuals(at(z)(*inputs), safe_y, weights, options.log_residuals))(x)
    info = J.T @ (jnp.where(mask, unit, 0.0)[:, None] * J)

    def gain(z: Array) -> Array:
        value = at(z)(pick[None, :], target[None])[0]
        if reference is not None:
            value = value - at(z)(reference[None, :], target[None])[0]
        return value

    g = jax.grad(gain)(x)
    s2 = (noise / _residual_scale(y, weights, options.log_residuals)) ** 2
    # sqrt(eps) of the largest curvature: a direction no run can determine (a symmetry of the law) must not turn
    # rounding noise in g into an infinite variance
    ridge = jnp.sqrt(jnp.finfo(x.dtype).eps) * jnp.max(jnp.linalg.eigvalsh(info))
    return info, g, s2, ridge


def _new_rows(law: Any, options: Any, scale: Array, r: Array, size: Array) -> Array:
    """The rows [k, d] that runs (r [k, n], size [k]) add to the fit's residual Jacobian, each at the law's own
    prediction (its expected outcome): d log f / dx under log residuals, else d f / dx / scale."""
    x, unravel, static, _ = _loss(law, options)

    def residual(z: Array) -> Array:
        prediction = eqx.combine(unravel(z), static)(r, size)
        return jnp.log(prediction) if options.log_residuals else prediction / scale

    return jax.jacfwd(residual)(x)


def _band_variance(info: Array, g: Array, s2: Array, ridge: Array, rows: Array) -> Array:
    """s^2 g^T (J^T W J + J_new^T J_new + ridge I)^-1 g: the gain's variance once the runs of `rows` are added."""
    A = info + rows.T @ rows + ridge * jnp.eye(info.shape[0], dtype=info.dtype)
    return s2 * g @ jnp.linalg.solve(A, g)


class _BandProblem(eqx.Module):
    """Everything the band ascent reads, as one pytree: a new fit of the same shapes reuses the compiled ascent."""

    law: Any
    options: Any = eqx.field(static=True)
    info: Array
    g: Array
    s2: Array
    ridge: Array
    scale: Array
    log_sizes: Array
    log_costs: Array
    min_share: Array

    def mixture(self, z: Array) -> Array:
        return self.min_share + (1 - z.shape[-1] * self.min_share) * jax.nn.softmax(z, axis=-1)

    def removed_per_flop(self, zv: Array, chosen: Array) -> Array:
        """The variance of the gain one run at (softmax(z), size(v)) removes after `chosen` [batch, d], per FLOP."""
        z, v = zv[:-1], zv[-1]
        lo, hi = self.log_sizes[0], self.log_sizes[-1]
        log_size = lo + (hi - lo) * jax.nn.sigmoid(v)
        row = _new_rows(self.law, self.options, self.scale, self.mixture(z)[None, :], jnp.exp(log_size)[None])
        before = _band_variance(self.info, self.g, self.s2, self.ridge, chosen)
        after = _band_variance(self.info, self.g, self.s2, self.ridge, jnp.concatenate([chosen, row]))
        return (before - after) / jnp.exp(jnp.interp(log_size, self.log_sizes, self.log_costs))


@eqx.filter_jit
def _band_ascend(problem: _BandProblem, chosen: Array, zv0: Array, learning_rate: Array, steps: int) -> Array:
    """From starts zv0 [S, n + 1] (logits, then the size's logit in the offered range), Adam on the variance removed
    per FLOP; returns the final zv [S, n + 1]."""
    return jax.vmap(lambda zv: _adam(lambda w: -problem.removed_per_flop(w, chosen), zv, learning_rate, steps))(zv0)


@eqx.filter_jit
def _band_after(problem: _BandProblem, chosen: Array, j: Array, r: Array, size: Array) -> tuple[Array, Array]:
    """For each candidate run (r [S, n], size [S]) put in slot j of `chosen`: its row [S, d] and the gain's
    variance after it [S]."""

    def one(r: Array, size: Array) -> tuple[Array, Array]:
        row = _new_rows(problem.law, problem.options, problem.scale, r[None, :], size[None])[0]
        return row, _band_variance(problem.info, problem.g, problem.s2, problem.ridge, chosen.at[j].set(row))

    return jax.vmap(one)(r, size)


@eqx.filter_jit
def _band_variance_jit(problem: _BandProblem, rows: Array) -> Array:
    return _band_variance(problem.info, problem.g, problem.s2, problem.ridge, rows)


def _band_next_runs(fitted: FitResult, sizes_arr: np.ndarray, costs_arr: np.ndarray, target_size: float,
                    noise: float, key: Array, batch: int, budget: float, starts: int, steps: int,
                    learning_rate: float, decimals: int, names: Sequence[str] | None,
                    reference: Any, min_share: float) -> pd.DataFrame:  # fmt: skip
    if len(fitted.inputs) != 2:
        raise ValueError("score='band' needs a law of (mixture, size); this fit has "
                         f"{len(fitted.inputs)} inputs (a token-aware law?)")  # fmt: skip
    law, _ = _best_start(fitted)
    n = int(fitted.inputs[0].shape[1])
    if not 0.0 <= min_share < 1.0 / n:
        raise ValueError(f"`min_share` must be in [0, 1/{n}); got {min_share}")
    options = fitted.fit_options
    names = list(names) if names is not None else [f"r_{j}" for j in range(n)]
    dtype = fitted.inputs[0].dtype
    M_t = jnp.full(1, target_size, dtype)
    key_opt, key_starts = jax.random.split(key)
    one = jax.tree.map(lambda a: a[None] if eqx.is_array(a) else a, law)  # a batch of one law
    choice = optimal_mixture(_MeanLoss(one, M_t), n, key=key_opt)
    ref = None if reference is None else _check_reference(reference, n).astype(dtype)
    info, g, s2, ridge = _band_setup(law, fitted.inputs, fitted.y, fitted.weights, options,
                                     jnp.asarray(choice.r, dtype), ref, M_t[0], jnp.asarray(noise, dtype))  # fmt: skip
    order = np.argsort(sizes_arr)
    sizes_arr, costs_arr = sizes_arr[order], costs_arr[order]
    problem = _BandProblem(law, options, info, g, s2, ridge, _residual_scale(fitted.y, fitted.weights,
                           options.log_residuals), jnp.log(jnp.asarray(sizes_arr, dtype)),
                           jnp.log(jnp.asarray(costs_arr, dtype)), jnp.asarray(min_share, dtype))  # fmt: skip
    chosen = jnp.zeros((batch, info.shape[0]), dtype)  # zero rows add nothing: one compiled ascent for every pick
    left = float(_band_variance_jit(problem, chosen))
    sd_before = float(np.sqrt(max(left, 0.0)))
    rows: list[dict[str, Any]] = []
    spent = 0.0
    # the size's logit starts at each offered size (kept off the ends of the range, where the sigmoid is flat)
    lo, hi = np.log(sizes_arr[0]), np.log(sizes_arr[-1])
    position = np.clip((np.log(sizes_arr) - lo) / max(hi - lo, 1e-12), 0.02, 0.98)
    v0 = np.repeat(np.log(position / (1 - position)), starts)
    for j, k in enumerate(jax.random.split(key_starts, batch)):
        affordable = spent + costs_arr <= budget * (1 + 1e-12)
        if not affordable.any():
            break
        shares = jax.random.dirichlet(k, jnp.ones(n, dtype), (len(v0),))
        zv0 = jnp.concatenate([jnp.log(jnp.maximum(shares, 1e-12)), jnp.asarray(v0, dtype)[:, None]], axis=1)
        zv = np.asarray(_band_ascend(problem, chosen, zv0, jnp.asarray(learning_rate, dtype), steps))
        best = _band_round(problem, chosen, j, zv, (lo, hi), sizes_arr, costs_arr, affordable, left, decimals)
        if best is None:
            break
        r, i, row, after, removed = best[1]
        chosen = chosen.at[j].set(row)
        left = after
        spent += float(costs_arr[i])
        rows.append({**dict(zip(names, r)), "size": float(sizes_arr[i]), "flops": float(costs_arr[i]),
                     "score": removed, "score_per_flop": removed / float(costs_arr[i])})  # fmt: skip
    return _result_table(rows, sd_before, choice)


def _band_round(problem: Any, chosen: Array, j: int, zv: np.ndarray, size_range: tuple[float, float],
                sizes_arr: np.ndarray, costs_arr: np.ndarray, affordable: np.ndarray, left: float,
                decimals: int) -> tuple[float, Any] | None:  # fmt: skip
    """The ends of one pick's ascents `zv` (mixture coordinates, then the size's logit) rounded to trainable runs
    (shares to `decimals`, the nearest affordable offered size), rescored there, the best kept: (its reduction of
    the band's variance per FLOP, (mixture, size index, its Jacobian row, the variance after it, the reduction));
    None when no end is finite."""
    dtype = problem.info.dtype
    lo, hi = size_range
    zv = zv[np.all(np.isfinite(zv), axis=1)]  # a diverged start loses
    r = np.round(np.asarray(problem.mixture(jnp.asarray(zv[:, :-1]))), decimals)
    r = r / r.sum(axis=1, keepdims=True)  # trainable shares
    log_size = lo + (hi - lo) / (1 + np.exp(-zv[:, -1]))
    distance = np.abs(np.log(sizes_arr)[None, :] - log_size[:, None])
    distance[:, ~affordable] = np.inf
    i_size = np.argmin(distance, axis=1)  # the nearest affordable offered size
    rows_j, after_j = _band_after(problem, chosen, jnp.asarray(j), jnp.asarray(r, dtype),
                                  jnp.asarray(sizes_arr[i_size], dtype))  # fmt: skip
    # a mixture where the law's derivatives overflow is not a run to train
    per_flop = np.where(np.isfinite(np.asarray(after_j)), (left - np.asarray(after_j)) / costs_arr[i_size],
                        -np.inf)  # fmt: skip
    if not len(per_flop) or not np.isfinite(per_flop.max()):
        return None
    s_best = int(np.argmax(per_flop))
    after = float(after_j[s_best])
    return float(per_flop[s_best]), (r[s_best], int(i_size[s_best]), rows_j[s_best], after, left - after)


def _check_sizes_costs(
    sizes: Sequence[float] | np.ndarray, costs: Sequence[float] | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """`sizes` and `costs` as float arrays, checked: 1-D, of the same length, with costs > 0."""
    sizes_arr, costs_arr = np.asarray(sizes, float), np.asarray(costs, float)
    if sizes_arr.shape != costs_arr.shape or sizes_arr.ndim != 1 or not np.all(costs_arr > 0):
        raise ValueError("`sizes` and `costs` must be 1-D of the same length, with costs > 0")
    return sizes_arr, costs_arr


@eqx.filter_jit
def _ascend(laws: Any, q: Array, Fc: Array, size: Array, z0: Array, noise2: Array, learning_rate: Array,
            steps: int) -> tuple[Array, Array]:  # fmt: skip
    """From logits z0 [S, n] (one row per start) at one size, Adam on the conditional score; returns (z, score)."""

    def loss(z: Array) -> Array:
        g = _law_outcomes(laws, jax.nn.softmax(z)[None, :], size[None])[:, 0]
        return -_conditional_score(q, Fc, g, noise2)

    def one_start(z0: Array) -> tuple[Array, Array]:
        z = _adam(loss, z0, learning_rate, steps)
        return z, -loss(z)

    return jax.vmap(one_start)(z0)


def _adam(loss: Any, z0: Array, learning_rate: Array, steps: int) -> Array:
    """`steps` of Adam (Kingma & Ba 2015) on `loss` from z0, written out: one dtype throughout (optax's bias
    correction mixes int32 counts)."""

    def step(carry: Any, t: Array) -> tuple[Any, None]:
        z, m, v = carry
        grad = jax.grad(loss)(z)
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad**2
        m_hat, v_hat = m / (1 - 0.9**t), v / (1 - 0.999**t)
        return (z - learning_rate * m_hat / (jnp.sqrt(v_hat) + 1e-12), m, v), None

    counts = jnp.arange(1, steps + 1, dtype=z0.dtype)
    (z, _, _), _ = jax.lax.scan(step, (z0, jnp.zeros_like(z0), jnp.zeros_like(z0)), counts)
    return z


def _best_run(
    laws: Any,
    ascent: tuple[Array, Array, int],
    q: Array,
    Fc: Array,
    sizes_arr: np.ndarray,
    costs_arr: np.ndarray,
    k: Array,
    n: int,
    starts: int,
    decimals: int,
    spent: float,
    budget: float,
) -> tuple[float, Any] | None:
    """The best (score per FLOP, (r, size, cost, score, g)) over the affordable sizes, rounded; None if none."""
    best: tuple[float, Any] | None = None
    for s, c in zip(sizes_arr, costs_arr):
        if spent + c > budget * (1 + 1e-12):
            continue
        shares = jax.random.dirichlet(jax.random.fold_in(k, int(s * 1000) % 2**31), jnp.ones(n), (starts,))
        z0 = jnp.log(jnp.maximum(shares, 1e-12))  # a share drawn as 0 would start at -inf logits
        z, scores = _ascend(laws, q, Fc, jnp.asarray(s, q.dtype), z0, *ascent)
        finite = np.where(np.isfinite(np.asarray(scores)), np.asarray(scores), -np.inf)  # a diverged start loses
        if not np.isfinite(finite.max()):
            continue
        r = np.round(np.asarray(jax.nn.softmax(z[int(np.argmax(finite))])), decimals)
        r = r / r.sum()  # trainable shares
        g = _law_outcomes(laws, jnp.asarray(r)[None, :], jnp.full(1, s))[:, 0]
        score = float(_conditional_score(q, Fc, g, ascent[0]))
        if best is None or score / c > best[0]:
            best = (score / c, (r, s, c, score, g))
    return best


def _result_table(rows: list[dict[str, Any]], sd: float, choice: Any) -> pd.DataFrame:
    """The chosen runs as a DataFrame, each with the sd of the decision left after it (`sd` before any);
    attrs `recommended` and `sd_before`."""
    left = sd**2
    for row in rows:
        left -= row["score"]
        row["sd_after"] = float(np.sqrt(max(left, 0.0)))
    out = pd.DataFrame(rows)
    out.attrs = {"recommended": np.asarray(choice.r), "sd_before": sd}
    return out
