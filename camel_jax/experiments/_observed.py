"""Does the pick win on measured runs? The decision backtest where the truth is a table, not a simulator.

Real mixture studies train a few mixtures at a size larger than the rest (dmsl_shukor2025: four at 2.7B;
mixinglaws_ye2024: six at 1B; regmix_liu2024: 256 at 60M). Hold those out as `candidates`, fit each method on the
smaller `train` runs, let it rank the candidates by their predicted weighted loss (a weighting: a weighted mean of
losses, lower is better) and judge its pick by the measured one: the regret (pick minus the best candidate), its
share of the candidates' range, and the rank correlation between predicted and measured weighted losses. With a
handful of candidates one decision is weak evidence: report several weightings (one per validation loss) and read
the spread, not one number.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from jaxtyping import Array

from .._deprecated import renamed_keywords
from ..data._checks import DESIGN_WARNINGS
from ..data._containers import MIXTURE_SUM_TOLERANCE, _column_list, _numeric, _positive_column, _require_columns
from ..fitting._fit import fit
from ..laws import law_template
from ._evaluate import DMLNested, identical_rows

OBSERVED_METHODS = ("camel", "camel-free", "sodm", "dml", "size-agnostic", "best-observed", "camel-data")
OBSERVED_COLUMNS = (
    "data", "weighting", "method", "at_size", "n_train", "n_candidates", "pick", "regret", "regret_share",
    "spearman", "predicted_value", "true_value", "best_value", "worst_value",
)  # fmt: skip


@renamed_keywords(objectives="weightings")
def backtest_observed(
    train: pd.DataFrame,
    candidates: pd.DataFrame,
    *,
    mixture: Sequence[str],
    size: str,
    weightings: Mapping[str, Mapping[str, float]] | Sequence[str],
    key: Array,
    methods: Sequence[str] = OBSERVED_METHODS,
    restarts: int = 16,
    name: str = "data",
) -> pd.DataFrame:
    """Backtest mixture-choosing methods against measured runs: which candidate would each method have trained?

    **Arguments**:

    - `train`, `candidates`: runs tables with the `mixture` columns, the `size` column and the loss columns the
      weightings name. Every candidate must have every named loss; a missing training loss only drops that run
      from that loss's fit. Neither table is modified.
    - `weightings`: {name: {loss column: weight}}, each the weighted mean of its losses (lower is better); a list
      of loss columns is one weighting per column (the old keyword `objectives=` is deprecated).
    - `methods`: names from `OBSERVED_METHODS`. `"camel"` (tied, k=3), `"camel-free"`, `"camel-data"` (tied
      CAMELData, k=3, without a tokens input) and `"sodm"` (SODMAdditive in size) fit one law per loss and predict
      each candidate at its own size; `"size-agnostic"` predicts with the tied CAMEL fit at the largest trained
      size; `"dml"` is the paper's nested DML at the candidates' size (it needs one candidate size and mixtures
      trained at >= 3 sizes); `"best-observed"` ranks the candidates by their measured weighted loss at the largest
      trained size that holds the most of them (no law; candidates not trained there rank last, and with none
      trained at all it has no pick).
      When `train` holds a single size, no law can say how size changes the ranking: every law method then
      predicts at that size (the `at_size` column says so) and `"dml"` is skipped.
    - `restarts`: of every fit; `key`: the fits' random key; `name`: the `data` column.

    **Returns**: one row per (weighting, method), columns `OBSERVED_COLUMNS` then the pick's mixture `r_<column>`.
    `pick` is the chosen candidate's index label, `regret` = its measured weighted loss minus the best candidate's
    (>= 0), `regret_share` = regret / (worst - best), `spearman` the rank correlation of predicted and measured
    weighted losses over the candidates (NaN for best-observed when fewer than 2 candidates were trained).
    """
    weights = _weighting_table(weightings)
    losses = sorted({c for w in weights.values() for c in w})
    mixture = _column_list(mixture, "mixture")
    unknown = [m for m in methods if m not in OBSERVED_METHODS]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}: choose from {OBSERVED_METHODS}")
    r_train, s_train, Y, W = _runs(train, mixture, size, losses, "train", allow_missing=True)
    r_cand, s_cand, Y_cand, _ = _runs(candidates, mixture, size, losses, "candidates", allow_missing=False)
    measured = {o: _combine(w, losses, Y_cand) for o, w in weights.items()}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=DESIGN_WARNINGS)
        per_loss = _per_loss_predictions(methods, (r_train, s_train, Y, W), r_cand, s_cand, restarts, key)
    predictions = {m: ({o: _combine(w, losses, p) for o, w in weights.items()}, at) for m, (p, at) in per_loss.items()}
    rows = []
    for weighting, truth in measured.items():
        for method, (predicted, at_size) in predictions.items():
            p = predicted[weighting]
            rows.append(_row(name, weighting, method, at_size, len(train), candidates.index, p, truth)
                        | _mixture_of(p, r_cand, mixture))  # fmt: skip
    return pd.DataFrame(rows, columns=[*OBSERVED_COLUMNS, *(f"r_{c}" for c in mixture)])


def _per_loss_predictions(methods, runs, r_cand, s_cand, restarts, key) -> dict[str, tuple[np.ndarray, float]]:
    """{method: (each loss predicted at the candidates [L, C], the size it predicted at)}."""
    r_train, s_train, Y, W = runs
    top = float(s_train.max())
    single = bool(np.all(s_train == top))
    out: dict[str, tuple[np.ndarray, float]] = {}
    fits: dict[str, Any] = {}  # one fit per law: "camel" and "size-agnostic" share theirs
    for method in methods:
        law = "camel" if method == "size-agnostic" else method
        k = jax.random.fold_in(key, OBSERVED_METHODS.index(law))
        if method == "best-observed":
            out[method] = _best_observed(r_train, s_train, Y, W, r_cand)
        elif method == "dml":
            if not (single or len(np.unique(s_cand)) > 1):
                out[method] = (_dml(r_train, s_train, Y, W, r_cand, float(s_cand[0]), restarts, k), float(s_cand[0]))
        else:
            if law not in fits:
                fits[law] = _law_fit(law, r_train, s_train, Y, W, restarts, k)
            at = np.full_like(s_cand, top) if single or method == "size-agnostic" else s_cand
            out[method] = (np.asarray(fits[law].predict(r_cand, at)), float(np.max(at)))
    return out


def _row(name, weighting, method, at_size, n_train, index, p, truth) -> dict[str, Any]:
    """One row of the result; a method with no finite prediction (best-observed with no candidate trained at the
    largest size) has no pick: NaN regret and an empty pick."""
    row = {"data": name, "weighting": weighting, "method": method, "at_size": at_size, "n_train": n_train,
           "n_candidates": len(index), "best_value": truth.min(), "worst_value": truth.max()}  # fmt: skip
    if not np.isfinite(p).any():
        return row | {"pick": None, "regret": np.nan, "regret_share": np.nan, "spearman": np.nan,
                      "predicted_value": np.nan, "true_value": np.nan}  # fmt: skip
    pick = int(np.nanargmin(p))
    regret = truth[pick] - truth.min()
    return row | {
        "pick": index[pick],
        "regret": regret,
        "regret_share": regret / np.ptp(truth) if np.ptp(truth) > 0 else np.nan,
        "spearman": spearman(p, truth),
        "predicted_value": p[pick],
        "true_value": truth[pick],
    }


def _mixture_of(p: np.ndarray, r_cand: np.ndarray, mixture: list[str]) -> dict[str, float]:
    pick = r_cand[int(np.nanargmin(p))] if np.isfinite(p).any() else np.full(len(mixture), np.nan)
    return {f"r_{c}": float(pick[j]) for j, c in enumerate(mixture)}


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Rank correlation of two vectors over the entries finite in both (average ranks for ties); NaN if fewer
    than 2 such entries or a constant one.

    **Arguments**:

    - `a`, `b`: vectors of the same length.

    **Returns**: the Spearman correlation, a float in [-1, 1] or NaN.
    """
    a, b = np.asarray(a, float), np.asarray(b, float)
    keep = np.isfinite(a) & np.isfinite(b)
    if keep.sum() < 2:
        return float("nan")
    ra = pd.Series(a[keep]).rank().to_numpy()
    rb = pd.Series(b[keep]).rank().to_numpy()
    if np.ptp(ra) == 0 or np.ptp(rb) == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def _weighting_table(weightings: Any) -> dict[str, dict[str, float]]:
    if isinstance(weightings, str):
        raise TypeError(f"`weightings` must be a list of loss columns or a mapping; got the string {weightings!r}")
    if not isinstance(weightings, Mapping):
        weightings = {str(c): {str(c): 1.0} for c in weightings}
    if len(weightings) == 0:
        raise ValueError("`weightings` is empty: name at least one loss column")
    table = {}
    for name, w in weightings.items():
        if not isinstance(w, Mapping) or len(w) == 0:
            raise ValueError(f"weighting {name!r} must be a non-empty {{loss column: weight}} mapping; got {w!r}")
        bad = [c for c, v in w.items() if not (np.isfinite(v) and v >= 0)]
        if bad or sum(w.values()) <= 0:
            raise ValueError(f"weighting {name!r}: weights must be finite, >= 0 and not all 0; check {bad or list(w)}")
        table[str(name)] = {str(c): float(v) for c, v in w.items()}
    return table


def _runs(df: pd.DataFrame, mixture: list[str], size: str, losses: list[str], what: str, *, allow_missing: bool):
    """(r [P, n], sizes [P], losses Y [L, P] with missing entries 1.0, 0/1 weights W [L, P]), validated."""
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"`{what}` must be a pandas DataFrame; got {type(df).__name__}")
    _require_columns(df, [*mixture, size])
    r = np.stack([_numeric(df, c) for c in mixture], axis=1)
    bad_mix = (r < 0).any(axis=1) | (np.abs(r.sum(axis=1) - 1.0) > MIXTURE_SUM_TOLERANCE)
    if bad_mix.any():
        i = int(np.argmax(bad_mix))
        raise ValueError(f"`{what}` row {df.index[i]!r}: mixture columns {mixture} hold {r[i].tolist()}, not "
                         f"weights >= 0 summing to 1")  # fmt: skip
    if what == "train" and not np.all(np.any(r > 0, axis=0)):
        column = mixture[int(np.argmin(np.any(r > 0, axis=0)))]
        raise ValueError(f"mixture column {column!r} is zero in every training run: no law can learn its effect")
    sizes = _positive_column(df, size, "size")
    missing = [c for c in losses if c not in df.columns]
    if missing:
        raise ValueError(f"`{what}` has no loss column(s) {missing}; available columns: {list(map(str, df.columns))}")
    Y = np.empty((len(losses), len(df)))
    for i, c in enumerate(losses):
        values = pd.to_numeric(df[c], errors="coerce").to_numpy(float)
        bad = (~np.isfinite(values) & df[c].notna().to_numpy()) | (values <= 0)
        if not allow_missing:
            bad |= ~np.isfinite(values)
        if bad.any():
            row = df.index[int(np.argmax(bad))]
            raise ValueError(f"`{what}` column {c!r} must hold positive losses; got {df[c].loc[row]!r} at row {row!r}")
        Y[i] = values
    W = np.isfinite(Y).astype(float)
    empty = [c for c, w in zip(losses, W) if not w.any()]
    if empty:
        raise ValueError(f"`{what}` column(s) {empty} have no measured loss")
    return r / r.sum(axis=1, keepdims=True), sizes, np.where(W > 0, Y, 1.0), W


def _combine(weights: Mapping[str, float], losses: list[str], values: np.ndarray) -> np.ndarray:
    """The weighted mean over a weighting's losses of per-loss values [L, P] -> [P]."""
    w = np.array([weights.get(c, 0.0) for c in losses])
    return (w @ values) / w.sum()


def _template(law: str, n: int, scale: float, key: Array) -> Any:
    """The registered law a method names (`laws.LAWS`), k=3; tokens are not an input here: CAMELData's data term
    is folded into each run's own count."""
    return law_template(law, key, n_datasets=n, n_domains=3, tokens=False, size_scale=scale)


def _law_fit(law, r, s, Y, W, restarts, key) -> Any:
    """One fit per loss: a [L, P] multi-target fit of the law's template."""
    scale = float(np.exp(np.mean(np.log(s))))
    return fit(_template(law, r.shape[1], scale, key), (r, s), Y, weights=W, key=key, restarts=restarts)


def _dml(r, s, Y, W, r_cand, target_size, restarts, key) -> np.ndarray:
    laws, skipped = DMLNested(n_domains=1, restarts=restarts).fit_nested(
        r, s, identical_rows(r), Y, W, target_size, key
    )
    out = np.array(jax.vmap(lambda law: law(jnp.asarray(r_cand)))(laws))
    groups = len(np.unique(identical_rows(r)))
    out[skipped == len(np.unique(groups))] = np.nan  # no mixture trained at 3 sizes for that loss
    return out


def _best_observed(r, s, Y, W, r_cand) -> tuple[np.ndarray, float]:
    """Each candidate's measured losses [L, C] at the largest trained size that holds the most candidates (NaN
    where a candidate was not trained there; the mean over repeats where it was trained more than once), and that
    size: the practitioner's rule "train the mixture that won at the largest size where they were compared"."""
    same = np.all(np.abs(r[:, None, :] - r_cand[None, :, :]) < 1e-6, axis=2)  # [P, C]
    sizes = np.unique(s)
    held = np.array([same[s == size].any(axis=0).sum() for size in sizes])
    at = float(sizes[held == held.max()].max())
    out = np.full((Y.shape[0], len(r_cand)), np.nan)
    for j in range(len(r_cand)):
        rows = same[:, j] & (s == at)
        if rows.any():
            w = W[:, rows]
            with np.errstate(invalid="ignore"):
                out[:, j] = np.where(w.sum(axis=1) > 0, (Y[:, rows] * w).sum(axis=1) / w.sum(axis=1), np.nan)
    return out, at
