"""The decision-backtest study behind the README's table: every method on many worlds of one zoo family.

For each world (seed 0..N-1): `cj.experiments.backtest` with every method of `cj.experiments.BACKTEST_METHODS`, five
FLOPs budgets (10%, 20%, 40%, 70% and 100% of the paper's 66-run design), CAMEL on the hourglass strategy and the
baselines on the
rectangle (the paper's Figure 1 protocol), at M=20. Prints per-world progress and, at the end, the mean regret
(accuracy points) and median capture per method with standard errors over worlds; writes every row to --out.

With `--resamples B` every law method's cells are also refitted on B bootstrap resamples (`backtest`'s
`n_resamples`): the summary adds the coverage of the pick's nominal 95% band, and `--robust mean|q25|q10` makes each
law method pick the mixture maximizing the mean (or the quantile) of the score over its resamples. The same
seeds give the same runs and point fits, so two runs that differ only in `--robust` are paired.

Usage: python benchmarks/study_backtest.py [--family capacity_data] [--worlds 20] [--repeats 6]
       [--weights balanced] [--max-shift 0.2] [--fractions 0.1,0.2,0.4,0.7,1] [--methods camel,sodm]
       [--resamples 20] [--robust mean] [--out backtest.csv]
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np
import pandas as pd

jax.config.update("jax_enable_x64", True)

import camel_jax as cj  # noqa: E402
from camel_jax import simulate  # noqa: E402

FRACTIONS = (0.1, 0.2, 0.4, 0.7, 1.0)
SIZES = (4.0, 5.0, 6.0, 7.0, 8.0, 10.0)


ROBUST = {"none": None, "mean": "mean", "q25": ("quantile", 0.25), "q10": ("quantile", 0.1)}


def one_world(family: str, seed: int, repeats: int, weights: str, max_shift: float | None,
              fractions=FRACTIONS, methods=cj.experiments.BACKTEST_METHODS, resamples: int = 0,
              robust: str = "none") -> pd.DataFrame:  # fmt: skip
    world = simulate.make_world(jax.random.key(seed), family)
    full = float(world.runs(cj.experiments.perturbed_mixtures(simulate.REFERENCE, 0.2), SIZES)["flops"].sum())
    table = cj.experiments.backtest(
        world,
        methods,
        key=jax.random.key(100 + seed),
        benchmark_weights=weights,
        budgets=[f * full for f in fractions],
        strategy={"camel": "hourglass", "camel-free": "hourglass"},
        repeats=repeats,
        max_shift=max_shift,
        n_resamples=resamples,
        robust=ROBUST[robust],
    )
    return table.assign(seed=seed, fraction=(table["budget"] / full).round(2))


def summarize(table: pd.DataFrame) -> pd.DataFrame:
    """Per method: regret (points) and capture, averaged within each world, then mean and standard error over
    worlds; the share of worlds where the method's mean capture beats best-observed's."""
    per_world = table.groupby(["method", "seed"])[["regret", "capture", "covered"]].mean()
    out = per_world.groupby("method").agg(["mean", "sem"])
    out[("regret", "mean")] *= 100
    out[("regret", "sem")] *= 100
    if "best-observed" in set(table["method"]):
        base = per_world.xs("best-observed", level="method")["capture"]
        out[("beats best-observed", "share")] = [
            float(np.mean(per_world.xs(m, level="method")["capture"] > base)) for m in out.index
        ]
    return out.round(3)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--family", default="capacity_data", choices=simulate.FAMILIES)
    parser.add_argument("--worlds", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--weights", default="balanced", choices=sorted(cj.BENCHMARK_WEIGHTS), help="benchmark weights")
    parser.add_argument("--max-shift", type=float, default=None, help="choose within reference (1 +- this)")
    parser.add_argument("--fractions", default=",".join(str(f) for f in FRACTIONS), help="budgets, share of 66 runs")
    parser.add_argument("--methods", default=",".join(cj.experiments.BACKTEST_METHODS))
    parser.add_argument("--resamples", type=int, default=0, help="bootstrap resamples per cell (bands, robust)")
    parser.add_argument("--robust", default="none", choices=sorted(ROBUST))
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    fractions = [float(f) for f in args.fractions.split(",")]
    methods = args.methods.split(",")
    print(f"camel-jax {cj.__version__}, jax {jax.__version__}, devices {jax.devices()}")
    frames = []
    for seed in range(args.worlds):
        t0 = time.perf_counter()
        frames.append(one_world(args.family, seed, args.repeats, args.weights, args.max_shift, fractions, methods,
                                args.resamples, args.robust))  # fmt: skip
        medians = frames[-1].groupby("method")["capture"].median().round(2).to_dict()
        print(f"world {seed}: {time.perf_counter() - t0:.0f} s; median capture {medians}", flush=True)
        if args.out:
            pd.concat(frames).to_csv(args.out, index=False)
    table = pd.concat(frames, ignore_index=True)
    region = "the whole simplex" if args.max_shift is None else f"reference (1 +- {args.max_shift:g})"
    print(f"\n{args.family}, {args.weights}, {region}, {args.worlds} worlds x {args.repeats} repeats x "
          f"{len(fractions)} budgets, {args.resamples} resamples, robust {args.robust}")  # fmt: skip
    print(summarize(table).to_string())
    print("\nby budget (mean capture):")
    print(table.pivot_table(index="method", columns="fraction", values="capture", aggfunc="mean").round(2).to_string())


if __name__ == "__main__":
    main()
