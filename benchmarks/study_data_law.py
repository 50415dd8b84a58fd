"""Study 7 (issue 15): CAMELData against CAMEL and SODM in every family of the world zoo.

For each world: (1) extrapolation error: every validation loss's law fitted on the paper's design (11 perturbed
mixtures x sizes 4-10, 0.2% noise) and scored by `select_law` against the noise-free losses at M=20 (MAPE, %);
(2) decision regret: `cj.experiments.backtest` with methods camel (tied CAMEL), camel-data (tied CAMELData) and sodm on
the `--weights` (default Balanced) at M=20 over the whole simplex, every run, `--repeats` noise draws. Prints
per-family means with standard errors over worlds and the share of worlds in which each law is within 10% of the
best error.

    python benchmarks/study_data_law.py [--worlds 10] [--first 0] [--repeats 4] [--families capacity,dml,sodm]
        [--weights math] [--no-loss]
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

SIZES = (4.0, 5.0, 6.0, 7.0, 8.0, 10.0)
TARGET = 20.0
METHODS = ("camel", "camel-data", "sodm")


def laws(n: int, key: jax.Array) -> dict[str, object]:
    """The backtest's three mixture laws, as select_law candidates (scale index sizes, capacity ~ M^3)."""
    return {
        "camel": cj.CAMEL.sample_init(key, n_datasets=n, n_domains=3, tied=True, capacity_exponent=3.0),
        "camel-data": cj.CAMELData.sample_init(
            key, n_datasets=n, n_domains=3, tied=True, tokens=False, capacity_exponent=3.0
        ),
        "sodm": cj.SODMAdditive.sample_init(key, n_datasets=n, tokens=False, size_scale=10.0),
    }


def extrapolation(world, seed: int) -> pd.DataFrame:
    """MAPE at M=20 of each law on each validation loss (fitted on the noisy paper design)."""
    mixtures = cj.experiments.perturbed_mixtures(simulate.REFERENCE, 0.2)
    train = world.runs(mixtures, SIZES, noise=0.002, key=jax.random.key(500 + seed))
    test = world.runs(mixtures, [TARGET])
    runs = pd.concat([train, test], ignore_index=True)
    columns = [c for c in runs.columns if c.startswith("r_")]
    frames = []
    for target in [c for c in runs.columns if c.startswith("loss_val")]:
        data = cj.MixtureData.from_frame(runs, mixture=columns, target=target, size="size")
        _, table = cj.experiments.select_law(laws(len(columns), jax.random.key(seed)), data, key=jax.random.key(seed))
        frames.append(table.assign(loss=target))
    return pd.concat(frames)[["law", "loss", "error"]]


def one_world(family: str, seed: int, repeats: int, weights: str, loss: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    world = simulate.make_world(jax.random.key(seed), family)
    errors = extrapolation(world, seed) if loss else pd.DataFrame({"law": list(METHODS), "loss": "", "error": np.nan})
    regret = cj.experiments.backtest(world, METHODS, key=jax.random.key(100 + seed), repeats=repeats,
                                     target_size=TARGET,
                         benchmark_weights=weights)  # fmt: skip
    return errors.assign(family=family, world=seed), regret.assign(family=family, world_seed=seed)


def summarize(errors: pd.DataFrame, regret: pd.DataFrame) -> pd.DataFrame:
    per_world = errors.groupby(["family", "world", "law"])["error"].mean().unstack("law")
    within = per_world.le(1.1 * per_world.min(axis=1), axis=0).groupby("family").mean()
    within.columns = pd.MultiIndex.from_product([within.columns, ["share"]])
    mape = per_world.groupby("family").agg(["mean", "sem"])
    reg = regret.groupby(["family", "world_seed", "method"])["regret"].mean().unstack("method")
    reg = (100 * reg).groupby("family").agg(["mean", "sem"])  # accuracy points
    return pd.concat({"MAPE at M=20 (%)": mape, "within 10% of best": within, "regret (points)": reg}, axis=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worlds", type=int, default=10)
    parser.add_argument("--first", type=int, default=0, help="seed of the first world (to extend a run)")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--families", default=",".join(simulate.FAMILIES))
    parser.add_argument("--weights", default="balanced", choices=sorted(cj.BENCHMARK_WEIGHTS))
    parser.add_argument("--no-loss", action="store_true", help="skip the loss extrapolation part (decisions only)")
    parser.add_argument("--out", default=None, help="prefix for the two CSV tables")
    args = parser.parse_args()
    errors, regrets = [], []
    for family in args.families.split(","):
        for seed in range(args.first, args.first + args.worlds):
            start = time.perf_counter()
            e, r = one_world(family, seed, args.repeats, args.weights, not args.no_loss)
            errors.append(e)
            regrets.append(r)
            mean_e = e.groupby("law")["error"].mean().round(3).to_dict()
            mean_r = (100 * r.groupby("method")["regret"].mean()).round(3).to_dict()
            print(f"{family:14s} world {seed:2d} ({time.perf_counter() - start:5.1f}s) MAPE {mean_e} regret {mean_r}",
                  flush=True)  # fmt: skip
    errors_df, regret_df = pd.concat(errors), pd.concat(regrets)
    if args.out:
        errors_df.to_csv(f"{args.out}_errors.csv", index=False)
        regret_df.to_csv(f"{args.out}_regret.csv", index=False)
    print(summarize(errors_df, regret_df).round(3).to_string())


if __name__ == "__main__":
    main()
