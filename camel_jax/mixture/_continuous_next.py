"""Gradient-based design (issue 60): the next runs' mixtures as continuous variables, chosen by ascending the
decision variance they are expected to remove per FLOP, then rounded to trainable shares.

Where `next_runs` scores a table of candidates, this optimizes each new run's mixture at each offered size: the
score of a run g = f(r, M) given the runs already chosen (outcomes F_c, measured with noise s) is the conditional
form of `variance_reduction`,

    (Cov(q, g) - Cov(q, F_c) K^-1 Cov(F_c, g))^2 / (Var g - Cov(g, F_c) K^-1 Cov(F_c, g) + s^2),  K = Cov(F_c) + s^2 I,

read off the resample ensemble (a differentiable function of r through the laws), ascended in softmax coordinates
from several starts at once (vmapped), and the best (size, mixture) per FLOP is added to the batch.
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
    fitted: BootstrapResult,
    sizes: Sequence[float],
    costs: Sequence[float],
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
) -> pd.DataFrame:
    """The next `batch` runs, each a (size, mixture) whose mixture is optimized by gradient ascent on the decision
    variance it removes (given the runs chosen before it), per FLOP.

    **Arguments**:

    - `fitted`: a `BootstrapResult` of a law of (r, M) (lower is better); `noise`: the sd of one measured outcome.
    - `sizes`, `costs`: the sizes a run may have and the FLOPs of one run at each.
    - `target_size`: the decision's size; `key`: the optimizers' starts.
    - `batch`: at most this many runs; `budget`: FLOPs they may spend (default: no limit).
    - `starts`, `steps`, `learning_rate`: Adam on softmax logits, vmapped over starts.
    - `decimals`: the trainable shares are rounded to this many decimals (then renormalized).
    - `names`: the mixture columns of the result (default r_0, r_1, ...).

    **Returns**: a DataFrame, one row per chosen run in order: the mixture columns, `size`, `flops`, `score`
    (variance of q removed), `score_per_flop` and `sd_after`; `attrs["recommended"]` and `attrs["sd_before"]`.
    """
    check_key(key)
    target_size = check_model_size(target_size, "target_size")
    sizes_arr, costs_arr = _check_sizes_costs(sizes, costs)
    laws = fitted.laws
    n = int(laws.structure()["n_datasets"])
    names = list(names) if names is not None else [f"r_{j}" for j in range(n)]
    M_t = jnp.full(1, float(target_size))
    key_opt, key_starts = jax.random.split(key)
    choice = optimal_mixture(_MeanLoss(laws, M_t), n, key=key_opt)
    q = _law_outcomes(laws, jnp.asarray(choice.r)[None, :], M_t)[:, 0]
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
        r, s, c, score, g = best[1]
        spent += c
        Fc = Fc.at[:, j].set(g)
        rows.append({**dict(zip(names, r)), "size": s, "flops": c, "score": score, "score_per_flop": score / c})
    return _result_table(rows, q, choice)


def _check_sizes_costs(sizes: Sequence[float], costs: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
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
        def step(carry: Any, t: Array) -> tuple[Any, None]:
            # Adam (Kingma & Ba 2015), written out: one dtype throughout (optax's bias correction mixes int32 counts)
            z, m, v = carry
            grad = jax.grad(loss)(z)
            m = 0.9 * m + 0.1 * grad
            v = 0.999 * v + 0.001 * grad**2
            m_hat, v_hat = m / (1 - 0.9**t), v / (1 - 0.999**t)
            return (z - learning_rate * m_hat / (jnp.sqrt(v_hat) + 1e-12), m, v), None

        counts = jnp.arange(1, steps + 1, dtype=z0.dtype)
        (z, _, _), _ = jax.lax.scan(step, (z0, jnp.zeros_like(z0), jnp.zeros_like(z0)), counts)
        return z, -loss(z)

    return jax.vmap(one_start)(z0)


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


def _result_table(rows: list[dict[str, Any]], q: Array, choice: Any) -> pd.DataFrame:
    """The chosen runs as a DataFrame, each with the sd of q left after it; attrs `recommended` and `sd_before`."""
    sd = float(jnp.std(q, ddof=1))
    left = sd**2
    for row in rows:
        left -= row["score"]
        row["sd_after"] = float(np.sqrt(max(left, 0.0)))
    out = pd.DataFrame(rows)
    out.attrs = {"recommended": np.asarray(choice.r), "sd_before": sd}
    return out
