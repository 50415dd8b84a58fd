"""Replay a real swarm as if its runs were trained one batch at a time (issue 60).

A published table of training runs (the pool) and a few runs at a larger size (the held-out decision) are taken as
they are. A method reveals pool runs under a FLOPs budget (6 N D, or any cost column): `"next"` one batch at a time,
each chosen by `next_runs` from the runs not yet revealed, fitted on what was revealed so far; `"gradient"` likewise,
but each batch designed as continuous (mixture, size) by `continuous_next_runs(score="band")` (the fit's implicit
band of the gain) and every designed run rounded to the nearest run not yet revealed (`"gradient-ensemble"`: the
bootstrap ensemble's score); `"random"` in a random order; a name of `STRATEGIES` by the paper's static allocation
over sizes. After each step the law is fitted on the revealed runs and the decision is scored against what the
whole table says: the held-out error at the held-out size, the rank (1 = best) of the chosen mixture among the
held-out runs, the regret of that choice (its measured loss minus the best one), and the rank correlation of the
predicted and measured held-out losses.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
import pandas as pd
from jaxtyping import Array

from ..fitting._bootstrap import bootstrap
from ..fitting._fit import fit
from ..laws._registry import law_template
from ..mixture._continuous_next import continuous_next_runs
from ..mixture._next import next_runs
from ._design import STRATEGIES, sample_design
from ._observed import spearman

REPLAY_COLUMNS = ("method", "repeat", "step", "spent", "n_runs", "error", "rank", "regret", "spearman", "converged")


@dataclasses.dataclass(frozen=True)
class ReplayTable:
    """A swarm to replay: the pool of runs that may be revealed and the held-out runs that score the decision.

    **Fields**: `r` [P, n], `size` [P], `y` [P] (the loss, lower is better), `cost` [P] (FLOPs) of the pool;
    `r_test` [C, n], `y_test` [C] at the one held-out size `size_test`; `names`: the mixture columns."""

    r: np.ndarray
    size: np.ndarray
    y: np.ndarray
    cost: np.ndarray
    r_test: np.ndarray
    y_test: np.ndarray
    size_test: float
    names: tuple[str, ...]

    def frame(self) -> pd.DataFrame:
        """The pool as a runs table (named mixture columns, `size`, `flops`), row i = pool run i."""
        table = pd.DataFrame(self.r, columns=list(self.names))
        return table.assign(size=self.size, flops=self.cost)


class _Fitter:
    """One law fitted to the revealed runs as a 0/1 weight mask over the whole pool: one compiled program for
    every step, method and repeat."""

    def __init__(self, table: ReplayTable, law: str, restarts: int, n_resamples: int) -> None:
        self.table, self.restarts, self.n_resamples = table, restarts, n_resamples
        scale = float(np.exp(np.mean(np.log(table.size))))
        self.template = law_template(law, jax.random.key(0), n_datasets=table.r.shape[1], n_domains=3,
                                     tokens=False, size_scale=scale)  # fmt: skip
        self.inputs = (np.asarray(table.r), np.asarray(table.size, float))
        self.seconds = {"fit": 0.0, "bootstrap": 0.0, "next_runs": 0.0, "gradient": 0.0}  # wall-clock, for the log
        self.calls = {"fit": 0, "bootstrap": 0, "next_runs": 0, "gradient": 0}
        self.steps = 100  # the gradient design's ascent steps

    def _timed(self, what: str, start: float) -> None:
        self.seconds[what] += time.perf_counter() - start
        self.calls[what] += 1

    def fit(self, mask: np.ndarray, key: Array) -> Any:
        start = time.perf_counter()
        result = fit(self.template, self.inputs, self.table.y, weights=mask.astype(float), key=key,
                     restarts=self.restarts, names=self.table.names)  # fmt: skip
        jax.block_until_ready(result.law)
        self._timed("fit", start)
        return result

    def score(self, result: Any) -> dict[str, float]:
        t = self.table
        predicted = np.asarray(result.predict(t.r_test, np.full(len(t.y_test), t.size_test)))
        chosen = int(np.argmin(predicted))
        return {
            "error": float(100 * np.mean(np.abs(predicted - t.y_test) / t.y_test)),
            "rank": float(1 + np.sum(t.y_test < t.y_test[chosen])),
            "regret": float(t.y_test[chosen] - t.y_test.min()),
            "spearman": spearman(predicted, t.y_test) if len(t.y_test) > 2 else float("nan"),
            "converged": float(np.all(np.asarray(result.best_status) <= 1)),
        }

    def _noise(self, result: Any, mask: np.ndarray) -> float:
        residual = np.asarray(self.table.y) - np.asarray(result.predict(*self.inputs))
        return float(np.sqrt(np.average(residual**2, weights=mask.astype(float))))

    def _bootstrap(self, result: Any, mask: np.ndarray, key: Array) -> Any:
        start = time.perf_counter()
        boot = bootstrap(result.law, self.inputs, self.table.y, key=key, n_resamples=self.n_resamples,
                         inits=result.best_laws(min(4, self.restarts)), weights=mask.astype(float),
                         progress=False)  # fmt: skip
        jax.block_until_ready(boot.laws)
        self._timed("bootstrap", start)
        return boot

    def gradient_batch(self, result: Any, mask: np.ndarray, budget: float, batch: int, key: Array,
                       score: str = "band") -> np.ndarray:  # fmt: skip
        """The pool rows nearest to the runs `continuous_next_runs` designs (mixture and size continuous, at the
        sizes not yet fully revealed, each at its median cost there), among those not yet revealed, in its order,
        while the budget allows. Nearest: the smallest L1 distance of the mixtures plus |log size ratio|."""
        t = self.table
        hidden = ~mask.astype(bool)
        sizes = np.unique(t.size[hidden])
        costs = np.asarray([np.median(t.cost[hidden & (t.size == s)]) for s in sizes])
        fitted = result if score == "band" else self._bootstrap(result, mask, key)
        start = time.perf_counter()
        # each dataset at least its smallest share in the pool: the design stays where the table has runs
        floor = float(min(np.min(t.r), 0.5 / t.r.shape[1]))
        design = continuous_next_runs(fitted, sizes, costs, target_size=t.size_test, noise=self._noise(result, mask),
                                      key=key, batch=batch, budget=budget, steps=self.steps, score=score,
                                      reference=np.mean(t.r, axis=0) if score == "band" else None,
                                      min_share=floor if score == "band" else 0.0)  # fmt: skip
        self._timed("gradient", start)
        if not len(design):
            return np.zeros(0, int)
        free, take, spent = hidden.copy(), [], 0.0
        for r, s in zip(design.iloc[:, : t.r.shape[1]].to_numpy(float), design["size"].to_numpy(float)):
            distance = np.abs(t.r - r).sum(axis=1) + np.abs(np.log(t.size / s))
            distance[~free | (spent + t.cost > budget * (1 + 1e-12))] = np.inf
            i = int(np.argmin(distance))
            if np.isfinite(distance[i]):
                take.append(i)
                free[i] = False
                spent += float(t.cost[i])
        return np.asarray(take, int)

    def next_batch(self, result: Any, mask: np.ndarray, budget: float, batch: int, key: Array) -> np.ndarray:
        """The pool rows `next_runs` chooses among those not yet revealed (bootstrap of the current fit)."""
        t = self.table
        noise = self._noise(result, mask)
        boot = self._bootstrap(result, mask, key)
        start = time.perf_counter()
        candidates = t.frame()[~mask.astype(bool)]
        chosen = next_runs(boot, candidates, budget=budget, target_size=t.size_test, key=key, batch=batch,
                           replace=False, noise=noise, mixture=list(t.names))  # fmt: skip
        self._timed("next_runs", start)
        return chosen.index.to_numpy()


def _prefix_within(order: np.ndarray, cost: np.ndarray, budget: float) -> np.ndarray:
    """The runs of `order` taken while the budget allows (a run that does not fit is skipped)."""
    take, spent = [], 0.0
    for i in order:
        if spent + cost[i] <= budget * (1 + 1e-12):
            take.append(i)
            spent += cost[i]
    return np.asarray(take, int)


def replay(
    table: ReplayTable,
    *,
    key: Array,
    methods: Sequence[str] = ("next", "random", *STRATEGIES),
    fractions: Sequence[float] = (0.1, 0.2, 0.3, 0.5),
    repeats: int = 3,
    law: str = "camel-tied",
    restarts: int = 8,
    n_resamples: int = 16,
    seed_fraction: float = 0.1,
    round_fraction: float = 0.1,
    batch: int = 8,
    log: Any = None,
    only: Sequence[int] | None = None,
    steps: int = 100,
) -> pd.DataFrame:
    """Replay `table` with each method at each budget (a share of the whole pool's cost), `repeats` times.

    **Arguments**:

    - `table`: a `ReplayTable`; `key`: every random draw (orders, allocations, fits, bootstraps).
    - `methods`: `"next"` (a random seed of `seed_fraction`, then rounds of `round_fraction` of the pool's cost, at
      most `batch` runs each, chosen by `next_runs` from a bootstrap of `n_resamples` refits), `"gradient"` and
      `"gradient-ensemble"` (the same rounds, each designed by `continuous_next_runs` with score "band" or
      "ensemble" and rounded to the nearest runs not yet revealed), `"random"`, and names of `STRATEGIES`.
    - `fractions`: the budgets of the static methods and where the curves are read; `law`: a registered law name.
    - `only`: run only these repeats (of `repeats`, with the same keys as the whole run), so that repeats can run in
      separate processes and their rows be concatenated; `steps`: the gradient design's ascent steps.

    **Returns**: a DataFrame with `REPLAY_COLUMNS`, one row per fit: `step` is the budget fraction (static methods)
    or the round (next); `spent` the share of the pool's cost revealed. The whole table (`method` "full table") is
    one row per repeat.
    """
    fitter = _Fitter(table, law, restarts, n_resamples)
    fitter.steps = steps
    total = float(np.sum(table.cost))
    pool = table.frame().assign(alloc=table.cost)
    rows: list[dict[str, Any]] = []

    def record(method: str, repeat: int, step: float, mask: np.ndarray, result: Any) -> None:
        rows.append({"method": method, "repeat": repeat, "step": step, "spent": float(table.cost[mask].sum() / total),
                     "n_runs": int(mask.sum()), **fitter.score(result)})  # fmt: skip

    for repeat, k in enumerate(jax.random.split(key, repeats)):
        if only is not None and repeat not in only:
            continue
        k_order, k_fit, k_next, k_static = jax.random.split(k, 4)
        full = np.ones(len(table.y), bool)
        record("full table", repeat, 1.0, full, fitter.fit(full, k_fit))
        order = np.asarray(jax.random.permutation(k_order, len(table.y)))
        for method in methods:
            t0 = time.perf_counter()
            if method in ADAPTIVE:
                rounds = (seed_fraction * total, max(fractions) * total, round_fraction * total, batch)
                choose = ADAPTIVE[method](fitter)
                _replay_next(fitter, table, order, rounds, k_fit, k_next,
                             lambda *a, r=repeat, m=method: record(m, r, *a), choose)  # fmt: skip
            else:
                for f, kf in zip(fractions, jax.random.split(k_static, len(fractions))):
                    mask = np.zeros(len(table.y), bool)
                    if method == "random":
                        mask[_prefix_within(order, table.cost, f * total)] = True
                    elif method in STRATEGIES:
                        mask = sample_design(method, pool, f * total, kf, cost="alloc").astype(bool)
                    else:
                        known = [*ADAPTIVE, "random", *STRATEGIES]
                        raise ValueError(f"unknown method {method!r}; choose one of {known}")
                    if mask.sum() == 0:
                        continue
                    record(method, repeat, f, mask, fitter.fit(mask, k_fit))
            if log is not None:
                spent = ", ".join(f"{w} {fitter.seconds[w]:.1f} s / {fitter.calls[w]}" for w in fitter.seconds)
                log(f"  repeat {repeat} {method}: {time.perf_counter() - t0:.1f} s (so far, time / calls: {spent})")
    return pd.DataFrame(rows, columns=list(REPLAY_COLUMNS))


ADAPTIVE = {
    "next": lambda fitter: fitter.next_batch,
    "gradient": lambda fitter: fitter.gradient_batch,
    "gradient-ensemble": lambda fitter: lambda *a: fitter.gradient_batch(*a, score="ensemble"),
}


def _replay_next(fitter: Any, table: ReplayTable, order: np.ndarray, rounds: tuple[float, float, float, int],
                 k_fit: Array, k_next: Array, record: Any, choose: Any = None) -> None:  # fmt: skip
    """One repeat of an adaptive method: a random seed of `rounds[0]` of cost, then rounds of at most `rounds[2]` of
    cost (at most `rounds[3]` runs) chosen by `choose(result, mask, budget, batch, key)` (default `next_runs`)
    until `rounds[1]` is spent; each fit `record(step, mask, result)`."""
    choose = fitter.next_batch if choose is None else choose
    seed, limit, per_round, batch = rounds
    mask = np.zeros(len(table.y), bool)
    mask[_prefix_within(order, table.cost, seed)] = True
    step, keys = 0, iter(jax.random.split(k_next, 1000))
    while True:
        result = fitter.fit(mask, k_fit)
        record(step, mask, result)
        left = limit - float(table.cost[mask].sum())
        if left <= 0 or mask.all():
            break
        budget = min(per_round, left)
        chosen = choose(result, mask, budget, batch, next(keys))
        if len(chosen) == 0:  # nothing informative fits the round: reveal in random order instead
            rest = np.asarray([i for i in order if not mask[i]])
            chosen = _prefix_within(rest, table.cost, budget)
            if len(chosen) == 0:
                break
        mask[chosen] = True
        step += 1


def replay_curve(rows: pd.DataFrame, fractions: Sequence[float], metric: str) -> pd.DataFrame:
    """Each method's `metric` at each budget fraction: per repeat, the last fit whose revealed runs cost at most that
    share of the pool; then the median and the 10%-90% band over repeats (columns `median`, `low`, `high`)."""
    out = []
    for (method, repeat), group in rows[rows["method"] != "full table"].groupby(["method", "repeat"]):
        for f in fractions:
            within = group[group["spent"] <= f + 1e-9]
            if method not in ADAPTIVE:
                within = within[np.isclose(within["step"], f)]
            if len(within):
                out.append({"method": method, "repeat": repeat, "fraction": f, metric: within.iloc[-1][metric],
                            "spent": within.iloc[-1]["spent"]})  # fmt: skip
    full = rows[rows["method"] == "full table"]
    out += [{"method": "full table", "repeat": r, "fraction": 1.0, metric: v, "spent": 1.0}
            for r, v in zip(full["repeat"], full[metric])]  # fmt: skip
    frame = pd.DataFrame(out)
    grouped = frame.groupby(["method", "fraction"])
    return pd.DataFrame({
        "median": grouped[metric].median(),
        "low": grouped[metric].quantile(0.1),
        "high": grouped[metric].quantile(0.9),
        "spent": grouped["spent"].mean(),
        "repeats": grouped[metric].size(),
    })  # fmt: skip
