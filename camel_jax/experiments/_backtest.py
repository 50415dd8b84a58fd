"""Does the pick win? Each method's recommended mixture, scored by the true score of a simulated world.

The paper's question (Li, Gu & Zhang 2026, Figure 1 and Tables 1-2) asked of a world whose truth is known: train
the small runs a design and a FLOPs budget allow, fit, choose the mixture for the target size, and measure the
regret (true optimum minus the true value of the pick) and the capture (the share of the achievable gain over the
reference mixture). Repeats draw fresh run noise and fresh runs; every (budget, repeat) of one method is a row of
one multi-target fit (0/1 weight masks over one table of runs, as `extrapolation_error` does), so a method
compiles once whatever the number of repeats and budgets, and every method sees the same noise and masks.

Bands and robust picks (`backtest(..., n_resamples=B, robust=..., level=0.95)`): with B > 0 every law method's
mixture laws are also refitted on B bootstrap resamples of the runs each cell trained (whole runs, within each
size; warm-started from the cell's fit; every cell, benchmark and resample one multi-target fit). `low` and `high`
are then the `level` percentile band of the score at the pick across those resamples and `covered` says
whether the true value lies in it. That band is the plain bootstrap's: the loss-to-benchmark laws are the cell's
point fits and no extrapolation calibration is added, so it measures how well such a band covers at the target.
`robust` ("mean" or ("quantile", q), needs B >= 2) makes each law method pick the mixture maximizing that
statistic of the score over its cell's resamples (`optimal_mixture`'s `robust`). Nested DML keeps its point
pick; `low`, `high` and `covered` are NaN without resamples and for dml, size-agnostic, best-observed and
callables.

The "adaptive" strategy (issue 16; the paper leaves adaptive allocation to future work) chooses its runs while
training them. In each (budget, repeat) it starts from the hourglass design at `seed` x budget, then spends the rest
in `rounds` tranches: fit the design law (`law`) with `n_resamples` bootstrap refits to the runs trained so far,
and add the greedy `next_runs` batch over the runs not yet trained within the tranche (score: the variance of the
recommended mixture's gain over the reference at the target that a run's outcome would remove, Cov(q, f_c)^2 /
(Var(f_c) + noise^2), per FLOP; noise: the rms residual of the cell's point pipeline). Tranche t spends at most
(budget - spent) / (rounds left); a round that finds nothing worth its cost leaves the FLOPs to the next, so the
strategy may end under budget (the `flops` column says). Every round is one batched fit over all cells, so the
design costs `rounds` x (one method's fits with resamples) and compiles once.
"""

from __future__ import annotations

import dataclasses
import inspect
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from jaxtyping import Array, ArrayLike

from .._deprecated import renamed_keywords, warn_renamed
from ..data._checks import DESIGN_WARNINGS
from ..fitting._calibrate import warm_starts
from ..fitting._fit import fit
from ..laws import law_template
from ..laws._base import count
from ..mixture._next import greedy_batch
from ..mixture._optimize import _bounds, _quantile_level, check_model_size, optimal_mixture, robust_mixtures
from ..mixture._pipeline import BENCHMARK_WEIGHTS, PROXY_OPTIONS, Pipeline, _rows, fit_benchmark_laws
from ._design import STRATEGIES, perturbed_mixtures, sample_design
from ._evaluate import DMLNested, identical_rows
from ._simulate import COOLDOWN_TOKENS, REFERENCE, World

BACKTEST_METHODS = ("camel", "camel-free", "sodm", "dml", "size-agnostic", "best-observed", "camel-data")
BACKTEST_STRATEGIES = (*STRATEGIES, "adaptive")
@dataclasses.dataclass(frozen=True)
class AdaptiveOptions:
    """Options of the "adaptive" strategy of `backtest` (frozen; checked when built).

    **Fields**: `law`, the law it designs with (a registered name: "camel" (tied), "camel-free", "camel-data" or
    "sodm"); `seed`, the hourglass seed design's share of the budget, in (0, 1]; `rounds`, the tranches chosen by
    `next_runs` after the seed; `n_resamples` (>= 2), the bootstrap refits each round scores candidates on.
    """

    law: str = "camel"
    seed: float = 0.25
    rounds: int = 3
    n_resamples: int = 16

    def __post_init__(self) -> None:
        if self.law not in ("camel", "camel-free", "camel-data", "sodm"):
            raise ValueError(f"`AdaptiveOptions.law` must be camel, camel-free, camel-data or sodm; got {self.law!r}")
        if isinstance(self.seed, bool) or not (isinstance(self.seed, float | int) and 0 < self.seed <= 1):
            raise ValueError(f"`AdaptiveOptions.seed` (the seed design's share of the budget) must be in (0, 1]; got "
                             f"{self.seed!r}")  # fmt: skip
        count(self.rounds, "AdaptiveOptions.rounds")
        count(self.n_resamples, "AdaptiveOptions.n_resamples", least=2)


ADAPTIVE = AdaptiveOptions()
"""The "adaptive" strategy's defaults (frozen; `backtest(adaptive=AdaptiveOptions(...))` replaces them)."""
BACKTEST_COLUMNS = (
    "world", "method", "strategy", "budget", "repeat", "n_runs", "flops", "regret", "capture", "true_value",
    "predicted_value", "low", "high", "covered",
)  # fmt: skip


class _AtTarget(eqx.Module):
    """A law of the mixture alone (nested DML, already at the target size) as a law of (r, M)."""

    law: Any

    def __call__(self, r: Array, size: Array) -> Array:
        return self.law(r)

    def structure(self) -> dict[str, Any]:
        return self.law.structure()


@dataclasses.dataclass(frozen=True)
class _Design:
    """The repeats' runs: mixtures r [P, n], sizes [P], FLOPs [P], noisy losses [R, P, V] and accuracies
    [R, P, B], and the 0/1 training masks {strategy: [nb, R, P]} under each budget."""

    r: np.ndarray
    size: np.ndarray
    flops: np.ndarray
    losses: np.ndarray
    accuracies: np.ndarray
    masks: dict[str, np.ndarray]
    budgets: np.ndarray
    columns: list[str]

    def frame(self, repeat: int, mask: np.ndarray, benchmarks: Sequence[str]) -> pd.DataFrame:
        """The training runs one (repeat, mask) sees, as a runs table (for user callables)."""
        table = pd.DataFrame(self.r, columns=self.columns)
        table["size"], table["flops"] = self.size, self.flops
        accuracies = {f"acc_{b}": self.accuracies[repeat, :, j] for j, b in enumerate(benchmarks)}
        return table.assign(**accuracies)[mask > 0].reset_index(drop=True)


@dataclasses.dataclass(frozen=True)
class _Setup:
    """Everything a method needs: the design, the score's benchmarks and weights, the bounds and the keys."""

    world: World
    design: _Design
    names: list[str]
    weights: dict[str, float]
    target_size: float
    region: dict[str, Any]
    reference: np.ndarray
    restarts: int
    key: Array
    n_resamples: int = 0
    robust: str | tuple[str, float] | None = None
    level: float = 0.95
    adaptive: AdaptiveOptions = ADAPTIVE


@renamed_keywords(objective="benchmark_weights")
def backtest(
    world: World,
    methods: Sequence[str | Callable[..., ArrayLike]] | Mapping[str, str | Callable[..., ArrayLike]] = BACKTEST_METHODS,
    *,
    key: Array,
    benchmark_weights: str | Mapping[str, float] = "balanced",
    target_size: float = 20.0,
    train_sizes: Sequence[float] = (4.0, 5.0, 6.0, 7.0, 8.0, 10.0),
    reference: ArrayLike | None = None,
    mixtures: ArrayLike | None = None,
    budgets: Sequence[float | None] | None = None,
    strategy: str | Mapping[str, str] = "rectangle",
    repeats: int = 10,
    noise: float = 0.002,
    max_shift: float | None = None,
    restarts: int = 4,
    name: str | None = None,
    n_resamples: int = 0,
    robust: str | tuple[str, float] | None = None,
    level: float = 0.95,
    adaptive: AdaptiveOptions | Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Backtest mixture-choosing methods on a world whose true score is known.

    **Arguments**:

    - `world`: a `simulate.World`, whose true score (`World.true_score`) judges every pick.
    - `key`: draws the runs' noise, the strategies' choices and every fit's starts; `repeats`: independent
      repeats (fresh noise and choices) of every (method, budget) cell.
    - `methods`: names from `BACKTEST_METHODS` or callables, as a sequence or as {label: method}. `"camel"` (tied
      CAMEL, k=3), `"camel-free"` (free profiles), `"camel-data"` (tied CAMELData, k=3, at the runs' one token
      count), `"sodm"` (SODMAdditive in size) and `"dml"` (nested, as the paper runs it) fit the end-to-end
      pipeline and optimize it at `target_size`; `"size-agnostic"` optimizes the tied CAMEL pipeline at the
      largest trained size instead; `"best-observed"` picks the trained mixture with the best observed score
      at the largest trained size (no law). A callable is called as `method(runs, benchmark_weights=weights,
      target_size=..., key=...)` (`weights` a dict {benchmark: w_b}) with the training runs it may see (a
      DataFrame with the mixture columns `r_<dataset>`, `size`, `flops` and `acc_<benchmark>`) and returns a
      mixture [n]; a callable written for the old keyword `objective=` still gets it, with a warning.
    - `benchmark_weights`: the weights of the score, a name of `BENCHMARK_WEIGHTS` or {benchmark: w_b} (the old
      keyword `objective=` is deprecated). `target_size`: the size to choose for.
    - The runs: `mixtures` (default: `perturbed_mixtures(reference, 0.2)`, the paper's 11) at `train_sizes`, with
      relative `noise` (the world's heteroscedastic scale applies) drawn afresh for every repeat.
      `reference` defaults to the paper's `REFERENCE` (5 datasets) or the uniform mixture.
    - `budgets`: FLOPs budgets (None: every run); for each, `strategy` (a name of `BACKTEST_STRATEGIES`, or {method
      label: strategy}) chooses the runs; methods with the same strategy see the same runs. `max_shift`: search (the
      truth too) within reference (1 +- max_shift). `restarts`: of every fit. `name`: the `world` column (default:
      the family). `n_resamples`, `robust`, `level`, and `adaptive` (options of the "adaptive" strategy, defaults
      `ADAPTIVE`): see the module docstring.

    **Returns**: one row per (method, budget, repeat), columns `BACKTEST_COLUMNS` then the pick `r_<dataset>`:
    `regret` = true optimum - true value of the pick (accuracy units, >= 0 up to the optimizer's tolerance),
    `capture` = (true value of the pick - that of the reference) / (optimum - reference), `predicted_value` the
    method's own estimate of its pick (NaN for callables and size-agnostic). Where a method cannot fit its law
    (nested DML with no mixture trained at 3 sizes) it keeps the reference.
    """
    resampling = _resampling(n_resamples, robust, level) | {"adaptive": _adaptive_options(adaptive)}  # checked
    setup, labelled = _setup(world, methods, key, benchmark_weights, target_size, train_sizes, reference, mixtures,
                             budgets, strategy, repeats, noise, max_shift, restarts, resampling)  # fmt: skip
    truth = _truth(setup)
    cache: dict[tuple[str, str], Any] = {}
    frames = [
        _method_rows(label, method, strat, setup, cache, truth, name) for label, (method, strat) in labelled.items()
    ]
    return pd.concat(frames, ignore_index=True)


def _method_rows(label, method, strategy, setup, cache, truth, name) -> pd.DataFrame:
    """One method's rows: its picks judged by the truth (the true score, (optimum, reference value))."""
    true_f, scale = truth
    with warnings.catch_warnings():  # small budgets fit few runs by design: the regret is the report
        warnings.filterwarnings("ignore", message=DESIGN_WARNINGS)
        picks, predicted, band = _run_method(method, setup, strategy, cache)
    true_values = np.asarray(jax.vmap(true_f)(jnp.asarray(picks)))
    return _rows_of(setup, label, strategy, picks, predicted, true_values, scale, band, name)


def _truth(setup: _Setup) -> tuple[Callable[[Array], Array], tuple[float, float]]:
    """The world's true score at the target, and (its optimum over the search region, its reference value)."""
    world = setup.world
    true_f = world.true_score(setup.target_size, setup.weights)
    key = jax.random.fold_in(setup.key, 1)
    truth = optimal_mixture(true_f, world.n_datasets, key=key, restarts=32, **setup.region)
    return true_f, (float(truth.value), float(true_f(jnp.asarray(setup.reference))))


def _resampling(n_resamples: int, robust: Any, level: float) -> dict[str, Any]:
    """The resampling arguments, checked."""
    count(n_resamples, "n_resamples", least=0)
    if robust is not None:
        if robust != "mean":
            _quantile_level(robust)  # raises for anything else
        if n_resamples < 2:
            raise ValueError(f"`robust` needs resamples to be robust over: give n_resamples >= 2; got {n_resamples}")
    if not 0 < level < 1:
        raise ValueError(f"`level` must be in (0, 1); got {level!r}")
    return {"n_resamples": int(n_resamples), "robust": robust, "level": float(level)}


def _setup(world, methods, key, benchmark_weights, target_size, train_sizes, reference, mixtures, budgets, strategy,
           repeats, noise, max_shift, restarts, resampling) -> tuple[_Setup, dict[str, tuple[Any, str]]]:  # fmt: skip
    """Checks every argument (before any compute) and builds the design."""
    if not isinstance(world, World):
        raise TypeError(f"`world` must be a camel_jax.simulate.World; got {type(world).__name__}")
    weights = _weights(benchmark_weights, world)
    labelled = _labelled(methods, strategy)
    count(repeats, "repeats")
    count(restarts, "restarts")
    size = check_model_size(target_size, "target_size")
    ref = _reference(world, reference)
    rows = perturbed_mixtures(ref, 0.2) if mixtures is None else np.asarray(mixtures, dtype=float)
    if rows.ndim != 2 or rows.shape[1] != world.n_datasets or np.any(rows < 0):
        raise ValueError(f"`mixtures` must be [P, {world.n_datasets}] non-negative rows; got shape {rows.shape}")
    if not (np.isfinite(noise) and noise >= 0):
        raise ValueError(f"`noise` must be finite and >= 0; got {noise!r}")
    _bounds(world.n_datasets, None, None, None if max_shift is None else ref, max_shift)  # infeasible: raises
    region = {} if max_shift is None else {"reference": ref, "max_shift": max_shift}
    budget_list = [None] if budgets is None else list(budgets)
    for b in budget_list:
        if b is not None and not (np.isfinite(b) and b > 0):
            raise ValueError(f"`budgets` must be FLOPs > 0 (or None for every run); got {b!r}")
    strategies = sorted({s for _, s in labelled.values()} - {"adaptive"})
    design = _design(world, rows, train_sizes, budget_list, strategies, repeats, noise, jax.random.fold_in(key, 0))
    names = [b for b in weights if weights[b] != 0]
    setup = _Setup(world, design, names, {b: weights[b] for b in names}, size, region, ref, restarts, key,
                   **resampling)  # fmt: skip
    if any(s == "adaptive" for _, s in labelled.values()):
        with warnings.catch_warnings():  # the seed designs are small by design
            warnings.filterwarnings("ignore", message=DESIGN_WARNINGS)
            adaptive = _adaptive_masks(setup)
        setup = dataclasses.replace(setup, design=dataclasses.replace(design, masks=design.masks | adaptive))
    return setup, labelled


def _adaptive_options(adaptive: AdaptiveOptions | Mapping[str, Any] | None) -> AdaptiveOptions:
    """The "adaptive" strategy's options: an `AdaptiveOptions`, or a mapping of some of its fields (the rest the
    defaults), checked."""
    if adaptive is None or isinstance(adaptive, AdaptiveOptions):
        return ADAPTIVE if adaptive is None else adaptive
    if not isinstance(adaptive, Mapping):
        raise TypeError(f"`adaptive` must be an AdaptiveOptions (or a mapping of its fields); got {adaptive!r}")
    known = [field.name for field in dataclasses.fields(AdaptiveOptions)]
    unknown = sorted(set(adaptive) - set(known))
    if unknown:
        raise ValueError(f"unknown `adaptive` options {unknown}; known: {sorted(known)}")
    return dataclasses.replace(ADAPTIVE, **adaptive)


def _adaptive_masks(setup: _Setup) -> dict[str, np.ndarray]:
    """{"adaptive": training masks [nb, R, P]}: in each (budget, repeat) the hourglass design at `seed` x budget,
    then `rounds` tranches of the rest (each round spends at most what is left / rounds left), every tranche the
    greedy `next_runs` batch chosen from the law's resampled fit to the runs trained so far."""
    d, options = setup.design, setup.adaptive
    nb, R = len(d.budgets), d.losses.shape[0]
    runs = pd.DataFrame({"size": d.size, "flops": d.flops})
    k = jax.random.fold_in(setup.key, 7)
    seeds = [[sample_design("hourglass", runs, options.seed * b, jax.random.fold_in(k, i)) for i in range(R)]
             for b in d.budgets]  # fmt: skip
    masks = np.asarray(seeds, dtype=float)
    masks[d.budgets >= d.flops.sum()] = 1.0  # nothing left to choose
    inner = dataclasses.replace(setup, n_resamples=options.n_resamples, robust=None)
    for left in range(options.rounds, 0, -1):
        tranche = (d.budgets[:, None] - masks @ d.flops) / left  # [nb, R]
        q, F, noise = _decision_ensemble(options.law, inner, masks)
        for c, (j, i) in enumerate(np.ndindex(nb, R)):
            free = np.flatnonzero(masks[j, i] == 0)
            if len(free) and tranche[j, i] > 0:
                chosen = greedy_batch(q[c], F[c][:, free], noise[c], d.flops[free], budget=tranche[j, i],
                                      batch=len(free), replace=False)  # fmt: skip
                masks[j, i, free[[p for p, _, _ in chosen]]] = 1.0
    return {"adaptive": masks}


def _decision_ensemble(law: str, setup: _Setup, masks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What `next_runs` scores, for every cell at once: the resampled gain of the recommended mixture (robust mean)
    over the reference at the target q [C, B], every run's resampled score F [C, B, P], and the noise sd of one
    run's score [C] (the rms residual of the cell's point pipeline over the runs it trained)."""
    r, size = jnp.asarray(setup.design.r), jnp.asarray(setup.design.size)
    pipelines, _, boot = _fit_pipelines(law, setup, masks, _benchmark_laws(setup, masks))
    assert boot is not None  # `law` is never nested DML and `setup` has resamples
    key = jax.random.fold_in(setup.key, 8)
    best = robust_mixtures(boot, key=key, model_size=setup.target_size, robust="mean", **setup.region)
    M, ref = jnp.asarray([setup.target_size]), jnp.asarray(setup.reference)[None, :]
    q = jax.vmap(lambda p, r: p.score(r[None, :], M)[:, 0] - p.score(ref, M)[:, 0])(boot, best.r)
    F = boot.score(r, size)  # [C, B, P]
    W = masks.reshape(-1, masks.shape[-1])
    residual = np.tile(_observed(setup), (masks.shape[0], 1)) - np.asarray(pipelines.score(r, size))
    noise = np.sqrt((W * residual**2).sum(axis=1) / np.maximum(W.sum(axis=1), 1.0))
    return np.asarray(q), np.asarray(F), noise


def _observed(setup: _Setup) -> np.ndarray:
    """The observed score of every run in every repeat [R, P]."""
    index = [setup.world.benchmarks.index(b) for b in setup.names]
    return setup.design.accuracies[:, :, index] @ np.array([setup.weights[b] for b in setup.names])


def _reference(world: World, reference: ArrayLike | None) -> np.ndarray:
    n = world.n_datasets
    if reference is None:
        return np.asarray(REFERENCE) if n == len(REFERENCE) else np.full(n, 1.0 / n)
    ref = np.asarray(reference, dtype=float)
    if ref.shape != (n,) or np.any(ref < 0) or abs(ref.sum() - 1) > 1e-9:
        raise ValueError(f"`reference` must be a mixture of {n} datasets (>= 0, summing to 1); got {ref}")
    return ref


def _weights(benchmark_weights: str | Mapping[str, float], world: World) -> dict[str, float]:
    if isinstance(benchmark_weights, str):
        if benchmark_weights not in BENCHMARK_WEIGHTS:
            raise ValueError(f"unknown benchmark weights {benchmark_weights!r}; choose one of "
                             f"{sorted(BENCHMARK_WEIGHTS)} or give {{benchmark: weight}}")  # fmt: skip
        return dict(BENCHMARK_WEIGHTS[benchmark_weights])
    weights = {b: float(w) for b, w in benchmark_weights.items()}
    unknown = [b for b in weights if b not in world.benchmarks]
    if unknown:
        raise ValueError(f"`benchmark_weights` name benchmarks {unknown} the world lacks; it has {world.benchmarks}")
    return weights


def _labelled(methods: Any, strategy: str | Mapping[str, str]) -> dict[str, tuple[Any, str]]:
    """{label: (method, strategy)} with every name and strategy checked."""
    items = list(methods.items()) if isinstance(methods, Mapping) else [(_label(m), m) for m in methods]
    if not items:
        raise ValueError("`methods` is empty")
    out = {}
    for label, method in items:
        if isinstance(method, str) and method not in BACKTEST_METHODS:
            raise ValueError(f"unknown method {method!r}; choose from {BACKTEST_METHODS} or pass a callable")
        if not (isinstance(method, str) or callable(method)):
            raise TypeError(f"method {label!r} must be a method name or a callable; got {type(method).__name__}")
        strat = strategy.get(label, "rectangle") if isinstance(strategy, Mapping) else strategy
        if strat not in BACKTEST_STRATEGIES:
            raise ValueError(f"unknown strategy {strat!r} for method {label!r}; choose one of {BACKTEST_STRATEGIES}")
        out[label] = (method, strat)
    return out


def _label(method: Any) -> str:
    return method if isinstance(method, str) else getattr(method, "__name__", type(method).__name__)


def _design(world, mixtures, train_sizes, budgets, strategies, repeats, noise, key) -> _Design:
    """Noisy runs for every repeat and the training masks of every (strategy, budget, repeat)."""
    sizes = np.asarray(train_sizes, dtype=float)
    k_noise, k_mask = jax.random.split(key)
    tables = [
        world.runs(mixtures, sizes, noise=noise, key=jax.random.fold_in(k_noise, i), tokens=COOLDOWN_TOKENS)
        for i in range(repeats)
    ]
    first = tables[0]
    losses = np.stack([t[[f"loss_{v}" for v in world.validation_sets]].to_numpy() for t in tables])
    accuracies = np.stack([t[[f"acc_{b}" for b in world.benchmarks]].to_numpy() for t in tables])
    runs = first[["size", "flops"]]
    masks = {}
    for s in strategies:
        masks[s] = np.stack(
            [
                np.stack(
                    [
                        np.ones(len(runs)) if b is None else sample_design(s, runs, b, jax.random.fold_in(k_mask, i))
                        for i in range(repeats)
                    ]
                )
                for b in budgets
            ]
        ).astype(float)
    total = float(first["flops"].sum())
    budget_arr = np.array([total if b is None else float(b) for b in budgets])
    columns = [f"r_{d}" for d in world.datasets]
    r = first[columns].to_numpy()
    return _Design(r, first["size"].to_numpy(), first["flops"].to_numpy(), losses, accuracies, masks, budget_arr,
                   columns)  # fmt: skip


_Band = tuple[np.ndarray, np.ndarray] | None


def _run_method(method: Any, setup: _Setup, strategy: str, cache: dict) -> tuple[np.ndarray, np.ndarray, _Band]:
    """(picks [nb * R, n], predicted values [nb * R], the band (low, high) of the score at the picks or
    None) of one method, rows budget-major."""
    masks = setup.design.masks[strategy]  # [nb, R, P]
    if callable(method):
        return (*_callable_picks(method, setup, masks), None)
    if method == "best-observed":
        return (*_best_observed(setup, masks), None)
    law = "camel" if method == "size-agnostic" else method
    if ("benchmarks", strategy) not in cache:
        cache[("benchmarks", strategy)] = _benchmark_laws(setup, masks)
    if (law, strategy) not in cache:
        cache[(law, strategy)] = _fit_pipelines(law, setup, masks, cache[("benchmarks", strategy)])
    pipelines, unfit, boot = cache[(law, strategy)]
    size = float(np.max(setup.design.size)) if method == "size-agnostic" else setup.target_size
    key = jax.random.fold_in(setup.key, 3)
    if boot is not None and setup.robust is not None:
        best = robust_mixtures(boot, key=key, model_size=size, robust=setup.robust, **setup.region)
    else:
        best = optimal_mixture(pipelines, setup.world.n_datasets, key=key, model_size=size, **setup.region)
    picks, values = np.array(best.r), np.array(best.value)
    picks[unfit], values[unfit] = setup.reference, np.nan  # no law could be fitted: keep the reference
    if method == "size-agnostic":  # its own prediction is for the size it optimized, not the target
        return picks, np.full(len(picks), np.nan), None
    return picks, values, None if boot is None else _band(boot, picks, setup)


def _band(boot: Pipeline, picks: np.ndarray, setup: _Setup) -> tuple[np.ndarray, np.ndarray]:
    """The `level` percentile band of each cell's resampled score at its pick: (low [C], high [C])."""
    size = jnp.asarray([setup.target_size])
    draws = jax.vmap(lambda p, r: p.score(r[None, :], size)[:, 0])(boot, jnp.asarray(picks))  # [C, B]
    tail = 100 * (1 - setup.level) / 2
    low, high = np.percentile(np.asarray(draws), [tail, 100 - tail], axis=1)
    return low, high


def _benchmark_laws(setup: _Setup, masks: np.ndarray) -> tuple[Any, np.ndarray]:
    """Loss-to-benchmark laws per (budget, repeat, benchmark), batched [nb, R, B], and their proxy losses
    [nb, R, B, P]; one fit per repeat (its own noisy losses), every budget and benchmark a target."""
    d = setup.design
    nb, R, P = masks.shape
    index = [setup.world.benchmarks.index(b) for b in setup.names]
    B = len(index)
    laws, proxies = [], []
    for i in range(R):
        Y = np.tile(d.accuracies[i][:, index].T, (nb, 1))  # budget-major: row j * B + b
        W = np.repeat(masks[:, i, :], B, axis=0)
        names = [f"{j}/{b}" for j in range(nb) for b in setup.names]
        fits = fit_benchmark_laws(d.losses[i], Y, W, names=names, key=jax.random.fold_in(setup.key, 2),
                                  restarts=setup.restarts)  # fmt: skip
        laws.append(fits.result.law)
        proxies.append(np.asarray(jax.vmap(lambda law, L=d.losses[i]: law.proxy_loss(jnp.asarray(L)))(fits.result.law)))

    def by_budget(*leaves: Array) -> Array:  # [R, nb * B, ...] -> [nb, R, B, ...]
        return jnp.swapaxes(jnp.stack(leaves).reshape((R, nb, B) + leaves[0].shape[1:]), 0, 1)

    # Each repeat's own losses set its laws' center; the pipelines hold them without one (B itself, the same
    # function), so that their programs (the ascent, the bands) do not depend on the world's losses and a new
    # world reuses them.
    laws = [law.in_units(None, laws[0].loss_spread) for law in laws]
    stacked = jax.tree.map(by_budget, *laws)
    proxy = np.swapaxes(np.stack(proxies).reshape(R, nb, B, P), 0, 1)
    return stacked, proxy


def _fit_pipelines(
    law: str, setup: _Setup, masks: np.ndarray, benchmarks: tuple[Any, np.ndarray]
) -> tuple[Pipeline, np.ndarray, Pipeline | None]:
    """The end-to-end pipelines of one mixture law, batched over (budget, repeat) [nb * R], which of them
    could not be fitted [nb * R] (nested DML without a mixture trained at 3 sizes), and with `n_resamples` the
    resampled pipelines [nb * R, B] (None for nested DML or without resamples)."""
    bench, proxy = benchmarks
    nb, R, P = masks.shape
    B = len(setup.names)
    Y = proxy.reshape(nb * R * B, P)
    W = np.repeat(masks.reshape(nb * R, P), B, axis=0)
    d = setup.design
    k = jax.random.fold_in(setup.key, 4)
    if law == "dml":
        groups = identical_rows(d.r)
        nested = DMLNested(n_domains=1, restarts=setup.restarts, options=PROXY_OPTIONS)
        nested_laws, skipped = nested.fit_nested(d.r, d.size, groups, Y, W, setup.target_size, k)
        fitted = _AtTarget(nested_laws)
        unfit = (skipped == len(np.unique(groups))).reshape(nb * R, B).any(axis=1)
    else:
        fitted = fit(_template(law, d.r.shape[1], k), (d.r, d.size), Y, weights=W, key=k, restarts=setup.restarts,
                     options=PROXY_OPTIONS).law  # fmt: skip
        unfit = np.zeros(nb * R, bool)
    per_target = jax.tree.map(lambda leaf: leaf.reshape((nb * R, B) + leaf.shape[1:]), fitted)
    loss_laws = _rows(jax.tree.map(lambda leaf: jnp.moveaxis(leaf, 1, 0), per_target), setup.names)
    bench_flat = jax.tree.map(lambda leaf: jnp.moveaxis(leaf.reshape((nb * R, B) + leaf.shape[3:]), 1, 0), bench)
    pipelines = Pipeline(loss_laws, _rows(bench_flat, setup.names), setup.weights)
    if law == "dml" or setup.n_resamples == 0:
        return pipelines, unfit, None
    return pipelines, unfit, _resampled_pipelines(law, setup, masks, Y, fitted, bench_flat)


def _resampled_pipelines(law: str, setup: _Setup, masks: np.ndarray, Y: np.ndarray, fitted: Any, bench: Any):
    """Every cell's mixture laws refitted on `n_resamples` bootstrap resamples of the runs it trained (whole runs
    within each size), as one multi-target fit with rows (cell, benchmark, resample), each warm-started at its
    cell's fit; the loss-to-benchmark laws stay the cell's. A Pipeline batched [C, B]."""
    d, nb_R, Bn, Bres = setup.design, masks.shape[0] * masks.shape[1], len(setup.names), setup.n_resamples
    counts = _cell_resamples(masks.reshape(nb_R, -1), d.size, Bres, jax.random.fold_in(setup.key, 5))  # [C, B, P]
    W = np.repeat(counts[:, None], Bn, axis=1).reshape(nb_R * Bn * Bres, -1)
    k = jax.random.fold_in(setup.key, 6)
    refit = fit(_template(law, d.r.shape[1], k), (d.r, d.size), np.repeat(Y, Bres, axis=0), weights=W, key=k,
                inits=warm_starts(fitted, Bres), options=PROXY_OPTIONS).law  # fmt: skip
    per_cell = jax.tree.map(lambda leaf: leaf.reshape((nb_R, Bn, Bres) + leaf.shape[1:]), refit)
    loss_laws = {b: jax.tree.map(lambda leaf, j=j: leaf[:, j], per_cell) for j, b in enumerate(setup.names)}
    bench_laws = {b: jax.tree.map(lambda leaf: jnp.repeat(leaf[:, None], Bres, axis=1), law_b)
                  for b, law_b in _rows(bench, setup.names).items()}  # fmt: skip
    return Pipeline(loss_laws, bench_laws, setup.weights)


def _cell_resamples(masks: np.ndarray, size: np.ndarray, n_resamples: int, key: Array) -> np.ndarray:
    """Bootstrap counts [C, B, P]: in each cell, the trained runs of each size drawn with replacement (as many
    as were trained at that size); untrained runs count 0."""
    rng = np.random.default_rng(np.asarray(jax.random.key_data(key)).ravel())
    counts = np.zeros((masks.shape[0], n_resamples, masks.shape[1]))
    for c, mask in enumerate(masks):
        for s in np.unique(size[mask > 0]):
            members = np.flatnonzero((mask > 0) & (size == s))
            draws = members[rng.integers(0, len(members), (n_resamples, len(members)))]
            for b in range(n_resamples):
                np.add.at(counts[c, b], draws[b], 1.0)
    return counts


def _template(law: str, n: int, key: Array) -> Any:
    """The registered law a method names (`laws.LAWS`: "camel" is tied CAMEL everywhere), as the paper fits it: k=3,
    capacity exponent 3; the runs share one token count, so CAMELData's data term is a size-free mixture effect."""
    scale = {"size_scale": 10.0} if law == "sodm" else {}
    return law_template(law, key, n_datasets=n, n_domains=3, capacity_exponent=3.0, tokens=False, **scale)


def _best_observed(setup: _Setup, masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The trained mixture with the best observed score at the largest size trained in each mask."""
    d = setup.design
    observed = _observed(setup)  # [R, P]
    picks, values = [], []
    for j in range(masks.shape[0]):
        for i in range(masks.shape[1]):
            trained = masks[j, i] > 0
            top = trained & (d.size == d.size[trained].max())
            row = np.flatnonzero(top)[np.argmax(observed[i, top])]
            picks.append(d.r[row])
            values.append(observed[i, row])
    return np.array(picks), np.array(values)


def _weights_keyword(method: Callable) -> str:
    """`benchmark_weights`, or `objective` (with a warning) for a method written before issue 33 that takes only
    the old keyword."""
    try:
        parameters = inspect.signature(method).parameters
    except (TypeError, ValueError):  # no signature to read (some builtins): call it the documented way
        return "benchmark_weights"
    if "objective" in parameters and "benchmark_weights" not in parameters:
        warn_renamed("a backtest method taking `objective=`", "one taking `benchmark_weights=`")
        return "objective"
    return "benchmark_weights"


def _callable_picks(method: Callable, setup: _Setup, masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    picks = []
    keyword = _weights_keyword(method)
    for j in range(masks.shape[0]):
        for i in range(masks.shape[1]):
            runs = setup.design.frame(i, masks[j, i], setup.world.benchmarks)
            key = jax.random.fold_in(setup.key, 1000 + j * masks.shape[1] + i)
            weights = {keyword: dict(setup.weights)}
            r = np.asarray(method(runs, **weights, target_size=setup.target_size, key=key), float)
            if r.shape != (setup.world.n_datasets,) or np.any(r < -1e-9) or abs(r.sum() - 1) > 1e-6:
                raise ValueError(f"method {_label(method)!r} returned {r}: not a mixture of {setup.world.n_datasets}")
            picks.append(r)
    return np.array(picks), np.full(len(picks), np.nan)


def _rows_of(setup, label, strategy, picks, predicted, true_values, scale, band, name) -> pd.DataFrame:
    """The method's rows; `scale` = (true optimum, true value of the reference); `band` = (low, high) or None."""
    optimum, ref_value = scale
    d = setup.design
    nb, R, _ = d.masks[strategy].shape
    masks = d.masks[strategy].reshape(nb * R, -1)
    gap = optimum - ref_value
    table = {
        "world": name if name is not None else setup.world.family,
        "method": label,
        "strategy": strategy,
        "budget": np.repeat(d.budgets, R),
        "repeat": np.tile(np.arange(R), nb),
        "n_runs": masks.sum(axis=1).astype(int),
        "flops": masks @ d.flops,
        "regret": optimum - true_values,
        "capture": (true_values - ref_value) / gap if gap > 0 else np.nan,
        "true_value": true_values,
        "predicted_value": predicted,
        "low": np.nan if band is None else band[0],
        "high": np.nan if band is None else band[1],
        "covered": np.nan if band is None else ((band[0] <= true_values) & (true_values <= band[1])).astype(float),
    }
    table |= {c: picks[:, j] for j, c in enumerate(d.columns)}
    return pd.DataFrame(table)
