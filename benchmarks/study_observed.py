"""The real-data decision backtests behind the README's table (issue 13): which held-out run would each method
have trained?

- dmsl_shukor2025: fit sizes <= 1.235B (each run at its largest token count), choose among the four mixtures trained
  at 2.718B; 8 weightings (each SlimPajama validation loss and their mean).
- mixinglaws_ye2024 5Mix at step 20k: fit 70M-410M, choose among the 1B runs; the weighted validation loss.
- regmix_liu2024: fit the 512 1M-parameter runs, rank the 256 held-out mixtures trained at 60M (Pile-CC loss);
  "best-observed" here is RegMix's own proxy: the same 256 mixtures measured at 1M.

Every fit is repeated with --seeds keys (the restarts differ); prints the mean regret share (regret over the
candidates' range; a random pick averages ~0.5) and Spearman correlation per data set and method, with the
spread over weightings and seeds. Needs ../shared/data/external (the data sets do not ship with the package).

Usage: python benchmarks/study_observed.py [--seeds 5] [--restarts 32] [--out observed.csv]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax
import pandas as pd

jax.config.update("jax_enable_x64", True)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import shared_data  # noqa: E402

import camel_jax as cj  # noqa: E402


def backtests(seed: int, restarts: int) -> pd.DataFrame:
    key = jax.random.key(seed)
    common = dict(key=key, restarts=restarts)
    train, candidates, mixture, weightings = shared_data.dmsl_decision()
    frames = [cj.experiments.backtest_observed(train, candidates, mixture=mixture, size="model_size",
                                               weightings=weightings,
                                   name="dmsl 2.7B (4)", **common)]  # fmt: skip
    train, candidates, mixture, weightings = shared_data.mixinglaws_decision()
    frames.append(cj.experiments.backtest_observed(train, candidates, mixture=mixture, size="nonembedding_params",
                                       weightings=weightings, name="mixinglaws 1B", **common))  # fmt: skip
    train, candidates, at_1m, mixture, weightings = shared_data.regmix_decision()
    laws = [m for m in cj.experiments.OBSERVED_METHODS if m != "best-observed"]
    frames.append(cj.experiments.backtest_observed(train, candidates, mixture=mixture, size="size",
                                                   weightings=weightings,
                                       methods=laws, name="regmix 60M (256)", **common))  # fmt: skip
    proxy = cj.experiments.backtest_observed(pd.concat([train, at_1m], ignore_index=True), candidates, mixture=mixture,
                                 size="size", weightings=weightings, methods=["best-observed"], name="regmix 60M (256)",
                                 **common)  # fmt: skip
    frames.append(proxy)
    return pd.concat(frames, ignore_index=True).assign(seed=seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--restarts", type=int, default=32)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    frames = []
    for seed in range(args.seeds):
        start = time.perf_counter()
        frames.append(backtests(seed, args.restarts))
        print(f"seed {seed}: {time.perf_counter() - start:.0f} s", flush=True)
    table = pd.concat(frames, ignore_index=True)
    if args.out:
        table.to_csv(args.out, index=False)
    summary = table.groupby(["data", "method"], sort=False).agg(
        regret_share=("regret_share", "mean"),
        picks_best=("regret", lambda x: float((x <= 1e-12).mean())),
        spearman=("spearman", "mean"),
        decisions=("regret", "size"),
    )
    with pd.option_context("display.width", 160):
        print(summary.round(3).to_string())


if __name__ == "__main__":
    main()
