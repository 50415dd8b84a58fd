# ruff: noqa: E501
"""Compute-aware experiment design: FLOPs, perturbed mixtures, and the five sampling strategies.

A strategy is an explicit priority order over model sizes, visited in rounds while the budget allows. With sizes
indexed 0 (smallest) to S-1 and, for diamond and hourglass, a size's *level* its distance rank from the centre
(for S=6: sizes 2,3 are level 0, sizes 1,4 level 1, sizes 0,5 level 2; L is the largest level), round j visits:

| strategy            | sizes visited in round j (smallest first)       | shape of the counts after full rounds |
|---------------------|-------------------------------------------------|---------------------------------------|
| `rectangle`         | every size                                      | equal at every size                   |
| `triangle`          | sizes i <= j mod S                              | S, S-1, ..., 1 (most at small sizes)  |
| `inverted_triangle` | sizes i >= S-1 - (j mod S)                      | 1, 2, ..., S (most at large sizes)    |
| `diamond`           | sizes of level <= j mod (L+1)                   | most in the middle, expanding outward |
| `hourglass`         | sizes of level >= L - (j mod (L+1))             | most at both extremes, filling inward |

A visit adds one run at that size. A size with no unused mixture left is skipped; the first visit whose run costs
more than what is left of the budget ends the allocation (a strict priority order: a cheaper size later in the
order does not jump the queue, which would turn every strategy into a triangle at tight budgets). Allocation
also ends when a whole cycle of rounds adds nothing. The budget is never exceeded. (Li, Gu & Zhang 2026, Section "Sampling Strategies" and Appendix "Experiments with
Different Sampling Strategies".)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import jax
import numpy as np
import pandas as pd
from jaxtyping import Array, ArrayLike

from ..data._checks import check_key

STRATEGIES = ("rectangle", "triangle", "inverted_triangle", "diamond", "hourglass")


def flops(active_params: ArrayLike, tokens: ArrayLike) -> np.ndarray:
    """Training FLOPs by the paper's convention, 6 N D (N active parameters, D tokens); vectorized.

    **Arguments**:

    - `active_params`: N, active parameters per run; `tokens`: D, training tokens (broadcast together).

    **Returns**: the FLOPs, an array of the broadcast shape.
    """
    return 6.0 * np.asarray(active_params, dtype=float) * np.asarray(tokens, dtype=float)


# Sizes this large are parameter counts; below, the paper's size index M (active parameters ~1.47e5 M^3).
PARAMETER_COUNT_FLOOR = 1e4


def size_units(sizes: ArrayLike) -> str:
    """`"params"` when `sizes` are parameter counts (any >= `PARAMETER_COUNT_FLOOR`), else `"index"` (the paper's
    size index M, whose active parameters are `paper_active_params(M)`)."""
    return "params" if np.max(np.asarray(sizes, dtype=float)) >= PARAMETER_COUNT_FLOOR else "index"


def active_params(sizes: ArrayLike) -> np.ndarray:
    """Active parameters N of each size, in either unit of `size_units`: parameter counts as they are, a size index
    through the paper's architecture."""
    from ._simulate import paper_active_params

    sizes = np.asarray(sizes, dtype=float)
    return sizes if size_units(sizes) == "params" else np.asarray(paper_active_params(sizes), dtype=float)


def tokens_for_size(sizes: ArrayLike, tokens: ArrayLike, at: ArrayLike) -> np.ndarray:
    """Tokens at the sizes `at` along the runs' tokens-for-size line: log tokens regressed on log size over the runs
    (`sizes`, `tokens`); the runs' geometric-mean tokens when they hold one size."""
    log_size, log_tokens = np.log(np.asarray(sizes, float)), np.log(np.asarray(tokens, float))
    slope = np.polyfit(log_size, log_tokens, 1)[0] if np.ptp(log_size) > 0 else 0.0
    intercept = float(np.mean(log_tokens - slope * log_size))
    return np.exp(intercept + slope * np.log(np.asarray(at, float)))


def perturbed_mixtures(reference: ArrayLike | Sequence[float], factor: float = 0.2) -> np.ndarray:
    """The reference mixture and, for each dataset j, r_j -> (1 +- factor) r_j with the other datasets rescaled
    proportionally so that the row sums to 1: 2n+1 rows (paper Appendix "Details of Datasets").

    Row order: reference, then (j up, j down) for j = 0..n-1.

    **Arguments**:

    - `reference`: the reference mixture [n]; `factor`: the relative perturbation (0.2: the paper's +-20%).

    **Returns**: the mixtures [2n+1, n].
    """
    r = np.asarray(reference, dtype=float)
    if r.ndim != 1 or np.any(r < 0) or abs(r.sum() - 1) > 1e-9:
        raise ValueError(f"`reference` must be a mixture (1-D, >= 0, summing to 1); got {r}")
    if not 0 < factor:
        raise ValueError(f"`factor` must be > 0; got {factor}")
    rows = [r]
    for j in range(len(r)):
        for sign in (1.0, -1.0):
            new_j = r[j] * (1 + sign * factor)
            if not 0 <= new_j <= 1:
                raise ValueError(
                    f"perturbing dataset {j} by {sign * factor:+g} gives weight {new_j:.4g}, outside [0, 1]"
                )
            rest = 1.0 - r[j]
            if rest <= 0:
                raise ValueError(f"dataset {j} holds the whole reference mixture: nothing to rescale")
            row = r * (1.0 - new_j) / rest
            row[j] = new_j
            rows.append(row)
    return np.stack(rows)


def _levels(n_sizes: int) -> np.ndarray:
    centre = (n_sizes - 1) / 2
    distance = np.abs(np.arange(n_sizes) - centre)
    return np.unique(distance, return_inverse=True)[1]


def _rounds(strategy: str, n_sizes: int) -> Iterator[list[int]]:
    """The sizes visited in each round, forever (the caller stops)."""
    levels = _levels(n_sizes)
    top = int(levels.max())
    j = 0
    while True:
        if strategy == "rectangle":
            yield list(range(n_sizes))
        elif strategy == "triangle":
            yield [i for i in range(n_sizes) if i <= j % n_sizes]
        elif strategy == "inverted_triangle":
            yield [i for i in range(n_sizes) if i >= n_sizes - 1 - j % n_sizes]
        elif strategy == "diamond":
            yield [i for i in range(n_sizes) if levels[i] <= j % (top + 1)]
        elif strategy == "hourglass":
            yield [i for i in range(n_sizes) if levels[i] >= top - j % (top + 1)]
        else:  # pragma: no cover - checked by the caller
            raise ValueError(strategy)
        j += 1


def allocate(
    strategy: str,
    sizes: ArrayLike | Sequence[float],
    cost_per_run: ArrayLike,
    budget: float,
    max_per_size: int | ArrayLike,
) -> np.ndarray:
    """Number of runs per size under a compute `budget` (same units as `cost_per_run`, e.g. FLOPs).

    See the module docstring for the priority orders.

    **Arguments**:

    - `strategy`: a name of `STRATEGIES`; `sizes`: the S sizes in increasing order.
    - `cost_per_run`: [S], the cost of one run at each size; `budget`: the compute to spend.
    - `max_per_size`: (int or [S]) the mixtures available at each size.

    **Returns**: the number of runs at each size, an int array [S].
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of {STRATEGIES}")
    sizes_arr = np.asarray(sizes, dtype=float)
    S = len(sizes_arr)
    if S == 0 or not np.all(np.isfinite(sizes_arr)) or np.any(np.diff(sizes_arr) <= 0):
        repeated = sizes_arr[:-1][np.diff(sizes_arr) == 0]
        hint = f" ({repeated[0]:g} is repeated)" if len(repeated) else ""
        raise ValueError(f"`sizes` must be finite, non-empty and strictly increasing{hint}; got {sizes_arr}")
    cost = np.broadcast_to(np.asarray(cost_per_run, dtype=float), (S,))
    if not np.all(np.isfinite(cost) & (cost > 0)):
        bad = int(np.argmin(np.isfinite(cost) & (cost > 0)))
        raise ValueError(
            f"`cost_per_run` must be finite and > 0 for every size; size {sizes_arr[bad]:g} costs {cost[bad]}"
        )
    try:
        raw_cap = np.broadcast_to(np.asarray(max_per_size, dtype=float), (S,))
    except (TypeError, ValueError):
        raise ValueError(f"`max_per_size` must be an integer or one per size ({S}); got {max_per_size!r}") from None
    if not np.all(np.isfinite(raw_cap)) or np.any(raw_cap != np.round(raw_cap)) or np.any(raw_cap < 0):
        raise ValueError(f"`max_per_size` must be whole numbers of runs >= 0; got {max_per_size!r}")
    cap = raw_cap.astype(int)
    if isinstance(budget, bool) or not isinstance(budget, int | float | np.integer | np.floating):
        raise TypeError(f"`budget` must be a number (e.g. 1e21); got {type(budget).__name__} {budget!r:.40}")
    if not (np.isfinite(budget) and budget >= 0):
        raise ValueError(f"`budget` must be finite and >= 0; got {budget}")
    counts = np.zeros(S, dtype=int)
    left = float(budget)
    rounds = _rounds(strategy, S)
    cycle = S if strategy in ("triangle", "inverted_triangle") else int(_levels(S).max()) + 1
    idle = 0
    while idle < max(cycle, 1):
        added = False
        for i in next(rounds):
            if counts[i] >= cap[i]:
                continue
            if cost[i] > left:
                return counts
            counts[i] += 1
            left -= cost[i]
            added = True
        idle = 0 if added else idle + 1
    return counts


def sample_design(
    strategy: str, runs: pd.DataFrame, budget: float, key: Array, *, size: str = "size", cost: str = "flops"
) -> np.ndarray:
    """Concrete runs for a strategy: a 0/1 mask over the rows of `runs`.

    The allocation comes from `allocate` with each size's cost (the `cost` column, constant per size) and
    number of available rows; the rows at each size are then drawn uniformly without replacement with `key`.

    **Arguments**:

    - `strategy`: a name of `STRATEGIES`; `runs`: the candidate runs (not modified); `budget`: in `cost` units.
    - `key`: draws the rows at each size; `size`, `cost`: the column names of the size and the cost.

    **Returns**: a 0/1 int mask over the rows of `runs`.
    """
    check_key(key)
    for column in (size, cost):
        if column not in runs.columns:
            raise ValueError(f"column {column!r} not found in `runs`; available: {list(runs.columns)}")
    sizes = np.sort(runs[size].unique())
    per_size = runs.groupby(size)[cost]
    varying = (per_size.max() - per_size.min()).abs() > 1e-9 * per_size.max().abs()  # beyond rounding
    if varying.any():
        s = varying.idxmax()
        low, high = per_size.min()[s], per_size.max()[s]
        raise ValueError(
            f"column {cost!r} varies within size {s:g} ({low:g} to {high:g}): a design allocates runs by size, so each "
            "size needs one cost per run; split the sizes or make their costs equal"
        )
    costs = np.array([runs.loc[runs[size] == s, cost].max() for s in sizes])
    available = np.array([(runs[size] == s).sum() for s in sizes])
    counts = allocate(strategy, sizes, costs, budget, available)
    mask = np.zeros(len(runs), dtype=int)
    for s, n, k in zip(sizes, counts, jax.random.split(key, len(sizes))):
        rows = np.flatnonzero(runs[size].to_numpy() == s)
        chosen = rows[np.asarray(jax.random.permutation(k, len(rows)))[:n]]
        mask[chosen] = 1
    return mask
