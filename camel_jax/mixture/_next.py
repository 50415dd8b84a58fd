"""Choose the next training runs: the candidates whose outcome would most reduce the uncertainty of the decision at
the target size, per FLOP (issue 16; the paper names adaptive allocation as future work)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from jaxtyping import Array, ArrayLike

from ..data._checks import check_key
from ..data._containers import MixtureData, match_mixture_columns
from ..fitting._bootstrap import BootstrapResult
from ._optimize import _reference_mixture, check_model_size, optimal_mixture
from ._pipeline import Pipeline, PipelineFit

NEXT_COLUMNS = ("order", "score", "score_per_flop", "cost", "cumulative_cost", "sd_after", "shift")


def variance_reduction(q: ArrayLike, F: ArrayLike, noise: ArrayLike) -> np.ndarray:
    """Expected reduction of Var(q) from observing each candidate once, from an ensemble [C].

    With q [B] the decision quantity and F [B, C] the candidates' outcomes in each of B ensemble members (bootstrap
    resamples), and `noise` the sd of one measured outcome (scalar or [C]):

        score_c = Cov(q, f_c)^2 / (Var(f_c) + noise_c^2)

    the variance q loses when f_c is observed, under the linear-Gaussian reading of the ensemble (the ensemble
    Kalman update: Evensen 2003; as a rule for choosing experiments, expected variance reduction: Cohn, Ghahramani
    & Jordan 1996). It is 0 where the members agree on the outcome (a run already measured without noise) and
    Var(q) for a noiseless run of q itself; never more.

    **Arguments**:

    - `q`: the decision quantity in each member [B]; `F`: the candidates' outcomes [B, C].
    - `noise`: the sd of one measured outcome, a scalar or [C].

    **Returns**: the score of each candidate [C], in the squared units of q.
    """
    return _scores(*_joint(q, F, noise))


def _joint(q: ArrayLike, F: ArrayLike, noise: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """(the ensemble covariance of [q, f_1, ..., f_C], each candidate's outcome noise variance)."""
    F = np.asarray(F)
    return _covariance(np.asarray(q, float), F.astype(float)), _noise_variance(noise, F)


def _noise_variance(noise: ArrayLike, F: np.ndarray) -> np.ndarray:
    """noise^2 per candidate, floored at (100 eps |f_c|)^2 in F's precision: members that agree up to rounding
    agree (otherwise a zero-noise score would be Var(q) corr^2 of rounding errors)."""
    eps = np.finfo(F.dtype).eps if np.issubdtype(F.dtype, np.floating) else np.finfo(float).eps
    floor = (100 * eps * np.abs(F.astype(float)).mean(axis=0)) ** 2
    return np.broadcast_to(np.asarray(noise, float) ** 2, floor.shape) + floor


def _covariance(q: np.ndarray, F: np.ndarray) -> np.ndarray:
    """Ensemble covariance of [q, f_1, ..., f_C], [(C+1), (C+1)]."""
    Z = np.concatenate([q[:, None], F], axis=1)
    Z = Z - Z.mean(axis=0)
    return Z.T @ Z / max(Z.shape[0] - 1, 1)


def _scores(S: np.ndarray, s2: np.ndarray) -> np.ndarray:
    denominator = np.diag(S)[1:] + s2
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator > 0, S[0, 1:] ** 2 / denominator, 0.0)


def greedy_batch(
    q: ArrayLike,
    F: ArrayLike,
    noise: ArrayLike,
    cost: ArrayLike,
    *,
    budget: float,
    batch: int,
    replace: bool = True,
    same: ArrayLike | None = None,
) -> list[tuple[int, float, float]]:
    """Up to `batch` candidates within `budget` FLOPs, each the best variance reduction per FLOP given the ones
    chosen before it (their outcomes are conditioned on: a rank-one update of the ensemble covariance, so a second
    copy of a chosen run is worth less than the first; `replace=False` chooses each candidate at most once, and
    with `same` (an id per candidate, equal for copies of one run) no copy of a chosen run either).
    Returns [(index, score, sd of q after)]."""
    S, s2 = _joint(q, F, noise)
    cost = np.asarray(cost, float)
    chosen: list[tuple[int, float, float]] = []
    spent, negligible = 0.0, 1e-9 * S[0, 0]  # removes less than a billionth of today's Var(q): tells nothing
    available = np.ones(len(cost), bool)
    for _ in range(batch):
        scores = _scores(S, s2)
        useful = (spent + cost <= budget * (1 + 1e-12)) & (scores > negligible) & available
        per_flop = np.where(useful, scores / cost, -np.inf)
        c = int(np.argmax(per_flop))
        if not useful[c]:
            break
        column = S[:, c + 1].copy()
        S = S - np.outer(column, column) / (S[c + 1, c + 1] + s2[c])
        spent += float(cost[c])
        if not replace:
            available[c] = False
            if same is not None:
                available[np.asarray(same) == np.asarray(same)[c]] = False
        chosen.append((c, float(scores[c]), float(np.sqrt(max(S[0, 0], 0.0)))))
    return chosen


class _MeanLoss(eqx.Module):
    """Minus the resample-mean loss at (r, size[, tokens]): its maximizer is a loss law's recommended mixture. A
    Module, so that new laws of the same shapes reuse the optimizer's compiled program."""

    laws: Any
    size: Array
    tokens: tuple[Array, ...] = ()

    def __call__(self, r: Array) -> Array:
        return -jnp.mean(_law_outcomes(self.laws, r[None, :], self.size, *self.tokens))


@eqx.filter_jit
def _law_outcomes(laws: Any, r: Array, size: Array, *tokens: Array) -> Array:
    return jax.vmap(lambda law: law(r, size, *tokens))(laws)


class WeightedTargets(eqx.Module):
    """A law of several targets (a fit of T validation losses, batched [T, ...]) read as one: the weighted sum of
    its targets' predictions, `weights @ [law_t(inputs)]_t` (the objective of `target_weights`). Batched over
    resamples like any law ([B, T, ...] laws, [B, T] weights), so `BootstrapResult.of_laws` and `next_runs` take it.

    **Fields**: `laws` (the per-target laws, leading axis T), `weights` [T] (>= 0, summing to 1)."""

    laws: Any
    weights: Array

    def __call__(self, *inputs: Array) -> Array:
        return self.weights @ jax.vmap(lambda law: law(*inputs))(self.laws)

    def structure(self) -> dict[str, Any]:
        return self.laws.structure() if hasattr(self.laws, "structure") else {}


@eqx.filter_jit
def _pipeline_outcomes(pipelines: Pipeline, r: Array, size: Array) -> Array:
    return pipelines.score(r, size)


def _ensemble(
    fitted: Any, noise: float | None, target_size: float, target_tokens: float | None = None
) -> tuple[Any, Any, dict[str, Any], float]:
    """(f(r, M) -> [B, P] per resample, the score `optimal_mixture` maximizes for the recommendation and its
    keywords, the noise sd of one measured outcome)."""
    if isinstance(fitted, PipelineFit):
        if fitted.pipelines is None:
            raise ValueError("`fitted` has no resamples: fit_pipeline(..., n_resamples=B) gives the ensemble")
        noise = fitted.score_noise if noise is None else noise
        fitted = fitted.pipelines
    if noise is None:
        raise ValueError("`noise` (the sd of one measured outcome) is required unless `fitted` is a PipelineFit")
    if isinstance(fitted, Pipeline):
        if not fitted.batch_shape:
            raise ValueError("`fitted` must be a batched Pipeline (one per resample): a single law has no spread")
        options = {"model_size": float(target_size), "robust": "mean"}
        return functools.partial(_pipeline_outcomes, fitted), fitted, options, float(noise)
    if isinstance(fitted, BootstrapResult):
        at = () if target_tokens is None else (jnp.full(1, float(target_tokens)),)
        score = _MeanLoss(fitted.laws, jnp.full(1, float(target_size)), at)
        return functools.partial(_law_outcomes, fitted.laws), score, {}, float(noise)
    raise TypeError(f"`fitted` must be a PipelineFit, a batched Pipeline or a BootstrapResult; got {type(fitted)}")


def _candidate_runs(
    candidates: Any,
    mixture: Sequence[str] | None,
    names: Sequence[str] | None,
    n: int,
    size: str,
    cost: str,
    tokens: str | None = None,
) -> MixtureData:
    """The candidates' mixtures, sizes and costs (as the target), checked like any runs table. The mixture columns
    are `mixture` when given, else those the fit was made on (`names`, matched by name), else the `r_*` columns."""
    if not isinstance(candidates, pd.DataFrame):
        raise TypeError(f"`candidates` must be a DataFrame; got {type(candidates).__name__}")
    if len(candidates) == 0:
        raise ValueError("`candidates` is empty: no runs to choose from")
    if mixture is not None:
        columns = list(mixture)
        if len(columns) != n:
            raise ValueError(f"`mixture` names {len(columns)} column(s) {columns}; the fit has {n} datasets")
    else:
        columns = match_mixture_columns(candidates, names, n, "`candidates`")
    return MixtureData.from_frame(candidates, mixture=columns, target=cost, size=size, tokens=tokens)


def _fit_names(fitted: Any) -> tuple[tuple[str, ...] | None, int]:
    """(the mixture columns the ensemble was fitted on, or None; its number of datasets)."""
    if isinstance(fitted, PipelineFit):
        return fitted.loss_fit.names or fitted.pipeline.datasets, fitted.pipeline.n_datasets
    if isinstance(fitted, Pipeline):
        return fitted.datasets, fitted.n_datasets
    if isinstance(fitted, BootstrapResult):
        n = fitted.laws.structure().get("n_datasets") if hasattr(fitted.laws, "structure") else None
        if n is None:
            raise ValueError("`fitted` must be a bootstrap of a mixture law (one declaring n_datasets)")
        names = getattr(fitted, "names", None)  # a bootstrap of named columns carries them (issue 55)
        return (None if names is None else tuple(str(c) for c in names)), int(n)
    raise TypeError(f"`fitted` must be a PipelineFit, a batched Pipeline or a BootstrapResult; got {type(fitted)}")


def next_runs(
    fitted: PipelineFit | Pipeline | BootstrapResult,
    candidates: pd.DataFrame,
    *,
    budget: float,
    target_size: float,
    key: Array,
    batch: int = 1,
    replace: bool = True,
    reference: ArrayLike | None = None,
    max_shift: float | None = None,
    noise: float | None = None,
    mixture: Sequence[str] | None = None,
    size: str = "size",
    cost: str = "flops",
    tokens: str | None = None,
    target_tokens: float | None = None,
) -> pd.DataFrame:
    """The next runs to train: candidates ranked by how much their outcome would sharpen the decision, per FLOP.

    The decision quantity q is, in each resample, the predicted score (a pipeline; a loss law's loss) at the
    recommended mixture r* at `target_size` (r*: `optimal_mixture` with `robust="mean"`), or its gain over
    `reference` when one is given. A candidate's outcome is the same prediction at its own (mixture, size). Each
    candidate is scored by `variance_reduction` (Cov(q, f_c)^2 / (Var(f_c) + noise^2), read off the resample
    ensemble), and the batch is built greedily by score per FLOP, conditioning on the runs already chosen.

    **Arguments**:

    - `fitted`: a `PipelineFit` with resamples (its `score_noise` is the default `noise`), a batched
      `Pipeline`, or a `BootstrapResult` of a law of (r, M) (lower is better; pass `noise`, e.g. the fit's rms
      residual).
    - `candidates`: runs not yet trained: `mixture` columns, `size` and `cost` (FLOPs, > 0) columns. Not
      modified. The mixture columns are matched by name: by default those the fit was made on (a `PipelineFit`
      or `Pipeline` of named columns: a missing one, or an `r_*` column the fit never saw, is an error), else
      every `r_*` column in the table's order; `mixture` names them explicitly, in the fit's dataset order.
    - `target_size`: the model size the decision is for.
    - `budget`: FLOPs the batch may spend; `batch`: at most this many runs; `replace`: whether a candidate may be
      chosen again (a replicate with fresh noise; False when each row can be trained once); `key`: the
      optimizer's starts.
    - `max_shift`: recommend within reference (1 +- max_shift), as `optimal_mixture` does (needs `reference`).
    - `tokens`, `target_tokens`: for a bootstrap of a token-aware law (inputs (r, size, tokens)): the candidates'
      tokens column and the training tokens at `target_size` the decision is for. A candidate is then a
      (mixture, size, tokens) run.

    With `replace=False`, each run is chosen at most once: rows of `candidates` that repeat a chosen run (the same
    mixture, size and tokens) are not chosen again either.

    **Returns**: the chosen rows of `candidates` in order of choice, with `NEXT_COLUMNS`: `score` (the variance of
    q removed, in squared score units), `score_per_flop`, `cost`, `cumulative_cost`, `sd_after` (the sd of q once
    the runs so far are measured) and `shift` (sqrt(score): the sd of the change of q's estimate that measuring the
    run is expected to make). Empty when no candidate fits the budget or none would tell anything.
    `attrs["recommended"]` is r* [n], `attrs["sd_before"]` the sd of q over the resamples today and
    `attrs["noise"]` the sd of one measured outcome: a run whose `shift` is below it is not expected to move the
    decision by more than one run's measurement noise (more runs stop paying).
    """
    check_key(key)
    if noise is not None and not (isinstance(noise, (int, float, np.number)) and np.isfinite(noise) and noise >= 0):
        raise ValueError(f"`noise` must be a finite number >= 0 (the sd of one measured outcome); got {noise!r}")
    target_size = check_model_size(target_size, "target_size")
    if (tokens is None) != (target_tokens is None):
        raise ValueError("`tokens` (the candidates' tokens column) and `target_tokens` go together: give both for a "
                         "token-aware law, neither otherwise")  # fmt: skip
    if target_tokens is not None:
        target_tokens = check_model_size(target_tokens, "target_tokens")
        if not isinstance(fitted, BootstrapResult):
            raise ValueError("`tokens`/`target_tokens` are for a bootstrap of a token-aware law; a pipeline takes none")
    f, score, options, noise_sd = _ensemble(fitted, noise, target_size, target_tokens)
    if not (np.isfinite(noise_sd) and noise_sd >= 0):
        raise ValueError(f"the fit's outcome noise is {noise_sd!r}: pass `noise` (the sd of one measured outcome)")
    if not (isinstance(budget, (int, float, np.number)) and np.isfinite(budget) and budget > 0):
        raise ValueError(f"`budget` must be a positive number of FLOPs; got {budget!r}")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"`batch` must be an integer >= 1; got {batch!r}")
    names, n = _fit_names(fitted)
    table = _candidate_runs(candidates, mixture, names, n, size, cost, tokens)
    if reference is not None:
        reference = _reference_mixture(reference, n)
    M_t = jnp.full(1, float(target_size))
    at_target: tuple[Array, ...] = () if target_tokens is None else (jnp.full(1, float(target_tokens)),)
    at_candidates: tuple[Array, ...] = () if target_tokens is None else (jnp.asarray(table.tokens),)
    region: dict[str, Any] = {} if max_shift is None else {"reference": reference, "max_shift": max_shift}
    choice = optimal_mixture(score, table.n_datasets, key=key, **options, **region)
    r_star = jnp.asarray(choice.r)[None, :]
    q = f(r_star, M_t, *at_target)[:, 0]
    if reference is not None:
        q = q - f(jnp.asarray(reference, dtype=r_star.dtype)[None, :], M_t, *at_target)[:, 0]
    F = np.asarray(f(table.r, table.size, *at_candidates))  # the fit's precision: `_noise_variance`'s rounding floor
    same = None if replace else _same_runs(table)
    picks = greedy_batch(np.asarray(q), F, noise_sd, np.asarray(table.y), budget=float(budget), batch=batch,
                         replace=bool(replace), same=same)  # fmt: skip
    out = _chosen(candidates, picks, np.asarray(table.y))
    out.attrs = {"recommended": np.asarray(choice.r), "sd_before": float(np.std(np.asarray(q), ddof=1)),
                 "noise": float(noise_sd)}  # fmt: skip
    return out


def _same_runs(table: MixtureData) -> np.ndarray:
    """An id per candidate: equal for rows that describe the same run (mixture, size and tokens to 1e-9)."""
    columns = [np.asarray(table.r, float), np.log(np.asarray(table.size, float))[:, None]]
    if table.tokens is not None:
        columns.append(np.log(np.asarray(table.tokens, float))[:, None])
    key = np.round(np.concatenate(columns, axis=1), 9)
    return np.unique(key, axis=0, return_inverse=True)[1].ravel()


def _chosen(candidates: pd.DataFrame, picks: list[tuple[int, float, float]], cost: np.ndarray) -> pd.DataFrame:
    """The chosen rows of `candidates` (a copy), in order of choice, with `NEXT_COLUMNS`."""
    index = [c for c, _, _ in picks]
    return candidates.iloc[index].assign(
        order=np.arange(1, len(index) + 1),
        score=[s for _, s, _ in picks],
        score_per_flop=[s / cost[c] for c, s, _ in picks],
        cost=cost[index],
        cumulative_cost=np.cumsum(cost[index]),
        sd_after=[sd for _, _, sd in picks],
        shift=[float(np.sqrt(max(s, 0.0))) for _, s, _ in picks],
    )
