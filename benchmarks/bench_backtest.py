"""Decision-backtest benchmark: a full backtest of one world (every method x 5 FLOPs budgets x 10 repeats).

Prints the time of the first call (compile included) and of a second call on a new world of the same family (the
compiled programs are reused), then tied CAMEL's cells alone against issue 29's target of <= 30 s per world after
compiling on 2 CPU cores, and the ratio to a baseline
measured in the same run: the same tied-CAMEL pipeline fitted cell by cell (one `fit_benchmarks` + `fit_pipeline`
+ `optimal_mixture` per (budget, repeat), the way a hand-written loop does it), timed on a few cells and scaled to
the 50 cells. Asserts nothing.

Usage: python benchmarks/bench_backtest.py [--repeats 10] [--baseline-cells 3]
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

import camel_jax as cj  # noqa: E402
from camel_jax import simulate  # noqa: E402

SIZES = (4.0, 5.0, 6.0, 7.0, 8.0, 10.0)


def budgets(world: simulate.World) -> list[float | None]:
    full = float(world.runs(cj.experiments.perturbed_mixtures(simulate.REFERENCE, 0.2), SIZES)["flops"].sum())
    return [f * full for f in (0.1, 0.2, 0.4, 0.7)] + [None]


def timed_backtest(seed: int, repeats: int, methods=cj.experiments.BACKTEST_METHODS) -> tuple[float, object]:
    world = simulate.make_world(jax.random.key(seed))
    t0 = time.perf_counter()
    table = cj.experiments.backtest(world, methods, key=jax.random.key(seed), budgets=budgets(world), repeats=repeats)
    return time.perf_counter() - t0, table


def baseline_cell(world: simulate.World, seed: int) -> float:
    """One (budget, repeat) cell of the tied-CAMEL method, fitted on its own."""
    runs = world.runs(cj.experiments.perturbed_mixtures(simulate.REFERENCE, 0.2), SIZES, noise=0.002,
                      key=jax.random.key(seed))
    key = jax.random.key(seed)
    t0 = time.perf_counter()
    losses = [f"loss_{v}" for v in world.validation_sets]
    names = list(world.benchmarks)
    fits = cj.fit_benchmarks(runs, losses=losses, benchmarks=[f"acc_{b}" for b in names], names=names, key=key,
                             restarts=4)  # fmt: skip
    data = world.mixture_data(runs, losses[0])
    law = cj.CAMEL.sample_init(key, n_datasets=5, n_domains=3, tied=True, capacity_exponent=3.0)
    fitted = cj.fit_pipeline(data, fits, cj.BENCHMARK_WEIGHTS["balanced"], law=law, key=key, restarts=4)
    jax.block_until_ready(cj.optimal_mixture(fitted.pipeline, 5, key=key, model_size=20.0).r)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--baseline-cells", type=int, default=3)
    args = parser.parse_args()
    print(f"camel-jax {cj.__version__}, jax {jax.__version__}, devices {jax.devices()}")
    cells = 5 * args.repeats
    first, _ = timed_backtest(0, args.repeats)
    second, table = timed_backtest(1, args.repeats)
    print(
        f"full backtest, {len(cj.experiments.BACKTEST_METHODS)} methods x 5 budgets x {args.repeats} repeats "
        f"({cells} cells per method):"
    )
    print(f"  first world {first:.1f} s (compile included); second world {second:.1f} s")
    print("  median capture by method (second world): " + ", ".join(
        f"{m} {v:.2f}" for m, v in table.groupby("method")["capture"].median().items()))  # fmt: skip
    camel_time, _ = timed_backtest(2, args.repeats, ["camel"])
    world = simulate.make_world(jax.random.key(3))
    baseline_cell(world, 0)  # compile
    per_cell = np.mean([baseline_cell(world, i + 1) for i in range(args.baseline_cells)])
    print(
        f"tied CAMEL alone: batched {camel_time:.1f} s for {cells} cells (target <= 30 s after compiling); "
        f"cell-by-cell loop {per_cell:.2f} s a cell -> {per_cell * cells:.1f} s; "
        f"ratio {per_cell * cells / camel_time:.1f}x"
    )


if __name__ == "__main__":
    main()
