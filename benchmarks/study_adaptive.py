"""The adaptive-design study behind the README's table (issue 16): adaptive vs the five static strategies.

For each world (seed 0..N-1) of one zoo family: `cj.experiments.backtest` with one law (tied CAMEL by default)
fitted on the runs each strategy chooses under the same FLOPs budgets (shares of the paper's 66-run design), the
five static strategies of `cj.experiments.STRATEGIES` and `"adaptive"` (an hourglass seed at 25% of the budget, then
`--rounds` tranches chosen by `next_runs` from `--resamples` bootstrap refits). The full design (every run, the same
for every strategy) is the yardstick. Prints per world and, at the end, per (strategy, budget): the median and mean
regret (accuracy points) over worlds x repeats, the mean FLOPs spent, and the smallest budget at which each
strategy's median regret reaches the full design's (the paper's "50% saving" question). With `--bands B` every cell
is also refitted on B bootstrap resamples and the summary adds the coverage of the pick's nominal 95% band (the true
value inside it). Writes every row to --out.

Usage: python benchmarks/study_adaptive.py [--family capacity_data] [--worlds 20] [--first 0] [--repeats 3]
       [--fractions 0.25,0.5,0.75] [--law camel] [--rounds 3] [--resamples 16] [--bands 16] [--max-shift 0.2]
       [--out a.csv]
"""

from __future__ import annotations

import argparse
import time

import jax
import pandas as pd

jax.config.update("jax_enable_x64", True)

import camel_jax as cj  # noqa: E402
from camel_jax import simulate  # noqa: E402

SIZES = (4.0, 5.0, 6.0, 7.0, 8.0, 10.0)


def one_world(args: argparse.Namespace, seed: int) -> pd.DataFrame:
    world = simulate.make_world(jax.random.key(seed), args.family)
    full = float(world.runs(cj.experiments.perturbed_mixtures(simulate.REFERENCE, 0.2), SIZES)["flops"].sum())
    fractions = [float(f) for f in args.fractions.split(",")]
    strategies = (*cj.experiments.STRATEGIES, "adaptive")
    table = cj.experiments.backtest(
        world,
        {s: args.law for s in strategies},
        key=jax.random.key(100 + seed),
        budgets=[f * full for f in fractions] + [None],
        strategy={s: s for s in strategies},
        repeats=args.repeats,
        max_shift=args.max_shift,
        adaptive=cj.experiments.AdaptiveOptions(law=args.law, rounds=args.rounds, n_resamples=args.resamples),
        n_resamples=args.bands,
    )
    table = table.assign(seed=seed, fraction=(table["budget"] / full).round(2), spent=table["flops"] / full)
    at_full = table["fraction"] >= 1.0
    yardstick = table[at_full & (table["method"] == "rectangle")].assign(method="full design")
    return pd.concat([table[~at_full], yardstick], ignore_index=True)


def summarize(table: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, float | None]]:
    """Per (strategy, budget): median and mean regret in points (with the standard error over worlds), FLOPs
    spent; and per strategy the smallest budget whose median regret is at most the full design's."""
    points = table.assign(regret=100 * table["regret"])
    groups = points.groupby(["method", "fraction"])
    out = groups["regret"].agg(median="median", mean="mean")
    out["sem"] = points.groupby(["method", "fraction", "seed"])["regret"].mean().groupby(["method", "fraction"]).sem()
    out["spent"] = groups["spent"].mean()
    out["coverage"] = groups["covered"].mean()  # NaN without --bands
    full_median = float(out.loc[("full design", 1.0), "median"])
    reaches = {}
    for method in out.index.get_level_values(0).unique():
        if method == "full design":
            continue
        rows = out.loc[method]
        hit = rows.index[rows["median"] <= full_median]
        reaches[method] = float(hit.min()) if len(hit) else None
    return out.round(3), reaches


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--family", default="capacity_data", choices=simulate.FAMILIES)
    parser.add_argument("--worlds", type=int, default=20)
    parser.add_argument("--first", type=int, default=0, help="seed of the first world (to extend a study)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fractions", default="0.25,0.5,0.75", help="budgets, share of the 66-run design")
    parser.add_argument("--law", default="camel", choices=["camel", "camel-free", "camel-data", "sodm"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--resamples", type=int, default=16)
    parser.add_argument("--bands", type=int, default=0, help="resamples per cell for the pick's 95%% band")
    parser.add_argument("--max-shift", type=float, default=None, help="choose within reference (1 +- this)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    print(f"camel-jax {cj.__version__}, jax {jax.__version__}, devices {jax.devices()}")
    frames = []
    for seed in range(args.first, args.first + args.worlds):
        t0 = time.perf_counter()
        frames.append(one_world(args, seed))
        means = (100 * frames[-1].groupby("method")["regret"].mean()).round(2).to_dict()
        print(f"world {seed}: {time.perf_counter() - t0:.0f} s; mean regret (points) {means}", flush=True)
        if args.out:
            pd.concat(frames).to_csv(args.out, index=False)
    summary, reaches = summarize(pd.concat(frames, ignore_index=True))
    region = "the whole simplex" if args.max_shift is None else f"reference (1 +- {args.max_shift:g})"
    print(f"\n{args.family}, law {args.law}, {region}, {args.worlds} worlds x {args.repeats} repeats, adaptive: "
          f"{args.rounds} rounds x {args.resamples} resamples")  # fmt: skip
    print(summary.to_string())
    print("\nsmallest budget whose median regret <= the full design's:", reaches)


if __name__ == "__main__":
    main()
