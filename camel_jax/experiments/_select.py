"""Choose a law by held-out extrapolation error, never by its training objective (issue 15)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import equinox as eqx
import jax
import numpy as np
import pandas as pd
from jaxtyping import Array

from .._progress import progress_bar
from ..data._containers import MixtureData
from ..solver._options import FitOptions, Status
from ._evaluate import METRICS, extrapolation_error

SELECT_COLUMNS = ("law", "test_size", "n_train", "error", "converged", "rank")


def takes_tokens(law: Any) -> bool:
    """Whether a law takes the tokens input: it declares `tokens=True` in its structure (SODM, CAMELData)."""
    return bool(isinstance(law, eqx.Module) and hasattr(law, "structure") and law.structure().get("tokens", False))


def law_data(law: Any, data: MixtureData, name: str) -> MixtureData:
    """`data` as `law` takes it: without the tokens column for a law of (r, M), an error if tokens are missing."""
    if takes_tokens(law):
        if data.tokens is None:
            raise ValueError(f"law {name!r} takes tokens, but `data` has none: build MixtureData with `tokens`")
        return data
    if data.tokens is None:
        return data
    return eqx.tree_at(lambda d: d.tokens, data, None, is_leaf=lambda x: x is None)


def _held_out(data: MixtureData, holdout: str | Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """(training sizes, held-out sizes): the largest size, or the sizes given."""
    if data.size is None:
        raise ValueError("`select_law` scores held-out model sizes: build MixtureData with `size`")
    sizes = np.unique(np.asarray(data.size))
    if isinstance(holdout, str):
        if holdout != "largest_size":
            raise ValueError(f"`holdout` must be 'largest_size' or a sequence of sizes; got {holdout!r}")
        test = sizes[-1:]
    else:
        test = np.unique(np.asarray(holdout, dtype=float))
        missing = [s for s in test if not np.any(np.isclose(sizes, s))]
        if missing or test.size == 0:
            raise ValueError(f"`holdout` sizes {missing or list(test)} are not in the data; sizes: {sizes.tolist()}")
    train = sizes[sizes < test.min()]
    if train.size < 2:
        raise ValueError(
            f"`select_law` needs >= 2 training sizes below the held-out {test.tolist()}; the data hold {sizes.tolist()}"
        )
    return train, test


def select_law(
    laws: Mapping[str, Any],
    data: MixtureData,
    *,
    key: Array,
    holdout: str | Sequence[float] = "largest_size",
    metric: str = "mape",
    restarts: int = 16,
    options: FitOptions | None = None,
    progress: bool = False,
) -> tuple[str, pd.DataFrame]:
    """Fit each candidate law on every run below the held-out size(s) and score its predictions there.

    **Arguments**:

    - `laws`: {name: law template or `DMLNested`}. A law that declares `tokens=True` in its structure (CAMELData,
      SODM with tokens) is fitted on `(r, size, tokens)`; the others on `(r, size)`.
    - `data`: the runs, with sizes (and tokens where a candidate takes them).
    - `holdout`: `"largest_size"` (default) or the sizes to hold out; the law is fitted on every smaller size.
    - `key`: draws every fit's starts.
    - `metric`: "mape" (percent), "mae" or "rmse"; `restarts`, `options`: of every fit.
    - `progress`: draw a bar with the laws fitted so far on stderr (only when it is a terminal).

    **Returns**: (the winner's name, a frame with `SELECT_COLUMNS`): one row per (law, held-out size), `rank` 1 for
    the lowest mean error over the held-out sizes among the laws whose every held-out fit converged (`converged`:
    the best start met its stopping rule; for `DMLNested`, no mixture skipped). A law with an unconverged fit
    ranks after all of those (its error describes where its starts stopped, not an optimum of the law), and a law
    whose fit fails (non-finite error) ranks last.
    """
    if metric not in METRICS:
        raise ValueError(f"`metric` must be one of {METRICS}; got {metric!r}")
    if not laws:
        raise ValueError("`laws` is empty: pass {name: law template}")
    train, test = _held_out(data, holdout)
    inputs = {name: law_data(law, data, name) for name, law in laws.items()}
    mask = (np.asarray(data.size) < test.min()).astype(float)[None, :]
    frames = []
    for i, (name, law) in enumerate(laws.items()):
        if progress:
            progress_bar(i, len(laws), f"held-out fits ({name})", "laws")
        k = jax.random.fold_in(key, i)
        frame = extrapolation_error(law, inputs[name], train.tolist(), test.tolist(), masks=mask, key=k, metric=metric,
                                    restarts=restarts, options=options)  # fmt: skip
        frames.append(frame.assign(law=name))
    if progress:
        progress_bar(len(laws), len(laws), "held-out fits", "laws")
    table = pd.concat(frames, ignore_index=True)
    converged = table["converged"] if "converged" in table else pd.Series(np.nan, index=table.index, dtype=object)
    if "n_skipped" in table:  # the nested DML baseline: "converged" when no mixture was skipped
        converged = converged.where(table["n_skipped"].isna(), table["n_skipped"] == 0)
    table["converged"] = converged.astype(bool)
    mean = table.groupby("law", sort=False)["error"].mean()
    finished = table.groupby("law", sort=False)["converged"].all()
    order = sorted(mean.index, key=lambda name: (not np.isfinite(mean[name]), not finished[name], mean[name]))
    table["rank"] = table["law"].map({name: j + 1 for j, name in enumerate(order)})
    return str(order[0]), table[list(SELECT_COLUMNS) + [c for c in table if c not in SELECT_COLUMNS]]


def simplest_within(errors: Mapping[str, float], n_params: Mapping[str, int], best: str, se: float) -> str:
    """The one-standard-error rule: among the laws whose held-out error is within `se` of the best law's, the one
    with the fewest free parameters (ties: the lower error). Without a finite `se`, the best law."""
    if not np.isfinite(se):
        return best
    close = [name for name, e in errors.items() if np.isfinite(e) and e <= errors[best] + se]
    return min(close, key=lambda name: (n_params[name], errors[name]))


def target_failures(result: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per target (one for a fit of one), each [T] booleans: whether its best start did not meet its stopping rule,
    whether it did not or is degenerate, and whether it is degenerate (`FitResult.degenerate_by_target`, warnings
    silenced)."""
    import warnings

    best = np.atleast_1d(np.asarray(result.best_status))
    unconverged = ~np.isin(best, [Status.CONVERGED, Status.STALLED])
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        degenerate = np.array([bool(found) for found in result.degenerate_by_target()])
    return unconverged, unconverged | degenerate, degenerate


def held_out_rows(
    laws: Mapping[str, Any],
    inputs: Mapping[str, tuple[Any, ...]],
    y: Any,
    test: Any,
    *,
    key: Array,
    restarts: int = 16,
    options: FitOptions | Mapping[str, FitOptions | None] | None = None,
    progress: bool = False,
    weights: Any = None,
) -> tuple[str, pd.DataFrame]:
    """Fit each candidate law on the rows outside `test` and score its MAPE (%) on the rows in it: law choice by
    any held-out split (a token budget, a quarter of the mixtures), where `select_law` holds out model sizes.

    **Arguments**:

    - `laws`: {name: law template}; `inputs`: {name: the tuple that law is called on} (every tuple over the same
      rows); `y`: the targets [P], or [T, P] for T targets fitted together (one law for all, as `fit` does);
      `test`: booleans [P], the held-out rows (some, not all).
    - `key`: draws every fit's starts (`fold_in` by the law's position); `restarts`, `options`: of every fit
      (`options` may also be {name: FitOptions or None}, one per law; None: the law's defaults).
    - `progress`: draw a bar with the laws fitted so far on stderr (only when it is a terminal).
    - `weights`: [P] or [T, P], 0 where a target was not measured (left out of the fit and of the score).

    **Returns**: (the winner's name, a frame with `law, n_train, n_test, error, error_se, converged, degenerate,
    rank`): `rank` 1 for the lowest error among the laws whose fit converged and is not degenerate
    (`FitResult.degenerate`); the others rank after them, a non-finite error last. With T targets `error` is the
    mean of the targets' held-out MAPEs (each target's error counts alike, whatever its number of measured rows),
    `error_se` the standard error of that mean over the held-out points, `converged` that every target's best
    start converged, `degenerate` that some target's fit is, and `failed_share` the share of the targets whose
    best start did not converge or is degenerate (0 or 1 for one target).
    """
    import warnings

    from ..fitting._fit import fit

    test = np.asarray(test, dtype=bool)
    y = np.asarray(y, dtype=float)
    if test.ndim != 1 or test.shape != y.shape[-1:] or not test.any() or test.all():
        raise ValueError(f"`test` must mark some but not all of the {y.shape[-1]} rows; got {int(test.sum())} marked")
    measured = np.broadcast_to(True if weights is None else np.asarray(weights, float) > 0, y.shape)
    rows = []
    for i, (name, law) in enumerate(laws.items()):
        if progress:
            progress_bar(i, len(laws), f"held-out fits ({name})", "laws")
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")  # judged below: converged and degenerate are columns
            chosen = options.get(name) if isinstance(options, Mapping) else options
            result = fit(law, inputs[name], y, weights=(measured & ~test).astype(float),
                         key=jax.random.fold_in(key, i), restarts=restarts, options=chosen)  # fmt: skip
            pred = np.asarray(result.predict(*inputs[name]))
        scored = measured & test  # [P] or [T, P]
        with np.errstate(all="ignore"):
            ape = np.where(scored, 100.0 * np.abs(pred / y - 1.0), 0.0)
        counts = np.atleast_1d(scored.sum(-1))
        per_target = np.atleast_1d(ape.sum(-1))[counts > 0] / counts[counts > 0]  # targets with a held-out point
        error = float(np.mean(per_target)) if per_target.size else np.nan
        points = ape[scored]
        unconverged, failed, degenerate = target_failures(result)
        rows.append({
            "law": name, "n_train": int((~test).sum()), "n_test": int(test.sum()), "error": error,
            "error_se": float(np.std(points, ddof=1) / np.sqrt(points.size)) if points.size > 1 else np.nan,
            "converged": not unconverged.any(), "degenerate": bool(degenerate.any()),
            "failed_share": float(failed.mean()),
        })  # fmt: skip
    if progress:
        progress_bar(len(laws), len(laws), "held-out fits", "laws")
    table = pd.DataFrame(rows)
    order = sorted(range(len(table)), key=lambda j: (not np.isfinite(table["error"][j]), bool(table["degenerate"][j]),
                                                     not table["converged"][j], table["error"][j]))  # fmt: skip
    table["rank"] = 0
    for rank, j in enumerate(order):
        table.loc[j, "rank"] = rank + 1
    return str(table["law"][order[0]]), table.sort_values("rank").reset_index(drop=True)
